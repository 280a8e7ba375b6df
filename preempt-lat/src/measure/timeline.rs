//! What happened when in one run, kept for `--trace`: the LP commands as the launcher saw them,
//! each sample's request, suspend, suspended window, resume and HP probe start, and what the
//! device timed itself; turned into a Chrome trace ([`crate::trace`]) on the host clock.
use super::backend::{DeviceSpan, RawSample};
use crate::options::Level;
use crate::trace::{Trace, Track};
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
    /// Added to the samples' stamps (the backend's clock) to put them on `CLOCK_MONOTONIC`.
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
        tr.span(
            t(RUN),
            "run",
            "run",
            self.run_ns.0,
            self.run_ns.1,
            json!({ "device": device }),
        );
        for c in &self.lp {
            tr.span(
                t(LP_QUEUE),
                "lp",
                format!("LP {}", c.id),
                c.launched_ns,
                c.completed_ns,
                json!({ "ok": c.ok }),
            );
        }
        let (suspend, resume) = if level == Level::Lv1 {
            ("suspend (stop launching, drain)", "resume (launching)")
        } else {
            ("suspend", "resume")
        };
        for (r, hp_start_ns) in &self.samples {
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
        for d in &self.device {
            tr.span(
                t(tracks[d.track.as_str()]),
                "device",
                d.name.clone(),
                d.start_ns,
                d.end_ns,
                json!({}),
            );
        }
        tr
    }
}
