//! Two "library" kernels, computed for real on device memory: what a GEMM (hipBLAS) and a
//! convolution (MIOpen) launch on a GPU, here as naive f32 loops, so that a program can check
//! that a suspended and resumed kernel still gives the right numbers.
//!
//! - `sgemm_f32(const float* A, const float* B, float* C, u32 M, u32 N, u32 K)`: row-major
//!   `C = A·B` (A is M×K, B is K×N, C is M×N), each element summed over k = 0..K in order;
//! - `conv2d_f32_nchw(const float* x, const float* w, float* y, u32 N, u32 C, u32 H, u32 W,
//!   u32 K, u32 R, u32 S, u32 stride, u32 pad)`: PyTorch's `conv2d` (a cross-correlation) of x
//!   (N×C×H×W) with w (K×C×R×S), zero padding, no bias, into y (N×K×OH×OW), each element summed
//!   over c, r, s in that order.
//!
//! A kernel runs in tiles (rows of C, planes of y). Each tile is first one command on the
//! stream's worker processes, of the tile's share of the kernel's time ([`NS_PER_MAC`]), and its
//! results are written once that command completed: a suspension (the workers stopped) holds
//! the kernel between its tiles with part of its output written, and the resume continues it
//! from the next tile, as waves restored by CWSR continue. The arithmetic itself runs in the
//! stream's dispatcher thread: device memory is this process's, the workers are other
//! processes.
use crate::code::{self, Code};
use crate::memory::Memory;
use std::ops::Range;

/// The kernels' pace: host work per multiply-add, 100 M a second (a host figure, chosen so that
/// a 128×128×128 GEMM takes about 20 ms and suspensions land inside it; nothing like a GPU's).
pub const NS_PER_MAC: u64 = 10;
/// The most tiles a kernel is cut into.
pub const MAX_TILES: usize = 8;
/// The most multiply-adds one launch may ask for (a typo must not hold a stream for hours).
pub const MAX_MACS: u64 = 1 << 32;

/// The shape of a convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvDims {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
    pub r: usize,
    pub s: usize,
    pub stride: usize,
    pub pad: usize,
}

impl ConvDims {
    /// The output's height and width; None when the window does not fit or a size is 0.
    pub fn out_hw(&self) -> Option<(usize, usize)> {
        let fits = |len: usize, win: usize| (len + 2 * self.pad).checked_sub(win).map(|d| d / self.stride + 1);
        if [self.n, self.c, self.h, self.w, self.k, self.r, self.s, self.stride].contains(&0) {
            return None;
        }
        Some((fits(self.h, self.r)?, fits(self.w, self.s)?))
    }
}

/// A library kernel's launch, its arguments read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibCall {
    Sgemm {
        a: usize,
        b: usize,
        c: usize,
        m: usize,
        n: usize,
        k: usize,
    },
    Conv2d {
        x: usize,
        w: usize,
        y: usize,
        d: ConvDims,
    },
}

fn bytes(elems: usize) -> Result<usize, Code> {
    elems.checked_mul(4).ok_or(code::INVALID_VALUE)
}

fn product(v: &[usize]) -> Result<usize, Code> {
    v.iter()
        .try_fold(1usize, |p, &x| p.checked_mul(x))
        .ok_or(code::INVALID_VALUE)
}

impl LibCall {
    pub fn sgemm(a: usize, b: usize, c: usize, m: usize, n: usize, k: usize, mem: &Memory) -> Result<LibCall, Code> {
        let call = LibCall::Sgemm { a, b, c, m, n, k };
        call.check(mem)?;
        Ok(call)
    }

    pub fn conv2d(x: usize, w: usize, y: usize, d: ConvDims, mem: &Memory) -> Result<LibCall, Code> {
        let call = LibCall::Conv2d { x, w, y, d };
        call.check(mem)?;
        Ok(call)
    }

    /// Every buffer inside device memory, every size above 0, the work bounded.
    fn check(&self, mem: &Memory) -> Result<(), Code> {
        let (buffers, macs) = match *self {
            LibCall::Sgemm { a, b, c, m, n, k } => {
                if m == 0 || n == 0 || k == 0 {
                    return Err(code::INVALID_VALUE);
                }
                (
                    [(a, product(&[m, k])?), (b, product(&[k, n])?), (c, product(&[m, n])?)],
                    product(&[m, n, k])?,
                )
            }
            LibCall::Conv2d { x, w, y, d } => {
                let (oh, ow) = d.out_hw().ok_or(code::INVALID_VALUE)?;
                (
                    [
                        (x, product(&[d.n, d.c, d.h, d.w])?),
                        (w, product(&[d.k, d.c, d.r, d.s])?),
                        (y, product(&[d.n, d.k, oh, ow])?),
                    ],
                    product(&[d.n, d.k, oh, ow, d.c, d.r, d.s])?,
                )
            }
        };
        if macs as u64 > MAX_MACS {
            return Err(code::INVALID_VALUE);
        }
        for (addr, elems) in buffers {
            if !mem.contains(addr, bytes(elems)?) {
                return Err(code::INVALID_VALUE);
            }
        }
        Ok(())
    }

    /// Output units (rows of C, planes of y) and multiply-adds per unit.
    fn units(&self) -> (usize, usize) {
        match *self {
            LibCall::Sgemm { m, n, k, .. } => (m, n * k),
            LibCall::Conv2d { d, .. } => {
                let (oh, ow) = d.out_hw().unwrap_or((0, 0));
                (d.n * d.k, oh * ow * d.c * d.r * d.s)
            }
        }
    }

    /// The kernel's host work in all.
    pub fn work_ns(&self) -> u64 {
        let (units, per) = self.units();
        (units as u64).saturating_mul(per as u64).saturating_mul(NS_PER_MAC)
    }

    /// The kernel's tiles, as ranges of output units.
    pub fn tiles(&self) -> Vec<Range<usize>> {
        let units = self.units().0;
        let t = units.clamp(1, MAX_TILES);
        (0..t).map(|i| i * units / t..(i + 1) * units / t).collect()
    }

    /// Runs the kernel: for each tile, `gate` with the tile's host work (one command on the
    /// stream's workers, which a suspension holds), then the tile's results into device memory.
    pub fn run(&self, mem: &Memory, mut gate: impl FnMut(u64) -> Result<(), Code>) -> Result<(), Code> {
        let (ins, out, out_unit) = self.read_inputs(mem)?;
        let per = self.units().1 as u64;
        for tile in self.tiles() {
            gate((tile.len() as u64).saturating_mul(per).saturating_mul(NS_PER_MAC))?;
            let mut part = vec![0f32; tile.len() * out_unit];
            match *self {
                LibCall::Sgemm { n, k, .. } => sgemm_rows(&ins[0], &ins[1], n, k, tile.clone(), &mut part),
                LibCall::Conv2d { d, .. } => conv2d_planes(&ins[0], &ins[1], &d, tile.clone(), &mut part),
            }
            let raw: Vec<u8> = part.iter().flat_map(|v| v.to_le_bytes()).collect();
            mem.write(out + bytes(tile.start * out_unit)?, &raw)?;
        }
        Ok(())
    }

    /// The two inputs as f32, the output's address and its elements per unit.
    fn read_inputs(&self, mem: &Memory) -> Result<([Vec<f32>; 2], usize, usize), Code> {
        let read = |addr: usize, elems: usize| -> Result<Vec<f32>, Code> {
            let mut raw = vec![0u8; bytes(elems)?];
            mem.read(addr, &mut raw)?;
            Ok(raw
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        };
        match *self {
            LibCall::Sgemm { a, b, c, m, n, k } => Ok(([read(a, m * k)?, read(b, k * n)?], c, n)),
            LibCall::Conv2d { x, w, y, d } => {
                let (oh, ow) = d.out_hw().ok_or(code::INVALID_VALUE)?;
                let xs = read(x, d.n * d.c * d.h * d.w)?;
                let ws = read(w, d.k * d.c * d.r * d.s)?;
                Ok(([xs, ws], y, oh * ow))
            }
        }
    }
}

/// Rows `rows` of row-major `A·B` (A: rows×k of an M×K matrix, B: k×n) into `out`
/// (`rows.len()`×n), each element summed over k in order.
pub fn sgemm_rows(a: &[f32], b: &[f32], n: usize, k: usize, rows: Range<usize>, out: &mut [f32]) {
    for (i, row) in rows.enumerate() {
        for j in 0..n {
            let mut acc = 0f32;
            for p in 0..k {
                acc += a[row * k + p] * b[p * n + j];
            }
            out[i * n + j] = acc;
        }
    }
}

/// Output planes `planes` (plane = image × K + output channel) of the convolution into `out`
/// (`planes.len()`×OH×OW), each element summed over c, r, s in order; padding reads as zero.
pub fn conv2d_planes(x: &[f32], w: &[f32], d: &ConvDims, planes: Range<usize>, out: &mut [f32]) {
    let Some((oh, ow)) = d.out_hw() else { return };
    for (i, plane) in planes.enumerate() {
        let (img, kc) = (plane / d.k, plane % d.k);
        for oy in 0..oh {
            for ox in 0..ow {
                let mut acc = 0f32;
                for c in 0..d.c {
                    for r in 0..d.r {
                        for s in 0..d.s {
                            let (iy, ix) = (oy * d.stride + r, ox * d.stride + s);
                            if iy < d.pad || ix < d.pad || iy - d.pad >= d.h || ix - d.pad >= d.w {
                                continue;
                            }
                            let xv = x[((img * d.c + c) * d.h + iy - d.pad) * d.w + ix - d.pad];
                            acc += xv * w[((kc * d.c + c) * d.r + r) * d.s + s];
                        }
                    }
                }
                out[(i * oh + oy) * ow + ox] = acc;
            }
        }
    }
}

#[cfg(test)]
mod tests;
