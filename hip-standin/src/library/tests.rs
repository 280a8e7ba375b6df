//! The library kernels' arithmetic against cases small enough to check by hand, and against
//! formulations of their own written here (a padded copy of the input instead of bounds checks,
//! dot products of rows and columns).
use super::*;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32s(mem: &Memory, addr: usize, n: usize) -> Vec<f32> {
    let mut raw = vec![0u8; 4 * n];
    mem.read(addr, &mut raw).unwrap();
    raw.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// A deterministic, exactly representable input: small integers and halves.
fn input(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7 + seed * 3) % 11) as f32 - 5.0) / 2.0).collect()
}

#[test]
fn sgemm_is_rows_times_columns() {
    let (m, n, k) = (2, 2, 3);
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
    let mut c = [0f32; 4];
    sgemm_rows(&a, &b, n, k, 0..m, &mut c);
    for i in 0..m {
        for j in 0..n {
            let row = &a[i * k..(i + 1) * k];
            let col = (0..k).map(|p| b[p * n + j]);
            let dot: f32 = row.iter().zip(col).map(|(x, y)| x * y).sum();
            assert_eq!(c[i * n + j], dot, "C[{i}][{j}]");
        }
    }
    // By hand: row 0 · column 0 = 1·7 + 2·9 + 3·11.
    assert_eq!(c[0], 1.0 * 7.0 + 2.0 * 9.0 + 3.0 * 11.0);
}

#[test]
fn sgemm_by_the_identity_is_the_matrix() {
    let (m, k) = (3, 4);
    let a = input(m * k, 1);
    let eye: Vec<f32> = (0..k * k).map(|i| if i / k == i % k { 1.0 } else { 0.0 }).collect();
    let mut c = vec![0f32; m * k];
    sgemm_rows(&a, &eye, k, k, 0..m, &mut c);
    assert_eq!(c, a);
}

#[test]
fn conv2d_of_ones_counts_the_window_inside_the_image() {
    // 1×1×3×3 ones, a 2×2 kernel of ones, padding 1: each output is how many of its window's four
    // cells lie inside the image (corners 1, edges 2, middle 4).
    let d = ConvDims {
        n: 1,
        c: 1,
        h: 3,
        w: 3,
        k: 1,
        r: 2,
        s: 2,
        stride: 1,
        pad: 1,
    };
    assert_eq!(d.out_hw(), Some((4, 4)));
    let mut y = [0f32; 16];
    conv2d_planes(&[1.0; 9], &[1.0; 4], &d, 0..1, &mut y);
    let inside = |o: usize| [o.checked_sub(1), Some(o)].iter().flatten().filter(|&&i| i < 3).count();
    for oy in 0..4 {
        for ox in 0..4 {
            assert_eq!(y[oy * 4 + ox], (inside(oy) * inside(ox)) as f32, "y[{oy}][{ox}]");
        }
    }
    assert_eq!(y[..4], [1.0, 2.0, 2.0, 1.0]);
}

/// The convolution written another way: the input copied into a zero-padded array first.
fn conv_padded(x: &[f32], w: &[f32], d: &ConvDims) -> Vec<f32> {
    let (oh, ow) = d.out_hw().unwrap();
    let (ph, pw) = (d.h + 2 * d.pad, d.w + 2 * d.pad);
    let mut xp = vec![0f32; d.n * d.c * ph * pw];
    for (i, v) in x.iter().enumerate() {
        let (nc, yx) = (i / (d.h * d.w), i % (d.h * d.w));
        xp[nc * ph * pw + (yx / d.w + d.pad) * pw + yx % d.w + d.pad] = *v;
    }
    let mut y = Vec::new();
    for img in 0..d.n {
        for kc in 0..d.k {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0f32;
                    for c in 0..d.c {
                        for r in 0..d.r {
                            for s in 0..d.s {
                                let xv = xp[((img * d.c + c) * ph + oy * d.stride + r) * pw + ox * d.stride + s];
                                acc += xv * w[((kc * d.c + c) * d.r + r) * d.s + s];
                            }
                        }
                    }
                    y.push(acc);
                }
            }
        }
    }
    y
}

#[test]
fn conv2d_matches_the_padded_formulation_with_stride_and_channels() {
    let d = ConvDims {
        n: 2,
        c: 3,
        h: 5,
        w: 6,
        k: 4,
        r: 3,
        s: 2,
        stride: 2,
        pad: 1,
    };
    let (x, w) = (input(2 * 3 * 5 * 6, 2), input(4 * 3 * 3 * 2, 5));
    let (oh, ow) = d.out_hw().unwrap();
    assert_eq!((oh, ow), ((5 + 2 - 3) / 2 + 1, (6 + 2 - 2) / 2 + 1));
    let mut y = vec![0f32; 2 * 4 * oh * ow];
    conv2d_planes(&x, &w, &d, 0..8, &mut y);
    assert_eq!(y, conv_padded(&x, &w, &d));
}

#[test]
fn a_kernel_runs_tile_by_tile_and_stops_between_tiles_when_held() {
    let mem = Memory::default();
    let (m, n, k) = (10, 3, 4);
    let (a, b) = (input(m * k, 1), input(k * n, 2));
    let (pa, pb, pc) = (
        mem.alloc(4 * m * k).unwrap(),
        mem.alloc(4 * k * n).unwrap(),
        mem.alloc(4 * m * n).unwrap(),
    );
    mem.write(pa, &f32s(&a)).unwrap();
    mem.write(pb, &f32s(&b)).unwrap();
    let call = LibCall::sgemm(pa, pb, pc, m, n, k, &mem).unwrap();
    let tiles = call.tiles();
    assert_eq!(tiles.len(), MAX_TILES);
    assert_eq!(tiles.iter().map(Range::len).sum::<usize>(), m);
    assert!(tiles.windows(2).all(|t| t[0].end == t[1].start));
    // A gate that refuses the third tile: the first two tiles' rows are written, no later row.
    let mut gates = Vec::new();
    let r = call.run(&mem, |ns| {
        gates.push(ns);
        if gates.len() == 3 {
            Err(code::LAUNCH_FAILURE)
        } else {
            Ok(())
        }
    });
    assert_eq!(r, Err(code::LAUNCH_FAILURE));
    let mut whole = vec![0f32; m * n];
    sgemm_rows(&a, &b, n, k, 0..m, &mut whole);
    let done = tiles[1].end * n;
    assert_eq!(read_f32s(&mem, pc, m * n)[..done], whole[..done]);
    assert!(read_f32s(&mem, pc, m * n)[done..].iter().all(|v| *v == 0.0));
    // Run whole: every tile gated once, the gates' work adding up to the kernel's.
    gates.clear();
    call.run(&mem, |ns| {
        gates.push(ns);
        Ok(())
    })
    .unwrap();
    assert_eq!(gates.len(), tiles.len());
    assert_eq!(gates.iter().sum::<u64>(), call.work_ns());
    assert_eq!(call.work_ns(), (m * n * k) as u64 * NS_PER_MAC);
    assert_eq!(read_f32s(&mem, pc, m * n), whole);
}

#[test]
fn a_launch_outside_device_memory_or_of_no_size_is_refused() {
    let mem = Memory::default();
    let (pa, pb, pc) = (
        mem.alloc(4 * 4).unwrap(),
        mem.alloc(4 * 4).unwrap(),
        mem.alloc(4 * 4).unwrap(),
    );
    assert!(LibCall::sgemm(pa, pb, pc, 2, 2, 2, &mem).is_ok());
    assert_eq!(
        LibCall::sgemm(pa, pb, pc, 2, 3, 2, &mem),
        Err(code::INVALID_VALUE),
        "C of 2×3 in 4 floats"
    );
    assert_eq!(LibCall::sgemm(pa, pb, pc, 0, 2, 2, &mem), Err(code::INVALID_VALUE));
    assert_eq!(LibCall::sgemm(pa, pb, 0x1000, 1, 1, 1, &mem), Err(code::INVALID_VALUE));
    let d = ConvDims {
        n: 1,
        c: 1,
        h: 2,
        w: 2,
        k: 1,
        r: 3,
        s: 3,
        stride: 1,
        pad: 0,
    };
    assert_eq!(d.out_hw(), None, "a 3×3 window in a 2×2 image");
    assert_eq!(LibCall::conv2d(pa, pb, pc, d, &mem), Err(code::INVALID_VALUE));
    assert!(
        LibCall::conv2d(
            pa,
            pb,
            pc,
            ConvDims {
                pad: 1,
                r: 2,
                s: 2,
                ..d
            },
            &mem
        )
        .is_err(),
        "y of 3×3 in 4 floats"
    );
    assert!(LibCall::conv2d(pa, pb, pc, ConvDims { r: 2, s: 2, ..d }, &mem).is_ok());
}
