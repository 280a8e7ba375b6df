//! One mode of `preempt-lat priority` on the host device: an LP queue of worker processes fed a
//! saturating stream of delay commands through the Lv1 launcher, a one-worker HP queue taking
//! the HP requests, and a policy deciding when the LP queue is suspended (Lv3: SIGSTOP/SIGCONT;
//! Lv1: stop launching / resume launching). Host figures, never GPU figures.
use super::policy::{Action, Event, HighestPriorityFirst, NoScheduling, Policy};
use super::{Measured, PriorityParams};
use crate::measure::Correctness;
use crate::options::Mode;
use crate::trace::{Trace, Track};
use host_device::{HostCommand, HostDevice, HostQueue, HostSuspension};
use lv1::clock::{now_ns, sleep_until};
use lv1::{Config, HwQueue, SuspendMode, XQueue};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Trace tracks of one mode (the process is the mode).
const RUN: u32 = 0;
const LP_QUEUE: u32 = 1;
const SCHEDULER: u32 = 2;
const SUSPENDED: u32 = 3;
const HP_REQUESTS: u32 = 4;
const HP_WORKER: u32 = 5;
/// LP worker w is track `LP_WORKER0 + w`.
const LP_WORKER0: u32 = 10;

fn herr(what: &str) -> impl FnOnce(host_device::HostError) -> String + '_ {
    move |e| format!("host device: {what}: {e}")
}

/// The policy of a mode: highest priority first for lv1/lv3, none otherwise.
fn policy_of(mode: Mode) -> Box<dyn Policy> {
    match mode {
        Mode::Lv1 | Mode::Lv3 => Box::new(HighestPriorityFirst::default()),
        _ => Box::new(NoScheduling::default()),
    }
}

/// Carries out the policy's decisions on the LP queue through the mode's level.
struct Scheduler<'a> {
    mode: Mode,
    policy: Box<dyn Policy>,
    lp: Option<(&'a HostQueue, &'a XQueue<HostQueue>)>,
    guard: Option<HostSuspension<'a>>,
    suspended_at: Option<u64>,
    preemptions: u64,
    track: u32,
}

impl Scheduler<'_> {
    fn on(&mut self, e: Event, trace: &mut Trace) -> Result<(), String> {
        let action = self.policy.on_event(e).map_err(|e| format!("policy: {e}"))?;
        let Some((q, xq)) = self.lp else {
            return Ok(());
        };
        let t = |tid| Track { pid: self.track, tid };
        match action {
            Action::Nothing => {}
            Action::SuspendLp => {
                let t0 = now_ns();
                let name = if self.mode == Mode::Lv3 {
                    self.guard = Some(q.suspend().map_err(herr("suspend (SIGSTOP)"))?);
                    "suspend (SIGSTOP)"
                } else {
                    xq.suspend(SuspendMode::Stop)
                        .map_err(herr("Lv1 suspend (stop launching)"))?;
                    "suspend (stop launching)"
                };
                let t1 = now_ns();
                trace.span(
                    t(SCHEDULER),
                    "scheduler",
                    name,
                    t0,
                    t1,
                    json!({ "preemption": self.preemptions }),
                );
                self.suspended_at = Some(t1);
                self.preemptions += 1;
            }
            Action::ResumeLp => {
                let t0 = now_ns();
                let name = if self.mode == Mode::Lv3 {
                    if let Some(g) = self.guard.take() {
                        g.resume().map_err(herr("resume (SIGCONT)"))?;
                    }
                    "resume (SIGCONT)"
                } else {
                    xq.resume();
                    "resume (launching)"
                };
                let t1 = now_ns();
                trace.span(t(SCHEDULER), "scheduler", name, t0, t1, json!({}));
                if let Some(s) = self.suspended_at.take() {
                    trace.span(t(SUSPENDED), "suspended", "LP suspended", s, t0, json!({}));
                }
            }
        }
        Ok(())
    }

    /// Leaves the LP queue running whatever the policy last decided (end of a mode, or an error).
    fn release(&mut self) {
        if let Some(g) = self.guard.take() {
            let _ = g.resume();
        }
        if let Some((_, xq)) = self.lp {
            xq.resume();
        }
    }
}

/// Runs one mode: requests arrive at `t0 + arrivals[i]`. Returns what was measured; adds the
/// mode's timeline to `trace` as process `pid`.
pub fn run_mode(
    p: &PriorityParams,
    mode: Mode,
    arrivals: &[u64],
    trace: &mut Trace,
    pid: u32,
) -> Result<Measured, String> {
    let exe = crate::measure::host::worker_exe()?;
    let dev = HostDevice::spawn(&exe, if mode.has_lp() { p.workers as usize } else { 1 })
        .map_err(herr("starting workers"))?;
    let t = |tid| Track { pid, tid };
    trace.name_process(pid, format!("{} (host device)", mode.name()));
    for (tid, name) in [
        (RUN, "run"),
        (LP_QUEUE, "LP commands: launch -> completion seen"),
        (SCHEDULER, "scheduler: suspend / resume calls"),
        (SUSPENDED, "LP suspended"),
        (HP_REQUESTS, "HP requests: arrival -> completion"),
        (HP_WORKER, "HP worker"),
    ] {
        trace.name_thread(t(tid), name);
    }
    let cfg = Config::new(p.threshold as usize, p.batch as usize).map_err(|e| e.to_string())?;
    let xq = XQueue::new(std::sync::Arc::clone(dev.lp()), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let completions = xq.take_completions().ok_or("launcher completions already taken")?;
    let lp_ns = crate::num::round_u64(p.t_ms * 1e6);
    let hp_ns = crate::num::round_u64(p.hp_t_ms * 1e6);
    let keep_ahead = 2 * p.threshold as usize + 2;
    let stop = AtomicBool::new(false);
    let t_run0 = now_ns();

    let measured = std::thread::scope(|s| -> Result<Measured, String> {
        let feeder = mode.has_lp().then(|| {
            s.spawn(|| {
                let nap = Duration::from_nanos((lp_ns / 4).clamp(20_000, 1_000_000));
                while !stop.load(Ordering::Relaxed) {
                    if xq.stats().pending < keep_ahead {
                        xq.submit(HostCommand::delay_ns(lp_ns));
                    } else {
                        std::thread::sleep(nap);
                    }
                }
            })
        });
        let mut sched = Scheduler {
            mode,
            policy: policy_of(mode),
            lp: mode.has_lp().then(|| (dev.lp().as_ref(), &xq)),
            guard: None,
            suspended_at: None,
            preemptions: 0,
            track: pid,
        };
        let result = (|| -> Result<(u64, u64, Vec<u64>, bool), String> {
            if mode.has_lp() {
                dev.lp()
                    .wait_started(1, Duration::from_secs(30))
                    .map_err(herr("waiting for the first LP command"))?;
            }
            let t0 = now_ns();
            let lp_c0 = xq.stats().completed;
            let duration_ns = crate::num::round_u64(p.duration_s * 1e9);
            let mut latencies = Vec::new();
            let interrupted;
            if mode.has_hp() {
                let hp = dev.hp();
                let hp_cmds = u64::from(p.hp_cmds);
                (latencies, interrupted) = super::requests::drive(
                    arrivals,
                    t0,
                    t(HP_REQUESTS),
                    trace,
                    &mut |e, trace| sched.on(e, trace),
                    &mut |i, trace| {
                        for id in (0..hp_cmds).map(|j| i as u64 * hp_cmds + j) {
                            hp.launch(id, HostCommand::delay_ns(hp_ns)).map_err(herr("HP launch"))?;
                        }
                        hp.synchronize().map_err(herr("HP synchronize"))?;
                        let recs = hp.take_records();
                        for r in &recs {
                            trace.span(
                                t(HP_WORKER),
                                "hp",
                                format!("HP {}", r.id),
                                r.start_ns,
                                r.end_ns,
                                json!({ "request": i }),
                            );
                        }
                        Ok(recs.iter().map(|r| r.end_ns).max().unwrap_or_else(now_ns))
                    },
                )?;
                if !interrupted && sched.policy.lp_suspended() {
                    return Err("the policy holds the LP queue suspended with no HP request pending".into());
                }
                sleep_until(t0 + duration_ns);
            } else {
                interrupted = super::requests::idle_until(t0 + duration_ns);
            }
            let t_end = now_ns();
            let lp_done = xq.stats().completed - lp_c0;
            trace.span(
                t(RUN),
                "run",
                "measured window",
                t0,
                t_end,
                json!({ "mode": mode.name() }),
            );
            Ok((t_end - t0, lp_done, latencies, interrupted))
        })();
        sched.release();
        stop.store(true, Ordering::Relaxed);
        if let Some(f) = feeder {
            f.join().map_err(|_| "the LP feeder thread panicked".to_string())?;
        }
        let (window_ns, lp_completed, hp_latency_ns, interrupted) = result?;
        Ok(Measured {
            policy: sched.policy.name(),
            mechanism: super::host_mechanism(mode),
            hp_latency_ns,
            lp_completed,
            window_ns,
            preemptions: sched.preemptions,
            correctness: None,
            interrupted,
        })
    });
    let mut measured = measured?;
    // Drain: every LP command submitted must complete exactly once.
    let limit = Duration::from_secs(30) + Duration::from_nanos(lp_ns.saturating_mul(keep_ahead as u64 * 4));
    xq.wait_idle_for(limit)
        .map_err(|e| format!("draining the LP queue: {e} after {limit:?}"))?;
    let submitted = xq.stats().submitted;
    drop(xq);
    let mut done = Vec::new();
    for c in completions.try_iter() {
        trace.span(
            t(LP_QUEUE),
            "lp",
            format!("LP {}", c.id),
            c.stamps.launched_ns,
            c.stamps.completed_ns,
            json!({ "submitted_ns": c.stamps.submitted_ns }),
        );
        done.push((c.id, c.outcome.is_ok()));
    }
    let records = dev.lp().take_records();
    for r in &records {
        trace.span(
            t(LP_WORKER0 + u32::try_from(r.worker).unwrap_or(0)),
            "lp",
            format!("LP {}", r.id),
            r.start_ns,
            r.end_ns,
            json!({ "worker": r.worker }),
        );
    }
    if mode.has_lp() {
        for w in 0..p.workers {
            trace.name_thread(t(LP_WORKER0 + w), format!("LP worker {w}"));
        }
        let recs: Vec<(u64, bool)> = records.iter().map(|r| (r.id, r.is_correct())).collect();
        measured.correctness = Some(Correctness::check(submitted, &done, &recs, p.workers as usize));
    }
    trace.span(t(RUN), "run", "run", t_run0, now_ns(), json!({ "mode": mode.name() }));
    Ok(measured)
}
