use super::*;
use crate::acceptance::plan::{LIBRARY_KERNELS_BOUND_S, Sizes, Work, args as child_args, stages};
use crate::options::InternalStage;

const OK_LINE: &str = "library_kernels ok=1 route=host device=host figures=host gemm_runs=4 conv_runs=4 \
                       suspends=20 resumes=20 mid_kernel=18 mismatches=0 mismatched_runs=0 compare=exact \
                       reason=every_result_matched_the_reference";

#[test]
fn a_run_that_matched_passes_with_its_counts_and_host_label() {
    let s = summary(&format!("torch (stand-in)\n{OK_LINE}\n"));
    assert_eq!(s["route"], "host");
    assert_eq!(s["suspends"], 20.0);
    let Verdict::Pass(why) = judge(Some(0), &s, "", true) else {
        panic!("not a pass")
    };
    assert!(
        why.starts_with("host figures on the stand-in HIP runtime (not hipBLAS/MIOpen): "),
        "{why}"
    );
    assert!(
        why.contains("4 GEMM and 4 conv launches, 20 suspends and resumes (18 found a kernel running)"),
        "{why}"
    );
    assert!(why.ends_with("bit-exact against the reference"), "{why}");
    let Verdict::Pass(gpu) = judge(Some(0), &s, "", false) else {
        panic!("not a pass")
    };
    assert!(!gpu.contains("host figures"), "{gpu}");
}

#[test]
fn a_mismatch_fails_a_route_that_cannot_run_skips_and_exit_0_without_ok_fails() {
    let bad = summary(
        "library_kernels ok=0 gemm_runs=4 conv_runs=4 suspends=20 resumes=20 mismatches=1 mismatched_runs=1 \
         reason=1_runs_differ_from_the_reference\n",
    );
    let Verdict::Fail(why) = judge(Some(3), &bad, "", true) else {
        panic!("not a failure")
    };
    assert!(
        why.contains("1 mismatched elements in 1 runs") && why.ends_with("1 runs differ from the reference"),
        "{why}"
    );
    let why = "library_kernels: cannot run here: PyTorch does not import (No module named 'torch')";
    assert_eq!(
        judge(Some(4), &Map::new(), why, false),
        Verdict::Skip(format!("the script cannot run here: {why}"))
    );
    assert!(matches!(judge(Some(0), &Map::new(), "", true), Verdict::Fail(_)));
    assert!(matches!(judge(None, &Map::new(), "killed", true), Verdict::Fail(w) if w.ends_with("killed")));
}

#[test]
fn quick_makes_the_host_run_small_and_the_sources_are_laid_out_as_the_script_expects() {
    let dir = Path::new("/tmp/x");
    let line = |dev, quick| -> Vec<String> {
        args(dev, quick, dir)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        line(DeviceSpec::HOST, true),
        [
            "/tmp/x/library_kernels.py",
            "--device",
            "host",
            "--timeout-s",
            "110",
            "--runs",
            "4",
            "--suspends",
            "20"
        ]
    );
    assert_eq!(
        line(DeviceSpec::Hip(1), false),
        ["/tmp/x/library_kernels.py", "--device", "hip:1", "--timeout-s", "390"]
    );
    assert!(
        SOURCES[2].1.contains("import preempt_kfd as pk"),
        "the GPU route is the package's"
    );
    // Every module of the stand-in torch is written, each where the package has it.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut on_disk = Vec::new();
    let mut dirs = vec![examples.join("xsched_seed002/standin_torch/torch")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "py") {
                on_disk.push(p.strip_prefix(&examples).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    on_disk.sort();
    let mut written: Vec<String> = SOURCES
        .iter()
        .filter(|(p, _)| p.starts_with("xsched_seed002/"))
        .map(|(p, _)| p.to_string())
        .collect();
    written.sort();
    assert_eq!(written, on_disk);
    // The script's default --standin-torch is xsched_seed002/standin_torch beside it.
    assert!(SOURCES[0].1.contains("\"xsched_seed002\", \"standin_torch\""));
}

/// The library-kernels stage runs on both devices right after the interposer, needing what its
/// route needs (the host device: its environment; a GPU: the LP queue found and a Lv3 latency that
/// passed, as the package's Lv3 stream needs), and it is told `--quick`.
#[test]
fn library_kernels_follows_the_interposer_and_is_sized_by_quick() {
    for (dev, needs, any) in [
        (DeviceSpec::HOST, "environment", false),
        (DeviceSpec::Hip(1), "discovery", true),
    ] {
        for quick in [false, true] {
            let v = stages(dev, quick, None);
            let at = |id: &str| v.iter().position(|s| s.id == id).unwrap();
            let s = &v[at("library-kernels")];
            assert_eq!(at("library-kernels"), at("interposer") + 1);
            assert_eq!(s.work, Work::Internal(InternalStage::LibraryKernels, None));
            assert_eq!((s.needs.as_slice(), &s.not_here), (&[needs.to_string()][..], &None));
            assert_eq!(!s.needs_any.is_empty(), any, "{dev}");
            assert_eq!(
                s.bound,
                Duration::from_secs_f64(LIBRARY_KERNELS_BOUND_S as f64 * Sizes::of(quick).bound_scale)
            );
            let a = child_args(s, dev, quick, Path::new("/tmp/x"), None).unwrap();
            assert_eq!(a.contains(&"--quick".to_string()), quick, "{a:?}");
        }
    }
}
