//! Tests against the real libamdhip64 when it is installed (Debian's libamdhip64-5 here and in
//! CI): the delay kernel's compile step and the run checks. Without a GPU, HIP must answer
//! hipErrorNoDevice.

use hip_rt::testing::real_hip;

use super::*;

#[test]
fn real_hiprtc_compiles_delay_kernel_if_it_can_without_gpu() {
    // hiprtc needs no GPU in principle (comgr compiles); some HIP builds still initialize the
    // runtime first. Only a produced code object is checked; a refusal is reported, not failed.
    let Some(hip) = real_hip() else { return };
    let arch = GfxTarget::parse("gfx90a").expect("valid");
    match kernel::compile(&hip, &arch) {
        Ok(code) => {
            assert_eq!(&code.image[..4], b"\x7fELF", "not an ELF code object");
            // The parameters the launchers pass, as the code object's metadata declares them.
            let k = hip_rt::code_object::kernels(&code.image).expect("metadata");
            let sizes = |name: &str| -> Vec<(hip_rt::code_object::ParamKind, u64)> {
                let k = k
                    .iter()
                    .find(|k| k.name == name)
                    .unwrap_or_else(|| panic!("{name} missing"));
                k.params.iter().map(|p| (p.kind.clone(), p.size)).collect()
            };
            use hip_rt::code_object::ParamKind::{ByValue, GlobalBuffer};
            assert_eq!(
                sizes("delay_kernel"),
                [(GlobalBuffer, 8), (ByValue, 4), (ByValue, 8), (ByValue, 4)]
            );
            assert_eq!(sizes("delay_kernel_heavy"), sizes("delay_kernel"));
            assert_eq!(sizes("hp_probe"), [(GlobalBuffer, 8), (ByValue, 4)]);
            eprintln!("hiprtc compiled delay.hip for gfx90a: {} bytes", code.image.len());
            // What this hiprtc's compiler made of the heavy kernel: the run refuses it when it is not
            // the full state (clang-19's output is checked by scripts/check-delay-kernel.sh).
            let heavy = k.iter().find(|k| k.name == "delay_kernel_heavy").expect("heavy kernel");
            let grid = setup::lp_grid_for(LpState::Heavy, 104, 64, 1).expect("grid");
            match state::check_heavy(&heavy.resources, grid) {
                Ok(()) => eprintln!(
                    "hiprtc's delay_kernel_heavy holds the full state: {:?}",
                    heavy.resources
                ),
                Err(e) => eprintln!("NOTE: this hiprtc's delay_kernel_heavy would be refused at run time: {e}"),
            }
        }
        Err(e) => eprintln!("NOTE: hiprtc did not compile here (no GPU?): {e}"),
    }
}

#[test]
fn hiprtc_refuses_targets_newer_than_the_runtime() {
    // HIP 5.2's hiprtc crashes the process on gfx942; compile must refuse it with an error.
    let Some(hip) = real_hip() else { return };
    let (major, _, _) = hip_rt::decode_version(hip.runtime_version().unwrap_or(0));
    if major >= 6 {
        eprintln!("SKIPPED: HIP {major}.x knows gfx942");
        return;
    }
    let e = kernel::compile(&hip, &GfxTarget::parse("gfx942:sramecc+:xnack-").unwrap()).expect_err("refused");
    assert!(
        matches!(e, Error::HipTooOld { .. }) && e.to_string().contains("gfx942"),
        "{e}"
    );
}

#[test]
fn usable_without_a_gpu_says_why() {
    let Some(hip) = real_hip() else { return };
    match usable(0) {
        Ok(()) => eprintln!("a GPU is usable here: {:?}", hip.device_count()),
        Err(e) => {
            eprintln!("usable(0): {e}");
            if hip.device_count().is_err_and(|d| d.is_no_device()) {
                assert!(matches!(e, Error::Hip(ref h) if h.is_no_device()), "{e:?}");
                let source = std::error::Error::source(&e).expect("the HIP error is the source");
                assert!(source.to_string().contains("hipErrorNoDevice"), "{source}");
            }
        }
    }
}

#[test]
fn arch_errors_name_the_device() {
    let info = hip_rt::DeviceInfo {
        index: 3,
        name: "x".into(),
        pci_bus_id: "0000:04:00.0".into(),
        gcn_arch_name: Ok("sm_90".into()),
        cu_count: 1,
        wave_size: 64,
        max_threads_per_block: 1024,
        clock_khz: 1,
        wall_clock_khz: 100_000,
        wall_clock_reported: false,
    };
    let e = gfx_target(&info).unwrap_err();
    assert_eq!(e.to_string(), "hip:3: not a gfx target: \"sm_90\"");
    assert!(std::error::Error::source(&e).is_some());
    let ok = hip_rt::DeviceInfo {
        gcn_arch_name: Ok("gfx942:sramecc+:xnack-".into()),
        ..info
    };
    assert_eq!(gfx_target(&ok).unwrap().offload_arch(), "gfx942:sramecc+:xnack-");
}
