//! `priority --policy ... --standalone` end to end on the host device: each class alone first,
//! then together; the JSON carries both and the comparison, the text says it. Host figures only:
//! the figures are checked for consistency with each other, never for size.
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

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn standalone_is_for_the_class_experiment_only() {
    let o = pl(&["priority", "--device", "host", "--standalone"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--standalone is for the class experiment"),
        "{}",
        stderr(&o)
    );
}

/// Runs `priority --standalone` with `args` and returns its JSON and text.
fn run(name: &str, args: &[&str]) -> (Value, String) {
    let dir = std::env::temp_dir().join(format!("preempt-lat-standalone-{name}-{}", std::process::id()));
    let mut a = vec![
        "priority",
        "--device",
        "host",
        "--standalone",
        "--duration-s",
        "0.6",
        "--quiet",
        "--out-dir",
        dir.to_str().unwrap(),
    ];
    a.extend_from_slice(args);
    let o = pl(&a);
    assert!(o.status.success(), "{a:?}: {}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("schedule.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (v, String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn request_classes_are_compared_with_themselves_alone_and_their_sum() {
    let (v, text) = run(
        "kedf",
        &[
            "--policy",
            "kedf",
            "--k",
            "1",
            "--class",
            "video:rate=60:t=1:deadline=10",
            "--class",
            "bulk:rate=60:t=1:deadline=200",
        ],
    );
    let classes = v["classes"].as_array().unwrap();
    let mut sum = 0.0;
    for c in classes {
        let alone = &c["alone"];
        assert_eq!(alone["exactly_once"], true, "{c}");
        // P99 together over P99 alone, from the figures beside it.
        let ratio = f(&c["latency_ns"]["p99"]) / f(&alone["latency_ns"]["p99"]);
        assert!(close(f(&c["p99_vs_alone"]), ratio), "{c}");
        sum += f(&alone["work_per_s"]);
    }
    let s = &v["standalone"];
    assert_eq!(s["reference"], "sum of the classes alone", "no class saturates: {s}");
    assert!(
        close(f(&s["sum_alone_work_per_s"]), sum) && close(f(&s["reference_work_per_s"]), sum),
        "{s}"
    );
    assert!(s["capacity_work_per_s"].is_null());
    assert!(close(f(&s["combined_work_per_s"]), f(&v["combined_work_per_s"])), "{s}");
    let loss = (1.0 - f(&s["combined_work_per_s"]) / sum) * 100.0;
    assert!(close(f(&s["throughput_loss_percent"]), loss), "{s}");
    assert!(text.contains("against each class alone"), "{text}");
    assert!(text.contains("the sum of the classes alone: loss"), "{text}");
}

#[test]
fn saturating_classes_are_compared_with_the_capacity_one_measures_alone() {
    let (v, text) = run("up", &["--policy", "up", "--shares", "75:25", "--round-ms", "20"]);
    let s = &v["standalone"];
    let alone: Vec<f64> = v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| f(&c["alone"]["work_per_s"]))
        .collect();
    let capacity = alone.iter().copied().fold(f64::MIN, f64::max);
    assert!(close(f(&s["capacity_work_per_s"]), capacity), "{s}");
    assert_eq!(s["reference"], "device capacity (a saturating class alone)", "{s}");
    assert!(close(f(&s["reference_work_per_s"]), capacity), "{s}");
    // Saturating classes have no request latency to compare.
    assert!(
        v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["p99_vs_alone"].is_null())
    );
    assert!(
        text.contains("the device capacity (a saturating class alone): loss"),
        "{text}"
    );
}
