//! From a stage's ended child to its status and one line of reason, and from a device's stage
//! records to its targets judged ([`super::targets`]).
use super::plan::{Stage, Work, result_files};
use super::runner::Ended;
use super::stage;
use super::summary::{StageRecord, Status};
use super::targets::{self, Judged};
use crate::options::Level;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// The longest reason kept from a child's stderr.
const MAX_REASON: usize = 400;

fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(MAX_REASON) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// The line of a child's stderr that says what went wrong: its last `preempt-lat: ` line, else
/// its last line.
pub fn stderr_line(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let ours = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("preempt-lat: ") && !l.contains("WARNING"));
    clip(ours.or(lines.last()).copied().unwrap_or("(nothing on stderr)"))
}

fn json(dir: &Path, name: &str) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).ok()?).ok()
}

#[allow(clippy::cast_precision_loss)] // latencies in ns: far below 2^52
fn us(v: &Value) -> String {
    v.as_u64()
        .map_or_else(|| "-".into(), |n| format!("{:.1}", n as f64 / 1000.0))
}

/// What a passed subcommand stage measured, in one line (from its own result files).
fn pass_line(work: Work, dir: &Path) -> String {
    let n = |v: &Value| v.as_array().map_or(0, Vec::len);
    match work {
        Work::Latency(..) => json(dir, "run.json").map_or_else(
            || "passed (no run.json to summarize)".into(),
            |r| {
                let l = &r["latency_ns"];
                format!(
                    "{}: suspend p50 {} / p99 {} us, HP start p99 {} us, resume p99 {} us; {} samples; every LP command exactly once",
                    r["env"]["mechanism"].as_str().unwrap_or("-"),
                    us(&l["suspend"]["p50"]),
                    us(&l["suspend"]["p99"]),
                    us(&l["hp_start"]["p99"]),
                    us(&l["resume"]["p99"]),
                    n(&r["samples"])
                )
            },
        ),
        Work::SweepT => format!(
            "{} runs -> sweep-t.{{csv,json,svg}}",
            json(dir, "sweep-t.json").map_or(0, |v| n(&v))
        ),
        Work::SweepState => format!(
            "{} runs -> sweep-state.{{csv,json,svg}}",
            json(dir, "sweep-state.json").map_or(0, |v| n(&v))
        ),
        Work::SweepThreshold => format!(
            "{} points -> sweep-threshold.{{csv,json,svg}}",
            json(dir, "sweep-threshold.json").map_or(0, |v| n(&v))
        ),
        Work::Priority => json(dir, "priority.json").map_or_else(
            || "passed (no priority.json to summarize)".into(),
            |p| {
                let modes: Vec<String> = p["modes"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|m| {
                                let r = m["hp_p99_vs_standalone"]
                                    .as_f64()
                                    .map_or(String::new(), |r| format!(" {r:.2}x"));
                                format!("{}{r}", m["mode"].as_str().unwrap_or("?"))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                format!("modes {}; every LP command exactly once", modes.join(", "))
            },
        ),
        Work::Internal(..) | Work::KernelLog => "passed".into(),
    }
}

/// A stage's status, reason and facts from how its child ended (under `bound`) and what it wrote
/// into `dir`.
pub fn of_child(stage: &Stage, bound: Duration, ended: &Ended, dir: &Path) -> (Status, String, Value) {
    let how = ended.describe();
    if ended.interrupted {
        return (
            Status::Skip,
            format!(
                "interrupted (Ctrl-C/SIGTERM) after {:.1} s; its child: {how}; what it wrote is kept",
                ended.seconds
            ),
            Value::Null,
        );
    }
    if ended.over_bound {
        return (
            Status::Fail,
            format!(
                "over its time bound of {} s: stopped ({how}); what it wrote is kept; last stderr line: {}",
                crate::plot::ticks::fmt_num(bound.as_secs_f64()),
                stderr_line(dir)
            ),
            Value::Null,
        );
    }
    if let Work::Internal(..) = stage.work {
        return match stage::read(dir) {
            Ok(r) => (r.status, r.reason, r.facts),
            Err(e) => (
                Status::Fail,
                format!("its process ended ({how}) without a result ({e}): {}", stderr_line(dir)),
                Value::Null,
            ),
        };
    }
    match ended.status.and_then(|s| s.code()) {
        Some(0) => (Status::Pass, pass_line(stage.work, dir), Value::Null),
        Some(3) => (
            Status::Fail,
            format!("a correctness check failed (exit status 3): {}", stderr_line(dir)),
            Value::Null,
        ),
        Some(2) => (
            Status::Fail,
            format!(
                "refused its arguments (exit status 2; a bug of acceptance): {}",
                stderr_line(dir)
            ),
            Value::Null,
        ),
        _ => (Status::Fail, format!("{how}: {}", stderr_line(dir)), Value::Null),
    }
}

/// The result files of `stage` that its child wrote into `dir`.
pub fn results_in(stage: &Stage, dir: &Path) -> Vec<&'static str> {
    result_files(stage.work)
        .iter()
        .copied()
        .filter(|f| dir.join(f).is_file())
        .collect()
}

/// The targets of one device, judged from its passed stages' result files (`top` is the run's
/// directory, which the records' file paths are relative to). A target whose stage did not pass
/// is listed as not measured, with the stage's status and reason.
pub fn targets(stages: &[Stage], records: &[StageRecord], top: &Path) -> Vec<Judged> {
    type Keep<'a> = &'a dyn Fn(&crate::targets::Judgement) -> bool;
    let mut out = Vec::new();
    let mut from = |stage: &str, name: &str, id: &str, scope: &str, keep: Keep| {
        let Some(r) = records.iter().find(|r| r.id == stage) else {
            return;
        };
        let file = r
            .files
            .iter()
            .find(|f| f.rsplit('/').next() == Some(name))
            .map(|f| (f, json(top, f)));
        out.push(match (r.status, file) {
            (Status::Pass, Some((f, Some(v)))) => targets::judged(&v, f, id, scope, keep),
            (Status::Pass, _) => Judged::not_measured(id, scope, format!("stage {stage} wrote no result to judge")),
            (s, _) => Judged::not_measured(id, scope, format!("stage {stage}: {} ({})", s.word(), clip(&r.reason))),
        });
    };
    let all: Keep = &|_| true;
    for s in stages {
        if let Work::Latency(Level::Lv3, Some(m)) = s.work {
            from(&s.id, "run.json", "lv3-p99", m.name(), all);
        }
    }
    from("sweep-t", "sweep-t.json", "lv3-flat-in-t", "lv3", all);
    from("latency-lv1", "run.json", "lv1-threshold-x-t", "lv1", all);
    // Lv2's targets where the plan runs Lv2 (the host device); a GPU's plan skips latency-lv2
    // with its reason and has no lv2 mode, so nothing there could ever measure them.
    let lv2 = stages
        .iter()
        .any(|s| matches!(s.work, Work::Latency(Level::Lv2, _)) && s.not_here.is_none());
    if lv2 {
        from("latency-lv2", "run.json", "lv2-one-t", "lv2", all);
    }
    from("sweep-threshold", "sweep-threshold.json", "lv1-overhead", "lv1", all);
    from("priority", "priority.json", "hp-p99-fig9", "lv3 mode", &|j| {
        j.from.ends_with("mode lv3")
    });
    if lv2 {
        from("priority", "priority.json", "hp-p99-fig9", "lv2 mode", &|j| {
            j.from.ends_with("mode lv2")
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::plan::stages;
    use preempt_api::DeviceSpec;

    #[test]
    fn a_stage_that_did_not_pass_leaves_its_targets_not_measured_with_its_reason() {
        let plan = stages(DeviceSpec::Host, true);
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

    /// Issue 23 (Lv2): on the host device latency-lv2 is judged against ~1 x T and priority's lv2
    /// mode against Fig. 9's HP P99 target; a GPU, whose plan skips latency-lv2 saying why, has
    /// no Lv2 target rows at all (no N/A that nothing could ever measure).
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
        let t = targets(&stages(DeviceSpec::Host, true), &records, &top);
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
        let gpu = stages(DeviceSpec::Hip(0), true);
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
}
