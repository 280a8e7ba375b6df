//! `sweep rate` end to end on the host device: its refusals, its help, its outputs (the table,
//! sweep-rate.{csv,json,svg}), a template's rates split by weight, and `report` reading it. Host
//! figures only: the latencies are checked for presence and structure, never for size.
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

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("preempt-lat-sweep-rate-{name}-{}", std::process::id()))
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn bad_rate_sweeps_are_one_line_exit_2() {
    for (args, want) in [
        (&["--policy", "hpf"][..], "the built-in clients share one priority"),
        (
            &["--policy", "hpf", "--class", "a:rate=1", "--class", "b:prio=1"],
            "needs prio= in --class a",
        ),
        (&["--rates", "0"], "--rates must be a finite number greater than 0"),
        (&["--rates", "100,x"], "is not a number (--rates)"),
        (
            &["--class", "bg:deadline=5", "--class", "bulk:deadline=9"],
            "needs a class with requests",
        ),
        (
            &["--clients", "3", "--class", "a:rate=1:deadline=1"],
            "cannot be used with",
        ),
        (&["--policy", "up", "--class", "a:rate=1"], "needs share= in --class a"),
        (&["--k", "0"], "at least 1"),
        (&["--clients", "65"], "--clients 65: at most 64"),
    ] {
        let mut a = vec!["sweep", "rate", "--device", "host"];
        a.extend_from_slice(args);
        let o = pl(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{a:?}: {}", stderr(&o));
    }
}

#[test]
fn help_teaches_the_host_defaults_and_fig_15b_on_a_gpu() {
    let o = pl(&["sweep", "rate", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = String::from_utf8_lossy(&o.stdout);
    for want in [
        "Examples:",
        "host defaults",
        "--clients 32 --k 16",
        "--preset 8.3.2",
        "--class video:rate=3",
    ] {
        assert!(h.contains(want), "--help lacks {want:?}: {h}");
    }
}

#[test]
fn the_built_in_set_up_sweeps_every_rate_and_writes_table_files_and_plot() {
    let dir = scratch("builtin");
    let o = pl(&[
        "sweep",
        "rate",
        "--device",
        "host",
        "--rates",
        "200,100",
        "--clients",
        "2",
        "--k",
        "1",
        "--duration-s",
        "0.4",
        "--quiet",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("host figures, not GPU figures"), "{t}");
    assert!(t.contains("correctness OK"), "{t}");
    // A table row per rate and client, the rates in order.
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("| 1") || l.starts_with("| 2"))
        .collect();
    let firsts: Vec<String> = rows
        .iter()
        .map(|r| r.split('|').map(str::trim).take(3).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(firsts, [" 100 c0", " 100 c1", " 200 c0", " 200 c1"], "{t}");
    let v = json(&dir.join("sweep-rate.json"));
    assert_eq!(v["sweep"], "rate");
    assert_eq!(v["env"]["device"], "host");
    assert_eq!(v["params"]["built_in"], true);
    let points = v["points"].as_array().unwrap();
    let rates: Vec<f64> = points.iter().map(|p| p["offered_rate"].as_f64().unwrap()).collect();
    assert_eq!(rates, [100.0, 200.0]);
    for p in points {
        let rate = p["offered_rate"].as_f64().unwrap();
        let classes = p["classes"].as_array().unwrap();
        assert_eq!(classes.len(), 2);
        for c in classes {
            // Each client an equal part of the offered rate; every command exactly once.
            assert_eq!(c["rate"].as_f64().unwrap(), rate / 2.0);
            assert_eq!(c["check"]["ok"], true, "{c}");
        }
    }
    let csv = std::fs::read_to_string(dir.join("sweep-rate.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 2, "{csv}");
    let svg = std::fs::read_to_string(dir.join("sweep-rate.svg")).unwrap();
    // The panel titles (plotters writes each text on a line of its own).
    for want in [
        "\nc0\n",
        "\nc1\n",
        "host device: host figures, not GPU figures",
        "offered (the swept rate)",
    ] {
        assert!(svg.contains(want), "sweep-rate.svg lacks {want:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_template_splits_each_rate_by_weight_compares_with_alone_and_report_judges_its_points() {
    let dir = scratch("template");
    let o = pl(&[
        "sweep",
        "rate",
        "--device",
        "host",
        "--policy",
        "up",
        "--rates",
        "80",
        "--class",
        "a:rate=3:t=0.5:share=3",
        "--class",
        "b:rate=1:t=0.5:share=1",
        "--class",
        "bg:t=0.5:share=1",
        "--duration-s",
        "0.5",
        "--standalone",
        "--quiet",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&dir.join("sweep-rate.json"));
    assert_eq!(v["params"]["built_in"], false);
    let c = v["points"][0]["classes"].as_array().unwrap();
    let rates: Vec<f64> = c.iter().map(|c| c["rate"].as_f64().unwrap()).collect();
    assert_eq!(rates, [60.0, 20.0, 0.0], "3:1 of 80 req/s; bg stays saturating");
    // --standalone: each class alone first; bg saturates, so the device's capacity is the
    // reference, and each row of the CSV carries the comparison.
    let s = &v["points"][0]["standalone"];
    assert_eq!(s["reference"], "device capacity (a saturating class alone)", "{s}");
    assert!(c.iter().all(|c| c["alone"]["exactly_once"] == true), "{c:?}");
    let csv = std::fs::read_to_string(dir.join("sweep-rate.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert!(
        header.contains(&"p99_vs_alone") && header.contains(&"throughput_loss_percent"),
        "{csv}"
    );
    // report reads it: the partition target judged for each class of the point.
    let o = pl(&[
        "report",
        "--out-dir",
        dir.join("r").to_str().unwrap(),
        dir.join("sweep-rate.json").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    let judged = t
        .lines()
        .filter(|l| l.starts_with("| share achieved - share asked, per queue |") && l.contains("80 req/s"))
        .count();
    assert_eq!(judged, 3, "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--policy hpf` sweeps a template of prioritised classes: every point names the policy and
/// carries each class's tail; the saturating class below them is suspended at their arrivals.
#[test]
fn hpf_sweeps_a_template_of_prioritised_classes() {
    let dir = scratch("hpf");
    let o = pl(&[
        "sweep",
        "rate",
        "--device",
        "host",
        "--policy",
        "hpf",
        "--rates",
        "80,160",
        "--arrival",
        "poisson",
        "--class",
        "high:rate=1:t=1:prio=2",
        "--class",
        "normal:rate=1:t=1:prio=1",
        "--class",
        "low:t=1:prio=0",
        "--duration-s",
        "0.5",
        "--quiet",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&dir.join("sweep-rate.json"));
    assert_eq!(v["params"]["policy"], preempt_api::Policy::HighestFirst.name());
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        assert_eq!(p["params"]["policy"], preempt_api::Policy::HighestFirst.name(), "{p}");
        let c = p["classes"].as_array().unwrap();
        assert!(c.iter().all(|c| c["check"]["ok"] == true), "{p}");
        assert!(c[..2].iter().all(|c| c["latency_ns"]["p99"].is_u64()), "{p}");
        assert!(p["suspends"].as_u64().unwrap() > 0, "{p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
