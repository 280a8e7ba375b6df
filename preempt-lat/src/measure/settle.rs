//! How a measurement's LP stream ends, once the samples are taken. A run that went to its end
//! drains it: every command submitted runs and completes, and all of them are checked. A run a
//! first Ctrl-C stopped (before or during that drain) closes it the way the application API
//! closes a stream (docs/c-api.md#close): the commands not launched yet are dropped (never run,
//! not checked), those in flight get [`CLOSE_WAIT`] to complete, and what still runs then is
//! abandoned (the host device kills its workers; a GPU runs it out, and the launcher is never
//! dropped, since its drop would wait for it). A stop thus costs at most about [`CLOSE_WAIT`]
//! whatever T is, where the drain would cost (2 x threshold + 2) x T; the check is then of the
//! commands launched, and not made when any was abandoned.
//!
//! The waits here wake as soon as the work is done (the launcher's condition variable), and look
//! for a stop every [`SLICE`] meanwhile, so a stop never adds to what is measured.
use super::abandon::{self, CLOSE_WAIT};
use super::control::stop_requested;
use crate::error::{Error, failed};
use lv1::{HwQueue, WaitIdleError, XQueue};
use preempt_api::latency::{Abandon, LatencyDevice, Settled};
use preempt_api::{ErrorKind, LpStream};
use std::time::{Duration, Instant};

/// What a measurement cut short by a stop fails with ([`wait_stream_or_stop`]): its caller leaves it out as the interruption it is.
pub const STOPPED: &str = "stopped by Ctrl-C (SIGTERM, SIGHUP)";

/// How often a wait for a whole measurement looks for a stop.
const SLICE: Duration = Duration::from_millis(50);

/// Ends `xq`, the launcher over `b`'s LP queue: drained within `drain_limit`, or closed as soon
/// as a stop is requested (before or during the drain). `Err` says why the queue did not drain.
pub fn settle<B: LatencyDevice>(xq: XQueue<B::Queue>, b: &B, drain_limit: Duration) -> Result<Settled, Error> {
    match idle_or_stop(&xq, Some(drain_limit)) {
        Ok(true) => {
            let ran = xq.stats().submitted;
            drop(xq);
            Ok(Settled { ran, abandoned: 0 })
        }
        Ok(false) => Ok(close(xq, &|| b.abandon())),
        Err(e) => {
            // Dropping the launcher would wait for the stuck queue forever: report and leave.
            std::mem::forget(xq);
            Err(Error::Drain {
                source: e,
                after: drain_limit,
                hint: b.drain_hint(),
            })
        }
    }
}

/// Waits at most `limit` (`None`: no limit) until `xq` is idle: `Ok(true)`; `Ok(false)` as soon
/// as a stop is requested.
fn idle_or_stop<Q: HwQueue>(xq: &XQueue<Q>, limit: Option<Duration>) -> Result<bool, WaitIdleError> {
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        if stop_requested() {
            return Ok(false);
        }
        let slice = deadline.map_or(SLICE, |d| SLICE.min(d.saturating_duration_since(Instant::now())));
        match xq.wait_idle_for(slice) {
            Ok(()) => return Ok(true),
            Err(WaitIdleError::TimedOut { .. }) if deadline.is_none_or(|d| Instant::now() < d) => {}
            Err(e) => return Err(e),
        }
    }
}

/// The close after a stop (see the module docs); `abandon` stops what still runs after
/// [`CLOSE_WAIT`] if the device can.
fn close<Q: HwQueue>(xq: XQueue<Q>, abandon: &dyn Fn() -> Abandon) -> Settled {
    xq.resume_dropping_pending();
    let mut gave_up = false;
    let mut idle = xq.wait_idle_for(CLOSE_WAIT).is_ok();
    if !idle {
        gave_up = true;
        // Killed workers fail the waits on them at once: the launcher is soon idle.
        idle = abandon() == Abandon::Stopped && xq.wait_idle_for(CLOSE_WAIT).is_ok();
    }
    let settled = of_stats(&xq.stats(), gave_up);
    if idle {
        drop(xq);
    } else {
        std::mem::forget(xq);
    }
    settled
}

/// The launcher's counters after a close that dropped the commands not launched yet; `gave_up`:
/// the close abandoned commands still running. After an abandonment (the close's, or the stop's
/// deadline while the run was blocked: the host workers were killed), every launched command
/// that did not complete is an abandoned one.
fn of_stats(s: &lv1::Stats, gave_up: bool) -> Settled {
    let ran = s.submitted.saturating_sub(s.dropped);
    let abandoned = if gave_up || abandon::happened() {
        ran.saturating_sub(s.completed.saturating_sub(s.errors))
    } else {
        0
    };
    Settled { ran, abandoned }
}

/// Waits at most `limit` (`None`: no limit) until every command submitted to `lp`, a stream of
/// the application API, completed: `Ok(true)`; `Ok(false)` as soon as a stop is requested (the
/// caller then closes it: [`closed_after_stop`], [`stream_settled`]).
pub fn stream_idle_or_stop(lp: &LpStream, limit: Option<Duration>) -> Result<bool, Error> {
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        if stop_requested() {
            return Ok(false);
        }
        let slice = deadline.map_or(SLICE, |d| SLICE.min(d.saturating_duration_since(Instant::now())));
        let t0 = Instant::now();
        match lp.wait_idle_for(slice) {
            Ok(()) => return Ok(true),
            // Its time ran out: wait on (the API's error has no kind of its own for that; every
            // other failure comes at once). Not judged by the counts read now: the work may have
            // completed since the wait gave up, and the next wait then returns at once.
            Err(_) if t0.elapsed() >= slice / 2 && deadline.is_none_or(|d| Instant::now() < d) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits until every command submitted to `lp` completed (a throughput measurement: up to
/// commands x T), then for the device ([`LpStream::synchronize`]). A stop ends the wait with
/// [`STOPPED`]: the caller's close of the session (bounded) ends the work.
pub fn wait_stream_or_stop(lp: &LpStream) -> Result<(), Error> {
    if !stream_idle_or_stop(lp, None)? {
        return Err(failed!("{STOPPED}"));
    }
    Ok(lp.synchronize()?)
}

/// A close of the application API after a stop: `Ok(true)` when it abandoned commands still
/// running (`Abandoned`: what a stop does, not a failure), `Ok(false)` when everything in flight
/// completed within it, and any other failure (a queue not resumed) as it is.
pub fn closed_after_stop(r: preempt_api::Result<()>) -> Result<bool, preempt_api::Error> {
    match r {
        Ok(()) => Ok(false),
        Err(e) if e.kind == ErrorKind::Abandoned => Ok(true),
        Err(e) => Err(e),
    }
}

/// How `lp`'s commands ended after its close following a stop ([`closed_after_stop`]: `gave_up`
/// when that close abandoned some): the close dropped those not launched yet.
pub fn stream_settled(lp: &LpStream, gave_up: bool) -> Settled {
    of_stats(&lp.stats().unwrap_or_default(), gave_up)
}
