//! One mode of `preempt-lat priority`, the same on every device, through the application API
//! ([`preempt_api::Session`]): an LP stream fed a saturating stream of delay commands through its
//! Lv1 launcher, the session's HP stream taking the HP requests (each `hp_cmds` delay commands of
//! `hp_t_ms`), and `hpf`'s highest-priority-first rule deciding when the LP stream is suspended:
//! at Lv3 through the session's mechanism (SIGSTOP on the host device; the chosen KFD mechanism
//! on the LP stream's discovered queue on a GPU), at Lv2 by letting each running LP command finish
//! and starting no new one (host device only: `lv2-hold`; no per-queue Lv2 on gfx942 under HWS,
//! docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws), at Lv1 by stopping its launcher. Native
//! and the standalone modes: no policy. Host figures are host figures; the GPU path is written for
//! hardware and has not run on one.
//!
//! What is checked after every mode: every LP command completed exactly once (the API's device
//! records: worker records on the host; slot stamps on a GPU, at Lv3 also against the stream's
//! suspension windows) and every HP command completed once.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use preempt_api::Priority;
use preempt_api::hpf::{Action, Policy};
use preempt_api::now_ns;
use preempt_api::{HpStream, Level, LpStream, Session};
use serde_json::json;

use super::lp_side::{self, LpCheck};
use super::requests::{self, Event};
use super::{Measured, PriorityParams};
use crate::arrivals::Arrivals;
use crate::error::{Context, Error, failed};
use crate::measure::abandon;
use crate::options::Mode;
use crate::stats::Recorder;
use crate::trace::tracks::{CALLS as SCHEDULER, HP as HP_REQUESTS, HP_WORKER, LP_QUEUE, RUN, SUSPENDED};
use crate::trace::{Trace, Track};

/// An HP request that has not completed after this long fails the mode (the GPU is stuck).
const HP_TIMEOUT: Duration = Duration::from_secs(10);
/// The LP stream's key and priority in the policy, and the HP requests' priority.
const LP: u64 = 0;
const LP_PRIORITY: Priority = 0;
const HP_PRIORITY: Priority = 1;

/// Carries the policy's decisions out on the LP stream, and times them for the trace.
struct Scheduler<'a> {
    /// `None`: no scheduling (native, standalone).
    policy: Option<Policy<u64>>,
    lp: Option<&'a LpStream>,
    suspended_at: Option<u64>,
    preemptions: u64,
    track: u32,
}

impl Scheduler<'_> {
    fn on(&mut self, e: Event, trace: &mut Trace) -> Result<(), Error> {
        let (Some(policy), Some(lp)) = (&mut self.policy, self.lp) else {
            return Ok(());
        };
        let actions = match e {
            Event::HpArrival => policy.enter(HP_PRIORITY),
            Event::HpCompletion => policy.leave(HP_PRIORITY).map_err(|e| failed!("policy: {e}"))?,
        };
        let t = |tid| Track { pid: self.track, tid };
        for a in actions {
            let t0 = now_ns();
            let done = match a {
                Action::Suspend(_) => lp.suspend().map(|info| format!("suspend ({})", info.mechanism)),
                Action::Resume(_) => lp.resume().map(|()| "resume".to_string()),
            };
            let name = match done {
                Ok(n) => n,
                Err(e) => {
                    policy.failed(a);
                    return Err(e).context("LP stream");
                }
            };
            let t1 = now_ns();
            match a {
                Action::Suspend(_) => {
                    let args = json!({ "preemption": self.preemptions });
                    trace.span(t(SCHEDULER), "scheduler", name, t0, t1, args);
                    self.suspended_at = Some(t1);
                    self.preemptions += 1;
                }
                Action::Resume(_) => {
                    trace.span(t(SCHEDULER), "scheduler", name, t0, t1, json!({}));
                    if let Some(s) = self.suspended_at.take() {
                        trace.span(t(SUSPENDED), "suspended", "LP suspended", s, t0, json!({}));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the policy holds the LP stream suspended.
    fn holds_lp(&self) -> bool {
        self.policy.as_ref().is_some_and(|p| p.is_suspended(LP))
    }

    /// Leaves the LP stream running whatever the policy last decided (end of a mode, an error;
    /// closing the session would resume it too).
    fn release(&mut self) {
        if let (Some(lp), true) = (self.lp, self.holds_lp()) {
            let _ = lp.resume(); // the mode's error, if any, is already on its way
        }
    }
}

/// The level the mode's LP stream is created at: the mode's own (native and standalone never
/// suspend it: Lv1, which arms nothing).
pub fn level(mode: Mode) -> Level {
    mode.level().unwrap_or(Level::Lv1)
}

/// Runs one mode on `session` (opened for this mode: `super::session`): requests
/// arrive at `t0 + arrivals[i]`. Returns what was measured; adds the mode's timeline to `trace`
/// as process `pid`, named with `device`.
pub fn run_mode(
    session: &Session,
    p: &PriorityParams,
    mode: Mode,
    arrivals: &Arrivals,
    trace: &mut Trace,
    pid: u32,
    device: &str,
) -> Result<Measured, Error> {
    let t = |tid| Track { pid, tid };
    trace.name_process(pid, format!("{} ({device})", mode.name()));
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
    let lp = match mode.has_lp() {
        true => Some(session.create_lp_stream(level(mode)).context("LP stream")?),
        false => None,
    };
    let hp = match mode.has_hp() {
        true => Some(session.hp_stream().context("HP stream")?),
        false => None,
    };
    // The LP workers (host device), killed if a stop's close time passes while the mode waits on
    // them: an Lv2 hold lasts up to T (crate::measure::abandon; the registration holds the
    // stream, hence its workers unreaped). A GPU's kernels cannot be stopped: nothing to register.
    let _abandonable = lp.as_ref().filter(|_| session.device().is_host()).map(|lp| {
        let lp = Arc::clone(lp);
        abandon::kill_at_deadline(move || abandon::kill_pids(&lp.host_pids()))
    });
    let lp_ns = crate::num::round_u64(p.t_ms * 1e6);
    let keep_ahead = 2 * p.threshold as usize + 2;
    let stop = AtomicBool::new(false);
    let t_run0 = now_ns();

    let host = session.device().is_host();
    let (measured, lp_check) = std::thread::scope(|s| -> Result<(Measured, Option<LpCheck>), Error> {
        let feeder = lp.as_deref().map(|lp| {
            let stop = &stop;
            let check = LpCheck::new(keep_ahead, host, trace.empty_like(), pid);
            s.spawn(move || lp_side::feed(lp, lp_ns, keep_ahead, stop, check))
        });
        let mut sched = Scheduler {
            policy: mode.level().is_some().then(Policy::new),
            lp: lp.as_deref(),
            suspended_at: None,
            preemptions: 0,
            track: pid,
        };
        if let Some(p) = &mut sched.policy {
            let none = p.register(LP, LP_PRIORITY);
            debug_assert!(none.is_empty(), "no block is active yet");
        }
        let result = measure_window(p, mode, arrivals, lp.as_deref(), hp.as_deref(), &mut sched, trace, pid);
        sched.release();
        stop.store(true, Ordering::Relaxed);
        let lp_check = match feeder {
            Some(f) => Some(f.join().map_err(|_| Error::msg("the LP feeder thread panicked"))?),
            None => None,
        };
        let (window_ns, lp_completed, hp_latency, interrupted) = result?;
        let measured = Measured {
            policy: if sched.policy.is_some() {
                preempt_api::Policy::HighestFirst.name()
            } else {
                "none"
            },
            mechanism: match mode {
                Mode::Lv3 => mechanism_label(session),
                // The one device with Lv2 (a GPU never gets here: the session refuses the level).
                Mode::Lv2 => preempt_api::Mechanism::Lv2Hold.name().into(),
                Mode::Lv1 => preempt_api::Lv1Suspend::Stop.name().into(),
                _ => "-".into(),
            },
            hp_requests: hp_latency.summary().map_or(0, |s| s.count),
            hp_latency_ns: hp_latency.summary(),
            hp_latency_cdf: hp_latency.cdf(),
            lp_completed,
            window_ns,
            preemptions: sched.preemptions,
            correctness: None,
            interrupted,
        };
        Ok((measured, lp_check))
    })?;
    let mut measured = measured;
    if let Some(hp) = &hp {
        let c = hp.check();
        if !c.ok() {
            return Err(failed!(
                "HP commands did not complete exactly once: {}",
                c.problems.join("; ")
            ));
        }
    }
    if let (Some(lp), Some(check)) = (&lp, lp_check) {
        // Every command must complete: what the launcher still holds, each of T. After a stop,
        // the stream is closed within the API's bounded close instead.
        let limit = Duration::from_secs(60) + Duration::from_nanos(lp_ns.saturating_mul(keep_ahead as u64 * 4));
        let (correctness, lp_trace) = check.finish(session, lp, mode, limit, p.workers)?;
        measured.correctness = Some(correctness);
        trace.absorb(lp_trace);
    }
    trace.landmark(t(RUN), "run", "run", t_run0, now_ns(), json!({ "mode": mode.name() }));
    Ok(measured)
}

/// LP slots for a mode on a GPU: twice the commands its duration can hold, plus the launcher's
/// depth, capped at 4 Mi commands.
pub fn lp_budget(p: &PriorityParams) -> u64 {
    let per_s = 1000.0 / p.t_ms.max(1e-3);
    (crate::num::round_u64(2.0 * p.duration_s * per_s) + 8 * u64::from(p.threshold) + 1024).min(1 << 22)
}

/// The mechanism's name as the rows print it (`sigstop` on the host device; `-` if none).
fn mechanism_label(session: &Session) -> String {
    session.mechanism().name.clone().unwrap_or_else(|| "-".into())
}

/// The measured window: the first LP command launched, then every HP request driven through
/// the scheduler (or, without HP, the window waited out). Returns (window ns, LP commands
/// completed in it, HP latencies, interrupted).
#[allow(clippy::too_many_arguments)] // one mode's pieces, each used once
fn measure_window(
    p: &PriorityParams,
    mode: Mode,
    arrivals: &Arrivals,
    lp: Option<&LpStream>,
    hp: Option<&HpStream>,
    sched: &mut Scheduler<'_>,
    trace: &mut Trace,
    pid: u32,
) -> Result<(u64, u64, Recorder, bool), Error> {
    let t = |tid| Track { pid, tid };
    let completed = || lp.and_then(LpStream::stats).map_or(0, |s| s.completed);
    if let Some(lp) = lp {
        let t0 = Instant::now();
        while lp.stats().is_none_or(|s| s.launched == 0) {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(Error::msg("the launcher launched no LP command within 30 s"));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    let t0 = now_ns();
    let lp_c0 = completed();
    let duration_ns = crate::num::round_u64(p.duration_s * 1e9);
    let (latencies, interrupted) = match hp {
        Some(hp) => {
            let hp_ns = crate::num::round_u64(p.hp_t_ms * 1e6);
            let r = requests::drive(
                arrivals,
                t0,
                t(HP_REQUESTS),
                trace,
                &mut |e, trace| sched.on(e, trace),
                &mut |i, trace| {
                    for _ in 0..p.hp_cmds {
                        hp.submit_delay(hp_ns).context("HP submit")?;
                    }
                    let recs = hp.wait(Some(HP_TIMEOUT)).context("HP request")?;
                    let mut end = None;
                    for (r, w) in recs.iter().filter_map(|r| r.worker.map(|w| (r, w))) {
                        if trace.is_on() {
                            let args = json!({ "request": i });
                            trace.span(t(HP_WORKER), "hp", format!("HP {}", r.id), w.start_ns, w.end_ns, args);
                        }
                        end = end.max(Some(w.end_ns));
                    }
                    // The worker's own end where it says (host), else when the wait returned.
                    Ok(end.unwrap_or_else(now_ns))
                },
            )?;
            if !r.1 && sched.holds_lp() {
                return Err(Error::msg(
                    "the policy holds the LP queue suspended with no HP request pending",
                ));
            }
            let (latencies, interrupted) = r;
            (latencies, interrupted || requests::idle_until(t0 + duration_ns))
        }
        None => (Recorder::default(), requests::idle_until(t0 + duration_ns)),
    };
    let t_end = now_ns();
    let lp_done = completed() - lp_c0;
    let args = json!({ "mode": mode.name() });
    trace.landmark(t(RUN), "run", "measured window", t0, t_end, args);
    Ok((t_end - t0, lp_done, latencies, interrupted))
}
