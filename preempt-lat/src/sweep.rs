//! `preempt-lat sweep t`, `sweep state` and `sweep threshold`: many runs, one CSV, one JSON, one
//! SVG each.
use crate::device::Device;
use crate::error::{Context, Error, UsageError};
use crate::exit::{Outcome, Verdict};
use crate::measure::{Correctness, Params, RunResult, control::stop_requested};
use crate::options::{HOST_HAS_NO_LP_STATE, Level, LpState, SweepStateOptions, SweepTOptions, SweepThresholdOptions};
use crate::output::Export;
use crate::output::files::{prepare, write_all};
use crate::plot::{self, Axis, Panel, RefLine, Scale, Series};
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;

/// The sweeps' latency panels: a row per metric (suspend, HP start), a column per level, each
/// panel one line (the P99 in µs against `x` of the run, with its p50-p99 band) and the reference
/// lines `refs` gives for its level. Small multiples instead of one chart, because the bands of
/// different levels and metrics cross and hide each other when drawn together. Runs without an
/// `x` are left out; a level without points gets no panels.
#[allow(clippy::cast_precision_loss)] // latencies in ns, far below 2^52
fn latency_panels(
    runs: &[RunResult],
    levels: &[Level],
    x: impl Fn(&RunResult) -> Option<f64>,
    refs: impl Fn(Level) -> Vec<RefLine>,
) -> (Vec<Panel>, usize) {
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut panels = Vec::new();
    let mut cols = 0;
    for metric in ["suspend", "HP start"] {
        let mut row = 0;
        for &level in levels {
            let spread: Vec<(f64, f64, f64)> = runs
                .iter()
                .filter(|r| r.params.level == level)
                .filter_map(|r| {
                    let s = if metric == "suspend" {
                        &r.latency_ns.suspend
                    } else {
                        &r.latency_ns.hp_start
                    };
                    let s = s.as_ref()?;
                    Some((x(r)?, us(s.p50), us(s.p99)))
                })
                .collect();
            if spread.is_empty() {
                continue;
            }
            row += 1;
            panels.push(Panel {
                title: format!("Lv{}: {metric}", level.number()),
                series: vec![Series {
                    label: format!("Lv{} P99", level.number()),
                    points: spread.iter().map(|&(x, _, p99)| (x, p99)).collect(),
                    spread,
                    connect: true,
                }],
                refs: refs(level),
            });
        }
        cols = cols.max(row);
    }
    (panels, cols)
}

/// The device the runs record (for plot titles) and whether its figures are host figures.
fn device_of(runs: &[RunResult]) -> (String, bool) {
    runs.first()
        .map(|r| (r.env.device.clone(), r.env.host_figures))
        .unwrap_or_default()
}

/// A sweep's latency plot: the panels of [`latency_panels`] on shared log axes.
fn latency_plot(path: &Path, title: &str, x_title: String, (panels, cols): (Vec<Panel>, usize)) -> Result<(), Error> {
    plot::draw_grid(
        path,
        &plot::Grid {
            title,
            x: Axis {
                title: x_title,
                scale: Scale::Log,
            },
            y: Axis {
                title: "latency (µs): P99, band p50-p99".into(),
                scale: Scale::Log,
            },
            panels,
            cols,
            x_names: &[],
        },
    )
}

/// The x values of `xs` padded like a log axis (the reference lines reach the plot's edges).
fn x_span(xs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    (lo <= hi).then_some((lo / 1.3, hi * 1.3))
}

/// A horizontal reference line at `y` over the padded x values `xs`.
fn flat_ref(label: &str, y: f64, xs: impl Iterator<Item = f64>) -> Option<RefLine> {
    x_span(xs).map(|(lo, hi)| RefLine {
        label: label.into(),
        points: vec![(lo, y), (hi, y)],
    })
}

/// A reference line at `k` x T (in µs, T in ms) over the padded T values `ts`.
fn times_t(k: f64, label: String, ts: impl Iterator<Item = f64>) -> Vec<RefLine> {
    x_span(ts)
        .map(|(lo, hi)| RefLine {
            label,
            points: [lo, hi].iter().map(|&t| (t, k * t * 1000.0)).collect(),
        })
        .into_iter()
        .collect()
}

/// The 100 µs target of Lv3 (seeds' test 4.1.1), drawn in Lv3's panels.
const LV3_TARGET: &str = "100 µs: Lv3 target";

/// Draws a sweep's plot at `path` unless it has nothing to draw (a sweep stopped by Ctrl-C before
/// its first point; a plot left there by an earlier sweep is removed, as it would not be this
/// one's). Returns the files written beside the CSV and JSON, for the summary line.
fn plot_if_any(
    path: &Path,
    has_data: bool,
    draw: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<&'static str, Error> {
    if !has_data {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e).with_context(|| path.display().to_string()),
            _ => Ok("{csv,json}"),
        };
    }
    draw(path)?;
    Ok("{csv,json,svg}")
}

/// Latency against T for each level.
pub fn t(a: &SweepTOptions, dev: Device) -> Outcome {
    let workers = dev.workers();
    let lp_state = dev.lp_state(a.lp.lp_state)?;
    let levels = a.levels.on(dev.spec());
    levels.iter().try_for_each(|&l| dev.check_level(l))?;
    prepare(&a.out_dir)?;
    let mut runs: Vec<RunResult> = Vec::new();
    'outer: for &level in &levels {
        for &t_ms in &a.t_ms {
            if stop_requested() {
                break 'outer;
            }
            let p = Params::new(
                level,
                t_ms,
                lp_state,
                a.per_point.samples,
                a.per_point.warmup,
                &a.common,
                workers,
            );
            eprintln!(
                "sweep t: Lv{} T={t_ms} ms, LP state {} ({} samples)",
                p.level.number(),
                lp_state.map_or("n.a.", LpState::name),
                p.samples
            );
            runs.push(dev.measure(&p, a.common.mechanism, a.common.quiet)?);
        }
    }
    write_all(&a.out_dir, "sweep-t", &runs[..])?;
    let (device, host_figures) = device_of(&runs);
    let panels = sweep_t_panels(&runs, &levels, a.common.lv1.threshold);
    let title = format!(
        "P99 preemption latency vs T ({}{})",
        plot::device_label(&device, host_figures),
        lp_state.map_or(String::new(), |s| format!(", {s} LP kernel"))
    );
    let files = plot_if_any(&a.out_dir.join("sweep-t.svg"), !panels.0.is_empty(), |path| {
        latency_plot(path, &title, "T, LP command time (ms)".into(), panels)
    })?;
    let checks = runs.iter().map(|r| &r.correctness);
    crate::output::line(format_args!(
        "sweep t: {} runs -> {}/sweep-t.{files}; correctness {}",
        runs.len(),
        a.out_dir.display(),
        Correctness::word_for(checks.clone())
    ))?;
    Ok(Verdict::from_ok(!checks.clone().any(Correctness::failed)))
}

/// Wave state per CU in KiB, the x of the state sweep.
fn state_kib(r: &RunResult) -> Option<f64> {
    r.lp_kernel.as_ref().map(|k| k.state_bytes_per_cu as f64 / 1024.0)
}

/// The x-axis label of the state sweep: which LP state sits where, e.g.
/// `wave state per CU, KiB (light 64, heavy 576)`.
fn state_axis(runs: &[RunResult], states: &[LpState]) -> String {
    let at: Vec<String> = states
        .iter()
        .filter_map(|&s| {
            let r = runs.iter().find(|r| r.params.lp_state == Some(s))?;
            Some(format!("{s} {:.0}", state_kib(r)?))
        })
        .collect();
    format!("wave state per CU, KiB ({})", at.join(", "))
}

/// Latency against the LP kernel's wave state (light, heavy) at one T, for each level: how Lv3's
/// CWSR save grows with the state it moves. GPU only: the host device has no wave state.
pub fn state(a: &SweepStateOptions, dev: Device) -> Outcome {
    if dev.is_host() {
        return Err(UsageError::new(
            HOST_HAS_NO_LP_STATE.replace("{what}", "sweep state") + "; the host device was selected",
        )
        .into());
    }
    let levels = a.levels.on(dev.spec());
    levels.iter().try_for_each(|&l| dev.check_level(l))?;
    prepare(&a.out_dir)?;
    let mut runs: Vec<RunResult> = Vec::new();
    'outer: for &level in &levels {
        for &state in &a.states {
            if stop_requested() {
                break 'outer;
            }
            let p = Params::new(
                level,
                a.t_ms,
                Some(state),
                a.per_point.samples,
                a.per_point.warmup,
                &a.common,
                0,
            );
            eprintln!(
                "sweep state: Lv{} {state} T={} ms ({} samples)",
                p.level.number(),
                a.t_ms,
                p.samples
            );
            runs.push(dev.measure(&p, a.common.mechanism, a.common.quiet)?);
        }
    }
    write_all(&a.out_dir, "sweep-state", &runs[..])?;
    let (device, host_figures) = device_of(&runs);
    let xs: Vec<f64> = runs.iter().filter_map(state_kib).collect();
    let panels = latency_panels(&runs, &levels, state_kib, |level| {
        (level == Level::Lv3)
            .then(|| flat_ref(LV3_TARGET, 100.0, xs.iter().copied()))
            .flatten()
            .into_iter()
            .collect()
    });
    let title = format!(
        "P99 preemption latency vs LP wave state ({}, T = {} ms)",
        plot::device_label(&device, host_figures),
        a.t_ms
    );
    let files = plot_if_any(&a.out_dir.join("sweep-state.svg"), !panels.0.is_empty(), |path| {
        latency_plot(path, &title, state_axis(&runs, &a.states), panels)
    })?;
    for r in &runs {
        let p99 =
            |s: &Option<crate::stats::Summary>| s.as_ref().map_or("-".into(), |s| format!("{:.1}", s.p99 as f64 / 1e3));
        crate::output::line(format_args!(
            "  Lv{} {} ({:.0} KiB/CU): p99 suspend {} us, HP start {} us{}",
            r.params.level.number(),
            r.params.lp_state.map_or("n.a.", LpState::name),
            state_kib(r).unwrap_or(0.0),
            p99(&r.latency_ns.suspend),
            p99(&r.latency_ns.hp_start),
            match r.correctness.ok {
                Some(true) => "",
                Some(false) => "; correctness FAILED",
                None => "; correctness not checked (interrupted)",
            }
        ))?;
    }
    let checks = runs.iter().map(|r| &r.correctness);
    crate::output::line(format_args!(
        "sweep state: {} runs -> {}/sweep-state.{files}; correctness {}",
        runs.len(),
        a.out_dir.display(),
        Correctness::word_for(checks.clone())
    ))?;
    Ok(Verdict::from_ok(!checks.clone().any(Correctness::failed)))
}

#[derive(Debug, Serialize)]
struct OverheadPoint {
    device: String,
    t_ms: f64,
    /// The GPU's LP kernel; null on the host device.
    lp_state: Option<&'static str>,
    threshold: u32,
    batch: u32,
    commands: u32,
    workers: u32,
    direct_s: f64,
    launcher_s: f64,
    overhead_percent: f64,
    git_revision: &'static str,
}

/// A point of the threshold sweep: JSON the object, CSV one row, text one line (a sweep's points
/// are exported as a list: the array, a row each, a line each).
impl Export for OverheadPoint {
    type Whole = Self;
    type Row<'a> = &'a OverheadPoint;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<&OverheadPoint> {
        vec![self]
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = self;
        writeln!(
            w,
            "{} T = {} ms, threshold {}, batch {}: Lv1 overhead {:+.1} % (direct {:.4} s, launcher {:.4} s, {} commands)",
            p.device, p.t_ms, p.threshold, p.batch, p.overhead_percent, p.direct_s, p.launcher_s, p.commands
        )
    }
}

/// Lv1 overhead against the threshold, for each T.
pub fn threshold(a: &SweepThresholdOptions, dev: Device) -> Outcome {
    let (workers, device) = (dev.workers(), dev.to_string());
    let lp_state = dev.lp_state(a.lp.lp_state)?;
    prepare(&a.out_dir)?;
    let mut pts = Vec::new();
    let total = (a.t_ms.len() * a.thresholds.len()) as u64;
    let pb = crate::measure::control::progress(total, a.common.quiet, &format!("sweep threshold ({device})"));
    // The device opened once for every point (a GPU's kernel compiled and calibrated once).
    let src = dev.open_shared_lv1(lp_state)?;
    'outer: for &t_ms in &a.t_ms {
        for &th in &a.thresholds {
            if stop_requested() {
                break 'outer;
            }
            // Short T makes short runs: at least ~50 ms of LP work per measurement, and the
            // median of 3 alternating direct/launcher measurements, so scheduler noise does
            // not dominate the few-percent differences being measured.
            // (Never beyond --commands' own bound: they are submitted at once.)
            let raised = crate::num::ceil_u32(50.0 / t_ms).min(crate::options::values::MAX_COMMANDS);
            let commands = a.commands.max(raised);
            let mut runs = Vec::new();
            for _ in 0..3 {
                // A measurement is --commands x T: a stop ends the one under way within the
                // bounded close (crate::measure::settle), and the point is left out.
                if stop_requested() {
                    break 'outer;
                }
                let work = crate::overhead::Work {
                    t_ms,
                    commands,
                    threshold: th,
                    batch: a.common.lv1.batch,
                };
                match crate::overhead::lv1_point(&src, work, workers) {
                    Ok(r) => runs.push(r),
                    // The stop cut it short (the error is that cut).
                    Err(_) if stop_requested() => break 'outer,
                    Err(e) => return Err(e.into()),
                }
            }
            let median = |f: fn(&(f64, f64, f64)) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                crate::stats::median(&v).unwrap_or(f64::NAN)
            };
            let (direct_s, launcher_s) = (median(|r| r.0), median(|r| r.1));
            let overhead_percent = (launcher_s / direct_s - 1.0) * 100.0;
            pts.push(OverheadPoint {
                device: device.clone(),
                t_ms,
                lp_state: lp_state.map(LpState::name),
                threshold: th,
                batch: a.common.lv1.batch.min(th),
                commands,
                workers,
                direct_s,
                launcher_s,
                overhead_percent,
                git_revision: crate::env::git_revision(),
            });
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    write_all(&a.out_dir, "sweep-threshold", &pts[..])?;
    let series: Vec<Series> = a
        .t_ms
        .iter()
        .map(|&t| Series {
            label: format!("T = {} ms", plot::ticks::fmt_num(t)),
            points: pts
                .iter()
                .filter(|p| p.t_ms == t)
                .map(|p| (f64::from(p.threshold), p.overhead_percent))
                .collect(),
            spread: Vec::new(),
            connect: true,
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let title = format!(
        "Lv1 overhead vs threshold ({})",
        plot::device_label(&device, dev.is_host())
    );
    let (lo, hi) = pts
        .iter()
        .fold((u32::MAX, 0), |(a, b), p| (a.min(p.threshold), b.max(p.threshold)));
    let zero = RefLine {
        label: "no overhead (0 %)".into(),
        points: vec![(f64::from(lo) - 0.5, 0.0), (f64::from(hi) + 0.5, 0.0)],
    };
    let files = plot_if_any(&a.out_dir.join("sweep-threshold.svg"), !series.is_empty(), |path| {
        plot::draw(
            path,
            &plot::Figure {
                title: &title,
                x: Axis {
                    title: "threshold (LP commands in flight)".into(),
                    scale: Scale::Integer,
                },
                y: Axis {
                    title: "LP throughput overhead of the launcher (%), median of 3".into(),
                    scale: Scale::Linear,
                },
                series: &series,
                refs: &[zero],
                x_names: &[],
            },
        )
    })?;
    crate::output::line(format_args!(
        "sweep threshold: {} points -> {}/sweep-threshold.{files}",
        pts.len(),
        a.out_dir.display()
    ))?;
    Ok(Verdict::Pass)
}

/// The panels of `sweep t`'s plot (see [`latency_panels`]) with the reference lines that explain
/// them: threshold x T in Lv1's panels (where Lv1's suspend should sit), 1 x T in Lv2's (the rest
/// of the running command is at most T) and the 100 µs target in Lv3's.
fn sweep_t_panels(runs: &[RunResult], levels: &[Level], threshold: u32) -> (Vec<Panel>, usize) {
    let ts = || runs.iter().map(|r| r.params.t_ms);
    latency_panels(
        runs,
        levels,
        |r| Some(r.params.t_ms),
        |level| match level {
            Level::Lv1 => times_t(
                f64::from(threshold),
                format!("threshold x T ({threshold} x T): Lv1's expected suspend"),
                ts(),
            ),
            Level::Lv2 => times_t(1.0, "1 x T: Lv2's expected suspend".into(), ts()),
            Level::Lv3 => flat_ref(LV3_TARGET, 100.0, ts()).into_iter().collect(),
            Level::Auto => Vec::new(),
        },
    )
}

#[cfg(test)]
mod tests;
