//! From a stage's ended child to its status and one line of reason, and from a device's stage
//! records to its targets judged ([`super::targets`]).
use super::plan::{SHARES, Stage, Work, result_files};
use super::runner::Ended;
use super::stage_result as stage;
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
        Work::Soak(_) => json(dir, "soak.json").map_or_else(
            || "passed (no soak.json to summarize)".into(),
            |r| {
                let drift: Vec<String> = r["p99_drift"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|d| format!("{} P99 {:.2}x", d["kind"].as_str().unwrap_or("?"), d["ratio"].as_f64().unwrap_or(f64::NAN)))
                    .collect();
                format!(
                    "{} windows; {}; RSS {:+} KiB, fds {:+}, threads {:+}; every LP command exactly once",
                    n(&r["windows"]),
                    drift.join(", "),
                    r["held_drift"]["rss_growth_kib"].as_i64().unwrap_or(0),
                    r["held_drift"]["fds_growth"].as_i64().unwrap_or(0),
                    r["held_drift"]["threads_growth"].as_i64().unwrap_or(0)
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
        Work::Preset(p) if p.class_set().is_some() => json(dir, "schedule.json").map_or_else(
            || "passed (no schedule.json to summarize)".into(),
            |r| format!("{}; every command exactly once", classes_line(&r)),
        ),
        Work::RatePreset(_) => json(dir, "sweep-rate.json").map_or_else(
            || "passed (no sweep-rate.json to summarize)".into(),
            |r| {
                let compared = r["compared"]["offered_rate"]
                    .as_f64()
                    .map_or(String::new(), |x| format!(" and the unscheduled comparison point at {x} req/s"));
                format!(
                    "{} rates{compared} -> sweep-rate.{{csv,json,svg}}; every command exactly once",
                    n(&r["points"])
                )
            },
        ),
        Work::Priority | Work::Preset(_) => json(dir, "priority.json").map_or_else(
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
        Work::Partition => json(dir, "schedule.json").map_or_else(
            || "passed (no schedule.json to summarize)".into(),
            |r| {
                let classes: Vec<String> = r["classes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let pc = |k: &str| c[k].as_f64().map_or_else(|| "-".into(), |v| format!("{v:.1} %"));
                        format!(
                            "{} asked {} got {}",
                            c["name"].as_str().unwrap_or("?"),
                            pc("share_asked_percent"),
                            pc("share_achieved_percent")
                        )
                    })
                    .collect();
                format!(
                    "{}; {} suspends, {} resumes through {}; every LP command exactly once",
                    classes.join(", "),
                    r["suspends"],
                    r["resumes"],
                    r["mechanism"].as_str().unwrap_or("-")
                )
            },
        ),
        Work::Overhead => json(dir, "overhead.json").map_or_else(
            || "passed (no overhead.json to summarize)".into(),
            |r| {
                let median = |f: &Value| f["median"].as_f64().map_or_else(|| "-".into(), |v| format!("{v:+.2}"));
                let setups: Vec<String> = r["setups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|s| !s["time_overhead_percent"].is_null())
                    .map(|s| {
                        format!(
                            "{} {} % time / {} points CPU",
                            s["setup"].as_str().unwrap_or("?"),
                            median(&s["time_overhead_percent"]),
                            median(&s["cpu_increase_points"])
                        )
                    })
                    .collect();
                format!(
                    "against native, medians of {} runs: {}; every LP command exactly once",
                    r["runs_done"],
                    setups.join(", ")
                )
            },
        ),
        Work::Internal(..) | Work::KernelLog => "passed".into(),
    }
}

/// A class experiment in one line: per class its P99 (request classes) or its share of the work
/// (saturating ones), and against alone where it ran alone; the suspends.
fn classes_line(r: &Value) -> String {
    let classes: Vec<String> = r["classes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or("?");
            let fig = match c["latency_ns"]["p99"].as_f64() {
                Some(ns) => format!("P99 {:.2} ms", ns / 1e6),
                None => format!(
                    "{:.1} % of the work",
                    c["share_achieved_percent"].as_f64().unwrap_or(f64::NAN)
                ),
            };
            let alone = match (c["work_per_s"].as_f64(), c["alone"]["work_per_s"].as_f64()) {
                (Some(t), Some(a)) if a > 0.0 => format!(", {:.2}x its throughput alone", t / a),
                _ => String::new(),
            };
            format!("{name} {fig}{alone}")
        })
        .collect();
    format!(
        "{} ({}); {} suspends",
        classes.join(", "),
        r["params"]["policy"].as_str().unwrap_or("-"),
        r["suspends"]
    )
}

/// Why a partition run that exited 0 failed all the same: the helper's policy reported suspends
/// or resumes that failed (each fed back to the policy, which went on), i.e. the mechanism did
/// not carry out the partition it was asked for.
fn failed_actions(dir: &Path) -> Option<String> {
    let r = json(dir, "schedule.json")?;
    let failed = r["failed_actions"].as_array().filter(|a| !a.is_empty())?;
    Some(clip(&format!(
        "the helper's policy reported {} failed suspend/resume action(s) (schedule.json lists at most 20); the first: {}",
        failed.len(),
        failed[0].as_str().unwrap_or("?")
    )))
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
    let code = ended.status.and_then(|s| s.code());
    if code == Some(0)
        && (stage.work == Work::Partition || matches!(stage.work, Work::Preset(p) if p.class_set().is_some()))
        && let Some(why) = failed_actions(dir)
    {
        return (Status::Fail, why, Value::Null);
    }
    match code {
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

/// The result files of `stage` that its child wrote into `dir` (an empty one is none: e.g.
/// `overhead`'s stdout when it stopped before writing its result).
pub fn results_in(stage: &Stage, dir: &Path) -> Vec<&'static str> {
    result_files(stage.work)
        .iter()
        .copied()
        .filter(|f| dir.join(f).metadata().is_ok_and(|m| m.is_file() && m.len() > 0))
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
    // 4.1.1's ratio at each T the sweep ran both levels at.
    from("sweep-t", "sweep-t.json", "lv3-vs-lv1", "lv3 vs lv1", all);
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
    // One partition row: with two queues their errors are equal and opposite (the achieved
    // shares add up to 100 % as the asked ones do); a class off by more stands for both.
    from("partition", "schedule.json", "partition", &format!("up {SHARES}"), all);
    // 7.2.2's cost of the partition: the stage runs each class alone first (--standalone).
    from(
        "partition",
        "schedule.json",
        "partition-overhead",
        &format!("up {SHARES}"),
        all,
    );
    // The seeds' experiments as presets: 7.2.1's HP load, then the chapter 8 case studies
    // (8.2.1 for laxity and its two baselines, the seeds' three rows of Fig. 14).
    from(
        "priority-fig9",
        "priority.json",
        "hp-p99-fig9",
        "lv3 mode, HP 20 % (7.2.1)",
        &|j| j.from.ends_with("mode lv3"),
    );
    for id in ["harvest-pjob", "harvest-ojob"] {
        from("case-8.1.1", "schedule.json", id, "hpf, 8.1.1", all);
    }
    for (stage, scope) in [
        ("case-8.2.1-native", "8.2.1 native baseline"),
        ("case-8.2.1-fixed", "8.2.1 fixed-priority baseline"),
        ("case-8.2.1", "8.2.1 laxity"),
    ] {
        for id in ["videoconf-frames-p99", "videoconf-speech"] {
            from(stage, "schedule.json", id, scope, all);
        }
    }
    from("case-8.3.1", "schedule.json", "hp-p99-fig15a", "hpf, 8.3.1", all);
    from(
        "case-8.3.2",
        "sweep-rate.json",
        "fig15b-vs-native",
        "kedf K = 16 vs native, 8.3.2",
        all,
    );
    // Example 5 per level of Phase 2 (the example's: lv2 on the host device only): its three
    // figures, each level a row, as `report` judges the same JSON.
    let levels: &[&str] = if lv2 { &["lv1", "lv2", "lv3"] } else { &["lv1", "lv3"] };
    for lv in levels {
        let phase = format!(": Phase 2 at {lv}");
        for id in ["example5-high-vs-baseline", "example5-low-high", "throughput-loss"] {
            from(
                "example5",
                crate::acceptance::stage_result::EXAMPLE5_RESULT,
                id,
                &format!("Example 5, Phase 2 at {lv}"),
                &|j| j.from.contains(&phase),
            );
        }
    }
    // The long run (`--long`): its problems, none allowed.
    from("soak", "soak.json", "soak-stable", "7.2.1 and 8.3.1 in turn", all);
    // overhead's scheduled setups, the levels the plan runs it with (lv2 where the device has it).
    let setups: Vec<&str> = [Level::Lv1, Level::Lv2, Level::Lv3]
        .into_iter()
        .filter(|&l| l != Level::Lv2 || lv2)
        .map(|l| crate::options::Setup::Scheduled(l).name())
        .collect();
    for id in ["overhead", "scheduler-cpu"] {
        for setup in &setups {
            let against = format!(": {setup} against native");
            from("overhead", "overhead.json", id, setup, &|j| j.from.contains(&against));
        }
    }
    out
}

#[cfg(test)]
mod tests;
