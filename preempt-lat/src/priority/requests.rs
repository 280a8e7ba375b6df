//! The HP side of a `priority` mode, the same on every device: request `i` arrives at
//! `t0 + arrivals[i]`, the scheduler hears of it then (or, if it arrived while the previous
//! request ran, as soon as that one completed, before its completion), the device runs it, and
//! the scheduler hears of its completion. Memory does not grow with the mode's length: the
//! arrivals are generated as they come (two cursors over the same times: the next to run and the
//! next to announce), the latencies go into a histogram.
use crate::arrivals::Arrivals;
use crate::error::Error;
use crate::measure::abandon;
use crate::measure::control::{sleep_until_or_stop, stop_requested};
use crate::stats::Recorder;
use crate::trace::{Trace, Track};
use preempt_api::now_ns;
use serde_json::json;

/// What happened on the HP side, for the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An HP request arrived (it is now pending until its completion).
    HpArrival,
    /// A pending HP request completed.
    HpCompletion,
}

/// Waits out a mode without HP requests until `t_end`; true if Ctrl-C cut it short.
pub fn idle_until(t_end: u64) -> bool {
    sleep_until_or_stop(t_end)
}

/// Drives every HP request of a mode. `on` tells the scheduler of an event; `run` executes
/// request `i` and returns when it completed (CLOCK_MONOTONIC ns). Returns the requests'
/// latencies (arrival to completion, ns) and whether Ctrl-C cut the mode short. An error once a
/// stop's deadline killed the LP workers (an Lv2 hold waited on them) is that cut, not a failure.
pub fn drive(
    arrivals: &Arrivals,
    t0: u64,
    track: Track,
    trace: &mut Trace,
    on: &mut dyn FnMut(Event, &mut Trace) -> Result<(), Error>,
    run: &mut dyn FnMut(u64, &mut Trace) -> Result<u64, Error>,
) -> Result<(Recorder, bool), Error> {
    let mut latencies = Recorder::default();
    match drive_into(&mut latencies, arrivals, t0, track, trace, on, run) {
        Ok(interrupted) => Ok((latencies, interrupted)),
        Err(_) if abandon::happened() => Ok((latencies, true)),
        Err(e) => Err(e),
    }
}

/// [`drive`], recording into `latencies`; whether Ctrl-C cut the mode short.
fn drive_into(
    latencies: &mut Recorder,
    arrivals: &Arrivals,
    t0: u64,
    track: Track,
    trace: &mut Trace,
    on: &mut dyn FnMut(Event, &mut Trace) -> Result<(), Error>,
    run: &mut dyn FnMut(u64, &mut Trace) -> Result<u64, Error>,
) -> Result<bool, Error> {
    // Announced (arrived, the scheduler told) up to `fed`; the next to announce is `ahead`'s.
    let mut ahead = arrivals.clone().peekable();
    let mut fed = 0u64;
    let arrive = |n: u64, at: u64, trace: &mut Trace, on: &mut dyn FnMut(Event, &mut Trace) -> Result<(), Error>| {
        if trace.is_on() {
            trace.instant(track, "hp", format!("HP request {n} arrives"), at, json!({}));
        }
        on(Event::HpArrival, trace)
    };
    for (i, a) in (0u64..).zip(arrivals.clone()) {
        if stop_requested() {
            return Ok(true);
        }
        let arrival = t0 + a;
        if fed <= i {
            if sleep_until_or_stop(arrival) {
                return Ok(true);
            }
            ahead.next();
            arrive(i, arrival, trace, on)?;
            fed = i + 1;
        }
        let done = run(i, trace)?;
        let latency = done.saturating_sub(arrival);
        if trace.is_on() {
            #[allow(clippy::cast_precision_loss)] // a latency in ns: exact below 2^52
            let us = latency as f64 / 1000.0;
            let args = json!({ "latency_us": us });
            trace.span(track, "hp", format!("HP request {i}"), arrival, done, args);
        }
        latencies.record(latency);
        // Requests that arrived while this one ran are pending before it completes.
        let now = now_ns();
        while let Some(at) = ahead.next_if(|&a| t0 + a <= now) {
            arrive(fed, t0 + at, trace, on)?;
            fed += 1;
        }
        on(Event::HpCompletion, trace)?;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Requests that arrive while one runs reach the scheduler before that one's completion, in
    /// arrival order; every arrival is matched by one completion.
    #[test]
    fn overlapping_requests_reach_the_scheduler_in_order() {
        let mut trace = Trace::default();
        let track = Track { pid: 1, tid: 4 };
        let t0 = now_ns();
        // Three requests 1 ms apart; each takes 2.5 ms, so the next two arrive during the first.
        let arrivals = Arrivals::new(crate::options::Arrival::Fixed, 0.0, 1000.0, 3_000_001, 1);
        let mut events = Vec::new();
        let (lat, interrupted) = drive(
            &arrivals,
            t0,
            track,
            &mut trace,
            &mut |e, _| {
                events.push(e);
                Ok(())
            },
            &mut |_, _| {
                std::thread::sleep(Duration::from_micros(2_500));
                Ok(now_ns())
            },
        )
        .unwrap();
        assert!(!interrupted);
        let lat = lat.summary().unwrap();
        assert_eq!(lat.count, 3);
        use Event::{HpArrival as A, HpCompletion as C};
        assert_eq!(events, [A, A, A, C, C, C]);
        assert!(lat.max >= 2 * 2_500_000, "the last waited for those before it: {lat:?}");
    }
}
