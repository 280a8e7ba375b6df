//! `preempt-lat sweep t` and `sweep threshold`: many runs, one CSV, one JSON, one SVG each.
use crate::device::Device;
use crate::exit::{Failure, Outcome, Verdict};
use crate::measure::{Params, RunResult, control::stop_requested, host};
use crate::options::{SweepTOptions, SweepThresholdOptions};
use crate::plot::{Series, lines};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Writes one output file through `write` (an exporter of [`crate::output`]).
fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    let e = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(e)?);
    write(&mut f).and_then(|()| f.flush()).map_err(e)
}

fn prepare(dir: &Path) -> Result<(), Failure> {
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
    let mut series = Vec::new();
    for &level in &a.levels {
        for (metric, pick) in [("suspend", 0), ("HP start", 1)] {
            let pts: Vec<(f64, f64)> = runs
                .iter()
                .filter(|r| r.params.level == level)
                .filter_map(|r| {
                    let s = if pick == 0 {
                        &r.latency_ns.suspend
                    } else {
                        &r.latency_ns.hp_start
                    };
                    s.map(|s| (r.params.t_ms, s.p99 as f64 / 1000.0))
                })
                .collect();
            if !pts.is_empty() {
                series.push(Series {
                    label: format!("Lv{} {metric} P99", level.number()),
                    points: pts,
                });
            }
        }
    }
    let title = format!(
        "P99 preemption latency vs T ({device} device{})",
        if device == "host" {
            ": host figures, not GPU"
        } else {
            ""
        }
    );
    lines(
        &a.out_dir.join("sweep-t.svg"),
        &title,
        "T (ms)",
        "P99 latency (us)",
        true,
        &series,
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
            label: format!("T = {t} ms"),
            points: pts
                .iter()
                .filter(|p| p.t_ms == t)
                .map(|p| (f64::from(p.threshold), p.overhead_percent))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let title = if device == "host" {
        "Lv1 overhead vs threshold (host device: host figures, not GPU)".to_string()
    } else {
        format!("Lv1 overhead vs threshold ({device})")
    };
    lines(
        &a.out_dir.join("sweep-threshold.svg"),
        &title,
        "threshold",
        "overhead (%)",
        false,
        &series,
    )?;
    println!(
        "sweep threshold: {} points -> {}/sweep-threshold.{{csv,json,svg}}",
        pts.len(),
        a.out_dir.display()
    );
    Ok(Verdict::Pass)
}
