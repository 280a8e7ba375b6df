//! `preempt-lat priority`: HP requests (fixed rate or Poisson) against a saturating stream of LP
//! commands, once per mode: standalone-hp, standalone-lp, native (no scheduling), lv1, lv2 (host
//! device only) and lv3 (highest priority first through that level). Per mode: HP request latency (arrival to
//! completion) percentiles, its P99 against standalone-hp (XSched's headline; the MI308X plan's
//! target is below [`TARGET_P99_RATIO`]), LP throughput against standalone-lp, preemptions, and
//! the LP correctness check. On the host device and on a GPU, through the application API: one
//! session per mode (opened from [`preempt_api::SharedDevice`]), one mode frame for every device ([`modes`]), `hpf`'s
//! rule as the policy.
pub mod lp_side;
pub mod modes;
pub mod processes;
pub mod report;
pub mod requests;

use crate::device::Device;
use crate::env::Environment;
use crate::error::{Context, Error, failed};
use crate::exit::{Outcome, Verdict};
use crate::measure::Correctness;
use crate::options::{Arrival, Mode, PriorityOptions};
use crate::stats::{CdfPoint, Summary};
use crate::trace::Trace;
use preempt_api::SharedDevice;
use preempt_api::{Options, Session};
use serde::Serialize;
use std::io::Write;

/// The MI308X plan's target for HP P99 under priority scheduling, relative to HP alone.
pub const TARGET_P99_RATIO: f64 = 1.30;

/// Everything that defines a priority run (written into every output).
#[derive(Debug, Clone, Serialize)]
pub struct PriorityParams {
    pub modes: Vec<Mode>,
    pub hp_rate: f64,
    pub arrival: Arrival,
    pub hp_t_ms: f64,
    pub hp_cmds: u32,
    pub t_ms: f64,
    pub duration_s: f64,
    pub threshold: u32,
    pub batch: u32,
    pub seed: u64,
    /// LP worker processes (host device).
    pub workers: u32,
    /// HP work per second of wall time (rate x commands x HP T).
    pub hp_load: f64,
}

/// What one mode measured, before it is summarized.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The policy's name (`none` or `highest-priority-first`, [`preempt_api::Policy::HighestFirst`]).
    pub policy: &'static str,
    /// How the LP queue was suspended (`-` where it never is).
    pub mechanism: String,
    /// HP requests completed.
    pub hp_requests: u64,
    /// Their latency, arrival to completion, in ns (`None` without requests).
    pub hp_latency_ns: Option<Summary>,
    /// The same latencies as a distribution (empty without requests): Fig. 9's CDF.
    pub hp_latency_cdf: Vec<CdfPoint>,
    /// LP commands completed within the measured window.
    pub lp_completed: u64,
    pub window_ns: u64,
    pub preemptions: u64,
    /// `None` where the mode runs no LP commands.
    pub correctness: Option<Correctness>,
    pub interrupted: bool,
}

/// One mode's row.
#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    pub mode: Mode,
    /// The scheduling policy (`none` or `highest-priority-first`).
    pub policy: &'static str,
    /// How the LP queue is suspended (`-` where it never is).
    pub mechanism: String,
    pub hp_requests: u64,
    /// HP request latency, arrival to completion, in ns.
    pub hp_latency_ns: Option<Summary>,
    /// Its distribution (the fraction of requests at or below each latency; empty without
    /// requests).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hp_latency_cdf: Vec<CdfPoint>,
    /// HP P99 / standalone-hp P99.
    pub hp_p99_vs_standalone: Option<f64>,
    pub lp_completed: u64,
    pub lp_throughput_per_s: Option<f64>,
    /// LP throughput / standalone-lp's.
    pub lp_throughput_vs_standalone: Option<f64>,
    pub preemptions: u64,
    pub correctness: Option<Correctness>,
    pub window_s: f64,
    pub interrupted: bool,
}

/// The result of `preempt-lat priority`.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityResult {
    pub params: PriorityParams,
    pub env: Environment,
    pub target_p99_ratio: f64,
    pub modes: Vec<ModeResult>,
    pub wall_time_s: f64,
    /// Where priority.{csv,json,svg} went (the text says so; not part of the result's outputs).
    #[serde(skip)]
    pub out_dir: std::path::PathBuf,
}

impl PriorityResult {
    /// No mode's check failed (one a stop could not complete is not a failure).
    pub fn correct(&self) -> bool {
        !self
            .modes
            .iter()
            .any(|m| m.correctness.as_ref().is_some_and(Correctness::failed))
    }
}

/// Summarizes the measured modes, comparing each with the standalone ones.
#[allow(clippy::cast_precision_loss)] // ns and counts of one run: far below 2^52
pub fn summarize(measured: Vec<(Mode, Measured)>) -> Vec<ModeResult> {
    let mut rows: Vec<ModeResult> = measured
        .into_iter()
        .map(|(mode, m)| {
            let window_s = m.window_ns as f64 / 1e9;
            ModeResult {
                mode,
                policy: m.policy,
                mechanism: m.mechanism,
                hp_requests: m.hp_requests,
                hp_latency_ns: m.hp_latency_ns,
                hp_latency_cdf: m.hp_latency_cdf,
                hp_p99_vs_standalone: None,
                lp_completed: m.lp_completed,
                lp_throughput_per_s: (mode.has_lp() && window_s > 0.0).then(|| m.lp_completed as f64 / window_s),
                lp_throughput_vs_standalone: None,
                preemptions: m.preemptions,
                correctness: m.correctness,
                window_s,
                interrupted: m.interrupted,
            }
        })
        .collect();
    let hp_ref = rows
        .iter()
        .find(|r| r.mode == Mode::StandaloneHp)
        .and_then(|r| r.hp_latency_ns);
    let lp_ref = rows
        .iter()
        .find(|r| r.mode == Mode::StandaloneLp)
        .and_then(|r| r.lp_throughput_per_s);
    for r in &mut rows {
        r.hp_p99_vs_standalone = crate::stats::p99_ratio(r.hp_latency_ns, hp_ref);
        r.lp_throughput_vs_standalone = match (r.lp_throughput_per_s, lp_ref) {
            (Some(t), Some(base)) if base > 0.0 => Some(t / base),
            _ => None,
        };
    }
    rows
}

/// The session of one mode: Lv3 armed only for the lv3 mode (dbg-trap would put the process in
/// debug mode for the others; Lv2 needs nothing armed), Lv1 suspends that only stop launching
/// (XSched's scheduler), the launcher's completions and the device records kept for the checks.
fn session(src: &SharedDevice, p: &PriorityParams, mode: Mode) -> Result<Session, Error> {
    let lv1 = lv1::Config::new(p.threshold as usize, p.batch as usize).map_err(|e| failed!("{e}"))?;
    let hp_cmds = crate::num::round_u64(p.hp_rate * p.duration_s + 1.0) * u64::from(p.hp_cmds);
    let opts = Options {
        lv1,
        no_lv3: mode != Mode::Lv3,
        lv1_no_wait: true,
        keep_records: true,
        host_workers: p.workers as usize,
        gpu_slots: usize::try_from(modes::lp_budget(p).max(hp_cmds)).unwrap_or(usize::MAX),
        ..Options::default()
    };
    src.session(opts).with_context(|| format!("{} session", mode.name()))
}

/// Runs every mode of `o` on `dev`, writes priority.{csv,json,svg} and priority-cdf.svg (and the trace), and prints
/// the report on stdout in `o.format`. On a GPU (written for hardware, not yet run on one) the
/// device is opened once and each mode runs in a session of its own on it.
pub fn run(o: &PriorityOptions, dev: Device) -> Outcome {
    if o.policy != crate::options::PolicyKind::Hpf {
        return crate::schedule::run(o, dev);
    }
    if let Some(n) = o.processes {
        return processes::run(o, dev, n);
    }
    // lv2 asked for where --device auto chose a GPU: refused before anything opens (a named GPU
    // was refused by the options).
    if o.modes.contains(&Mode::Lv2) {
        dev.check_lv2("--modes lv2")?;
    }
    let modes = o.modes_on(dev.spec());
    let target = dev.open_shared(o.common.mechanism, o.common.grace())?;
    crate::output::files::prepare(&o.out_dir)?;
    // Each mode's share of the trace's events, so that every mode is in it; none kept unasked.
    let mut trace = match o.trace {
        Some(_) => Trace::with_limit(crate::trace::MAX_EVENTS / modes.len().max(1)),
        None => Trace::off(),
    };
    let result = measure(o, &modes, dev.priority_workers(o.common.workers), &target, &mut trace)?;
    crate::output::files::write_all(&o.out_dir, "priority", &result)?;
    report::plot(&result, &o.out_dir.join("priority.svg"))?;
    report::plot_cdf(&result, &o.out_dir.join("priority-cdf.svg"))?;
    if let Some(path) = &o.trace {
        let what = if target.spec().is_host() {
            "preempt-lat priority on the host device: host figures, not GPU figures".to_string()
        } else {
            format!("preempt-lat priority on {}", target.label())
        };
        crate::trace::write_file(&trace, &what, path)?;
    }
    let mut out = std::io::stdout().lock();
    crate::output::export(o.format, &result, &mut out)
        .and_then(|()| out.flush())
        .context("writing the result")?;
    if !result.correct() {
        eprintln!("preempt-lat: correctness check FAILED: some LP command did not complete exactly once");
    }
    Ok(Verdict::from_ok(result.correct()))
}

/// Runs `modes` of `o` on a device already open (`target`), each mode in a session of its own,
/// with `workers` LP workers on the host device; writes nothing (`run` and `soak` report it).
pub fn measure(
    o: &PriorityOptions,
    modes: &[Mode],
    workers: u32,
    target: &SharedDevice,
    trace: &mut Trace,
) -> Result<PriorityResult, Error> {
    let t_start = std::time::Instant::now();
    let p = PriorityParams {
        modes: modes.to_vec(),
        hp_rate: o.hp_rate,
        arrival: o.arrival,
        hp_t_ms: o.hp_t_ms,
        hp_cmds: o.hp_cmds,
        t_ms: o.t_ms,
        duration_s: o.duration_s,
        threshold: o.common.lv1.threshold,
        batch: o.common.lv1.batch,
        seed: o.common.seed,
        // Host device: one LP worker per core unless --workers says otherwise, so HP and LP
        // share the CPUs (`priority --help`).
        workers,
        hp_load: o.hp_load(),
    };
    // Same arrivals in every mode, so the modes differ only in what runs and how it is scheduled.
    let arrivals = crate::arrivals::Arrivals::new(
        o.arrival,
        o.sigma,
        o.hp_rate,
        crate::num::round_u64(o.duration_s * 1e9),
        o.common.seed,
    );
    // Counted once (they are generated as they come: an hour at 100000/s is 360 M of them).
    let requests = arrivals.clone().count();
    let mut measured = Vec::new();
    for (pid, &mode) in (1u32..).zip(modes) {
        if crate::measure::control::stop_requested() {
            break;
        }
        if !o.common.quiet {
            eprintln!(
                "priority: {} for {} s ({} HP requests; {})",
                mode.name(),
                o.duration_s,
                if mode.has_hp() { requests } else { 0 },
                target.label()
            );
        }
        let session = session(target, &p, mode)?;
        let m = modes::run_mode(&session, &p, mode, &arrivals, trace, pid, &target.label());
        // Closing resumes anything an error left suspended and tears the mechanism down.
        let closed = session.close();
        let m = m?;
        closed.with_context(|| format!("{}: closing the session", mode.name()))?;
        measured.push((mode, m));
    }
    Ok(PriorityResult {
        params: p,
        env: crate::env::of_sessions(target),
        target_p99_ratio: TARGET_P99_RATIO,
        modes: summarize(measured),
        wall_time_s: t_start.elapsed().as_secs_f64(),
        out_dir: o.out_dir.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(lat: &[u64], lp: u64) -> Measured {
        let mut r = crate::stats::Recorder::default();
        for &ns in lat {
            r.record(ns);
        }
        Measured {
            policy: "none",
            mechanism: "-".into(),
            hp_requests: lat.len() as u64,
            hp_latency_ns: r.summary(),
            hp_latency_cdf: r.cdf(),
            lp_completed: lp,
            window_ns: 1_000_000_000,
            preemptions: 0,
            correctness: None,
            interrupted: false,
        }
    }

    #[test]
    fn modes_are_compared_with_the_standalone_ones() {
        let rows = summarize(vec![
            (Mode::StandaloneHp, m(&[1000; 10], 0)),
            (Mode::StandaloneLp, m(&[], 400)),
            (
                Mode::Lv3,
                Measured {
                    policy: "highest-priority-first",
                    mechanism: "sigstop".into(),
                    ..m(&[1200; 10], 300)
                },
            ),
        ]);
        assert_eq!(rows[2].hp_p99_vs_standalone.map(|r| (r * 100.0).round()), Some(120.0));
        assert_eq!(rows[2].lp_throughput_vs_standalone, Some(0.75));
        assert_eq!(rows[0].lp_throughput_per_s, None, "standalone-hp runs no LP");
        assert!(rows[1].hp_latency_ns.is_none() && rows[1].hp_p99_vs_standalone.is_none());
        assert!(rows[1].hp_latency_cdf.is_empty(), "no requests, no distribution");
        let cdf = &rows[2].hp_latency_cdf;
        assert_eq!(
            (cdf.first().map(|p| p.q), cdf.last().map(|p| p.q)),
            (Some(0.0), Some(1.0))
        );
        assert!(cdf.windows(2).all(|w| w[0].q < w[1].q && w[0].ns <= w[1].ns), "{cdf:?}");
        assert_eq!(
            (rows[2].policy, rows[2].mechanism.as_str()),
            ("highest-priority-first", "sigstop")
        );
    }
}
