//! Outputs that cannot be written (a closed stdout, as `| head -c1` leaves it): one line and exit
//! status 1, never a panic, and what could be written is.
mod common;

use common::{drain, preempt_lat, scratch, wait_or_kill};
use std::process::Stdio;
use std::time::Duration;

/// Runs preempt-lat with its stdout's reading end closed at once; (exit code, stderr).
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    let mut child = preempt_lat()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    drop(child.stdout.take());
    let err = drain(child.stderr.take().expect("stderr"));
    let st = wait_or_kill(&mut child, Duration::from_secs(120));
    let err = err.join().unwrap();
    (st.and_then(|s| s.code()), err)
}

/// `sweep` printed its summary with `println!`, which panics on a closed stdout (exit 101 and a
/// backtrace, after its files were written).
#[test]
fn a_sweep_whose_stdout_is_closed_says_so_in_one_line() {
    let dir = scratch("closed-sweep");
    let (code, err) = with_stdout_closed(&[
        "sweep",
        "threshold",
        "--device",
        "host",
        "--t-ms",
        "0.1",
        "--thresholds",
        "2",
        "--commands",
        "100",
        "--quiet",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("preempt-lat: ")).count(),
        1,
        "{err}"
    );
    assert!(err.contains("writing the result: Broken pipe"), "{err}");
    assert!(
        dir.join("sweep-threshold.json").is_file(),
        "the files are written first"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run's trace is written even when its result cannot be (it was lost with it).
#[test]
fn a_runs_trace_is_written_when_its_stdout_is_closed() {
    let dir = scratch("closed-trace");
    let trace = dir.join("run.trace.json");
    let (code, err) = with_stdout_closed(&[
        "--device",
        "host",
        "--samples",
        "20",
        "--warmup",
        "0",
        "--t-ms",
        "0.01",
        "--format",
        "json",
        "--quiet",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("writing the result: Broken pipe"), "{err}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).expect("the trace")).unwrap();
    assert!(t["traceEvents"].as_array().is_some_and(|e| !e.is_empty()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A broken stderr (its reader gone, as `2>&1 | head -1` leaves it) is no reason to stop: the
/// run's notes are lost, its result is not (std's `eprintln!` panicked: exit 101, nothing on
/// stdout).
#[test]
fn a_run_whose_stderr_is_broken_still_writes_its_result() {
    let mut child = preempt_lat()
        .args([
            "--device",
            "auto",
            "--samples",
            "3",
            "--warmup",
            "0",
            "--format",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    drop(child.stderr.take());
    let out = drain(child.stdout.take().expect("stdout"));
    let st = wait_or_kill(&mut child, Duration::from_secs(120));
    let out = out.join().unwrap();
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["samples"].as_array().map(Vec::len), Some(3));
}
