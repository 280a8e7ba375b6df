//! Tests against the real libamdhip64 when it is installed (Debian's libamdhip64-5 here and in
//! CI), and of the loader's error paths. Without a GPU, HIP must answer hipErrorNoDevice.

use super::*;
use crate::loader::{hip_search, hiprtc_search, mapped_hip_files};
use crate::testing::{hip_required, real_hip};

#[test]
fn hip_is_found_when_required() {
    if !hip_required() {
        eprintln!("SKIPPED: PREEMPT_REQUIRE_HIP is not 1 (CI sets it after scripts/install-deps.sh)");
        return;
    }
    let hip = Hip::load().unwrap_or_else(|e| panic!("PREEMPT_REQUIRE_HIP=1 but HIP did not load: {e}"));
    eprintln!("HIP loaded from {}", hip.library_path());
}

/// hipExtHostAlloc where HIP has it (ROCm 6.3+), else hipHostMalloc. The runtime's own version
/// decides which one this test expects.
#[test]
fn the_host_allocator_follows_the_runtime() {
    let Some(hip) = real_hip() else { return };
    let (major, minor, _) = decode_version(hip.runtime_version().unwrap());
    let want = if (major, minor) >= (6, 3) {
        "hipExtHostAlloc"
    } else {
        "hipHostMalloc"
    };
    assert_eq!(
        hip.host_allocator(),
        want,
        "HIP {major}.{minor} at {}",
        hip.library_path()
    );
}

#[test]
fn real_runtime_version_is_a_hip_encoding() {
    let Some(hip) = real_hip() else { return };
    let v = hip.runtime_version().expect("hipRuntimeGetVersion works without a GPU");
    let (major, minor, patch) = decode_version(v);
    eprintln!(
        "{}: hipRuntimeGetVersion = {v} ({major}.{minor}.{patch})",
        hip.library_path()
    );
    assert!(v > 50_000_000, "not a HIP >= 5 version encoding: {v}");
    assert!((5..=9).contains(&major));
}

#[test]
fn real_device_count_without_gpu_is_no_device() {
    let Some(hip) = real_hip() else { return };
    match hip.device_count() {
        Ok(n) => {
            assert!(std::path::Path::new("/dev/kfd").exists(), "{n} GPUs but no /dev/kfd?");
            eprintln!("this machine has {n} AMD GPU(s) visible to HIP");
        }
        Err(e) => {
            eprintln!("device_count: {e}");
            assert!(e.is_no_device(), "expected hipErrorNoDevice, got {e:?}");
            match &e {
                HipError::Hip {
                    func,
                    code,
                    name,
                    explanation,
                } => {
                    assert_eq!(
                        (*func, *code, name.as_str()),
                        ("hipGetDeviceCount", 100, "hipErrorNoDevice")
                    );
                    assert!(explanation.is_some_and(|x| x.contains("/dev/kfd") && x.contains("render")));
                }
                other => panic!("wrong variant {other:?}"),
            }
            let text = e.to_string();
            assert!(text.contains("hipGetDeviceCount") && text.contains("100"), "{text}");
        }
    }
}

#[test]
fn real_hiprtc_is_located() {
    let Some(hip) = real_hip() else { return };
    let v = hip.runtime_version().unwrap_or(0);
    eprintln!("hiprtc: {:?} / {:?}", hip.hiprtc_path(), hip.hiprtc_status().err());
    if decode_version(v).0 == 5 && decode_version(v).1 <= 2 {
        // HIP 5.2 has no libhiprtc: its hiprtc symbols are inside libamdhip64.
        assert!(hip.hiprtc_status().is_ok());
        assert!(
            hip.hiprtc_path()
                .is_some_and(|p| p.contains("built-in") || p.contains("hiprtc"))
        );
    }
}

#[test]
fn real_hiprtc_compiles_a_kernel_if_it_can_without_gpu() {
    // hiprtc needs no GPU in principle (comgr compiles); some HIP builds still initialize the
    // runtime first. Only a produced code object is checked; a refusal is reported, not failed.
    let Some(hip) = real_hip() else { return };
    let src = include_str!("../tests/fixtures/args.hip");
    match hip.compile(
        src,
        "args.hip",
        &["--offload-arch=gfx90a".to_string(), "-O3".to_string()],
    ) {
        Ok(code) => {
            assert_eq!(&code.image[..4], b"\x7fELF", "not an ELF code object");
            // hiprtc's output carries the metadata the launch check reads, as clang's does.
            let k = code_object::kernels(&code.image).expect("metadata of hiprtc's code object");
            let fixture = code_object::kernels(include_bytes!("../tests/fixtures/args-gfx90a.co")).unwrap();
            // Names and parameters; register counts differ between hiprtc's LLVM and clang-19's.
            let shape = |k: &[code_object::KernelInfo]| -> Vec<(String, Vec<code_object::Param>)> {
                k.iter().map(|k| (k.name.clone(), k.params.clone())).collect()
            };
            assert_eq!(shape(&k), shape(&fixture));
            eprintln!("hiprtc compiled args.hip for gfx90a: {} bytes", code.image.len());
        }
        Err(e) => eprintln!("NOTE: hiprtc did not compile here (no GPU?): {e}"),
    }
}

#[test]
fn nonexistent_library_is_not_found_with_paths_tried() {
    let tried = vec![
        "/nonexistent/dir/libamdhip64.so.6".to_string(),
        "libamdhip64-does-not-exist.so.9".to_string(),
    ];
    let e = Hip::load_from(&tried, &[]).err().expect("must fail");
    match &e {
        HipError::LibraryNotFound { library, tried: t } => {
            assert_eq!(*library, "libamdhip64");
            assert_eq!(t.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(), tried);
        }
        other => panic!("wrong error {other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains("not found") && tried.iter().all(|p| text.contains(p.as_str())),
        "{text}"
    );
}

#[test]
fn a_library_that_is_not_hip_lacks_a_symbol() {
    let e = Hip::load_from(&["libc.so.6".to_string()], &[])
        .err()
        .expect("libc is not HIP");
    match &e {
        HipError::MissingSymbol { library, symbol } => {
            assert_eq!(library, "libc.so.6");
            assert_eq!(*symbol, "hipRuntimeGetVersion");
        }
        other => panic!("wrong error {other:?}"),
    }
    assert!(e.to_string().contains("hipRuntimeGetVersion"));
}

#[test]
fn hiprtc_missing_is_reported_not_fatal() {
    let Some(hip) = real_hip() else { return };
    // The real HIP with a hiprtc that cannot be found: loads; compile says why.
    let h = Hip::load_from(
        &[hip.library_path().to_string()],
        &["/nonexistent/libhiprtc.so.6".to_string()],
    )
    .expect("HIP loads");
    if h.hiprtc_path().is_none() {
        let e = h.hiprtc_status().expect_err("no hiprtc");
        assert!(e.to_string().contains("/nonexistent/libhiprtc.so.6"), "{e}");
    }
}

/// With a HIP runtime already loaded (here the real one, as PyTorch's is after `import torch`),
/// `Hip::load` uses it, even where `ROCM_PATH` holds another `libamdhip64` that would come first
/// among the candidates (a decoy without HIP's symbols: opening it would fail).
#[test]
fn the_runtime_already_in_the_process_wins_over_rocm_path() {
    let Some(first) = real_hip() else { return };
    let Some(decoy) = crate::testing::FakeLibrary::build("decoy", "libamdhip64.so.7", "libamdhip64.so.7", &["not_hip"])
    else {
        return;
    };
    std::fs::create_dir_all(decoy.dir.join("lib")).unwrap();
    std::fs::rename(&decoy.path, decoy.dir.join("lib/libamdhip64.so.7")).unwrap();
    let rocm = decoy.dir.display().to_string();
    let hip = Hip::load_in(Some(&rocm), "").unwrap_or_else(|e| panic!("ROCM_PATH={rocm}: {e}"));
    let Origin::InProcess { probe } = hip.library_origin() else {
        panic!(
            "{} was not taken from the process: {}",
            hip.library_path(),
            hip.library_origin()
        );
    };
    assert!(HIP_SONAMES.contains(&probe.as_str()), "{probe}");
    assert!(!hip.library_path().starts_with(&rocm), "{}", hip.library_path());
    // The file loaded first, and no second copy: one libamdhip64 mapped in the process.
    let real = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mapped: Vec<_> = mapped_hip_files(&maps).iter().map(|p| real(p)).collect();
    assert_eq!(
        mapped,
        [real(hip.library_path())],
        "the libamdhip64 files mapped in this process"
    );
    assert_eq!(hip.runtime_version(), first.runtime_version());
    eprintln!("{}: {}", hip.library_path(), hip.library_origin());
}

/// The hiprtc beside a runtime found in the process: already loaded of its major, else opened
/// from its directory, without version (PyTorch's copies), then by soname.
#[test]
fn hiprtc_follows_the_runtime_found_in_the_process() {
    let found = Origin::InProcess {
        probe: "libamdhip64.so.6".into(),
    };
    let s = hiprtc_search(
        "/env/site-packages/torch/lib/libamdhip64.so",
        &found,
        Some("/opt/rocm-7.2.0"),
    );
    assert_eq!(s.in_process, ["libhiprtc.so.6"]);
    assert_eq!(
        &s.open[..3],
        [
            "/env/site-packages/torch/lib/libhiprtc.so.6",
            "/env/site-packages/torch/lib/libhiprtc.so",
            "libhiprtc.so.6"
        ]
    );
    // Opened HIP: no probe, its own directory and major first.
    let opened = Origin::Opened {
        candidate: "/opt/rocm-6.4.1/lib/libamdhip64.so.6".into(),
    };
    let s = hiprtc_search("/opt/rocm-6.4.1/lib/libamdhip64.so.6", &opened, None);
    assert!(s.in_process.is_empty());
    assert_eq!(
        s.open,
        hiprtc_candidates_for("/opt/rocm-6.4.1/lib/libamdhip64.so.6", None)
    );
}

/// The HIP search probes every soname, then every mapped libamdhip64 file, before opening.
#[test]
fn the_hip_search_probes_the_process_first() {
    let maps = "\
7f0000000000-7f0000100000 r-xp 00001000 fd:01 456 /env/torch/lib/libamdhip64-1a2b3c4d.so.6
7f0000100000-7f0000200000 r--p 00101000 fd:01 456 /env/torch/lib/libamdhip64-1a2b3c4d.so.6
7f0000200000-7f0000300000 r-xp 00001000 fd:01 457 /env/torch/lib/libamdhip64_extra_tool.so
7f0000300000-7f0000400000 r-xp 00001000 fd:01 458 /opt/rocm/lib/libamdhip64.so.6.4.43484
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]";
    assert_eq!(
        mapped_hip_files(maps),
        [
            "/env/torch/lib/libamdhip64-1a2b3c4d.so.6",
            "/opt/rocm/lib/libamdhip64.so.6.4.43484"
        ]
    );
    let s = hip_search(Some("/my/rocm"), maps);
    assert_eq!(&s.in_process[..HIP_SONAMES.len()], HIP_SONAMES);
    assert_eq!(s.in_process.len(), HIP_SONAMES.len() + 2);
    assert_eq!(s.open, library_candidates(&HIP_SONAMES, Some("/my/rocm")));
}

#[test]
fn candidates_order_rocm_path_then_loader_then_opt_rocm() {
    let c = library_candidates(&HIP_SONAMES, Some("/my/rocm/"));
    assert_eq!(c[0], "/my/rocm/lib/libamdhip64.so.7");
    assert_eq!(c[4], "libamdhip64.so.7");
    assert_eq!(c[7], "libamdhip64.so");
    assert_eq!(c[8], "/opt/rocm/lib/libamdhip64.so.7");
    assert_eq!(c.len(), 12);
    assert_eq!(library_candidates(&HIP_SONAMES, None).len(), 8);
    assert_eq!(library_candidates(&HIP_SONAMES, Some("/opt/rocm")).len(), 8);
    let r = hiprtc_candidates_for("/opt/rocm-6.4.1/lib/libamdhip64.so.6", None);
    assert_eq!(
        &r[..4],
        [
            "/opt/rocm-6.4.1/lib/libhiprtc.so.6",
            "/opt/rocm-6.4.1/lib/libhiprtc.so",
            "libhiprtc.so.6",
            "libhiprtc.so.7"
        ]
    );
    assert_eq!(hiprtc_candidates_for("libamdhip64.so", None)[0], "libhiprtc.so.7");
}

#[test]
fn version_decoding() {
    assert_eq!(decode_version(50221153), (5, 2, 21153));
    assert_eq!(decode_version(60443483), (6, 4, 43483));
    assert_eq!(decode_version(70051831), (7, 0, 51831));
}

fn props_with(strings: &[(usize, &str)]) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    for (off, s) in strings {
        buf[*off..off + s.len()].copy_from_slice(s.as_bytes());
    }
    buf
}

#[test]
fn scan_finds_gcn_arch_name_in_any_layout() {
    // R0600-like: name at 0, gcnArchName much later.
    let p = props_with(&[(0, "AMD Instinct MI300X"), (1160, "gfx942:sramecc+:xnack-")]);
    assert_eq!(scan_gcn_arch_name(&p).as_deref(), Some("gfx942:sramecc+:xnack-"));
    // A bare gfx name in `name` loses to the full one with features.
    let p = props_with(&[(0, "gfx90a"), (396, "gfx90a:sramecc-:xnack+")]);
    assert_eq!(scan_gcn_arch_name(&p).as_deref(), Some("gfx90a:sramecc-:xnack+"));
    // Only a bare one: taken.
    assert_eq!(
        scan_gcn_arch_name(&props_with(&[(300, "gfx942")])).as_deref(),
        Some("gfx942")
    );
    // Not at a field start, or garbage: ignored.
    assert_eq!(scan_gcn_arch_name(&props_with(&[(0, "xgfx942")])), None);
    assert_eq!(scan_gcn_arch_name(&props_with(&[(8, "gfxq")])), None);
    assert_eq!(scan_gcn_arch_name(&[]), None);
    assert_eq!(scan_gcn_arch_name(&props_with(&[(8, "gfx942:xnack")])), None);
    // Unterminated at the end of the buffer: ignored, no panic.
    let mut p = vec![0u8; 10];
    p[4..].copy_from_slice(b"gfx942");
    assert_eq!(scan_gcn_arch_name(&p), None);
}

#[test]
fn launch_arguments_must_match_the_metadata() {
    use crate::args::{ArgShape, check_args};
    use crate::code_object::{KernelInfo, Param, ParamKind};
    let p = |kind, size| Param {
        kind,
        size,
        offset: 0,
        name: None,
    };
    let k = KernelInfo {
        name: "fill".into(),
        params: vec![
            p(ParamKind::GlobalBuffer, 8),
            p(ParamKind::ByValue, 4),
            p(ParamKind::ByValue, 8),
        ],
        resources: Default::default(),
    };
    let check = |a: &[ArgShape]| check_args(&k, a.iter().copied());
    use ArgShape::{Pointer, Value};
    assert!(check(&[Pointer, Value(4), Value(8)]).is_ok());
    for wrong in [
        &[Pointer, Value(4)][..],
        &[Pointer, Value(4), Value(8), Value(4)],
        &[Value(8), Value(4), Value(8)],
        &[Pointer, Value(8), Value(8)],
        &[Pointer, Pointer, Value(8)],
        &[],
    ] {
        let e = check(wrong).expect_err("must be refused");
        assert!(
            matches!(e, HipError::Invalid(_)) && e.to_string().contains("launch of fill"),
            "{e}"
        );
    }
    let other = KernelInfo {
        name: "img".into(),
        params: vec![p(ParamKind::Other("image".into()), 8)],
        resources: Default::default(),
    };
    assert!(check_args(&other, [Pointer].into_iter()).is_err());
    assert!(check_args(&other, [Value(8)].into_iter()).is_err());
}

#[test]
fn kernel_args_carry_their_sizes() {
    use crate::args::ArgShape::Value;
    let a = KernelArgs::new().u8(1).i16(-2).u32(3).f32(0.5).u64(5).f64(1.0);
    assert_eq!(a.len(), 6);
    let k = code_object::KernelInfo {
        name: "k".into(),
        params: [1, 2, 4, 4, 8, 8]
            .iter()
            .map(|&size| code_object::Param {
                kind: code_object::ParamKind::ByValue,
                size,
                offset: 0,
                name: None,
            })
            .collect(),
        resources: Default::default(),
    };
    assert!(crate::args::check_args(&k, [1, 2, 4, 4, 8, 8].into_iter().map(Value)).is_ok());
}

#[test]
fn launch_shapes_are_checked() {
    assert!(LaunchConfig::linear(160, 1024).check().is_ok());
    assert!(LaunchConfig::linear(0, 64).check().is_err());
    assert!(LaunchConfig::linear(1, 1025).check().is_err());
    let c = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 32, 1],
        shared_mem_bytes: 0,
    };
    assert!(c.check().is_ok());
    let c = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 32, 2],
        shared_mem_bytes: 0,
    };
    assert!(c.check().is_err());
    let c = LaunchConfig {
        grid: [1, 1, 1],
        block: [u32::MAX, 2, 1],
        shared_mem_bytes: 0,
    };
    assert!(c.check().is_err());
}

#[test]
fn wall_clock_fallback_is_per_target() {
    // LLVM libc's table (libc/src/time/gpu/time_utils.h): gfx94x and gfx10+ 100 MHz, other gfx9 25 MHz.
    for (arch, khz) in [
        ("gfx942:sramecc+:xnack-", 100_000),
        ("gfx940", 100_000),
        ("gfx941", 100_000),
        ("gfx90a:sramecc+:xnack-", 25_000),
        ("gfx908", 25_000),
        ("gfx906", 25_000),
        ("gfx900", 25_000),
        ("gfx1100", 100_000),
        ("gfx1201", 100_000),
        ("", 100_000),
    ] {
        assert_eq!(crate::default_wall_clock_khz(arch), khz, "{arch}");
    }
}
