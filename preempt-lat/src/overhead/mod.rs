//! `preempt-lat overhead`: what being scheduled costs when nothing is preempted, the way XSched
//! measures it (Fig. 12a, 7.4.1: whole-application time native against scheduled, target
//! < 3.4 %; Fig. 12b, 7.4.2: the CPU the scheduled process uses over native, target < 5 % of one
//! core). The same LP work, `--commands` delay commands of T back to back, runs in each setup:
//!
//! - `native`: straight onto the device, no launcher and no session (the threshold sweep's
//!   direct phase: [`runs::native`]);
//! - `lv1`: through an application-API session's LP stream at Lv1, i.e. the launcher (at most
//!   `--threshold` in flight), no Lv3 mechanism built;
//! - `lv3`: through an LP stream at Lv3, the session's mechanism armed (on a GPU its KFD queue
//!   discovered; dbg-trap keeps the process in debug mode) and the stream registered with the
//!   helper, which is never entered, so nothing is suspended.
//!
//! Each run times every setup once, in an order that rotates from run to run (so that drift and
//! warm-up do not favour one setup); a setup's time overhead and CPU increase are taken against
//! the native run of the same run, then summarized as min / median / max over `--runs`. Wall time
//! and CPU come from `getrusage(RUSAGE_SELF)` around the submissions and the wait: every thread of
//! this process (the application's, the launcher's, the runtime's), not the host device's worker
//! processes, which are the device.
use crate::device::Device;
use crate::env::Environment;
use crate::error::Context;
use crate::exit::{Outcome, Verdict};
use crate::launcher_cost::Figure;
use crate::measure::control::stop_requested;
use crate::options::{Level, OverheadOptions, Setup};
use crate::output::Export;
use lv1::cost::Usage;
use runs::scheduled;
use serde::Serialize;
use std::io::{self, Write};

/// What one setup measured in one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub wall_ns: u64,
    pub cpu_ns: u64,
    pub exactly_once: bool,
}

impl Measured {
    pub(super) fn of(u: Usage, exactly_once: bool) -> Self {
        Measured {
            wall_ns: u.wall_ns,
            cpu_ns: u.cpu_ns,
            exactly_once,
        }
    }

    /// This process's CPU as a percentage of one core over the run.
    #[allow(clippy::cast_precision_loss)] // ns of one run: far below 2^53
    pub fn core_percent(&self) -> f64 {
        100.0 * self.cpu_ns as f64 / self.wall_ns.max(1) as f64
    }
}

/// The order setups run in, in run `run` (0-based): `n` setups, rotated by one per run.
pub fn order(n: usize, run: u32) -> Vec<usize> {
    let shift = usize::try_from(run).unwrap_or(0) % n.max(1);
    (0..n).map(|i| (i + shift) % n).collect()
}

/// One setup's figures over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct SetupResult {
    /// `native`, `lv1` or `lv3`.
    pub setup: &'static str,
    /// How the work runs in this setup.
    pub how: String,
    /// How the stream would be suspended (`-` for native, `lv1-stop` for Lv1, the session's
    /// mechanism for Lv3).
    pub mechanism: String,
    /// From the first submission until every command completed.
    pub wall_s: Figure,
    /// This process's CPU over that time, % of one core.
    pub cpu_percent_of_core: Figure,
    /// Scheduled setups: (wall / native wall of the same run - 1) x 100 (Fig. 12a).
    pub time_overhead_percent: Option<Figure>,
    /// Scheduled setups: CPU % of a core minus native's of the same run (Fig. 12b).
    pub cpu_increase_points: Option<Figure>,
    /// Every command of every run completed exactly once.
    pub exactly_once: bool,
    /// Each run's own figures, in run order.
    pub per_run: Vec<RunFigures>,
}

/// One setup in one run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunFigures {
    pub wall_s: f64,
    pub cpu_percent_of_core: f64,
}

/// The parameters.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadParams {
    pub t_ms: f64,
    pub commands: u32,
    pub runs: u32,
    pub threshold: u32,
    pub batch: u32,
    /// Host device: LP worker processes (every setup the same).
    pub workers: u32,
}

/// The result of `overhead`.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadResult {
    pub params: OverheadParams,
    pub env: Environment,
    pub setups: Vec<SetupResult>,
    /// Runs completed (fewer than `params.runs` when interrupted).
    pub runs_done: u32,
    pub interrupted: bool,
    pub note: &'static str,
    pub wall_time_s: f64,
}

impl OverheadResult {
    pub fn correct(&self) -> bool {
        self.setups.iter().all(|s| s.exactly_once)
    }
}

const NOTE: &str = "wall and CPU from getrusage(RUSAGE_SELF) around the submissions and the wait: every thread \
    of this process, not the host device's worker processes; overhead and CPU increase against the native run of \
    the same run, min / median / max over the runs";

/// The figures of every setup from the runs' measurements (`per_run[r][s]`: run r, setup s;
/// setup 0 is native).
pub fn summarize(setups: &[(Setup, String, String)], per_run: &[Vec<Measured>]) -> Vec<SetupResult> {
    #[allow(clippy::cast_precision_loss)] // ns of one run: far below 2^53
    let secs = |m: &Measured| m.wall_ns as f64 / 1e9;
    setups
        .iter()
        .enumerate()
        .map(|(s, (setup, how, mechanism))| {
            let name = setup.name();
            let mine = || per_run.iter().filter_map(move |r| Some((r.first()?, r.get(s)?)));
            let against_native = |f: &dyn Fn(&Measured, &Measured) -> f64| -> Vec<f64> {
                mine().map(|(native, m)| f(native, m)).collect()
            };
            let scheduled = *setup != Setup::Native;
            SetupResult {
                setup: name,
                how: how.clone(),
                mechanism: mechanism.clone(),
                wall_s: Figure::of(format!("{name}.wall_s"), "s", mine().map(|(_, m)| secs(m)).collect()),
                cpu_percent_of_core: Figure::of(
                    format!("{name}.cpu_percent_of_core"),
                    "% of one core",
                    mine().map(|(_, m)| m.core_percent()).collect(),
                ),
                time_overhead_percent: scheduled.then(|| {
                    Figure::of(
                        format!("{name}.time_overhead_percent"),
                        "%",
                        against_native(&|n, m| (secs(m) / secs(n) - 1.0) * 100.0),
                    )
                }),
                cpu_increase_points: scheduled.then(|| {
                    Figure::of(
                        format!("{name}.cpu_increase_points"),
                        "points of one core",
                        against_native(&|n, m| m.core_percent() - n.core_percent()),
                    )
                }),
                exactly_once: mine().all(|(_, m)| m.exactly_once),
                per_run: mine()
                    .map(|(_, m)| RunFigures {
                        wall_s: secs(m),
                        cpu_percent_of_core: m.core_percent(),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Measures on `dev` and writes the result on stdout in `--format`.
pub fn run(o: &OverheadOptions, dev: Device) -> Outcome {
    let workers = dev.workers();
    let src = dev.open_shared(o.common.mechanism, o.common.grace())?;
    let mut setups = vec![(
        Setup::Native,
        "straight onto the device: no launcher, no session".to_string(),
        "-".to_string(),
    )];
    for &level in &o.levels {
        dev.check_level(level)?;
        let how = match level {
            Level::Lv2 => "an LP stream at Lv2 (host device): the helper registered and never entered, through the \
                           launcher; nothing is armed"
                .to_string(),
            Level::Lv3 => "an LP stream at Lv3: the session's mechanism armed, the helper registered and never \
                           entered, through the launcher"
                .to_string(),
            _ => format!(
                "an LP stream at Lv1: the launcher (threshold {}, batch {}), no Lv3 mechanism",
                o.common.lv1.threshold, o.common.lv1.batch
            ),
        };
        setups.push((Setup::Scheduled(level), how, String::new()));
    }
    let t_start = std::time::Instant::now();
    let mut per_run: Vec<Vec<Measured>> = Vec::new();
    'runs: for r in 0..o.runs {
        if stop_requested() {
            break;
        }
        if !o.common.quiet {
            eprintln!("overhead: run {} of {} ({})", r + 1, o.runs, src.label());
        }
        let mut row = vec![None; setups.len()];
        for i in order(setups.len(), r) {
            // A setup is --commands x T: a stop ends the one under way (its work abandoned
            // within the bounded close, crate::measure::settle) and a run not measured whole is
            // left out.
            if stop_requested() {
                break 'runs;
            }
            let measured = match setups[i].0 {
                Setup::Native => {
                    runs::native(&src, o.t_ms, o.commands, workers).map(|(used, ok)| Measured::of(used, ok))
                }
                Setup::Scheduled(level) => scheduled(&src, &Work::of(o), level, workers).map(|(m, mechanism)| {
                    setups[i].2 = mechanism;
                    m
                }),
            };
            row[i] = Some(match measured {
                Ok(m) => m,
                // The stop cut it short (the error is that cut).
                Err(_) if stop_requested() => break 'runs,
                Err(e) => return Err(e.into()),
            });
        }
        per_run.push(row.into_iter().flatten().collect());
    }
    let runs_done = u32::try_from(per_run.len()).unwrap_or(u32::MAX);
    let r = OverheadResult {
        params: OverheadParams {
            t_ms: o.t_ms,
            commands: o.commands,
            runs: o.runs,
            threshold: o.common.lv1.threshold,
            batch: o.common.lv1.batch,
            workers,
        },
        env: crate::env::of_sessions(&src),
        setups: summarize(&setups, &per_run),
        runs_done,
        interrupted: runs_done < o.runs,
        note: NOTE,
        wall_time_s: t_start.elapsed().as_secs_f64(),
    };
    let mut out = io::stdout().lock();
    crate::output::export(o.format, &r, &mut out)
        .and_then(|()| out.flush())
        .context("writing the result")?;
    if !r.correct() {
        eprintln!("preempt-lat: correctness check FAILED: some LP command did not complete exactly once");
    }
    Ok(Verdict::from_ok(r.correct()))
}

/// One CSV row per setup.
#[derive(Debug, Serialize)]
pub struct Row<'a> {
    pub device: &'a str,
    pub setup: &'static str,
    pub mechanism: &'a str,
    pub t_ms: f64,
    pub commands: u32,
    pub runs: u32,
    pub threshold: u32,
    pub batch: u32,
    pub workers: u32,
    pub wall_s_median: f64,
    pub cpu_percent_of_core_min: f64,
    pub cpu_percent_of_core_median: f64,
    pub cpu_percent_of_core_max: f64,
    pub time_overhead_percent_min: Option<f64>,
    pub time_overhead_percent_median: Option<f64>,
    pub time_overhead_percent_max: Option<f64>,
    pub cpu_increase_points_min: Option<f64>,
    pub cpu_increase_points_median: Option<f64>,
    pub cpu_increase_points_max: Option<f64>,
    pub exactly_once: bool,
    pub git_revision: &'a str,
}

/// JSON: the result whole; CSV: a row per setup; text: a table and the targets judged.
impl Export for OverheadResult {
    type Whole = Self;
    type Row<'a> = Row<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<Row<'_>> {
        let p = &self.params;
        self.setups
            .iter()
            .map(|s| Row {
                device: &self.env.device,
                setup: s.setup,
                mechanism: &s.mechanism,
                t_ms: p.t_ms,
                commands: p.commands,
                runs: self.runs_done,
                threshold: p.threshold,
                batch: p.batch,
                workers: p.workers,
                wall_s_median: s.wall_s.median,
                cpu_percent_of_core_min: s.cpu_percent_of_core.min,
                cpu_percent_of_core_median: s.cpu_percent_of_core.median,
                cpu_percent_of_core_max: s.cpu_percent_of_core.max,
                time_overhead_percent_min: s.time_overhead_percent.as_ref().map(|f| f.min),
                time_overhead_percent_median: s.time_overhead_percent.as_ref().map(|f| f.median),
                time_overhead_percent_max: s.time_overhead_percent.as_ref().map(|f| f.max),
                cpu_increase_points_min: s.cpu_increase_points.as_ref().map(|f| f.min),
                cpu_increase_points_median: s.cpu_increase_points.as_ref().map(|f| f.median),
                cpu_increase_points_max: s.cpu_increase_points.as_ref().map(|f| f.max),
                exactly_once: s.exactly_once,
                git_revision: self.env.git_revision,
            })
            .collect()
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = &self.params;
        writeln!(
            w,
            "preempt-lat overhead on {}: {} commands of T = {} ms per setup and run, {} run(s){}; {}",
            self.env.device,
            p.commands,
            p.t_ms,
            self.runs_done,
            if self.interrupted { ", INTERRUPTED" } else { "" },
            crate::plot::device_label(&self.env.device, self.env.host_figures)
        )?;
        writeln!(w, "min / median / max over the runs:")?;
        writeln!(
            w,
            "| setup | how | wall s | CPU % of a core | time overhead % | CPU increase, points | exactly once |"
        )?;
        writeln!(w, "|{}", " --- |".repeat(7))?;
        let spread = |f: &Figure, prec: usize| format!("{:.prec$} / {:.prec$} / {:.prec$}", f.min, f.median, f.max);
        let signed = |f: &Option<Figure>| {
            f.as_ref().map_or("-".into(), |f| {
                format!("{:+.2} / {:+.2} / {:+.2}", f.min, f.median, f.max)
            })
        };
        for s in &self.setups {
            writeln!(
                w,
                "| {} | {}{} | {} | {} | {} | {} | {} |",
                s.setup,
                s.how,
                if s.mechanism.is_empty() || s.mechanism == "-" {
                    String::new()
                } else {
                    format!(" ({})", s.mechanism)
                },
                spread(&s.wall_s, 4),
                spread(&s.cpu_percent_of_core, 1),
                signed(&s.time_overhead_percent),
                signed(&s.cpu_increase_points),
                if s.exactly_once { "yes" } else { "NO" }
            )?;
        }
        let judged = crate::targets::judge(&serde_json::to_value(self).map_err(io::Error::other)?, "this run");
        for j in judged {
            writeln!(
                w,
                "target {} ({}): {} {:+.2} {}, bound {}: {}{}",
                j.target,
                j.source,
                j.from.trim_start_matches("this run: "),
                j.measured,
                j.unit,
                j.bound,
                if j.pass { "PASS" } else { "FAIL" },
                if j.host_figures { " (host figure)" } else { "" }
            )?;
        }
        writeln!(w, "note: {}", self.note)
    }
}

mod runs;
pub use runs::{Work, lv1_point};

#[cfg(test)]
mod tests;
