//! The outputs of `preempt-lat priority`: text for people, one CSV row per mode, and the SVG.
use super::PriorityResult;
use crate::error::Context as _;
use crate::num::ms;
use crate::output::{Export, opt};
use crate::plot::{self, Axis, RefLine, Scale, Series};
use serde::Serialize;
use std::io::{Result, Write};

/// JSON: the result whole; CSV: one row per mode; text: the table.
impl Export for PriorityResult {
    type Whole = Self;
    type Row<'a> = Row<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<Row<'_>> {
        rows(self)
    }
    fn text(&self, w: &mut dyn Write) -> Result<()> {
        text(self, w)
    }
}

/// Whether there is a plot: some mode has HP latencies.
pub fn has_plot(r: &PriorityResult) -> bool {
    r.modes.iter().any(|m| m.hp_latency_ns.is_some())
}

/// The text report.
pub fn text(r: &PriorityResult, w: &mut dyn Write) -> Result<()> {
    let p = &r.params;
    writeln!(
        w,
        "preempt-lat priority on device {} ({})",
        r.env.device, r.env.device_detail
    )?;
    writeln!(
        w,
        "HP: {} requests/s ({}), {} x {} ms per request (load {:.2}); LP: T = {} ms, threshold {}, batch {}, {} LP worker(s); {} s per mode, seed {}; rev {}",
        p.hp_rate,
        p.arrival.name(),
        p.hp_cmds,
        p.hp_t_ms,
        p.hp_load,
        p.t_ms,
        p.threshold,
        p.batch,
        p.workers,
        p.duration_s,
        p.seed,
        r.env.git_revision
    )?;
    writeln!(
        w,
        "{:<14} {:>5} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11} {:>6} {:>11}",
        "mode", "HP n", "p50 ms", "p90 ms", "p99 ms", "max ms", "p99/alone", "LP/alone", "preempt", "correctness"
    )?;
    for m in &r.modes {
        let (p50, p90, p99, max) = m.hp_latency_ns.map_or_else(
            || ("-".to_string(), "-".to_string(), "-".to_string(), "-".to_string()),
            |s| {
                (
                    format!("{:.3}", ms(s.p50)),
                    format!("{:.3}", ms(s.p90)),
                    format!("{:.3}", ms(s.p99)),
                    format!("{:.3}", ms(s.max)),
                )
            },
        );
        let correctness = match &m.correctness {
            None => "-".to_string(),
            Some(c) => match c.ok {
                Some(true) => format!("OK ({})", c.submitted),
                Some(false) => format!("FAILED ({} of {} once)", c.completed_once, c.submitted),
                None => "not checked".to_string(),
            },
        };
        writeln!(
            w,
            "{:<14} {:>5} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11} {:>6} {:>11}{}",
            m.mode.name(),
            m.hp_requests,
            p50,
            p90,
            p99,
            max,
            opt(m.hp_p99_vs_standalone, 2),
            opt(m.lp_throughput_vs_standalone, 2),
            m.preemptions,
            correctness,
            if m.interrupted { "  INTERRUPTED" } else { "" }
        )?;
    }
    let unchecked: Vec<String> = r
        .modes
        .iter()
        .filter_map(|m| {
            let c = m.correctness.as_ref().filter(|c| c.ok.is_none())?;
            Some(format!("{} of {} in {}", c.abandoned, c.submitted, m.mode.name()))
        })
        .collect();
    if !unchecked.is_empty() {
        writeln!(
            w,
            "not checked: interrupted with LP commands still running, abandoned ({}): the exactly-once check could not \
             be complete",
            unchecked.join(", ")
        )?;
    }
    writeln!(
        w,
        "p99/alone: HP P99 / standalone-hp P99 (target < {:.2}); LP/alone: LP throughput / standalone-lp's",
        r.target_p99_ratio
    )?;
    let svg = if has_plot(r) { ",svg" } else { "" };
    writeln!(w, "files: {}/priority.{{csv,json{svg}}}", r.out_dir.display())?;
    if r.env.host_figures {
        writeln!(w, "note: host device figures (CPU worker processes), not GPU figures")?;
    }
    Ok(())
}

/// One CSV row per mode, with every parameter and the environment.
#[derive(Debug, Serialize)]
pub struct Row<'a> {
    pub device: &'a str,
    pub mode: &'static str,
    pub policy: &'static str,
    pub mechanism: &'a str,
    pub hp_rate: f64,
    pub arrival: &'static str,
    pub hp_t_ms: f64,
    pub hp_cmds: u32,
    pub t_ms: f64,
    pub duration_s: f64,
    pub threshold: u32,
    pub batch: u32,
    pub seed: u64,
    pub workers: u32,
    pub kernel: &'a str,
    pub git_revision: &'a str,
    pub hp_requests: u64,
    pub hp_p50_ns: Option<u64>,
    pub hp_p90_ns: Option<u64>,
    pub hp_p99_ns: Option<u64>,
    pub hp_max_ns: Option<u64>,
    pub hp_p99_vs_standalone: Option<f64>,
    pub lp_completed: u64,
    pub lp_throughput_per_s: Option<f64>,
    pub lp_throughput_vs_standalone: Option<f64>,
    pub preemptions: u64,
    /// Empty where the mode runs no LP commands, or where a stop abandoned some that were
    /// still running (the check could not be made).
    pub correct: Option<bool>,
    pub interrupted: bool,
}

pub fn rows(r: &PriorityResult) -> Vec<Row<'_>> {
    let p = &r.params;
    r.modes
        .iter()
        .map(|m| Row {
            device: &r.env.device,
            mode: m.mode.name(),
            policy: m.policy,
            mechanism: &m.mechanism,
            hp_rate: p.hp_rate,
            arrival: p.arrival.name(),
            hp_t_ms: p.hp_t_ms,
            hp_cmds: p.hp_cmds,
            t_ms: p.t_ms,
            duration_s: p.duration_s,
            threshold: p.threshold,
            batch: p.batch,
            seed: p.seed,
            workers: p.workers,
            kernel: &r.env.kernel,
            git_revision: r.env.git_revision,
            hp_requests: m.hp_requests,
            hp_p50_ns: m.hp_latency_ns.map(|s| s.p50),
            hp_p90_ns: m.hp_latency_ns.map(|s| s.p90),
            hp_p99_ns: m.hp_latency_ns.map(|s| s.p99),
            hp_max_ns: m.hp_latency_ns.map(|s| s.max),
            hp_p99_vs_standalone: m.hp_p99_vs_standalone,
            lp_completed: m.lp_completed,
            lp_throughput_per_s: m.lp_throughput_per_s,
            lp_throughput_vs_standalone: m.lp_throughput_vs_standalone,
            preemptions: m.preemptions,
            correct: m.correctness.as_ref().and_then(|c| c.ok),
            interrupted: m.interrupted,
        })
        .collect()
}

/// Removes a plot an earlier run left at `path`, when this run has nothing to draw (no HP request
/// completed: standalone-lp alone, or stopped before the first): it would not be this run's.
fn remove_stale(path: &std::path::Path) -> std::result::Result<(), crate::error::Error> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(|| path.display().to_string()),
        _ => Ok(()),
    }
}

/// The target's latency: `target_p99_ratio` x standalone-hp's P99, in ms (none without it).
fn target_ms(r: &PriorityResult) -> Option<f64> {
    r.modes
        .iter()
        .find(|m| m.mode == crate::options::Mode::StandaloneHp)
        .and_then(|m| m.hp_latency_ns)
        .map(|s| ms(s.p99) * r.target_p99_ratio)
}

/// A plot's title: `what`, then the run's HP and LP load and the device.
fn title(r: &PriorityResult, what: &str) -> String {
    let p = &r.params;
    format!(
        "{what}: {}/s {}, HP {} x {} ms, LP T = {} ms ({})",
        p.hp_rate,
        p.arrival.name(),
        p.hp_cmds,
        p.hp_t_ms,
        p.t_ms,
        plot::device_label(&r.env.device, r.env.host_figures)
    )
}

/// HP request latency per mode: P99 (with the p50-p99 spread as an error bar), max, and the
/// target (1.30 x standalone-hp P99) as a reference line; each mode's LP throughput against
/// standalone is in its axis label. None where no mode has an HP latency (standalone-lp alone,
/// or a run stopped before its first HP request).
pub fn plot(r: &PriorityResult, path: &std::path::Path) -> std::result::Result<(), crate::error::Error> {
    if !has_plot(r) {
        return remove_stale(path);
    }
    let names: Vec<String> = r
        .modes
        .iter()
        .map(|m| match m.lp_throughput_vs_standalone {
            Some(x) if m.mode.has_hp() => format!("{} (LP {x:.2}x)", m.mode.name()),
            _ => m.mode.name().to_string(),
        })
        .collect();
    let hp: Vec<(f64, crate::stats::Summary)> = (0u32..)
        .zip(&r.modes)
        .filter_map(|(i, m)| m.hp_latency_ns.map(|s| (f64::from(i), s)))
        .collect();
    let series = [
        Series {
            label: "HP request P99 (bar down to the open circle: p50)".into(),
            points: hp.iter().map(|(x, s)| (*x, ms(s.p99))).collect(),
            spread: hp.iter().map(|(x, s)| (*x, ms(s.p50), ms(s.p99))).collect(),
            connect: false,
        },
        Series {
            label: "HP request max (beside the bar)".into(),
            points: hp.iter().map(|(x, s)| (*x + 0.12, ms(s.max))).collect(),
            spread: Vec::new(),
            connect: false,
        },
    ];
    let mut refs = Vec::new();
    if let Some(y) = target_ms(r) {
        let last = f64::from(u32::try_from(r.modes.len()).unwrap_or(1));
        refs.push(RefLine {
            label: format!("target: {:.2} x standalone-hp P99", r.target_p99_ratio),
            points: vec![(-0.5, y), (last - 0.5, y)],
        });
    }
    let title = title(r, "HP request latency per mode");
    plot::draw(
        path,
        &plot::Figure {
            title: &title,
            x: Axis {
                title: "mode (LP throughput relative to standalone-lp)".into(),
                scale: Scale::Integer,
            },
            y: Axis {
                title: "HP request latency, arrival to completion (ms)".into(),
                scale: Scale::Log,
            },
            series: &series,
            refs: &refs,
            x_names: &names,
        },
    )
}

/// Fig. 9 as the seeds draw it: the HP request latency's distribution per mode (the fraction of
/// requests at or below each latency), beside [`plot()`]'s bars; the target (1.30 x standalone-hp
/// P99) as a vertical line. Like [`plot()`], nothing where no mode has an HP latency.
pub fn plot_cdf(r: &PriorityResult, path: &std::path::Path) -> std::result::Result<(), crate::error::Error> {
    if !has_plot(r) {
        return remove_stale(path);
    }
    let series: Vec<Series> = r
        .modes
        .iter()
        .filter(|m| !m.hp_latency_cdf.is_empty())
        .map(|m| Series {
            label: m.mode.name().to_string(),
            points: m.hp_latency_cdf.iter().map(|p| (ms(p.ns), p.q)).collect(),
            spread: Vec::new(),
            connect: true,
        })
        .collect();
    let mut refs = Vec::new();
    if let Some(x) = target_ms(r) {
        refs.push(RefLine {
            label: format!("target: {:.2} x standalone-hp P99", r.target_p99_ratio),
            points: vec![(x, 0.0), (x, 1.0)],
        });
    }
    let title = title(r, "HP latency CDF per mode");
    plot::draw(
        path,
        &plot::Figure {
            title: &title,
            x: Axis {
                title: "HP request latency, arrival to completion (ms)".into(),
                scale: Scale::Log,
            },
            y: Axis {
                title: "fraction of HP requests at or below".into(),
                scale: Scale::Linear,
            },
            series: &series,
            refs: &refs,
            x_names: &[],
        },
    )
}
