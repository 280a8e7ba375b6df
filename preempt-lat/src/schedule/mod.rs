//! `preempt-lat priority --policy up|kedf|laxity`: the scheduling experiment of XSched's
//! evaluation over *classes* (queues), each an LP stream of one application-API session with its
//! own arrivals (fixed, Poisson, log-normal; or saturating), driven by a policy of the
//! `policies` crate: utilization partition (`--shares 75:25`: Fig. 9 bottom), K earliest
//! deadlines first (Fig. 15b), least laxity (8.2.1). Per class: request latency percentiles,
//! throughput, device share achieved (and asked, for up), late requests (kedf), the exactly-once
//! check; combined throughput. Host device and GPU through the same session API (the GPU path is
//! written for hardware and has not run on one). `--policy hpf` (the default) is `priority`'s own
//! mode comparison.
mod engine;
mod policy;
mod result;

use crate::device::Device;
use crate::exit::{Outcome, Verdict};
use crate::options::PriorityOptions;
use preempt_api::Options;
pub use result::ScheduleResult;
use std::io::Write;

/// Runs the class experiment of `o` on `dev`: one session, one LP stream per class; writes
/// schedule.{csv,json} into --out-dir and the result on stdout in --format.
pub fn run(o: &PriorityOptions, dev: Device) -> Outcome {
    let specs = o.class_specs();
    let (policy, initial) = policy::Policy::new(o.policy, &specs, o.k, o.round_ms)?;
    let src = dev.session_source(o.common.mechanism, o.common.grace())?;
    crate::output::files::prepare(&o.out_dir)?;
    let t_start = std::time::Instant::now();
    let duration_ns = crate::num::round_u64(o.duration_s * 1e9);
    let workers = dev.priority_workers(o.common.workers);
    let lv1 =
        lv1::Config::new(o.common.lv1.threshold as usize, o.common.lv1.batch as usize).map_err(|e| e.to_string())?;
    // Slots (GPU): every command a class can submit in the run, with room for the backlog.
    let cmds: f64 = specs
        .iter()
        .map(|c| {
            if c.saturates() {
                o.duration_s * 1000.0 / c.t_ms + 64.0
            } else {
                (c.rate * o.duration_s + 1.0) * f64::from(c.cmds)
            }
        })
        .sum();
    let session = src
        .open(Options {
            lv1,
            lv1_no_wait: true,
            keep_records: true,
            host_workers: workers as usize,
            gpu_slots: usize::try_from(crate::num::round_u64(cmds * 1.2)).unwrap_or(usize::MAX),
            ..Options::default()
        })
        .map_err(|e| format!("session: {e}"))?;
    if !o.common.quiet {
        eprintln!(
            "priority: --policy {} over {} classes for {} s ({})",
            o.policy.name(),
            specs.len(),
            o.duration_s,
            src.label()
        );
    }
    let arrivals = |i: usize| {
        let c = &specs[i];
        let seed = o.common.seed.wrapping_add(u64::try_from(i).unwrap_or(0));
        crate::arrivals::times(o.arrival, o.sigma, c.rate, duration_ns, seed)
    };
    let run = engine::run(
        &session,
        &specs,
        policy,
        initial,
        duration_ns,
        o.common.lv1.threshold as usize,
        arrivals,
    );
    let checked = run.and_then(|out| result::check_classes(&out).map(|checks| (out, checks)));
    let closed = session.close();
    let (out, checks) = checked?;
    closed.map_err(|e| format!("closing the session: {e}"))?;
    let r = ScheduleResult::new(o, workers, src.environment(), &session, out, checks, t_start.elapsed());
    crate::output::files::write_all(&o.out_dir, "schedule", &r)?;
    let mut stdout = std::io::stdout().lock();
    crate::output::export(o.format, &r, &mut stdout)
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("writing the result: {e}"))?;
    if !r.correct() {
        eprintln!("preempt-lat: correctness check FAILED: some command did not complete exactly once");
    }
    Ok(Verdict::from_ok(r.correct()))
}
