//! What the class experiment reports: per class its parameters, latency percentiles, throughput,
//! device share (asked and achieved) and exactly-once check; the run's parameters, environment
//! and totals. JSON whole, CSV a row per class, text a table.
use super::engine::{ClassRun, Outcome};
mod row;
use crate::env::Environment;
use crate::error::{Context, Error};
use crate::measure::settle::{closed_after_stop, stream_idle_or_stop, stream_settled};
use crate::num::ms;
use crate::options::Arrival;
use crate::options::class::ClassSpec;
use crate::output::{Export, opt};
use crate::stats::{Summary, p99_ratio};
use preempt_api::Session;
use preempt_api::latency::Settled;
pub use row::Row;
use serde::Serialize;
use std::io::{self, Write};
use std::time::Duration;

/// One class's exactly-once check (the application API's own: launcher and device records).
#[derive(Debug, Clone, Serialize)]
pub struct ClassCheck {
    /// The commands checked: every one submitted, or after a stop every one launched (the
    /// session's close dropped the others, never run).
    pub submitted: u64,
    pub exactly_once: u64,
    /// Null when a stop abandoned commands still running: the check could not be complete, and
    /// is neither a pass nor a failure.
    pub ok: Option<bool>,
    pub problems: Vec<String>,
    /// Commands a first Ctrl-C abandoned (still running when the session's bounded close ended).
    pub abandoned: u64,
}

/// Drains every class's stream (bounded) and checks its commands. Once a stop is requested
/// (before or during the drain) the session is closed instead, within the API's bounded close
/// (docs/c-api.md#close): a drain would wait for every class's backlog, 2 x threshold x T.
pub fn check_classes(session: &Session, out: &Outcome) -> Result<Vec<ClassCheck>, Error> {
    let mut drained = true;
    for c in &out.classes {
        let limit = Duration::from_secs(30) + Duration::from_secs_f64(c.spec.t_ms / 1000.0 * 64.0);
        drained =
            stream_idle_or_stop(&c.stream, Some(limit)).with_context(|| format!("class {}: draining", c.spec.name))?;
        if !drained {
            break;
        }
    }
    let gave_up = match drained {
        true => None,
        false => Some(closed_after_stop(session.close()).context("closing the session")?),
    };
    out.classes
        .iter()
        .map(|c| {
            let settled = match gave_up {
                Some(gave_up) => stream_settled(&c.stream, gave_up),
                None => Settled {
                    ran: c.stream.stats().map_or(0, |s| s.submitted),
                    abandoned: 0,
                },
            };
            let v = c
                .stream
                .verify()
                .with_context(|| format!("class {}: checking", c.spec.name))?;
            if settled.abandoned > 0 {
                return Ok(ClassCheck {
                    submitted: settled.ran,
                    exactly_once: settled.ran - settled.abandoned,
                    ok: None,
                    problems: Vec::new(),
                    abandoned: settled.abandoned,
                });
            }
            // `v.check.submitted` counts the commands a close dropped too: what ran is checked.
            let ok = v.check.finished && v.check.problems.is_empty() && v.check.exactly_once == settled.ran;
            Ok(ClassCheck {
                submitted: settled.ran,
                exactly_once: v.check.exactly_once,
                ok: Some(ok),
                problems: v.check.problems,
                abandoned: 0,
            })
        })
        .collect()
}

/// One class's row.
#[derive(Debug, Clone, Serialize)]
pub struct ClassResult {
    #[serde(flatten)]
    pub spec: ClassSpec,
    pub arrived: u64,
    /// Requests finished in the window (a saturating class: commands).
    pub finished: u64,
    /// kedf: requests that finished after their deadline.
    pub late: u64,
    /// Arrival to completion of the requests that finished in the window (none for saturating
    /// classes: their figure is throughput).
    pub latency_ns: Option<Summary>,
    /// Requests that arrived in the window and had not finished at its end.
    pub unfinished: u64,
    /// The oldest of those, its age at the window's end: a lower bound of its completion time
    /// (a request that never finished is not in `latency_ns`, yet it may already be late).
    pub oldest_unfinished_ns: Option<u64>,
    /// This class's P99 over the first class's.
    pub p99_vs_first: Option<f64>,
    pub requests_per_s: f64,
    /// Device time its completed commands represent, per second of the window (commands x T).
    pub work_per_s: f64,
    /// Its part of all completed work, in percent.
    pub share_achieved_percent: f64,
    /// up: its share of the shares, in percent.
    pub share_asked_percent: Option<f64>,
    /// up: achieved - asked, in percentage points (the Fig. 9 bottom target: within +-5).
    pub share_error_points: Option<f64>,
    pub check: ClassCheck,
    /// `--standalone`: this class run alone (same arrivals, same duration).
    pub alone: Option<super::standalone::Alone>,
    /// `--standalone`: its P99 here over its P99 alone.
    pub p99_vs_alone: Option<f64>,
}

/// The run's parameters.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleParams {
    pub policy: &'static str,
    pub k: usize,
    pub round_ms: f64,
    pub arrival: Arrival,
    pub sigma: f64,
    pub duration_s: f64,
    pub threshold: u32,
    pub batch: u32,
    pub seed: u64,
    /// Worker processes per class (host device).
    pub workers: u32,
    /// `--preset`: the test plan's section this run is (what the judge reads it as).
    pub preset: Option<&'static str>,
}

/// The result of a class experiment.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleResult {
    pub params: ScheduleParams,
    pub env: Environment,
    /// How the classes' streams are suspended (the session's Lv3 mechanism, or lv1).
    pub mechanism: String,
    pub classes: Vec<ClassResult>,
    /// Device time of all completed work per second of the window.
    pub combined_work_per_s: f64,
    pub suspends: u64,
    pub resumes: u64,
    /// Suspends or resumes that failed (at most 20 lines), each fed back to the policy.
    pub failed_actions: Vec<String>,
    pub window_s: f64,
    pub interrupted: bool,
    pub wall_time_s: f64,
    /// `--standalone`: the combined throughput against the classes alone.
    pub standalone: Option<super::standalone::Standalone>,
}

#[allow(clippy::cast_precision_loss)] // counts and ns of one run: far below 2^52
fn class_result(c: ClassRun, check: ClassCheck, window_s: f64, total_work: f64, total_shares: f64) -> ClassResult {
    let work = c.completed_cmds as f64 * c.spec.t_ms / 1000.0;
    let achieved = if total_work > 0.0 {
        100.0 * work / total_work
    } else {
        0.0
    };
    let asked = c
        .spec
        .share
        .filter(|_| total_shares > 0.0)
        .map(|s| 100.0 * f64::from(s) / total_shares);
    // A saturating class's requests are its commands.
    let finished = if c.spec.saturates() {
        c.completed_cmds
    } else {
        c.finished
    };
    ClassResult {
        arrived: c.arrived,
        unfinished: c.unfinished,
        oldest_unfinished_ns: c.oldest_unfinished_ns,
        finished,
        late: c.late,
        latency_ns: c.latency.summary(),
        p99_vs_first: None,
        requests_per_s: if window_s > 0.0 {
            finished as f64 / window_s
        } else {
            0.0
        },
        work_per_s: if window_s > 0.0 { work / window_s } else { 0.0 },
        share_achieved_percent: achieved,
        share_asked_percent: asked,
        share_error_points: asked.map(|a| achieved - a),
        check,
        alone: None,
        p99_vs_alone: None,
        spec: c.spec,
    }
}

impl ScheduleResult {
    #[allow(clippy::cast_precision_loss)] // counts and ns of one run: far below 2^52
    pub fn new(
        x: &super::Experiment,
        env: Environment,
        session: &Session,
        out: Outcome,
        checks: Vec<ClassCheck>,
        wall: Duration,
    ) -> Self {
        let window_s = out.window_ns as f64 / 1e9;
        let total_work: f64 = out
            .classes
            .iter()
            .map(|c| c.completed_cmds as f64 * c.spec.t_ms / 1000.0)
            .sum();
        let up = x.policy == crate::options::PolicyKind::Up;
        let total_shares: f64 = if up {
            out.classes.iter().filter_map(|c| c.spec.share).map(f64::from).sum()
        } else {
            0.0
        };
        let mut classes: Vec<ClassResult> = out
            .classes
            .into_iter()
            .zip(checks)
            .map(|(c, k)| class_result(c, k, window_s, total_work, total_shares))
            .collect();
        let first = classes.first().and_then(|c| c.latency_ns);
        for c in &mut classes {
            c.p99_vs_first = p99_ratio(c.latency_ns, first);
        }
        ScheduleResult {
            params: ScheduleParams {
                policy: x.policy.name(),
                k: x.k,
                round_ms: x.round_ms,
                arrival: x.arrival,
                sigma: x.sigma,
                duration_s: x.duration_s,
                threshold: x.lv1.threshold,
                batch: x.lv1.batch,
                seed: x.seed,
                workers: x.workers,
                preset: x.preset,
            },
            env,
            mechanism: session.mechanism().name.clone().unwrap_or_else(|| "lv1".into()),
            classes,
            combined_work_per_s: if window_s > 0.0 { total_work / window_s } else { 0.0 },
            suspends: out.suspends,
            resumes: out.resumes,
            failed_actions: out.failed_actions,
            window_s,
            interrupted: out.interrupted,
            wall_time_s: wall.as_secs_f64(),
            standalone: None,
        }
    }

    /// Every class's commands exactly once, here and alone: `Some(false)` if a class's check
    /// failed, else `None` if one could not be made (a stop abandoned commands), else
    /// `Some(true)`.
    pub fn verdict(&self) -> Option<bool> {
        let verdicts = || self.classes.iter().map(ClassResult::verdict);
        if verdicts().any(|v| v == Some(false)) {
            Some(false)
        } else if verdicts().any(|v| v.is_none()) {
            None
        } else {
            Some(true)
        }
    }

    /// No class's check failed, here or in the runs alone (one a stop could not complete is not
    /// a failure).
    pub fn correct(&self) -> bool {
        self.verdict() != Some(false)
    }
}

impl Export for ScheduleResult {
    type Whole = Self;
    type Row<'a> = Row<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<Row<'_>> {
        self.classes
            .iter()
            .map(|c| Row {
                mechanism: Some(&self.mechanism),
                rate: Some(c.spec.rate),
                share_achieved_percent: Some(c.share_achieved_percent),
                share_asked_percent: Some(c.share_asked_percent),
                ..Row::of(self, c)
            })
            .collect()
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = &self.params;
        writeln!(
            w,
            "policy {} on {} (suspended via {}), {} s{}; {}",
            p.policy,
            self.env.device,
            self.mechanism,
            p.duration_s,
            if self.interrupted { ", INTERRUPTED" } else { "" },
            if self.env.device == "host" {
                "host device: host figures, not GPU figures"
            } else {
                "GPU"
            }
        )?;
        writeln!(
            w,
            "| class | arrivals | T ms | done | late | p50 ms | p90 ms | p99 ms | max ms | p99/first | req/s | share asked | share got | exactly once |"
        )?;
        writeln!(w, "|{}", " --- |".repeat(14))?;
        for c in &self.classes {
            let s = &c.spec;
            let arrivals = if s.saturates() {
                "saturating".to_string()
            } else {
                format!("{}/s {}", s.rate, p.arrival.name())
            };
            writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {:.1} % | {} |",
                s.name,
                arrivals,
                s.t_ms,
                c.finished,
                c.late,
                opt(c.latency_ns.map(|x| ms(x.p50)), 2),
                opt(c.latency_ns.map(|x| ms(x.p90)), 2),
                opt(c.latency_ns.map(|x| ms(x.p99)), 2),
                opt(c.latency_ns.map(|x| ms(x.max)), 2),
                opt(c.p99_vs_first, 2),
                c.requests_per_s,
                c.share_asked_percent.map_or("-".into(), |a| format!("{a:.1} %")),
                c.share_achieved_percent,
                match c.verdict() {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "not checked",
                }
            )?;
        }
        writeln!(
            w,
            "combined: {:.3} s of device work per second; {} suspends, {} resumes{}",
            self.combined_work_per_s,
            self.suspends,
            self.resumes,
            if self.failed_actions.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} FAILED actions: {}",
                    self.failed_actions.len(),
                    self.failed_actions.join("; ")
                )
            }
        )?;
        if let Some(s) = &self.standalone {
            standalone_text(self, s, w)?;
        }
        let mut judged = crate::targets::judge(&serde_json::to_value(self).map_err(io::Error::other)?, "this run");
        // The partition's own targets: each class's share, and (with --standalone) its cost; a
        // preset's: the case study's it is.
        let preset = self.params.preset.is_some();
        judged.retain(|j| {
            j.target == "partition" || j.target == "partition-overhead" || (preset && CASE_TARGETS.contains(&j.target))
        });
        if !judged.is_empty() {
            for j in judged {
                let measured = if j.target == "partition" {
                    format!("{:+.2} {}", j.measured, j.unit)
                } else {
                    format!("{:.2} {}", j.measured, j.unit)
                };
                writeln!(
                    w,
                    "target {} ({}): {measured}, bound {}: {}{}",
                    j.target,
                    j.source,
                    j.bound,
                    if j.pass { "PASS" } else { "FAIL" },
                    if j.host_figures { " (host figure)" } else { "" }
                )?;
            }
        }
        Ok(())
    }
}

/// The targets a `--preset` run prints under its table (the chapter 8 case studies').
const CASE_TARGETS: [&str; 5] = [
    "harvest-pjob",
    "harvest-ojob",
    "videoconf-frames-p99",
    "videoconf-speech",
    "hp-p99-fig15a",
];

impl ClassResult {
    /// Every command completed exactly once, here and alone: `Some(false)` if a check failed,
    /// else `None` if one could not be made (a stop abandoned commands), else `Some(true)`.
    pub fn verdict(&self) -> Option<bool> {
        let alone = self.alone.as_ref().map_or(Some(true), |a| a.exactly_once);
        match (self.check.ok, alone) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        }
    }

    /// No check failed, here or alone.
    pub fn correct(&self) -> bool {
        self.verdict() != Some(false)
    }
}

/// `--standalone`'s lines: each class together against alone, then the combined throughput
/// against its reference.
fn standalone_text(r: &ScheduleResult, s: &super::standalone::Standalone, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "against each class alone (same arrivals, same duration):")?;
    writeln!(
        w,
        "| class | p99 ms alone | p99 ms together | p99 / alone | work/s alone | work/s together |"
    )?;
    writeln!(w, "|{}", " --- |".repeat(6))?;
    for c in &r.classes {
        let Some(a) = &c.alone else { continue };
        writeln!(
            w,
            "| {} | {} | {} | {} | {:.3} | {:.3} |",
            c.spec.name,
            opt(a.latency_ns.map(|x| ms(x.p99)), 2),
            opt(c.latency_ns.map(|x| ms(x.p99)), 2),
            opt(c.p99_vs_alone, 2),
            a.work_per_s,
            c.work_per_s
        )?;
    }
    writeln!(
        w,
        "combined throughput {:.3} s of device work per second against {:.3}, the {}: loss {:.1} %",
        s.combined_work_per_s, s.reference_work_per_s, s.reference, s.throughput_loss_percent
    )
}
