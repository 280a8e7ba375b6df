//! `overhead` end to end on the host device: its refusals, its help, its outputs (every setup,
//! the spread over the runs, the exactly-once check), and `report` judging its JSON. Host figures
//! only: the overheads are checked for consistency with the runs' own figures, never for size.
mod common;

use serde_json::Value;
use std::process::Output;
use std::time::Duration;

fn pl(args: &[&str]) -> Output {
    common::output_within(args, Duration::from_secs(90))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn bad_overhead_runs_are_one_line_exit_2() {
    for (args, want) in [
        (&["--levels", "4"][..], "invalid value '4' for '--levels"),
        (&["--levels", "auto"], "invalid value 'auto' for '--levels"),
        (&["--commands", "0"], "at least 1"),
        (
            &["--commands", "2000000"],
            "--commands 2000000: at most 1000000 per run",
        ),
        (&["--runs", "0"], "at least 1"),
        (&["--mechanism", "dbg-trap"], "needs an AMD GPU"),
        (&["--t-ms", "0"], "T must be greater than 0 ms"),
    ] {
        let mut a = vec!["overhead", "--device", "host"];
        a.extend_from_slice(args);
        let o = pl(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{a:?}: {}", stderr(&o));
    }
    let o = pl(&["overhead", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = String::from_utf8_lossy(&o.stdout);
    for want in [
        "Examples:",
        "--mechanism dbg-trap",
        "preempt-lat report overhead.json",
        "3.4 %",
    ] {
        assert!(h.contains(want), "--help lacks {want:?}: {h}");
    }
}

#[test]
fn native_and_scheduled_runs_report_their_spread_and_report_judges_them() {
    let (commands, t_ms, runs) = (60u32, 0.5, 3usize);
    let dir = std::env::temp_dir().join(format!("preempt-lat-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = pl(&[
        "overhead",
        "--device",
        "host",
        "--commands",
        &commands.to_string(),
        "--t-ms",
        &t_ms.to_string(),
        "--runs",
        &runs.to_string(),
        "--format",
        "json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["env"]["device"], "host");
    assert_eq!(v["runs_done"], runs);
    let setups = v["setups"].as_array().unwrap();
    let names: Vec<&str> = setups.iter().map(|s| s["setup"].as_str().unwrap()).collect();
    assert_eq!(names, ["native", "lv1", "lv3"]);
    assert_eq!(setups[2]["mechanism"], "sigstop", "the host device's Lv3");
    let wall = |s: &Value| -> Vec<f64> {
        s["per_run"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| f(&r["wall_s"]))
            .collect()
    };
    let native = wall(&setups[0]);
    for s in setups {
        assert_eq!(s["exactly_once"], true, "{s}");
        assert_eq!(s["per_run"].as_array().unwrap().len(), runs);
        // The work itself: every command runs T on the device, one after the other.
        let w = wall(s);
        assert!(w.iter().all(|&x| x >= f64::from(commands) * t_ms / 1000.0), "{s}");
        assert_eq!(f(&s["wall_s"]["median"]), median(w.clone()));
        if s["setup"] == "native" {
            assert!(s["time_overhead_percent"].is_null() && s["cpu_increase_points"].is_null());
            continue;
        }
        // Each run against the native run of the same run.
        let paired: Vec<f64> = w.iter().zip(&native).map(|(x, n)| (x / n - 1.0) * 100.0).collect();
        let got = f(&s["time_overhead_percent"]["median"]);
        assert!((got - median(paired)).abs() < 1e-9, "{s}");
    }
    let file = dir.join("overhead.json");
    std::fs::write(&file, &o.stdout).unwrap();
    let o = pl(&[
        "report",
        "--out-dir",
        dir.join("r").to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    for (what, n) in [
        ("| whole-run overhead of being scheduled, no preemption |", 2),
        ("| scheduler CPU, % of one core", 2),
    ] {
        let rows = t
            .lines()
            .filter(|l| l.starts_with(what) && l.contains("host (host figure") && l.contains("against native"))
            .count();
        assert_eq!(rows, n, "{what}: {t}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_level_and_csv() {
    let o = pl(&[
        "overhead",
        "--device",
        "host",
        "--levels",
        "lv3",
        "--commands",
        "20",
        "--runs",
        "1",
        "--format",
        "csv",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = String::from_utf8_lossy(&o.stdout);
    let setups: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(1).unwrap()).collect();
    assert_eq!(setups, ["native", "lv3"], "{csv}");
    assert!(
        csv.lines().next().unwrap().contains("time_overhead_percent_median"),
        "{csv}"
    );
}
