//! `preempt-lat sweep t`, `sweep state` and `sweep threshold`: many runs, one CSV, one JSON, one
//! SVG each.
use crate::device::Device;
use crate::exit::{Failure, Outcome, Verdict};
use crate::measure::{Params, RunResult, control::stop_requested};
use crate::options::{HOST_HAS_NO_LP_STATE, Level, LpState, SweepStateOptions, SweepTOptions, SweepThresholdOptions};
use crate::output::Export;
use crate::output::files::{prepare, write_all};
use crate::plot::{self, Axis, RefLine, Scale, Series};
use plotters::prelude::SeriesLabelPosition;
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;

/// The P99 suspend and HP start latency (us) of each level's runs against `x` of the run (runs
/// without an `x` are left out), as plot series; empty series are dropped.
fn p99_series(runs: &[RunResult], levels: &[Level], x: impl Fn(&RunResult) -> Option<f64>) -> Vec<Series> {
    let mut series = Vec::new();
    for &level in levels {
        for metric in ["suspend", "HP start"] {
            let points: Vec<(f64, f64, f64)> = runs
                .iter()
                .filter(|r| r.params.level == level)
                .filter_map(|r| {
                    let s = if metric == "suspend" {
                        &r.latency_ns.suspend
                    } else {
                        &r.latency_ns.hp_start
                    };
                    let s = s.as_ref()?;
                    Some((x(r)?, s.p50 as f64 / 1000.0, s.p99 as f64 / 1000.0))
                })
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    label: format!("Lv{} {metric} P99", level.number()),
                    spread: points.clone(),
                    points: points.iter().map(|&(x, _, p99)| (x, p99)).collect(),
                    connect: true,
                });
            }
        }
    }
    series
}

/// A sweep's latency plot: P99 lines with their p50-p99 bands against `x_title` (log), on a
/// log latency axis, with the reference lines.
/// The device the runs record (for plot titles) and whether its figures are host figures.
fn device_of(runs: &[RunResult]) -> (String, bool) {
    runs.first()
        .map(|r| (r.env.device.clone(), r.env.host_figures))
        .unwrap_or_default()
}

fn latency_plot(path: &Path, title: &str, x_title: String, series: &[Series], refs: &[RefLine]) -> Result<(), String> {
    plot::draw(
        path,
        &plot::Figure {
            title,
            x: Axis {
                title: x_title,
                scale: Scale::Log,
            },
            y: Axis {
                title: "latency (µs): P99, band p50-p99".into(),
                scale: Scale::Log,
            },
            series,
            refs,
            x_names: &[],
            legend: SeriesLabelPosition::UpperLeft,
        },
    )
}

/// Draws a sweep's plot at `path` unless it has nothing to draw (a sweep stopped by Ctrl-C before
/// its first point; a plot left there by an earlier sweep is removed, as it would not be this
/// one's). Returns the files written beside the CSV and JSON, for the summary line.
fn plot_if_any(
    path: &Path,
    series: &[Series],
    draw: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<&'static str, String> {
    if series.iter().all(|s| s.points.is_empty()) {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(format!("{}: {e}", path.display())),
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
    prepare(&a.out_dir)?;
    let mut runs: Vec<RunResult> = Vec::new();
    'outer: for &level in &a.levels.list {
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
    let (series, refs) = sweep_t_series(&runs, &a.levels.list, a.common.lv1.threshold);
    let title = format!(
        "P99 preemption latency vs T ({}{})",
        plot::device_label(&device, host_figures),
        lp_state.map_or(String::new(), |s| format!(", {s} LP kernel"))
    );
    let files = plot_if_any(&a.out_dir.join("sweep-t.svg"), &series, |path| {
        latency_plot(path, &title, "T, LP command time (ms)".into(), &series, &refs)
    })?;
    let ok = runs.iter().all(|r| r.correctness.ok);
    crate::output::line(format_args!(
        "sweep t: {} runs -> {}/sweep-t.{files}; correctness {}",
        runs.len(),
        a.out_dir.display(),
        if ok { "OK" } else { "FAILED" }
    ))?;
    Ok(Verdict::from_ok(ok))
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
        return Err(Failure::Usage(
            HOST_HAS_NO_LP_STATE.replace("{what}", "sweep state") + "; the host device was selected",
        ));
    }
    prepare(&a.out_dir)?;
    let mut runs: Vec<RunResult> = Vec::new();
    'outer: for &level in &a.levels.list {
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
    let series = p99_series(&runs, &a.levels.list, state_kib);
    let (device, host_figures) = device_of(&runs);
    let refs = if a.levels.list.contains(&Level::Lv3) && !series.is_empty() {
        let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
        let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        vec![RefLine {
            label: "100 µs: Lv3 target".into(),
            points: vec![(lo / 1.3, 100.0), (hi * 1.3, 100.0)],
        }]
    } else {
        Vec::new()
    };
    let title = format!(
        "P99 preemption latency vs LP wave state ({}, T = {} ms)",
        plot::device_label(&device, host_figures),
        a.t_ms
    );
    let files = plot_if_any(&a.out_dir.join("sweep-state.svg"), &series, |path| {
        latency_plot(path, &title, state_axis(&runs, &a.states), &series, &refs)
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
            if r.correctness.ok { "" } else { "; correctness FAILED" }
        ))?;
    }
    let ok = runs.iter().all(|r| r.correctness.ok);
    crate::output::line(format_args!(
        "sweep state: {} runs -> {}/sweep-state.{files}; correctness {}",
        runs.len(),
        a.out_dir.display(),
        if ok { "OK" } else { "FAILED" }
    ))?;
    Ok(Verdict::from_ok(ok))
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

/// The threshold sweep's points: JSON the array, CSV one row per point, text one line per point.
impl Export for [OverheadPoint] {
    type Whole = Self;
    type Row<'a> = &'a OverheadPoint;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<&OverheadPoint> {
        self.iter().collect()
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        for p in self {
            writeln!(
                w,
                "{} T = {} ms, threshold {}, batch {}: Lv1 overhead {:+.1} % (direct {:.4} s, launcher {:.4} s, {} commands)",
                p.device, p.t_ms, p.threshold, p.batch, p.overhead_percent, p.direct_s, p.launcher_s, p.commands
            )?;
        }
        Ok(())
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
                // A measurement is --commands x T: Ctrl-C waits for one, not for a point's three.
                if stop_requested() {
                    break 'outer;
                }
                runs.push(dev.lv1_overhead(t_ms, lp_state, th, a.common.lv1.batch, commands)?);
            }
            let median = |f: fn(&(f64, f64, f64)) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                v[1]
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
    let files = plot_if_any(&a.out_dir.join("sweep-threshold.svg"), &series, |path| {
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
                legend: SeriesLabelPosition::UpperRight,
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

/// The lines of `sweep t`'s plot: P99 per level and metric with its p50-p99 band (in µs), and
/// the reference lines that explain them: threshold x T (where Lv1's suspend should sit) and
/// the 100 µs target of Lv3.
#[allow(clippy::cast_precision_loss)] // latencies in ns, far below 2^52
fn sweep_t_series(runs: &[RunResult], levels: &[Level], threshold: u32) -> (Vec<Series>, Vec<RefLine>) {
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut series = Vec::new();
    for &level in levels {
        for metric in ["suspend", "HP start"] {
            let mut points = Vec::new();
            let mut spread = Vec::new();
            for r in runs.iter().filter(|r| r.params.level == level) {
                let s = if metric == "suspend" {
                    &r.latency_ns.suspend
                } else {
                    &r.latency_ns.hp_start
                };
                if let Some(s) = s {
                    points.push((r.params.t_ms, us(s.p99)));
                    spread.push((r.params.t_ms, us(s.p50), us(s.p99)));
                }
            }
            if !points.is_empty() {
                series.push(Series {
                    label: format!("Lv{} {metric} P99", level.number()),
                    points,
                    spread,
                    connect: true,
                });
            }
        }
    }
    let ts: Vec<f64> = runs.iter().map(|r| r.params.t_ms).collect();
    let (lo, hi) = ts.iter().fold((f64::MAX, f64::MIN), |(a, b), &t| (a.min(t), b.max(t)));
    let mut refs = Vec::new();
    if lo <= hi && levels.contains(&Level::Lv1) {
        refs.push(RefLine {
            label: format!("threshold x T ({threshold} x T): Lv1's expected suspend"),
            points: [lo / 1.3, hi * 1.3]
                .iter()
                .map(|&t| (t, f64::from(threshold) * t * 1000.0))
                .collect(),
        });
    }
    if lo <= hi && levels.contains(&Level::Lv3) {
        refs.push(RefLine {
            label: "100 µs: Lv3 target".into(),
            points: vec![(lo / 1.3, 100.0), (hi * 1.3, 100.0)],
        });
    }
    (series, refs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::fake_gpu_run as run;

    #[test]
    fn state_series_put_each_level_and_metric_against_the_wave_state() {
        let runs = [
            run(Level::Lv1, LpState::Light, 64, 4000),
            run(Level::Lv1, LpState::Heavy, 576, 4000),
            run(Level::Lv3, LpState::Light, 64, 40),
            run(Level::Lv3, LpState::Heavy, 576, 90),
        ];
        let s = p99_series(&runs, &[Level::Lv1, Level::Lv3], state_kib);
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "Lv1 suspend P99",
                "Lv1 HP start P99",
                "Lv3 suspend P99",
                "Lv3 HP start P99"
            ]
        );
        // x = KiB per CU, y = the run's P99 in us (within the histogram's 3 significant digits).
        let lv3 = &s[2].points;
        assert_eq!(lv3.iter().map(|p| p.0).collect::<Vec<_>>(), [64.0, 576.0]);
        assert!(
            (lv3[0].1 - 40.0).abs() < 0.1 && (lv3[1].1 - 90.0).abs() < 0.1,
            "{lv3:?}"
        );
        assert_eq!(
            state_axis(&runs, &[LpState::Light, LpState::Heavy]),
            "wave state per CU, KiB (light 64, heavy 576)"
        );
        // A level without runs gives no series; a run without an LP kernel (host) no point.
        assert!(p99_series(&runs[..2], &[Level::Lv3], state_kib).is_empty());
        let mut host = run(Level::Lv3, LpState::Light, 0, 10);
        host.lp_kernel = None;
        assert!(p99_series(&[host], &[Level::Lv3], state_kib).is_empty());
    }

    #[test]
    fn the_state_sweep_refuses_the_host_device() {
        let o = SweepStateOptions {
            levels: crate::options::Levels { list: vec![Level::Lv3] },
            states: LpState::ALL.to_vec(),
            t_ms: 0.5,
            per_point: crate::options::PerPoint { samples: 1, warmup: 0 },
            out_dir: std::env::temp_dir().join("preempt-lat-never-written"),
            common: crate::options::Common {
                lv1: crate::options::Lv1Options { threshold: 8, batch: 4 },
                device: crate::options::DeviceSpec::Auto,
                seed: 1,
                mechanism: lv3::MechanismChoice::Auto,
                grace: None,
                workers: None,
                quiet: true,
            },
        };
        match state(&o, Device::Host(1)) {
            Err(Failure::Usage(m)) => assert!(m.starts_with("sweep state needs an AMD GPU"), "{m}"),
            other => panic!("the host device must be refused: {other:?}"),
        }
        assert!(!o.out_dir.exists(), "nothing is written when refused");
    }
}
