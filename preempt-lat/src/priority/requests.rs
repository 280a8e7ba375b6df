//! The HP side of a `priority` mode, the same on every device: request `i` arrives at
//! `t0 + arrivals[i]`, the scheduler hears of it then (or, if it arrived while the previous
//! request ran, as soon as that one completed, before its completion), the device runs it, and
//! the scheduler hears of its completion.
use crate::measure::control::stop_requested;
use crate::trace::{Trace, Track};
use lv1::clock::{now_ns, sleep_until};
use serde_json::json;
use std::time::Duration;

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
    while now_ns() < t_end {
        if stop_requested() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10).min(Duration::from_nanos(t_end.saturating_sub(now_ns()))));
    }
    false
}

/// Drives every HP request of a mode. `on` tells the scheduler of an event; `run` executes
/// request `i` and returns when it completed (CLOCK_MONOTONIC ns). Returns each request's latency
/// (arrival to completion, ns) and whether Ctrl-C cut the mode short.
pub fn drive(
    arrivals: &[u64],
    t0: u64,
    track: Track,
    trace: &mut Trace,
    on: &mut dyn FnMut(Event, &mut Trace) -> Result<(), String>,
    run: &mut dyn FnMut(usize, &mut Trace) -> Result<u64, String>,
) -> Result<(Vec<u64>, bool), String> {
    let mut latencies = Vec::with_capacity(arrivals.len());
    let mut fed = 0usize;
    let arrive = |n: usize, trace: &mut Trace, on: &mut dyn FnMut(Event, &mut Trace) -> Result<(), String>| {
        let at = t0 + arrivals[n];
        trace.instant(track, "hp", format!("HP request {n} arrives"), at, json!({}));
        on(Event::HpArrival, trace)
    };
    for (i, &a) in arrivals.iter().enumerate() {
        if stop_requested() {
            return Ok((latencies, true));
        }
        let arrival = t0 + a;
        if fed <= i {
            sleep_until(arrival);
            arrive(i, trace, on)?;
            fed = i + 1;
        }
        let done = run(i, trace)?;
        let latency = done.saturating_sub(arrival);
        #[allow(clippy::cast_precision_loss)] // a latency in ns: exact below 2^52
        let us = latency as f64 / 1000.0;
        trace.span(
            track,
            "hp",
            format!("HP request {i}"),
            arrival,
            done,
            json!({ "latency_us": us }),
        );
        latencies.push(latency);
        // Requests that arrived while this one ran are pending before it completes.
        let now = now_ns();
        while fed < arrivals.len() && t0 + arrivals[fed] <= now {
            arrive(fed, trace, on)?;
            fed += 1;
        }
        on(Event::HpCompletion, trace)?;
    }
    Ok((latencies, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that arrive while one runs reach the scheduler before that one's completion, in
    /// arrival order; every arrival is matched by one completion.
    #[test]
    fn overlapping_requests_reach_the_scheduler_in_order() {
        let mut trace = Trace::default();
        let track = Track { pid: 1, tid: 4 };
        let t0 = now_ns();
        // Three requests 1 ms apart; each takes 2.5 ms, so the next two arrive during the first.
        let arrivals = [0, 1_000_000, 2_000_000];
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
        assert_eq!(lat.len(), 3);
        use Event::{HpArrival as A, HpCompletion as C};
        assert_eq!(events, [A, A, A, C, C, C]);
        assert!(lat[1] >= 2_500_000, "the second waited for the first: {lat:?}");
    }
}
