//! `--level 2` end to end: on the host device a run, a sweep with Lv2's panels and the target it
//! is judged against, `priority`'s lv2 mode; on a GPU one line and exit status 2 with the reason
//! and where the sources are. Every child is killed after [`LIMIT`] (the test then fails) rather
//! than hang the suite.
mod common;

use std::process::Output;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// preempt-lat with `args`, killed after [`LIMIT`] (the test then fails).
fn pl(args: &[&str]) -> Output {
    common::output_within(args, LIMIT)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> std::path::PathBuf {
    common::scratch(&format!("lv2-{name}"))
}

#[test]
fn lv2_on_the_host_device_runs_every_command_once_and_records_its_mechanism() {
    let o = pl(&[
        "--level",
        "2",
        "--device",
        "host",
        "--t-ms",
        "2",
        "--samples",
        "20",
        "--warmup",
        "2",
        "--format",
        "json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["params"]["level"], 2);
    assert_eq!(v["env"]["device"], "host");
    assert_eq!(v["env"]["mechanism"], "lv2-hold");
    assert!(
        v["env"]["grace_period"].as_str().unwrap().contains("Lv2"),
        "{}",
        v["env"]["grace_period"]
    );
    assert_eq!(v["correctness"]["ok"], true, "{}", v["correctness"]);
    assert_eq!(v["samples"].as_array().map(Vec::len), Some(20));
    assert!(v["latency_ns"]["suspend"]["p99"].as_u64().is_some_and(|ns| ns > 0));
}

#[test]
fn lv2_on_a_gpu_is_one_line_and_exit_2_saying_why_and_where() {
    let why = preempt_api::lv2_unavailable(preempt_api::DeviceSpec::Hip(0)).message;
    for args in [
        &["--level", "2", "--device", "hip:0"][..],
        &["--level", "lv2", "--device", "hip"],
        &["sweep", "t", "--levels", "1,2", "--device", "hip:0"],
        &["overhead", "--levels", "2", "--device", "hip:0"],
        &["priority", "--modes", "lv2", "--device", "hip:0"],
        &["priority", "--modes", "standalone-hp,lv2", "--device", "hip"],
    ] {
        let o = pl(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{args:?}: one line: {e}");
        assert!(e.starts_with("preempt-lat: ") && e.contains(&why), "{args:?}: {e}");
        assert!(
            e.contains("no per-queue Lv2 on gfx942 under HWS")
                && e.trim_end()
                    .ends_with("docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws"),
            "{e}"
        );
    }
}

#[test]
fn sweep_t_on_the_host_device_sweeps_lv2_by_default_with_one_t_in_its_panels() {
    let dir = scratch("sweep");
    let o = pl(&[
        "sweep",
        "t",
        "--device",
        "host",
        "--t-ms",
        "0.5,2",
        "--samples",
        "5",
        "--warmup",
        "0",
        "--out-dir",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep-t.json")).unwrap()).unwrap();
    let levels: Vec<u64> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["params"]["level"].as_u64().unwrap())
        .collect();
    assert_eq!(levels, [1, 1, 2, 2, 3, 3], "every level of the host device, each T");
    assert!(runs.as_array().unwrap().iter().all(|r| r["correctness"]["ok"] == true));
    let svg = std::fs::read_to_string(dir.join("sweep-t.svg")).unwrap();
    // (The SVG escapes the apostrophe of "Lv2's expected suspend".)
    for label in [
        "Lv2: suspend",
        "Lv2: HP start",
        "Lv2 P99",
        "1 x T: Lv2&apos;s expected suspend",
    ] {
        assert!(svg.contains(label), "sweep-t.svg lacks {label:?}");
    }
    // The report judges the Lv2 runs against the seeds' ~1 x T, as host figures.
    let out = dir.join("report");
    let o = pl(&[
        "report",
        dir.join("sweep-t.json").to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let targets: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("targets.json")).unwrap()).unwrap();
    let lv2: Vec<&serde_json::Value> = targets
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["target"] == "lv2-one-t")
        .collect();
    assert_eq!(lv2.len(), 2, "one judgement per Lv2 run: {targets}");
    assert!(
        lv2.iter()
            .all(|j| j["host_figures"] == true && j["measured"].as_f64().is_some())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn overhead_takes_lv2_on_the_host_device_as_a_setup_of_its_own() {
    let o = pl(&[
        "overhead",
        "--device",
        "host",
        "--levels",
        "2",
        "--commands",
        "40",
        "--runs",
        "1",
        "--t-ms",
        "0.5",
        "--format",
        "json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let setups: Vec<(&str, &str)> = v["setups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["setup"].as_str().unwrap(), s["mechanism"].as_str().unwrap()))
        .collect();
    assert_eq!(
        setups,
        [("native", "-"), ("lv2", preempt_api::Mechanism::Lv2Hold.name())]
    );
    assert!(v["setups"][1]["exactly_once"] == true, "{}", v["setups"][1]);
}

/// `priority`'s lv2 mode on the host device: HP requests against the saturating LP stream held at
/// Lv2 while they run (highest priority first), in the text, JSON, CSV and plot, with every LP
/// command exactly once; `report` judges it against the seeds' HP P99 targets, as host figures.
#[test]
fn priority_runs_an_lv2_mode_on_the_host_device_and_report_judges_it() {
    let dir = scratch("priority");
    let o = pl(&[
        "priority",
        "--device",
        "host",
        "--modes",
        "lv2,standalone-hp",
        "--duration-s",
        "0.6",
        "--hp-rate",
        "20",
        "--arrival",
        "fixed",
        "--hp-t-ms",
        "1",
        "--t-ms",
        "0.5",
        "--quiet",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("lv2 "))
        .unwrap_or_else(|| panic!("no lv2 row: {text}"));
    assert!(row.contains("OK ("), "{row}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("priority.json")).unwrap()).unwrap();
    assert_eq!(v["env"]["device"], "host");
    let modes = v["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["standalone-hp", "lv2"], "in run order, whatever --modes' order");
    let lv2 = &modes[1];
    assert_eq!(lv2["policy"], "highest-priority-first");
    assert_eq!(lv2["mechanism"], preempt_api::Mechanism::Lv2Hold.name());
    assert_eq!(lv2["correctness"]["ok"], true, "{}", lv2["correctness"]);
    // 20/s for 0.6 s, the first one gap after the start; each found the LP stream running.
    let requests = lv2["hp_requests"].as_u64().unwrap();
    assert_eq!(requests, modes[0]["hp_requests"].as_u64().unwrap());
    assert!((1..=requests).contains(&lv2["preemptions"].as_u64().unwrap()), "{lv2}");
    assert!(
        lv2["hp_latency_ns"]["p50"].as_u64().unwrap() >= 1_000_000,
        "an HP request is 1 ms of work"
    );
    assert!(lv2["hp_p99_vs_standalone"].as_f64().is_some_and(|r| r > 0.0), "{lv2}");
    let csv = std::fs::read_to_string(dir.join("priority.csv")).unwrap();
    assert!(
        csv.lines().any(|l| l.starts_with(&format!(
            "host,lv2,highest-priority-first,{},",
            preempt_api::Mechanism::Lv2Hold.name()
        ))),
        "{csv}"
    );
    let svg = std::fs::read_to_string(dir.join("priority.svg")).unwrap();
    // Each <text> element's content, trimmed: the x axis names the modes.
    let texts: Vec<&str> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split('<').next()?.trim()))
        .collect();
    assert!(texts.contains(&"lv2"), "the plot names the lv2 mode: {texts:?}");
    let out = dir.join("report");
    let o = pl(&[
        "report",
        dir.join("priority.json").to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let targets: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("targets.json")).unwrap()).unwrap();
    let judged: Vec<&str> = targets
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["from"].as_str().is_some_and(|f| f.ends_with("mode lv2")))
        .map(|j| j["target"].as_str().unwrap())
        .collect();
    assert_eq!(judged, ["hp-p99-fig9", "hp-p99-fig15a"], "{targets}");
    assert!(targets.as_array().unwrap().iter().all(|j| j["host_figures"] == true));
    let _ = std::fs::remove_dir_all(&dir);
}
