//! A first Ctrl-C ends every command within a bound whatever T is (waiting for the LP stream to
//! drain would take (2 x threshold + 2) x T, minutes at large T). Each test runs a command on the
//! host device with LP commands of seconds, sends one SIGINT once it is measuring, and wants: the
//! process ended within [`BOUND`] of the signal, exit status 0, what it measured written (marked
//! interrupted), the exactly-once check said to be not checked where LP commands were abandoned
//! (never a pass or a failure), and no host worker left alive or stopped.
mod common;

use common::{Interrupted, alive_after, interrupt_once, scratch};
use serde_json::Value;
use std::time::Duration;

/// From the signal to the end of the process: the API's bounded close (`preempt_api::CLOSE_WAIT`,
/// 1 s) and the writing of the result, with room for a loaded machine.
const BOUND: Duration = Duration::from_secs(5);

/// The common verdict: ended within the bound with status 0, its workers gone. Returns stdout.
fn ended_promptly(r: &Interrupted, what: &str) -> String {
    assert!(
        r.status.is_some(),
        "{what}: still running {BOUND:?} after one SIGINT (killed): {}",
        r.stderr
    );
    assert_eq!(
        r.status.and_then(|s| s.code()),
        Some(0),
        "{what}: took {:?}: {}",
        r.took,
        r.stderr
    );
    assert!(
        r.stderr.contains("stopping after the current sample"),
        "{what}: {}",
        r.stderr
    );
    assert!(!r.workers.is_empty(), "{what}: no host workers seen");
    let left = alive_after(&r.workers, Duration::from_secs(2));
    assert!(left.is_empty(), "{what}: host workers outlived it: {left:?}");
    r.stdout.clone()
}

fn json(out: &str, what: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {out}"))
}

/// The check of commands a stop abandoned: null (neither a pass nor a failure), and how many.
fn assert_not_checked(c: &Value, what: &str) {
    assert!(
        c["ok"].is_null(),
        "{what}: the check must be neither a pass nor a failure: {c}"
    );
    assert!(
        c["abandoned"].as_u64().is_some_and(|n| n > 0),
        "{what}: abandoned commands counted: {c}"
    );
}

/// The latency run at Lv1, T = 2 s, threshold 8: stopped in its first gap or drain, it used to
/// drain 18 commands of 2 s (36 s on one LP worker) before writing anything.
#[test]
fn a_run_with_a_large_t_ends_within_the_bound() {
    let what = "run --level 1 --t-ms 2000";
    let r = interrupt_once(
        &[
            "--device",
            "host",
            "--workers",
            "1",
            "--level",
            "1",
            "--t-ms",
            "2000",
            "--threshold",
            "8",
            "--samples",
            "5",
            "--warmup",
            "0",
            "--format",
            "json",
            "--quiet",
        ],
        2,
        Duration::from_millis(2500),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    assert_eq!(v["interrupted"], true, "{v}");
    assert_not_checked(&v["correctness"], what);
}

/// The same in text, at Lv3: the text says the check was not made, and why.
#[test]
fn a_run_in_text_says_its_check_was_not_made() {
    let what = "run --level 3 --t-ms 3000";
    let r = interrupt_once(
        &[
            "--device",
            "host",
            "--workers",
            "1",
            "--level",
            "3",
            "--t-ms",
            "3000",
            "--samples",
            "5",
            "--warmup",
            "0",
            "--quiet",
        ],
        2,
        Duration::from_millis(2000),
        BOUND,
    );
    let out = ended_promptly(&r, what);
    assert!(out.contains("INTERRUPTED: 0 of 5 samples measured"), "{out}");
    let line = out.lines().find(|l| l.starts_with("correctness:")).unwrap_or_default();
    assert!(
        line.starts_with("correctness: not checked (interrupted: ") && line.contains("LP commands abandoned"),
        "{out}"
    );
}

/// A stop that comes once every sample is taken, while the run drains its LP stream (18 commands
/// of 1 s on one worker): the drain is cut as a stop's close, not waited out, and its check is not
/// made rather than failed (the workers the stop killed are not lost commands).
#[test]
fn a_stop_during_the_final_drain_ends_it_within_the_bound() {
    let what = "run --level 3 --t-ms 1000 --samples 1, stopped in its drain";
    let r = interrupt_once(
        &[
            "--device",
            "host",
            "--workers",
            "1",
            "--level",
            "3",
            "--t-ms",
            "1000",
            "--samples",
            "1",
            "--warmup",
            "0",
            "--format",
            "json",
            "--quiet",
        ],
        2,
        // The one sample comes after a gap of at most 3 x T.
        Duration::from_millis(5000),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    assert_eq!(
        v["samples"].as_array().map(Vec::len),
        Some(1),
        "the sample was taken: {v}"
    );
    assert_not_checked(&v["correctness"], what);
}

/// `priority`'s lv1 mode at T = 2 s: after the window it drained the LP stream's 18 commands.
#[test]
fn priority_with_a_large_t_ends_within_the_bound() {
    let what = "priority --modes lv1 --t-ms 2000";
    let dir = scratch("first-signal-prio");
    let r = interrupt_once(
        &[
            "priority",
            "--device",
            "host",
            "--workers",
            "1",
            "--modes",
            "lv1",
            "--t-ms",
            "2000",
            "--hp-rate",
            "1",
            "--arrival",
            "fixed",
            "--duration-s",
            "60",
            "--format",
            "json",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ],
        2,
        Duration::from_millis(2500),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    let m = &v["modes"][0];
    assert_eq!(m["interrupted"], true, "{v}");
    assert!(
        m["hp_requests"].as_u64().is_some_and(|n| n >= 1),
        "what it measured is written: {v}"
    );
    assert_not_checked(&m["correctness"], what);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `priority`'s lv2 mode at T = 4 s, stopped while the first HP request (at 1 s) waits for the
/// LP command under way to finish (an Lv2 hold lasts up to T): the hold is cut, not waited out.
#[test]
fn priority_stopped_during_an_lv2_hold_ends_within_the_bound() {
    let what = "priority --modes lv2 --t-ms 4000";
    let dir = scratch("first-signal-lv2");
    let r = interrupt_once(
        &[
            "priority",
            "--device",
            "host",
            "--workers",
            "1",
            "--modes",
            "lv2",
            "--t-ms",
            "4000",
            "--hp-rate",
            "1",
            "--arrival",
            "fixed",
            "--duration-s",
            "60",
            "--format",
            "json",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ],
        2,
        Duration::from_millis(1500),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    assert_eq!(v["modes"][0]["interrupted"], true, "{v}");
    assert_not_checked(&v["modes"][0]["correctness"], what);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The class experiment with two saturating classes of T = 2 s: its check drained each class's
/// backlog (16 commands of 2 s) first.
#[test]
fn the_class_experiment_with_a_large_t_ends_within_the_bound() {
    let what = "priority --policy up, t=2000";
    let dir = scratch("first-signal-class");
    let r = interrupt_once(
        &[
            "priority",
            "--device",
            "host",
            "--workers",
            "1",
            "--policy",
            "up",
            "--class",
            "a:rate=0:t=2000:share=1",
            "--class",
            "b:rate=0:t=2000:share=1",
            "--duration-s",
            "60",
            "--format",
            "json",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ],
        2,
        Duration::from_millis(2500),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    assert_eq!(v["interrupted"], true, "{v}");
    for c in v["classes"].as_array().expect("classes") {
        assert_not_checked(&c["check"], what);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `overhead` at T = 1 s with 60 commands a setup: its native run (commands launched straight
/// onto the workers) was waited out, 60 s, then the scheduled one.
#[test]
fn overhead_with_a_large_t_ends_within_the_bound() {
    let what = "overhead --t-ms 1000 --commands 60";
    let r = interrupt_once(
        &[
            "overhead",
            "--device",
            "host",
            "--workers",
            "1",
            "--t-ms",
            "1000",
            "--commands",
            "60",
            "--runs",
            "2",
            "--levels",
            "1",
            "--format",
            "json",
            "--quiet",
        ],
        2,
        Duration::from_millis(2000),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(v["runs_done"], 0, "an unfinished run is not reported: {v}");
}

/// `sweep threshold` at T = 1 s with 60 commands a measurement: the measurement under way
/// (60 s of LP work) was waited out; the point it was measuring is left out.
#[test]
fn sweep_threshold_with_a_large_t_ends_within_the_bound() {
    let what = "sweep threshold --t-ms 1000 --commands 60";
    let dir = scratch("first-signal-sweep-threshold");
    let r = interrupt_once(
        &[
            "sweep",
            "threshold",
            "--device",
            "host",
            "--workers",
            "1",
            "--t-ms",
            "1000",
            "--thresholds",
            "2",
            "--commands",
            "60",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ],
        2,
        Duration::from_millis(2000),
        BOUND,
    );
    ended_promptly(&r, what);
    let points = std::fs::read_to_string(dir.join("sweep-threshold.json")).expect("sweep-threshold.json written");
    assert_eq!(json(&points, what), Value::Array(Vec::new()), "no point was complete");
    let _ = std::fs::remove_dir_all(&dir);
}

/// At a small T the commands in flight complete within the bounded close: nothing is abandoned,
/// and the check of the commands launched is made and passes (the ones a stop drops, never
/// launched, are not counted missing).
#[test]
fn a_run_with_a_small_t_is_still_checked() {
    let what = "run --level 1 --t-ms 1";
    let r = interrupt_once(
        &[
            "--device",
            "host",
            "--workers",
            "1",
            "--level",
            "1",
            "--t-ms",
            "1",
            "--samples",
            "100000",
            "--format",
            "json",
            "--quiet",
        ],
        2,
        Duration::from_millis(1500),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    assert_eq!(v["interrupted"], true, "{v}");
    let c = &v["correctness"];
    assert_eq!(
        (c["ok"].as_bool(), c["abandoned"].as_u64()),
        (Some(true), Some(0)),
        "{c}"
    );
    assert!(c["submitted"].as_u64().is_some_and(|n| n > 0), "{c}");
    assert_eq!(c["submitted"], c["completed_once"], "{c}");
}

/// The same for `priority`: a mode stopped at a small T is checked, and passes.
#[test]
fn priority_with_a_small_t_is_still_checked() {
    let what = "priority --modes lv3 --t-ms 1";
    let dir = scratch("first-signal-prio-small");
    let r = interrupt_once(
        &[
            "priority",
            "--device",
            "host",
            "--workers",
            "1",
            "--modes",
            "lv3",
            "--t-ms",
            "1",
            "--hp-rate",
            "50",
            "--duration-s",
            "60",
            "--format",
            "json",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ],
        2,
        Duration::from_millis(1500),
        BOUND,
    );
    let v = json(&ended_promptly(&r, what), what);
    let m = &v["modes"][0];
    assert_eq!(m["interrupted"], true, "{v}");
    let c = &m["correctness"];
    assert_eq!(
        (c["ok"].as_bool(), c["abandoned"].as_u64()),
        (Some(true), Some(0)),
        "{c}"
    );
    assert!(c["submitted"].as_u64().is_some_and(|n| n > 0), "{c}");
    let _ = std::fs::remove_dir_all(&dir);
}
