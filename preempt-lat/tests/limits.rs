//! Absurd sizes and settings that would hang or fail late: refused up front with one line and exit
//! status 2, or handled; every run bounded by a time limit.
mod common;

use common::{assert_refused, run_bounded, scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

/// `--threshold 4294967295 --batch 4294967295` would keep the first sample from ever ending (2 x
/// threshold + 2 commands submitted before it; an Lv1 suspend waits for threshold x T of work).
/// Refused before anything starts, in every command that takes them.
#[test]
fn absurd_lv1_settings_are_refused_up_front() {
    let huge = u32::MAX.to_string();
    let h = huge.as_str();
    let lv1 = ["--threshold", h, "--batch", h];
    let with = |head: &[&'static str]| -> Vec<String> {
        head.iter()
            .map(|s| (*s).to_string())
            .chain(lv1.iter().map(|s| (*s).to_string()))
            .collect()
    };
    for args in [
        with(&["--device", "host", "--level", "1", "--t-ms", "10000", "--samples", "5"]),
        with(&["--device", "host", "--level", "3"]),
        with(&["sweep", "t", "--device", "host"]),
        with(&["priority", "--device", "host"]),
        with(&["launcher-cost", "--device", "host"]),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_refused(&args, "--threshold", LIMIT);
    }
    // Within the absolute limit, the LP work an Lv1 suspend may wait for is bounded too.
    let r = run_bounded(
        &[
            "--device",
            "host",
            "--level",
            "1",
            "--t-ms",
            "10000",
            "--threshold",
            "1000",
            "--samples",
            "1",
        ],
        LIMIT,
    );
    assert_eq!(r.status.and_then(|s| s.code()), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("of LP work in flight"), "{}", r.stderr);
    let r = run_bounded(&["sweep", "threshold", "--device", "host", "--thresholds", h], LIMIT);
    assert_eq!(r.status.and_then(|s| s.code()), Some(2), "{}", r.stderr);
    // sweep threshold's measurements are --commands x T each, and bounded too.
    let r = run_bounded(
        &[
            "sweep",
            "threshold",
            "--device",
            "host",
            "--commands",
            "1000000",
            "--t-ms",
            "10000",
        ],
        LIMIT,
    );
    assert_eq!(r.status.and_then(|s| s.code()), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("of LP work per measurement"), "{}", r.stderr);
    // So are overhead's runs (one setup of --commands x T at a time).
    let r = run_bounded(
        &[
            "overhead",
            "--device",
            "host",
            "--commands",
            "1000000",
            "--t-ms",
            "10000",
        ],
        LIMIT,
    );
    assert_eq!(r.status.and_then(|s| s.code()), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("of LP work per measurement"), "{}", r.stderr);
}

/// `priority` with no HP request to plot (`--modes standalone-lp`) wrote its results but failed
/// with `plot ...: no data` (exit 1); a run interrupted before its first request did the same.
#[test]
fn priority_without_an_hp_request_writes_its_results_and_no_plot() {
    let dir = scratch("prio-no-hp");
    let r = run_bounded(
        &[
            "priority",
            "--device",
            "host",
            "--modes",
            "standalone-lp",
            "--duration-s",
            "0.3",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r.status.and_then(|s| s.code()), Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("priority.{csv,json}"), "{}", r.stdout);
    assert!(dir.join("priority.json").is_file() && !dir.join("priority.svg").exists());
    assert!(
        !dir.join("priority-cdf.svg").exists(),
        "no HP request, no distribution to draw"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Numbers at the ends of what parses are refused in one short line that echoes them (1e308
/// was printed as 309 digits, 1e-300 as 300 zeros), and the hidden bystander worker takes the
/// largest --max-duration-ms (it overflowed: a panic).
#[test]
fn extreme_numbers_are_refused_in_one_short_line() {
    for (args, want) in [
        (
            &["priority", "--device", "host", "--hp-rate", "1e308"][..],
            "--hp-rate = 1e308 is too large",
        ),
        (
            &["priority", "--device", "host", "--duration-s", "1e308"][..],
            "--duration-s = 1e308 is too large",
        ),
        (
            &["priority", "--device", "host", "--hp-rate", "1e-300"][..],
            "--hp-rate 1e-300 makes no HP request",
        ),
    ] {
        let r = run_bounded(args, LIMIT);
        assert_eq!(r.status.and_then(|s| s.code()), Some(2), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
        assert!(r.stderr.len() < 200, "{args:?}: a short line: {}", r.stderr);
    }
    let same = std::env::temp_dir().join(format!("preempt-lat-same-{}.json", std::process::id()));
    let same = same.to_str().unwrap();
    // (Was refused too, but as "--trace ...: cannot write: File exists".)
    let r = run_bounded(&["--device", "host", "--out", same, "--trace", same], LIMIT);
    assert_eq!(r.status.and_then(|s| s.code()), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--out and --trace both name"), "{}", r.stderr);
    let max = u64::MAX.to_string();
    let r = run_bounded(
        &[
            "__bystander-worker",
            "--device",
            "host",
            "--kernel-us",
            "10",
            "--max-duration-ms",
            &max,
        ],
        LIMIT,
    );
    assert_eq!(
        r.status.and_then(|s| s.code()),
        Some(0),
        "stdin closed: it ends: {}",
        r.stderr
    );
    assert!(r.stdout.contains("stdin closed"), "{}", r.stdout);
}
