//! A run's result for people.
use crate::measure::RunResult;
use crate::stats::Summary;
use std::io::{Result, Write};

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The text report of one run.
pub fn run(r: &RunResult, w: &mut dyn Write) -> Result<()> {
    let p = &r.params;
    let e = &r.env;
    writeln!(
        w,
        "preempt-lat: Lv{} on device {} ({}), mechanism {}, grace period {}",
        p.level.number(),
        e.device,
        e.device_detail,
        e.mechanism,
        e.grace_period
    )?;
    writeln!(
        w,
        "T = {} ms, threshold {}, batch {}, {} samples (+{} warm-up dropped), seed {}, {} LP worker(s); kernel {}, KFD {}, rev {}",
        p.t_ms,
        p.threshold,
        p.batch,
        r.samples.len(),
        p.warmup,
        p.seed,
        p.workers,
        e.kernel,
        e.kfd_version.as_deref().unwrap_or("none"),
        e.git_revision
    )?;
    match (&p.lp_state, &r.lp_kernel) {
        (Some(state), Some(k)) => writeln!(
            w,
            "LP state {state}: {} on {}x{}, {} waves/CU x {} VGPRs ({} AGPRs) + {} KiB LDS/block = {} KiB of wave state per CU",
            k.name,
            k.grid_blocks,
            k.block_threads,
            k.waves_per_cu,
            k.vgprs_per_lane,
            k.agprs_per_lane,
            k.lds_bytes_per_block / 1024,
            k.state_bytes_per_cu / 1024
        )?,
        (Some(state), None) => writeln!(w, "LP state {state}")?,
        (None, _) => writeln!(
            w,
            "LP state n.a. (host device: CPU worker processes have no GPU wave state)"
        )?,
    }
    match &r.achieved_t {
        Some(a) => writeln!(
            w,
            "achieved T {:.4} ms ({:+.1}%): median of {} LP commands ({} left out: suspended part-way)",
            a.ms,
            a.error * 100.0,
            a.commands,
            a.excluded
        )?,
        None if p.lp_state.is_none() => {}
        None => writeln!(w, "achieved T unknown: no LP command ran untouched by a suspension")?,
    }
    if r.interrupted {
        writeln!(w, "INTERRUPTED: {} of {} samples measured", r.samples.len(), p.samples)?;
    }
    writeln!(
        w,
        "{:<14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "latency (us)", "p50", "p90", "p95", "p99", "p99.9", "max", "count"
    )?;
    let row = |name: &str, s: &Option<Summary>, w: &mut dyn Write| -> Result<()> {
        match s {
            Some(s) => writeln!(
                w,
                "{:<14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
                name,
                us(s.p50),
                us(s.p90),
                us(s.p95),
                us(s.p99),
                us(s.p99_9),
                us(s.max),
                s.count
            ),
            None => writeln!(w, "{name:<14} (no samples)"),
        }
    };
    row("suspend", &r.latency_ns.suspend, w)?;
    if r.latency_ns.preempt_call.is_some() {
        row(" preempt call", &r.latency_ns.preempt_call, w)?;
    }
    row("HP start", &r.latency_ns.hp_start, w)?;
    row("resume", &r.latency_ns.resume, w)?;
    if let Some(s) = &r.latency_ns.suspend {
        writeln!(w, "suspend P99 / T = {:.3}", s.p99 as f64 / (p.t_ms * 1e6))?;
    }
    let c = &r.correctness;
    match c.ok {
        Some(true) => writeln!(
            w,
            "correctness: OK, all {} LP commands completed exactly once with the right result",
            c.submitted
        )?,
        Some(false) => writeln!(
            w,
            "correctness: FAILED: {} submitted, {} exactly once; missing {:?}, duplicated {:?}, failed {:?}, wrong result {:?}",
            c.submitted, c.completed_once, c.missing, c.duplicated, c.failed, c.wrong_result
        )?,
        None => writeln!(
            w,
            "correctness: not checked (interrupted: {} LP commands abandoned, of {} launched)",
            c.abandoned, c.submitted
        )?,
    }
    if e.host_figures {
        writeln!(w, "note: host device figures (CPU worker processes), not GPU figures")?;
    }
    Ok(())
}
