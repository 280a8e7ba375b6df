//! One device's stages, in order: each runs in a child with its time bound, or is skipped with
//! the reason (it cannot apply to the device, it was not selected, a stage it needs did not
//! pass, or the run was interrupted); progress on stderr; the kernel log read at the end; the
//! targets judged from what passed.
use super::kernel_log;
use super::outcome;
use super::plan::{self, Mech, Stage, Work};
use super::runner::{self, Steps};
use super::summary::{DeviceRun, StageRecord, Status};
use preempt_api::DeviceSpec;
use preempt_cli::stop::requested as stop_requested;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What every device's stages share.
pub struct Context<'a> {
    /// This executable: every stage's child is `preempt-lat` itself.
    pub program: &'a Path,
    /// The run's directory (what the archive holds).
    pub top: &'a Path,
    pub quick: bool,
    /// `--long`: the soak stage too, this long.
    pub long: Option<std::time::Duration>,
    /// `--only` (empty: every stage).
    pub only: &'a [String],
    /// `--stage-bound`.
    pub bounds: &'a [(String, f64)],
}

impl Context<'_> {
    fn selected(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }

    fn bound(&self, s: &Stage) -> Duration {
        self.bounds
            .iter()
            .rev()
            .find(|(id, _)| *id == s.id)
            .map_or(s.bound, |&(_, secs)| Duration::from_secs_f64(secs))
    }
}

/// The device's directory in the archive.
pub fn dir_name(device: DeviceSpec) -> String {
    match device {
        DeviceSpec::Hip(n) => format!("hip{n}"),
        d => d.to_string(),
    }
}

/// Why `stage` cannot run after `done`: a stage it needs (and that was selected) did not pass,
/// or none of those it needs one of did; with the failed stage behind it, where one is (a stage
/// skipped for a skipped stage names the failure that started the chain). Otherwise the
/// mechanism it is to use (`None`: auto).
fn needs(
    cx: &Context,
    stage: &Stage,
    done: &[StageRecord],
    plan: &[Stage],
) -> Result<Option<Mech>, (String, Option<String>)> {
    let find = |id: &str| done.iter().find(|r| r.id == id);
    let behind = |r: &StageRecord| match r.status {
        Status::Fail => Some(r.id.clone()),
        _ => r.blocked_by.clone(),
    };
    for n in stage.needs.iter().filter(|n| cx.selected(n)) {
        match find(n) {
            Some(r) if r.status == Status::Pass => {}
            Some(r) => {
                let why = match (r.status, &r.blocked_by) {
                    (Status::Fail, _) => format!("needs {n}, which failed"),
                    (_, Some(b)) => format!("needs {n}, which was skipped (blocked by {b}, which failed)"),
                    (_, None) => format!("needs {n}, which was skipped"),
                };
                return Err((why, behind(r)));
            }
            None => return Err((format!("needs {n}, which has not run"), None)),
        }
    }
    let any: Vec<&String> = stage.needs_any.iter().filter(|n| cx.selected(n)).collect();
    if any.is_empty() {
        return Ok(None);
    }
    match any.iter().find(|n| find(n).is_some_and(|r| r.status == Status::Pass)) {
        Some(n) => Ok(plan::mechanism_of(plan, n)),
        None => Err((
            format!(
                "needs one of {} to have passed, and none did",
                any.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
            any.iter().filter_map(|n| find(n)).find_map(behind),
        )),
    }
}

/// Every file under `dir`, as paths relative to `top`, sorted.
fn files_under(dir: &Path, top: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if let Ok(rel) = p.strip_prefix(top) {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Runs `stage`'s child; its record.
fn run_child(cx: &Context, device: DeviceSpec, stage: &Stage, rel: &str, chosen: Option<Mech>) -> StageRecord {
    let dir = cx.top.join(rel);
    let bound = cx.bound(stage);
    let mut rec = StageRecord::skipped(
        &stage.id,
        &stage.title,
        bound.as_secs_f64(),
        &stage.needs,
        String::new(),
    );
    let Some(args) = plan::args(stage, device, cx.quick, &dir, chosen) else {
        rec.reason = "internal: no command for this stage".into();
        rec.status = Status::Fail;
        return rec;
    };
    rec.command = Some(format!("preempt-lat {}", args.join(" ")));
    let files = std::fs::create_dir_all(&dir).and_then(|()| {
        let out = std::fs::File::create(dir.join(plan::stdout_file(stage.work)))?;
        let err = std::fs::File::create(dir.join("stderr.txt"))?;
        Ok((out, err))
    });
    let ended = files.and_then(|(out, err)| {
        let mut cmd = Command::new(cx.program);
        cmd.args(&args).stdout(out).stderr(err);
        runner::run(cmd, bound, &stop_requested, Steps::STAGE)
    });
    match ended {
        Err(e) => {
            rec.status = Status::Fail;
            rec.reason = format!("could not start its child: {e}");
        }
        Ok(ended) => {
            let (status, reason, facts) = outcome::of_child(stage, bound, &ended, &dir);
            (rec.status, rec.reason, rec.facts) = (status, reason, facts);
            rec.seconds = ended.seconds;
            rec.ended = Some(ended.describe());
        }
    }
    rec.files = files_under(&dir, cx.top);
    rec.results = outcome::results_in(stage, &dir)
        .into_iter()
        .map(|f| format!("{rel}/{f}"))
        .collect();
    rec
}

/// The kernel log stage, read here: `reader` was started before the device's first stage.
fn kernel_log_stage(cx: &Context, stage: &Stage, rel: &str, reader: kernel_log::Reader) -> StageRecord {
    let t0 = Instant::now();
    let dir = cx.top.join(rel);
    let bound = cx.bound(stage);
    let mut rec = StageRecord::skipped(
        &stage.id,
        &stage.title,
        bound.as_secs_f64(),
        &stage.needs,
        String::new(),
    );
    if let Err(e) = std::fs::create_dir_all(&dir) {
        rec.status = Status::Fail;
        rec.reason = format!("{}: {e}", dir.display());
        return rec;
    }
    let c = reader.collect(|args| kernel_log::journalctl(args, &dir, bound));
    let bad = kernel_log::suspicious(&c.lines);
    let mut text = c.lines.join("\n");
    text.push('\n');
    let written = crate::atomic_file::write_file(&dir.join("kernel-log.txt"), |w| w.write_all(text.as_bytes()));
    let lost = if c.lost > 0 {
        format!(
            " ({} record(s) lost: the ring buffer overran or the cap was reached)",
            c.lost
        )
    } else {
        String::new()
    };
    (rec.status, rec.reason) = match (&c.source, written) {
        (None, _) => (
            Status::Skip,
            format!(
                "cannot read the kernel log: {}; run `sudo dmesg --time-format iso` after the run and attach it",
                c.unreadable.join("; ")
            ),
        ),
        (Some(_), Err(e)) => (Status::Fail, e.to_string()),
        (Some(src), Ok(())) if bad.is_empty() => (
            Status::Pass,
            format!(
                "{} line(s) from {src}, none from amdgpu/amdkfd about a failure, none a kernel splat{lost}",
                c.lines.len()
            ),
        ),
        (Some(src), Ok(())) => (
            Status::Fail,
            format!(
                "{} suspicious line(s) of {} from {src}{lost}; the first: {}",
                bad.len(),
                c.lines.len(),
                bad[0]
            ),
        ),
    };
    rec.facts = serde_json::json!({
        "source": c.source,
        "lines": c.lines.len(),
        "suspicious": bad,
        "lost": c.lost,
        "unreadable": c.unreadable,
    });
    rec.seconds = t0.elapsed().as_secs_f64();
    rec.files = files_under(&dir, cx.top);
    rec
}

/// Runs every stage of `device`.
pub fn run_device(cx: &Context, device: DeviceSpec) -> DeviceRun {
    let dname = dir_name(device);
    let plan = plan::stages(device, cx.quick, cx.long);
    let mut reader = Some(kernel_log::Reader::start());
    let mut done: Vec<StageRecord> = Vec::new();
    let total = plan.len();
    for (i, stage) in plan.iter().enumerate() {
        let rel = format!("{dname}/{:02}-{}", i + 1, stage.id);
        let skip = |why: String| {
            StageRecord::skipped(
                &stage.id,
                &stage.title,
                cx.bound(stage).as_secs_f64(),
                &stage.needs,
                why,
            )
        };
        let head = format!("acceptance {device} [{:>2}/{total}] {}", i + 1, stage.id);
        let rec = if stop_requested() {
            skip("not run: interrupted (Ctrl-C/SIGTERM)".into())
        } else if let Some(why) = &stage.not_here {
            skip(why.clone())
        } else if !cx.selected(&stage.id) {
            skip("not selected (--only)".into())
        } else {
            match needs(cx, stage, &done, &plan) {
                Err((why, blocked_by)) => StageRecord {
                    blocked_by,
                    ..skip(why)
                },
                Ok(chosen) => {
                    eprintln!(
                        "{head}: {} (bound {} s)",
                        stage.title,
                        crate::plot::ticks::fmt_num(cx.bound(stage).as_secs_f64())
                    );
                    match (stage.work, &mut reader) {
                        (Work::KernelLog, r) => match r.take() {
                            Some(r) => kernel_log_stage(cx, stage, &rel, r),
                            None => skip("internal: the kernel log was read already".into()),
                        },
                        _ => run_child(cx, device, stage, &rel, chosen),
                    }
                }
            }
        };
        let time = if rec.status == Status::Skip {
            String::new()
        } else {
            format!(" ({:.1} s)", rec.seconds)
        };
        eprintln!("{head}: {}{time} {}", rec.status.word(), rec.reason);
        done.push(rec);
    }
    let targets = outcome::targets(&plan, &done, cx.top);
    DeviceRun {
        device: device.to_string(),
        host_figures: device.is_host(),
        dir: dname,
        stages: done,
        targets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, status: Status) -> StageRecord {
        StageRecord {
            status,
            ..StageRecord::skipped(id, id, 1.0, &[], String::new())
        }
    }

    #[test]
    fn a_stage_runs_only_when_what_it_needs_passed() {
        let plan = plan::stages(DeviceSpec::Hip(0), true, None);
        let cx = Context {
            program: Path::new("preempt-lat"),
            top: Path::new("/nonexistent"),
            quick: true,
            long: None,
            only: &[],
            bounds: &[],
        };
        let stage = |id: &str| plan.iter().find(|s| s.id == id).unwrap();
        let done = [
            rec("environment", Status::Pass),
            rec("hip-smoke", Status::Fail),
            rec("latency-lv1", Status::Pass),
            rec("latency-lv3-preempt-queues", Status::Skip),
            rec("latency-lv3-dbg-trap", Status::Pass),
        ];
        assert_eq!(
            needs(&cx, stage("calibration"), &done, &plan).unwrap_err(),
            ("needs hip-smoke, which failed".into(), Some("hip-smoke".into()))
        );
        // A stage skipped for a skipped stage names the failure behind the chain.
        let blocked = StageRecord {
            blocked_by: Some("hip-smoke".into()),
            ..rec("calibration", Status::Skip)
        };
        assert_eq!(
            needs(&cx, stage("latency-lv1"), &[blocked], &plan).unwrap_err(),
            (
                "needs calibration, which was skipped (blocked by hip-smoke, which failed)".into(),
                Some("hip-smoke".into())
            )
        );
        // The first Lv3 latency that passed names the mechanism of the sweep.
        assert_eq!(
            needs(&cx, stage("sweep-t"), &done, &plan),
            Ok(Some(Mech::Kfd(preempt_api::MechanismKind::DbgTrap)))
        );
        let none_lv3 = [rec("latency-lv1", Status::Pass)];
        assert!(
            needs(&cx, stage("priority"), &none_lv3, &plan)
                .unwrap_err()
                .0
                .starts_with("needs one of latency-lv3-")
        );
        // With --only, what was not selected is not asked for.
        let only = ["sweep-t".to_string()];
        let cx = Context { only: &only, ..cx };
        assert_eq!(needs(&cx, stage("sweep-t"), &[], &plan), Ok(None));
    }

    #[test]
    fn stage_bounds_can_be_overridden_by_id() {
        let plan = plan::stages(DeviceSpec::HOST, true, None);
        let bounds = [("sweep-t".to_string(), 2.5)];
        let cx = Context {
            program: Path::new("x"),
            top: Path::new("/x"),
            quick: true,
            long: None,
            only: &[],
            bounds: &bounds,
        };
        for s in &plan {
            let want = if s.id == "sweep-t" {
                Duration::from_secs_f64(2.5)
            } else {
                s.bound
            };
            assert_eq!(cx.bound(s), want, "{}", s.id);
        }
    }
}
