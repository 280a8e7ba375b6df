//! examples/library_kernels.py's host route end to end: the stand-in torch over this runtime (under
//! libamdhip64's names), a GEMM and a convolution launched again and again on one stream while
//! another thread suspends and resumes it. Asserted: every result equals the unpreempted
//! reference, the suspends were made and each was resumed, some landed while a kernel ran, the
//! lines say host figures; a reference moved by one ulp is reported as a mismatch (exit 3); bad
//! arguments exit 2 in one line; without the stand-in the script says it cannot run (exit 4).
//! Each run is a real process, bounded in time. python3 is a dependency of the suite
//! (scripts/install-deps.sh installs python3-venv, which brings it): missing, the tests fail
//! saying so.
use hip_testkit::{built, standin_dir, wait_bounded};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(240);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/library_kernels.py")
}

fn python() -> &'static str {
    let ok = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "python3 is not installed (scripts/install-deps.sh installs it): examples/library_kernels.py needs it"
    );
    "python3"
}

/// The script on the stand-in (`lib_dir` on LD_LIBRARY_PATH) with `args`, bounded.
fn run(python: &str, lib_dir: &Path, args: &[&str]) -> Output {
    let child = Command::new(python)
        .arg(script())
        .args(args)
        .env("LD_LIBRARY_PATH", lib_dir)
        .env("PREEMPT_HOST_WORKER", built("preempt-host-worker", "host-device"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    wait_bounded(child, BOUND, "examples/library_kernels.py")
}

fn on_standin() -> &'static Path {
    standin_dir(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// The summary line's `key=value`s.
fn summary(out: &Output) -> std::collections::HashMap<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("library_kernels ok="))
        .unwrap_or_else(|| {
            panic!(
                "no summary line; stdout:\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn num(s: &std::collections::HashMap<String, String>, k: &str) -> u64 {
    s.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{k} in {s:?}"))
}

#[test]
fn suspended_library_kernels_give_the_reference_results_on_the_host_route() {
    let py = python();
    let out = run(
        py,
        on_standin(),
        &["--device", "host", "--suspends", "50", "--runs", "8"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{err}");
    let s = summary(&out);
    assert_eq!(s["ok"], "1", "{s:?}");
    assert_eq!((s["route"].as_str(), s["figures"].as_str()), ("host", "host"));
    assert_eq!((num(&s, "gemm_runs"), num(&s, "conv_runs")), (8, 8));
    assert_eq!(num(&s, "mismatches"), 0);
    assert_eq!(s["compare"], "exact");
    let (suspends, resumes) = (num(&s, "suspends"), num(&s, "resumes"));
    assert!(suspends == resumes && suspends >= 50, "{s:?}");
    assert!(num(&s, "mid_kernel") > 0, "no suspend landed while a kernel ran: {s:?}");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        assert!(line.contains("host-figures") || line.contains("host figures"), "{line}");
    }
}

#[test]
fn a_reference_moved_by_one_ulp_is_a_mismatch_and_exit_3() {
    let py = python();
    let out = run(
        py,
        on_standin(),
        &[
            "--device",
            "host",
            "--suspends",
            "10",
            "--runs",
            "3",
            "--corrupt-reference",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&out);
    assert_eq!(s["ok"], "0");
    assert_eq!((num(&s, "mismatches"), num(&s, "mismatched_runs")), (1, 1), "{s:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("mismatch: gemm run 0: 1 elements differ"));
}

#[test]
fn bad_arguments_exit_2_in_one_line_and_no_standin_exits_4() {
    let py = python();
    for args in [&["--device", "hip:x"][..], &["--device", "host", "--gemm", "1,2"], &[]] {
        let out = run(py, on_standin(), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    // An empty directory first on the path: whatever libamdhip64 the system has (none, or a real
    // one without the stand-in's kernels), the host route cannot run, and says so.
    let empty = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-standin");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run(py, &empty, &["--device", "host"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("cannot run here"), "{err}");
}
