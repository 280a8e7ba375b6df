//! `preempt-lat sweep t` and `sweep threshold`: many runs, one CSV, one JSON, one SVG each.
use crate::device::Device;
use crate::exit::{Failure, Outcome, Verdict};
use crate::measure::{Params, RunResult, control::stop_requested, host};
use crate::options::Level;
use crate::options::{SweepTOptions, SweepThresholdOptions};
use crate::plot::{self, Axis, RefLine, Scale, Series};
use plotters::prelude::SeriesLabelPosition;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Writes one output file through `write` (an exporter of [`crate::output`]).
pub fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    let e = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(e)?);
    write(&mut f).and_then(|()| f.flush()).map_err(e)
}

pub fn prepare(dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--out-dir {}: cannot create: {e}", dir.display()))?;
    let probe = dir.join(".preempt-lat-write-test");
    std::fs::write(&probe, b"").map_err(|e| format!("--out-dir {}: cannot write: {e}", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Latency against T for each level.
pub fn t(a: &SweepTOptions, dev: Device) -> Outcome {
    let workers = if let Device::Host(w) = dev { w } else { 0 };
    prepare(&a.out_dir)?;
    let mut runs: Vec<RunResult> = Vec::new();
    'outer: for &level in &a.levels {
        for &t_ms in &a.t_ms {
            if stop_requested() {
                break 'outer;
            }
            let p = Params::new(level, t_ms, a.samples, a.warmup, &a.common, workers);
            eprintln!("sweep t: Lv{} T={t_ms} ms ({} samples)", p.level, p.samples);
            runs.push(dev.measure(&p, a.common.mechanism, a.common.quiet)?);
        }
    }
    write_file(&a.out_dir.join("sweep-t.csv"), |w| {
        crate::output::csv(runs.iter().flat_map(crate::output::run_rows), w)
    })?;
    write_file(&a.out_dir.join("sweep-t.json"), |w| crate::output::json(&runs, w))?;
    let device = runs.first().map(|r| r.env.device.clone()).unwrap_or_default();
    let (series, refs) = sweep_t_series(&runs, &a.levels, a.common.threshold);
    let title = format!("P99 preemption latency vs T ({})", plot::device_label(&device));
    plot::draw(
        &a.out_dir.join("sweep-t.svg"),
        &plot::Figure {
            title: &title,
            x: Axis {
                title: "T, LP command time (ms)".into(),
                scale: Scale::Log,
            },
            y: Axis {
                title: "latency (µs): P99, band p50-p99".into(),
                scale: Scale::Log,
            },
            series: &series,
            refs: &refs,
            x_names: &[],
            legend: SeriesLabelPosition::UpperLeft,
        },
    )?;
    let ok = runs.iter().all(|r| r.correctness.ok);
    println!(
        "sweep t: {} runs -> {}/sweep-t.{{csv,json,svg}}; correctness {}",
        runs.len(),
        a.out_dir.display(),
        if ok { "OK" } else { "FAILED" }
    );
    Ok(Verdict::from_ok(ok))
}

#[derive(Debug, Serialize)]
struct OverheadPoint {
    device: String,
    t_ms: f64,
    threshold: u32,
    batch: u32,
    commands: u32,
    workers: u32,
    direct_s: f64,
    launcher_s: f64,
    overhead_percent: f64,
    git_revision: &'static str,
}

/// Lv1 overhead against the threshold, for each T.
pub fn threshold(a: &SweepThresholdOptions, dev: Device) -> Outcome {
    let (workers, device) = match dev {
        Device::Host(w) => (w, "host".to_string()),
        Device::Hip(i) => (0, format!("hip:{i}")),
    };
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
            let commands = a.commands.max(crate::num::ceil_u32(50.0 / t_ms));
            let mut runs = Vec::new();
            for _ in 0..3 {
                runs.push(match dev {
                    Device::Host(_) => host::lv1_overhead(t_ms, th, a.common.batch, commands, workers)?,
                    Device::Hip(i) => crate::gpu::lv1_overhead(i, t_ms, th, a.common.batch, commands)?,
                });
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
                threshold: th,
                batch: a.common.batch.min(th),
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
    write_file(&a.out_dir.join("sweep-threshold.csv"), |w| crate::output::csv(&pts, w))?;
    write_file(&a.out_dir.join("sweep-threshold.json"), |w| {
        crate::output::json(&pts, w)
    })?;
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
    let title = format!("Lv1 overhead vs threshold ({})", plot::device_label(&device));
    let (lo, hi) = pts
        .iter()
        .fold((u32::MAX, 0), |(a, b), p| (a.min(p.threshold), b.max(p.threshold)));
    let zero = RefLine {
        label: "no overhead (0 %)".into(),
        points: vec![(f64::from(lo) - 0.5, 0.0), (f64::from(hi) + 0.5, 0.0)],
    };
    plot::draw(
        &a.out_dir.join("sweep-threshold.svg"),
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
    )?;
    println!(
        "sweep threshold: {} points -> {}/sweep-threshold.{{csv,json,svg}}",
        pts.len(),
        a.out_dir.display()
    );
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
