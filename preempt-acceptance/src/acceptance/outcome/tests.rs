use super::*;
use crate::acceptance::plan::stages;
use preempt_api::DeviceSpec;

#[test]
fn a_stage_that_did_not_pass_leaves_its_targets_not_measured_with_its_reason() {
    let plan = stages(DeviceSpec::HOST, true, None);
    let top = std::env::temp_dir().join(format!("preempt-lat-outcome-{}", std::process::id()));
    std::fs::create_dir_all(top.join("host/06-latency-lv3-sigstop")).unwrap();
    let run = serde_json::json!({
        "params": {"level": 3, "t_ms": 0.5},
        "env": {"device": "host"},
        "latency_ns": {"suspend": {"p99": 30_000, "count": 100}},
    });
    std::fs::write(top.join("host/06-latency-lv3-sigstop/run.json"), run.to_string()).unwrap();
    let rec = |id: &str, status: Status, files: &[&str]| StageRecord {
        files: files.iter().map(|s| s.to_string()).collect(),
        status,
        ..StageRecord::skipped(id, id, 1.0, &[], format!("{id} said why"))
    };
    let records = [
        rec(
            "latency-lv3-sigstop",
            Status::Pass,
            &["host/06-latency-lv3-sigstop/run.json"],
        ),
        rec("latency-lv1", Status::Fail, &[]),
        rec("sweep-t", Status::Skip, &[]),
    ];
    let t = targets(&plan, &records, &top);
    let by_id = |id: &str| t.iter().find(|j| j.id == id).unwrap();
    assert_eq!(by_id("lv3-p99").verdict, targets::Verdict::Pass);
    assert!(by_id("lv3-p99").host_figures);
    let lv1 = by_id("lv1-threshold-x-t");
    assert_eq!(lv1.verdict, targets::Verdict::NotMeasured);
    assert!(
        lv1.note.contains("stage latency-lv1: FAIL (latency-lv1 said why)"),
        "{}",
        lv1.note
    );
    assert!(by_id("lv3-flat-in-t").note.contains("SKIP"));
    // Stages with no record (not in the plan's run) give no row.
    assert!(t.iter().all(|j| j.id != "hp-p99-fig9"));
    std::fs::remove_dir_all(&top).unwrap();
}

/// Lv2: on the host device latency-lv2 is judged against ~1 x T and priority's lv2 mode against
/// Fig. 9's HP P99 target; a GPU, whose plan skips latency-lv2 saying why, has no Lv2 target rows
/// at all (no N/A that nothing could ever measure).
#[test]
fn lv2_targets_are_judged_where_the_plan_runs_lv2() {
    let top = std::env::temp_dir().join(format!("preempt-lat-outcome-lv2-{}", std::process::id()));
    std::fs::create_dir_all(top.join("host/13-latency-lv2")).unwrap();
    std::fs::create_dir_all(top.join("host/17-priority")).unwrap();
    let run = serde_json::json!({
        "params": {"level": 2, "t_ms": 0.5},
        "env": {"device": "host"},
        "latency_ns": {"suspend": {"p99": 400_000, "count": 100}},
    });
    std::fs::write(top.join("host/13-latency-lv2/run.json"), run.to_string()).unwrap();
    let prio = serde_json::json!({
        "target_p99_ratio": 1.3,
        "env": {"device": "host"},
        "modes": [
            {"mode": "standalone-hp", "hp_p99_vs_standalone": 1.0},
            {"mode": "lv2", "hp_p99_vs_standalone": 1.4},
            {"mode": "lv3", "hp_p99_vs_standalone": 1.1},
        ],
    });
    std::fs::write(top.join("host/17-priority/priority.json"), prio.to_string()).unwrap();
    let rec = |id: &str, status: Status, files: &[&str]| StageRecord {
        files: files.iter().map(|s| s.to_string()).collect(),
        status,
        ..StageRecord::skipped(id, id, 1.0, &[], format!("{id} said why"))
    };
    let records = [
        rec("latency-lv2", Status::Pass, &["host/13-latency-lv2/run.json"]),
        rec("priority", Status::Pass, &["host/17-priority/priority.json"]),
    ];
    let t = targets(&stages(DeviceSpec::HOST, true, None), &records, &top);
    let one_t = t.iter().find(|j| j.id == "lv2-one-t").expect("lv2-one-t judged");
    assert_eq!(
        (one_t.verdict, one_t.measured, one_t.host_figures),
        (targets::Verdict::Pass, Some(0.8), true)
    );
    let fig9: Vec<(&str, targets::Verdict)> = t
        .iter()
        .filter(|j| j.id == "hp-p99-fig9")
        .map(|j| (j.scope.as_str(), j.verdict))
        .collect();
    assert_eq!(
        fig9,
        [
            ("lv3 mode", targets::Verdict::Pass),
            ("lv2 mode", targets::Verdict::Fail)
        ]
    );
    // A GPU: latency-lv2 skipped by the plan (its record says why), no Lv2 target.
    let gpu = stages(DeviceSpec::Hip(0), true, None);
    let why = gpu
        .iter()
        .find(|s| s.id == "latency-lv2")
        .unwrap()
        .not_here
        .clone()
        .unwrap();
    let records = [
        StageRecord::skipped("latency-lv2", "Lv2", 1.0, &[], why),
        rec("priority", Status::Pass, &["host/17-priority/priority.json"]),
    ];
    let t = targets(&gpu, &records, &top);
    assert!(t.iter().all(|j| j.id != "lv2-one-t" && j.scope != "lv2 mode"), "{t:?}");
    std::fs::remove_dir_all(&top).unwrap();
}

#[test]
fn the_reason_of_a_failed_child_is_its_last_own_stderr_line() {
    let dir = std::env::temp_dir().join(format!("preempt-lat-outcome-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("stderr.txt"),
        "note\npreempt-lat: --device hip:0: cannot run: no /dev/kfd\npreempt-lat: WARNING: x\n\n",
    )
    .unwrap();
    assert_eq!(
        stderr_line(&dir),
        "preempt-lat: --device hip:0: cannot run: no /dev/kfd"
    );
    std::fs::write(dir.join("stderr.txt"), "").unwrap();
    assert_eq!(stderr_line(&dir), "(nothing on stderr)");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn write(dir: &std::path::Path, name: &str, v: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), v.to_string()).unwrap();
}

/// A class experiment's schedule.json as `priority --policy up --shares 75:25` writes it.
fn schedule(device: &str, got: [f64; 2], failed: &[&str]) -> Value {
    let class = |name: &str, asked: f64, got: f64| {
        serde_json::json!({"name": name, "share_asked_percent": asked, "share_achieved_percent": got,
            "share_error_points": got - asked})
    };
    serde_json::json!({
        "params": {"policy": preempt_api::Policy::Partition.name()},
        "env": {"device": device},
        "mechanism": "dbg-trap",
        "combined_work_per_s": 0.9,
        "classes": [class("q0", 75.0, got[0]), class("q1", 25.0, got[1])],
        "suspends": 300, "resumes": 299,
        "failed_actions": failed,
        "standalone": {"throughput_loss_percent": 0.8, "reference": "the classes alone"},
    })
}

/// overhead.json: every scheduled setup's medians (time overhead %, CPU increase in points).
fn overhead(device: &str, setups: &[(&str, f64, f64)]) -> Value {
    let fig = |m: f64| serde_json::json!({"min": m, "median": m, "max": m});
    let mut v =
        vec![serde_json::json!({"setup": "native", "time_overhead_percent": null, "cpu_increase_points": null})];
    v.extend(setups.iter().map(
        |&(s, t, c)| serde_json::json!({"setup": s, "time_overhead_percent": fig(t), "cpu_increase_points": fig(c)}),
    ));
    serde_json::json!({"env": {"device": device}, "setups": v, "runs_done": 3})
}

/// The partition stage's schedule.json is judged against the partition target (one row: with two
/// queues a class off by more stands for both) and overhead's JSON against overhead and
/// scheduler-cpu per scheduled setup (lv2 where the plan runs Lv2), host figures labelled; a stage
/// that did not pass leaves its targets N/A with its reason.
#[test]
fn partition_and_overhead_are_judged_per_device() {
    let top = std::env::temp_dir().join(format!("preempt-lat-outcome-partition-{}", std::process::id()));
    write(
        &top.join("host/18-partition"),
        "schedule.json",
        &schedule("host", [76.0, 24.0], &[]),
    );
    let setups = [("lv1", 0.5, 1.2), ("lv2", 4.0, 0.8), ("lv3", 0.3, 6.0)];
    write(
        &top.join("host/19-overhead"),
        "overhead.json",
        &overhead("host", &setups),
    );
    let rec = |id: &str, status: Status, files: &[&str]| StageRecord {
        files: files.iter().map(|s| s.to_string()).collect(),
        status,
        ..StageRecord::skipped(id, id, 1.0, &[], format!("{id} said why"))
    };
    let records = [
        rec("partition", Status::Pass, &["host/18-partition/schedule.json"]),
        rec("overhead", Status::Pass, &["host/19-overhead/overhead.json"]),
    ];
    let t = targets(&stages(DeviceSpec::HOST, true, None), &records, &top);
    let rows = |id: &str| -> Vec<(String, targets::Verdict, Option<f64>)> {
        t.iter()
            .filter(|j| j.id == id)
            .map(|j| (j.scope.clone(), j.verdict, j.measured))
            .collect()
    };
    let (pass, fail) = (targets::Verdict::Pass, targets::Verdict::Fail);
    assert_eq!(rows("partition"), [(format!("up {SHARES}"), pass, Some(1.0))]);
    assert_eq!(rows("partition-overhead"), [(format!("up {SHARES}"), pass, Some(0.8))]);
    assert_eq!(
        rows("overhead"),
        [
            ("lv1".into(), pass, Some(0.5)),
            ("lv2".into(), fail, Some(4.0)),
            ("lv3".into(), pass, Some(0.3))
        ]
    );
    assert_eq!(
        rows("scheduler-cpu"),
        [
            ("lv1".into(), pass, Some(1.2)),
            ("lv2".into(), pass, Some(0.8)),
            ("lv3".into(), fail, Some(6.0))
        ]
    );
    let mine = |j: &&Judged| ["partition", "partition-overhead", "overhead", "scheduler-cpu"].contains(&j.id.as_str());
    assert!(t.iter().filter(mine).all(|j| j.host_figures), "{t:?}");

    // A GPU: a share 7 points off fails, lv1 and lv3 only, nothing labelled host; a stage that
    // did not pass leaves its rows N/A with its reason.
    write(
        &top.join("hip0/18-partition"),
        "schedule.json",
        &schedule("hip:0", [68.0, 32.0], &[]),
    );
    let records = [
        rec("partition", Status::Pass, &["hip0/18-partition/schedule.json"]),
        rec("overhead", Status::Fail, &[]),
    ];
    let t = targets(&stages(DeviceSpec::Hip(0), true, None), &records, &top);
    let part: Vec<&Judged> = t.iter().filter(|j| j.id == "partition").collect();
    assert_eq!(part.len(), 1);
    assert_eq!(
        (part[0].verdict, part[0].measured, part[0].host_figures),
        (fail, Some(-7.0), false)
    );
    let over: Vec<(&str, &str)> = t
        .iter()
        .filter(|j| j.id == "overhead" || j.id == "scheduler-cpu")
        .map(|j| (j.id.as_str(), j.scope.as_str()))
        .collect();
    assert_eq!(
        over,
        [
            ("overhead", "lv1"),
            ("overhead", "lv3"),
            ("scheduler-cpu", "lv1"),
            ("scheduler-cpu", "lv3")
        ]
    );
    for j in t.iter().filter(|j| !j.id.starts_with("partition")) {
        assert_eq!(j.verdict, targets::Verdict::NotMeasured);
        assert!(
            j.note.contains("stage overhead: FAIL (overhead said why)"),
            "{}",
            j.note
        );
    }
    std::fs::remove_dir_all(&top).unwrap();
}

/// A partition run that exited 0 but whose helper policy reported failed suspends or resumes
/// did not carry the partition out: FAIL with the first failure; without any, PASS with the
/// shares achieved and the exactly-once check.
#[test]
fn a_partition_whose_policy_actions_failed_fails() {
    use std::os::unix::process::ExitStatusExt;
    let plan = stages(DeviceSpec::Hip(0), true, None);
    let stage = plan.iter().find(|s| s.id == "partition").unwrap();
    let ended = crate::acceptance::runner::Ended {
        status: Some(std::process::ExitStatus::from_raw(0)),
        seconds: 2.0,
        over_bound: false,
        interrupted: false,
        stops: Vec::new(),
    };
    let dir = std::env::temp_dir().join(format!("preempt-lat-outcome-actions-{}", std::process::id()));
    let first = "helper policy utilization-partition: suspend: class q1: mechanism refused";
    write(
        &dir,
        "schedule.json",
        &schedule("hip:0", [75.5, 24.5], &[first, "another"]),
    );
    let (status, reason, _) = of_child(stage, stage.bound, &ended, &dir);
    assert_eq!(status, Status::Fail, "{reason}");
    assert!(
        reason.contains("2 failed suspend/resume action(s)") && reason.ends_with(first),
        "{reason}"
    );
    write(&dir, "schedule.json", &schedule("hip:0", [75.5, 24.5], &[]));
    let (status, reason, _) = of_child(stage, stage.bound, &ended, &dir);
    assert_eq!(status, Status::Pass, "{reason}");
    assert_eq!(
        reason,
        "q0 asked 75.0 % got 75.5 %, q1 asked 25.0 % got 24.5 %; 300 suspends, 299 resumes through dbg-trap; \
         every LP command exactly once"
    );
    // overhead's one line: each scheduled setup's medians against native.
    let plan_stage = plan.iter().find(|s| s.id == "overhead").unwrap();
    write(
        &dir,
        "overhead.json",
        &overhead("hip:0", &[("lv1", 0.5, 1.25), ("lv3", -0.25, 2.0)]),
    );
    let (status, reason, _) = of_child(plan_stage, plan_stage.bound, &ended, &dir);
    assert_eq!(status, Status::Pass);
    assert_eq!(
        reason,
        "against native, medians of 3 runs: lv1 +0.50 % time / +1.25 points CPU, lv3 -0.25 % time / +2.00 points \
         CPU; every LP command exactly once"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Example 5's JSON is judged per level of Phase 2 the device has (lv2 on the host device only),
/// each level's three targets a row; a level the example skipped (Lv1 with PyTorch on a GPU) is
/// N/A, and a GPU's rows are GPU figures.
#[test]
fn example5_is_judged_per_level() {
    let top = std::env::temp_dir().join(format!("preempt-lat-outcome-e5-{}", std::process::id()));
    let level = |hv: f64, lh: f64, loss: f64| serde_json::json!({"high_p99_vs_test2": hv, "low_high_p99": lh, "throughput_loss_vs_test2": loss});
    let e5 = |device: &str, levels: Value| {
        let runs: serde_json::Map<String, Value> = levels
            .as_object()
            .unwrap()
            .keys()
            .map(|lv| (format!("phase2_{lv}"), serde_json::json!({})))
            .collect();
        serde_json::json!({"device": device, "runs": runs, "summary_by_level": levels})
    };
    let host = e5(
        "host",
        serde_json::json!({"lv1": level(2.4, 3.7, 0.25), "lv2": level(1.2, 27.0, 0.3), "lv3": level(0.7, 41.0, 0.05)}),
    );
    write(&top.join("host/24-example5"), "example5.json", &host);
    let rec = |id: &str, files: &[&str]| StageRecord {
        files: files.iter().map(|s| s.to_string()).collect(),
        status: Status::Pass,
        ..StageRecord::skipped(id, id, 1.0, &[], String::new())
    };
    let rows = |t: &[Judged]| -> Vec<(String, String, targets::Verdict, bool)> {
        t.iter()
            .filter(|j| j.scope.starts_with("Example 5"))
            .map(|j| (j.scope.clone(), j.id.clone(), j.verdict, j.host_figures))
            .collect()
    };
    let t = targets(
        &stages(DeviceSpec::HOST, true, None),
        &[rec("example5", &["host/24-example5/example5.json"])],
        &top,
    );
    let (p, f) = (targets::Verdict::Pass, targets::Verdict::Fail);
    let row = |lv: &str, id: &str, v, host| (format!("Example 5, Phase 2 at {lv}"), id.to_string(), v, host);
    assert_eq!(
        rows(&t),
        [
            row("lv1", "example5-high-vs-baseline", f, true),
            row("lv1", "example5-low-high", p, true),
            row("lv1", "throughput-loss", f, true),
            row("lv2", "example5-high-vs-baseline", f, true),
            row("lv2", "example5-low-high", p, true),
            row("lv2", "throughput-loss", f, true),
            row("lv3", "example5-high-vs-baseline", p, true),
            row("lv3", "example5-low-high", p, true),
            row("lv3", "throughput-loss", p, true),
        ]
    );
    let gpu = e5("hip:0", serde_json::json!({"lv3": level(0.5, 4.0, 0.02)}));
    write(&top.join("hip0/30-example5"), "example5.json", &gpu);
    let t = targets(
        &stages(DeviceSpec::Hip(0), true, None),
        &[rec("example5", &["hip0/30-example5/example5.json"])],
        &top,
    );
    let na = targets::Verdict::NotMeasured;
    assert_eq!(
        rows(&t),
        [
            row("lv1", "example5-high-vs-baseline", na, false),
            row("lv1", "example5-low-high", na, false),
            row("lv1", "throughput-loss", na, false),
            row("lv3", "example5-high-vs-baseline", p, false),
            row("lv3", "example5-low-high", p, false),
            row("lv3", "throughput-loss", p, false),
        ]
    );
    std::fs::remove_dir_all(&top).unwrap();
}
