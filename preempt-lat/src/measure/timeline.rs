//! What happened when in one run, kept for `--trace`: the LP commands as the launcher saw them,
//! each sample's request, suspend, suspended window, resume and HP probe start, and what the
//! device timed itself; turned into a Chrome trace ([`crate::trace`]) on the host clock.
use crate::options::Level;
use crate::trace::{MAX_EVENTS, Trace, Track};
use preempt_api::latency::{DeviceSpan, RawSample};
use serde_json::json;
use std::collections::BTreeMap;

/// One LP command as the launcher saw it (`CLOCK_MONOTONIC` ns).
#[derive(Debug, Clone, Copy)]
pub struct LpSpan {
    pub id: u64,
    pub ok: bool,
    pub launched_ns: u64,
    /// When its completion was observed (an upper bound: see `lv1::Stamps::completed_ns`).
    pub completed_ns: u64,
}

/// The timeline of one run.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// The whole run: from before the first LP command to after the last record was read
    /// (`CLOCK_MONOTONIC` ns).
    pub run_ns: (u64, u64),
    /// Added to the samples' stamps (the device's clock) to put them on `CLOCK_MONOTONIC`.
    pub offset_ns: i64,
    /// The first `warmup` samples are warm-up (measured and dropped).
    pub warmup: u32,
    pub lp: Vec<LpSpan>,
    /// Each sample with its HP start latency (ns).
    pub samples: Vec<(RawSample, u64)>,
    /// What the device timed itself (host workers); on `CLOCK_MONOTONIC`.
    pub device: Vec<DeviceSpan>,
}

use crate::trace::tracks::{CALLS, DEVICE0, HP, LP_QUEUE, RUN, SUSPENDED};

impl Timeline {
    /// The Chrome trace of the run: process 1, named after the level and device.
    pub fn trace(&self, level: Level, device: &str) -> Trace {
        let mut tr = Trace::default();
        let t = |tid| Track { pid: 1, tid };
        let host = |ns: u64| u64::try_from(i128::from(ns) + i128::from(self.offset_ns)).unwrap_or(0);
        // The trace keeps the first MAX_EVENTS events it is given: give it the earliest, as the
        // five of a sample (at its request), the LP commands and the device's spans interleave.
        let cutoff = self.cutoff(MAX_EVENTS, &host);
        let mut left_out = 0u64;
        let mut keep = |start: u64, n: u64| {
            let keep = start < cutoff;
            left_out += if keep { 0 } else { n };
            keep
        };
        tr.name_process(1, format!("Lv{} run on {device}", level.number()));
        for (tid, name) in [
            (RUN, "run"),
            (LP_QUEUE, "LP commands: launch -> completion seen"),
            (CALLS, "suspend / resume calls"),
            (SUSPENDED, "LP suspended"),
            (HP, "HP requests and probes"),
        ] {
            tr.name_thread(t(tid), name);
        }
        tr.landmark(
            t(RUN),
            "run",
            "run",
            self.run_ns.0,
            self.run_ns.1,
            json!({ "device": device }),
        );
        for c in self.lp.iter().filter(|c| keep(c.launched_ns, 1)) {
            tr.span(
                t(LP_QUEUE),
                "lp",
                format!("LP {}", c.id),
                c.launched_ns,
                c.completed_ns,
                json!({ "ok": c.ok }),
            );
        }
        let (suspend, resume) = match level {
            Level::Lv1 => ("suspend (stop launching, drain)", "resume (launching)"),
            Level::Lv2 => (
                "suspend (running commands finish, no new one starts)",
                "resume (commands start again)",
            ),
            Level::Lv3 | Level::Auto => ("suspend", "resume"),
        };
        for (r, hp_start_ns) in self.samples.iter().filter(|(r, _)| keep(host(r.t_req), 5)) {
            let args = json!({ "sample": r.index, "warmup": r.index < self.warmup });
            let req = host(r.t_req);
            tr.instant(t(HP), "hp", format!("HP request {}", r.index), req, args.clone());
            tr.instant(
                t(HP),
                "hp",
                format!("HP probe {} starts", r.index),
                req + hp_start_ns,
                args.clone(),
            );
            tr.span(t(CALLS), "call", suspend, req, req + r.suspend_ns, args.clone());
            let (w0, w1) = (host(r.window.0), host(r.window.1));
            tr.span(t(SUSPENDED), "suspended", "LP suspended", w0, w1, args.clone());
            tr.span(t(CALLS), "call", resume, w1, w1 + r.resume_ns, args);
        }
        let tracks: BTreeMap<&str, u32> = self
            .device
            .iter()
            .map(|d| d.track.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .zip(DEVICE0..)
            .collect();
        for (name, &tid) in &tracks {
            tr.name_thread(t(tid), *name);
        }
        for d in self.device.iter().filter(|d| keep(d.start_ns, 1)) {
            tr.span(
                t(tracks[d.track.as_str()]),
                "device",
                d.name.clone(),
                d.start_ns,
                d.end_ns,
                json!({}),
            );
        }
        tr.count_dropped(left_out);
        tr
    }

    /// The start time (host clock) before which at most `budget` of the run's events start:
    /// `u64::MAX` when all of them fit.
    fn cutoff(&self, budget: usize, host: &dyn Fn(u64) -> u64) -> u64 {
        let total = self.lp.len() + 5 * self.samples.len() + self.device.len();
        if total <= budget {
            return u64::MAX;
        }
        let mut starts: Vec<u64> = Vec::with_capacity(total);
        starts.extend(self.lp.iter().map(|c| c.launched_ns));
        for (r, _) in &self.samples {
            starts.extend([host(r.t_req); 5]);
        }
        starts.extend(self.device.iter().map(|d| d.start_ns));
        *starts.select_nth_unstable(budget).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use preempt_api::latency::HpStart;

    /// A run's trace keeps the earliest [`MAX_EVENTS`] events, whatever the run's length, and
    /// counts the rest: here the samples at the start are kept and the last LP commands are
    /// dropped.
    #[test]
    fn a_long_runs_trace_keeps_its_earliest_events() {
        let lp: Vec<LpSpan> = (0..MAX_EVENTS as u64)
            .map(|i| LpSpan {
                id: i,
                ok: true,
                launched_ns: 1_000 + i,
                completed_ns: 2_000 + i,
            })
            .collect();
        let sample = |i: u32| RawSample {
            index: i,
            t_req: u64::from(i),
            suspend_ns: 1,
            preempt_call_ns: None,
            resume_ns: 1,
            window: (u64::from(i) + 1, u64::from(i) + 2),
            hp: HpStart::At(0),
        };
        let tl = Timeline {
            run_ns: (0, 10_000_000),
            offset_ns: 0,
            warmup: 0,
            lp,
            samples: (0..10).map(|i| (sample(i), 5)).collect(),
            device: Vec::new(),
        };
        let tr = tl.trace(Level::Lv3, "host");
        let mut out = Vec::new();
        tr.write("test", &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        let named = |prefix: &str| {
            events
                .iter()
                .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
                .count()
        };
        assert_eq!(named("HP request "), 10, "the samples, the earliest, are kept");
        let total = MAX_EVENTS + 5 * 10;
        assert_eq!(tr.dropped(), (total - MAX_EVENTS) as u64);
        let lp_commands = events.iter().filter(|e| e["cat"] == "lp" && e["ph"] == "X").count();
        assert_eq!(
            lp_commands,
            MAX_EVENTS - 5 * 10,
            "the rest of the budget: the first LP commands"
        );
    }
}
