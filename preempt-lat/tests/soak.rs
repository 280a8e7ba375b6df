//! `soak` on the host device: the suite's two minutes of the long run (both experiments in
//! turn, every LP command exactly once, nothing held more at the end than after the second
//! window), its stop by Ctrl-C, its refusals, `report` judging it, and `acceptance --long`
//! running it as a stage (a 12-s trial). Host figures only; the
//! latency drift is printed, never asserted (a loaded 2-core VM moves it either way).
mod common;

use serde_json::Value;
use std::time::Duration;

fn json(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

#[test]
fn two_minutes_of_both_experiments_keep_every_command_and_hold_nothing_more() {
    let dir = common::scratch("soak-2min");
    let d = dir.to_str().unwrap();
    let args = [
        "soak",
        "--device",
        "host",
        "--minutes",
        "2",
        "--window-s",
        "10",
        "--quiet",
        "--out-dir",
        d,
    ];
    let o = common::output_within(&args, Duration::from_secs(300));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{args:?}: {}\n{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{text}");
    let r = json(&dir.join("soak.json"));
    let windows = r["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 12, "2 min of 10-s windows");
    for (i, w) in windows.iter().enumerate() {
        let (kind, preset) = if i % 2 == 0 {
            ("priority", "7.2.1")
        } else {
            ("classes", "8.3.1")
        };
        assert_eq!(
            (w["kind"].as_str(), w["preset"].as_str()),
            (Some(kind), Some(preset)),
            "{w}"
        );
        assert_eq!(w["correct"], true, "window {i}: every LP command exactly once: {w}");
        assert!(
            w["hp_requests"].as_u64().unwrap() > 0,
            "window {i} served HP requests: {w}"
        );
        assert!(
            w["hp_p99_ms"].as_f64().unwrap() >= w["hp_p50_ms"].as_f64().unwrap(),
            "{w}"
        );
        assert!(
            w["rss_kib"].as_u64().unwrap() > 0 && w["threads"].as_u64().unwrap() > 0,
            "{w}"
        );
    }
    let drift = r["p99_drift"].as_array().unwrap();
    let kinds: Vec<_> = drift
        .iter()
        .map(|d| (d["kind"].as_str().unwrap(), d["windows"].as_u64()))
        .collect();
    assert_eq!(kinds, [("priority", Some(6)), ("classes", Some(6))]);
    let h = &r["held_drift"];
    assert_eq!(
        (h["from_window"].as_u64(), h["to_window"].as_u64()),
        (Some(1), Some(11))
    );
    assert_eq!(
        (h["fds_growth"].as_i64(), h["threads_growth"].as_i64()),
        (Some(0), Some(0)),
        "{h}"
    );
    assert!(h["rss_growth_kib"].as_i64().unwrap() <= 64 * 1024, "{h}");
    assert_eq!(r["problems"], Value::Array(vec![]));
    assert_eq!(r["env"]["device"], "host");
    assert!(
        text.contains("verdict: PASS") && text.contains("not GPU figures"),
        "{text}"
    );
    let csv = std::fs::read_to_string(dir.join("soak.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13, "a header and a row per window: {csv}");

    let out = dir.join("report");
    let rep = common::output_within(
        &[
            "report",
            dir.join("soak.json").to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    let targets = json(&out.join("targets.json"));
    let stable: Vec<&Value> = targets
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["target"] == "soak-stable")
        .collect();
    assert_eq!(stable.len(), 1, "{targets}");
    assert_eq!(
        (&stable[0]["pass"], &stable[0]["host_figures"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
}

#[test]
fn ctrl_c_ends_the_soak_with_what_it_measured_and_no_worker_left() {
    let dir = common::scratch("soak-int");
    let d = dir.to_str().unwrap();
    let args = [
        "soak",
        "--device",
        "host",
        "--minutes",
        "10",
        "--window-s",
        "2",
        "--quiet",
        "--out-dir",
        d,
    ];
    let r = common::interrupt_once(&args, 1, Duration::from_secs(5), Duration::from_secs(20));
    assert_eq!(r.status.and_then(|s| s.code()), Some(0), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(10), "stopped in {:?}", r.took);
    let res = json(&dir.join("soak.json"));
    assert_eq!(res["interrupted"], true);
    let n = res["windows"].as_array().unwrap().len();
    assert!((1..300).contains(&n), "{n} windows before the stop");
    assert!(r.stdout.contains("verdict: PASS (interrupted)"), "{}", r.stdout);
    assert_eq!(
        res["held_drift"],
        Value::Null,
        "a window cut short is no baseline for growth"
    );
    let left = common::alive_after(&r.workers, Duration::from_secs(10));
    assert!(left.is_empty(), "host workers left behind: {left:?}");
}

#[test]
fn too_few_windows_and_bad_numbers_are_refused() {
    let limit = Duration::from_secs(30);
    common::assert_refused(
        &["soak", "--device", "host", "--minutes", "0.5", "--window-s", "10"],
        "a drift needs at least 6",
        limit,
    );
    common::assert_refused(&["soak", "--device", "host", "--window-s", "0"], "--window-s", limit);
    common::assert_refused(
        &["soak", "--device", "host", "--window-s", "0.5"],
        "--window-s 0.5: at least 1 s",
        limit,
    );
    common::assert_refused(
        &["soak", "--device", "host", "--rss-growth-mib=-1"],
        "--rss-growth-mib",
        limit,
    );
}

#[test]
fn acceptance_long_runs_the_soak_as_a_stage_archives_it_and_judges_it() {
    let dir = common::scratch("soak-acceptance");
    let args = [
        "acceptance",
        "--device",
        "host",
        "--quick",
        "--long=0.2",
        "--only",
        "soak",
        "--format",
        "json",
        "--node",
        "test-soak",
        "--out-dir",
        dir.to_str().unwrap(),
    ];
    let o = common::output_within(&args, Duration::from_secs(180));
    let summary: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let device = &summary["devices"][0];
    let stage = device["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "soak")
        .unwrap();
    assert_eq!(stage["status"], "PASS", "{stage}");
    let reason = stage["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("12 windows; priority P99 ") && reason.contains("fds +0, threads +0"),
        "{reason}"
    );
    let judged: Vec<&Value> = device["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"] == "soak-stable")
        .collect();
    assert_eq!(judged.len(), 1, "{device}");
    assert_eq!(
        (&judged[0]["verdict"], &judged[0]["host_figures"]),
        (&Value::from("PASS"), &Value::Bool(true))
    );
    let archive = dir.join(summary["archive"].as_str().unwrap());
    let soak = common::only_stage::members(&archive, "soak.json");
    assert_eq!(soak.len(), 1, "soak.json archived");
    let r: Value = serde_json::from_str(&soak[0].1).unwrap();
    assert_eq!(r["windows"].as_array().map(Vec::len), Some(12));
}
