//! `preempt-lat sweep rate`: the class experiment once per offered request rate (XSched's
//! Fig. 15b: K-EDF, log-normal arrivals, P99 latency against the request rate). Each point is
//! one [`super::run_experiment`] of the template's classes at that rate ([`class::at_rate`]);
//! the result is every point's class-experiment result, one CSV row per rate and class, and a
//! plot: per-class P99 with its p50 band against the rate (small multiples sharing axes) above
//! the requests completed per second against the rate ([`mod@plot`]).
mod plot;

use super::result::Row;
use super::{Experiment, ScheduleResult, run_experiment};
use crate::device::Device;
use crate::env::Environment;
use crate::error::{Context, Error, failed};
use crate::exit::{Outcome, Verdict};
use crate::measure::control::stop_requested;
use crate::num::ms;
use crate::options::class::{self, ClassSpec};
use crate::options::{Arrival, SweepRateOptions};
use crate::output::files::{prepare, write_all};
use crate::output::{Export, opt};
use serde::Serialize;
use std::io::{self, Write};

/// What defines the sweep (written into every output).
#[derive(Debug, Clone, Serialize)]
pub struct RateParams {
    /// Total offered request rates, requests per second.
    pub rates: Vec<f64>,
    pub policy: &'static str,
    pub k: usize,
    pub arrival: Arrival,
    pub sigma: f64,
    pub round_ms: f64,
    pub duration_s: f64,
    /// The classes as given (rates as weights of the total), or the built-in set-up's.
    pub template: Vec<ClassSpec>,
    /// `true`: the built-in set-up (`--clients` identical clients), `false`: `--class`.
    pub built_in: bool,
    pub threshold: u32,
    pub batch: u32,
    pub seed: u64,
    /// Worker processes per class (host device).
    pub workers: u32,
    /// `--preset`: the test plan's section this sweep is (what the judge reads it as).
    pub preset: Option<&'static str>,
}

/// The largest P99 of the run's request classes (the built-in clients are alike: their worst).
pub fn worst_p99_ns(r: &ScheduleResult) -> Option<u64> {
    r.classes.iter().filter_map(|c| c.latency_ns.map(|s| s.p99)).max()
}

/// One rate: the class experiment run at it.
#[derive(Debug, Clone, Serialize)]
pub struct RatePoint {
    /// The total offered rate, requests per second.
    pub offered_rate: f64,
    #[serde(flatten)]
    pub result: ScheduleResult,
}

/// The result of `sweep rate`.
#[derive(Debug, Clone, Serialize)]
pub struct RateSweep {
    /// `rate`: what `report` and the target table recognise the file by.
    pub sweep: &'static str,
    pub params: RateParams,
    pub env: Environment,
    pub points: Vec<RatePoint>,
    /// `--preset 8.3.2`: its comparison point, the same clients at the seeds' comparison rate
    /// with no scheduling (K = the clients: K-EDF then suspends nothing). The seeds compare with
    /// Paella there; no Paella runs here, so native stands in (docs/priority.md).
    pub compared: Option<RatePoint>,
    /// Stopped (Ctrl-C) before every rate ran.
    pub interrupted: bool,
    pub wall_time_s: f64,
}

impl RateSweep {
    pub fn correct(&self) -> bool {
        self.points.iter().chain(&self.compared).all(|p| p.result.correct())
    }
}

/// Runs the sweep of `o` on `dev`; writes sweep-rate.{csv,json,svg} into --out-dir and the
/// table on stdout.
pub fn run(o: &SweepRateOptions, dev: Device) -> Outcome {
    let template = o.template();
    let workers = dev.priority_workers(o.common.workers);
    let at = |rate: f64| -> Result<Experiment, Error> {
        let classes = class::at_rate(&template, rate).ok_or_else(|| failed!("no class with requests to sweep"))?;
        Ok(Experiment::of_sweep(o, classes, workers))
    };
    // The first point's policy first: a class it cannot take is refused before anything starts.
    let first = at(o.rates.first().copied().unwrap_or(1.0))?;
    super::policy::of(first.policy, &first.classes, first.k, first.round_ms)?;
    let src = dev.open_shared(o.common.mechanism, o.common.grace())?;
    prepare(&o.out_dir)?;
    let t_start = std::time::Instant::now();
    let mut points = Vec::new();
    for &rate in &o.rates {
        if stop_requested() {
            break;
        }
        if !o.common.quiet {
            eprintln!(
                "sweep rate: {} req/s over {} classes for {} s ({})",
                crate::plot::ticks::fmt_num(rate),
                template.len(),
                o.duration_s,
                src.label()
            );
        }
        let result = run_experiment(&at(rate)?, &src)?;
        points.push(RatePoint {
            offered_rate: rate,
            result,
        });
    }
    let mut compared = None;
    if let Some(rate) = o.compare_at()
        && !stop_requested()
    {
        if !o.common.quiet {
            eprintln!(
                "sweep rate: the comparison point, {} req/s with no scheduling (K = {} clients)",
                crate::plot::ticks::fmt_num(rate),
                template.len()
            );
        }
        let x = Experiment {
            k: template.len(),
            ..at(rate)?
        };
        compared = Some(RatePoint {
            offered_rate: rate,
            result: run_experiment(&x, &src)?,
        });
    }
    let sweep = RateSweep {
        sweep: "rate",
        params: RateParams {
            rates: o.rates.clone(),
            policy: o.policy.name(),
            k: o.k,
            arrival: o.arrival,
            sigma: o.sigma,
            round_ms: o.round_ms,
            duration_s: o.duration_s,
            template,
            built_in: o.classes.is_empty(),
            threshold: o.common.lv1.threshold,
            batch: o.common.lv1.batch,
            seed: o.common.seed,
            workers,
            preset: o.preset_name(),
        },
        env: crate::env::of_sessions(&src),
        interrupted: points.len() < o.rates.len() || (o.compare_at().is_some() && compared.is_none()),
        compared,
        points,
        wall_time_s: t_start.elapsed().as_secs_f64(),
    };
    write_all(&o.out_dir, "sweep-rate", &sweep)?;
    if !sweep.points.is_empty() {
        plot::draw(&sweep, &o.out_dir.join("sweep-rate.svg"))?;
    }
    let mut out = io::stdout().lock();
    sweep
        .text(&mut out)
        .and_then(|()| {
            writeln!(
                out,
                "sweep rate: {} rates -> {}/sweep-rate.{{csv,json,svg}}; correctness {}",
                sweep.points.len(),
                o.out_dir.display(),
                if sweep.correct() { "OK" } else { "FAILED" }
            )
        })
        .and_then(|()| out.flush())
        .context("writing the result")?;
    Ok(Verdict::from_ok(sweep.correct()))
}

/// JSON: the sweep whole; CSV: a row per rate and class; text: one table.
impl Export for RateSweep {
    type Whole = Self;
    type Row<'a> = Row<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<Row<'_>> {
        self.points
            .iter()
            .flat_map(|p| {
                p.result.classes.iter().map(move |c| Row {
                    device: &self.env.device,
                    policy: self.params.policy,
                    k: Some(self.params.k),
                    offered_rate: Some(p.offered_rate),
                    class_rate: Some(c.spec.rate),
                    deadline_ms: Some(c.spec.deadline_ms),
                    work_per_s: Some(c.work_per_s),
                    throughput_loss_percent: Some(p.result.standalone.as_ref().map(|s| s.throughput_loss_percent)),
                    ..Row::of(&p.result, c)
                })
            })
            .collect()
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = &self.params;
        writeln!(
            w,
            "sweep rate: {}{} over {} {}, {} arrivals{}, {} s per rate{}; {}",
            p.policy,
            if p.policy == preempt_api::Policy::KEdf.name() {
                format!(" (K = {})", p.k)
            } else {
                String::new()
            },
            p.template.len(),
            if p.built_in {
                "clients (built-in set-up)"
            } else {
                "classes"
            },
            p.arrival.name(),
            if p.arrival == Arrival::Lognormal {
                format!(" (sigma {})", p.sigma)
            } else {
                String::new()
            },
            p.duration_s,
            if self.interrupted { ", INTERRUPTED" } else { "" },
            crate::plot::device_label(&self.env.device, self.env.host_figures)
        )?;
        writeln!(
            w,
            "| offered req/s | class | req/s | done | late | p50 ms | p90 ms | p99 ms | max ms | got req/s | exactly once |"
        )?;
        writeln!(w, "|{}", " --- |".repeat(11))?;
        for pt in &self.points {
            for c in &pt.result.classes {
                writeln!(
                    w,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
                    crate::plot::ticks::fmt_num(pt.offered_rate),
                    c.spec.name,
                    if c.spec.saturates() {
                        "saturating".into()
                    } else {
                        format!("{:.1}", c.spec.rate)
                    },
                    c.finished,
                    c.late,
                    opt(c.latency_ns.map(|s| ms(s.p50)), 2),
                    opt(c.latency_ns.map(|s| ms(s.p90)), 2),
                    opt(c.latency_ns.map(|s| ms(s.p99)), 2),
                    opt(c.latency_ns.map(|s| ms(s.max)), 2),
                    c.requests_per_s,
                    if c.correct() { "yes" } else { "NO" }
                )?;
            }
        }
        for pt in &self.points {
            let Some(s) = &pt.result.standalone else { continue };
            let p99s: Vec<String> = pt
                .result
                .classes
                .iter()
                .filter_map(|c| Some(format!("{} {:.2}x", c.spec.name, c.p99_vs_alone?)))
                .collect();
            writeln!(
                w,
                "{} req/s against each class alone: P99 {}; throughput loss {:.1} % (against the {})",
                crate::plot::ticks::fmt_num(pt.offered_rate),
                if p99s.is_empty() { "-".into() } else { p99s.join(", ") },
                s.throughput_loss_percent,
                s.reference
            )?;
        }
        if let Some(c) = &self.compared {
            let at = self.points.iter().find(|p| p.offered_rate == c.offered_rate);
            let worst = |r: &ScheduleResult| worst_p99_ns(r).map_or_else(|| "-".into(), |v| format!("{:.2} ms", ms(v)));
            writeln!(
                w,
                "comparison point ({}): at {} req/s the worst client's P99 is {} under {} and {} with no scheduling \
                 (the seeds compare with Paella here; no Paella runs here, native stands in)",
                p.preset.unwrap_or("-"),
                crate::plot::ticks::fmt_num(c.offered_rate),
                at.map_or_else(|| "- (not swept)".into(), |a| worst(&a.result)),
                p.policy,
                worst(&c.result)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
