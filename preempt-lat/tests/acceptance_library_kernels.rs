//! `acceptance`'s library-kernels stage on the host device: examples/library_kernels.py, its
//! modules and the stand-in torch written into the stage's directory and run on the stand-in
//! runtime (the workspace's cdylib and worker as cargo built them: `cargo test --workspace`
//! builds them), judged and archived with the script's summary; and, from a copy of preempt-lat
//! with nothing built beside it, the stage skipped with the command that builds what is missing.
//! python3 is a dependency of the suite: missing, the tests fail saying so.
mod common;

use common::only_stage::{self, members};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(150);

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("acceptance-library-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// python3 is a dependency of the suite (scripts/install-deps.sh installs python3-venv, which
/// brings it): missing, the test fails saying so rather than passing without running.
fn require_python() {
    let ok = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "python3 is not installed (scripts/install-deps.sh installs it): the library-kernels stage runs a Python script"
    );
}

fn accept(program: &Path, out: &Path) -> (Value, String) {
    let mut c = Command::new("env");
    c.arg("--default-signal=INT,TERM")
        .arg("--unset=PREEMPT_PYTHON")
        .arg(program);
    only_stage::run(c, "library-kernels", out, LIMIT)
}

#[test]
fn the_stage_passes_on_the_stand_in_with_the_scripts_summary_archived() {
    require_python();
    let dir = scratch("pass");
    let t0 = Instant::now();
    let (s, stderr) = accept(Path::new(env!("CARGO_BIN_EXE_preempt-lat")), &dir);
    let st = only_stage::stage(&s, "library-kernels");
    assert_eq!(st["status"], "PASS", "{st}\n{stderr}");
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "--quick took {:?}",
        t0.elapsed()
    );
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("host figures on the stand-in HIP runtime (not hipBLAS/MIOpen): 4 GEMM and 4 conv launches, 20 suspends and resumes ("),
        "{reason}"
    );
    assert!(
        reason.ends_with("every result bit-exact against the reference"),
        "{reason}"
    );
    let sum = &st["facts"]["summary"];
    assert_eq!(
        (sum["ok"].as_f64(), sum["route"].as_str()),
        (Some(1.0), Some("host")),
        "{sum}"
    );
    assert_eq!(sum["mismatches"].as_f64(), Some(0.0), "{sum}");
    assert!(sum["mid_kernel"].as_f64().is_some_and(|n| n > 0.0), "{sum}");
    assert_eq!(st["facts"]["host_figures"], true);
    let archive = dir.join(s["archive"].as_str().unwrap());
    let script = members(&archive, "-library-kernels/library_kernels.py");
    assert_eq!(
        script[0].1,
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/library_kernels.py")).unwrap()
    );
    let out = members(&archive, "-library-kernels/library_kernels.stdout.txt");
    assert!(out[0].1.contains("library_kernels ok=1 route=host"), "{}", out[0].1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_the_stand_in_built_the_stage_is_skipped_naming_the_build_command() {
    let dir = scratch("missing");
    let lone = dir.join("bin");
    std::fs::create_dir_all(&lone).unwrap();
    let exe = lone.join("preempt-lat");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_preempt-lat"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_preempt-lat"), &exe).unwrap();
    }
    let (s, stderr) = accept(&exe, &dir.join("out"));
    let st = only_stage::stage(&s, "library-kernels");
    assert_eq!(st["status"], "SKIP", "{st}\n{stderr}");
    let reason = st["reason"].as_str().unwrap();
    let release = if cfg!(debug_assertions) { "" } else { " --release" };
    assert!(
        reason.starts_with("libhip_standin.so, preempt-host-worker not built")
            && reason.contains(&format!("`cargo build{release} -p hip-standin -p host-device`")),
        "{reason}"
    );
    assert_eq!(s["ok"], true, "a SKIP on the host device fails nothing");
    std::fs::remove_dir_all(&dir).unwrap();
}
