//! Timelines as Chrome trace-event JSON (the format Perfetto and chrome://tracing open): spans
//! ("X" events) and instants ("i") on named process and thread tracks, stamped on the host clock
//! (`CLOCK_MONOTONIC` ns) and written in microseconds from the earliest stamp.
use serde::Serialize;
use serde_json::{Value, json};
use std::io::{self, Write};

/// The tracks (threads) of one process of every trace this tool writes: the latency run's and
/// each `priority` mode's, so that timelines line up in a viewer.
pub mod tracks {
    /// The run and its measured window.
    pub const RUN: u32 = 0;
    /// LP commands from launch to the completion the launcher saw.
    pub const LP_QUEUE: u32 = 1;
    /// Suspend and resume calls.
    pub const CALLS: u32 = 2;
    /// The windows in which the LP queue was suspended.
    pub const SUSPENDED: u32 = 3;
    /// HP requests (and the latency run's probes).
    pub const HP: u32 = 4;
    /// The HP worker's own timing (host device).
    pub const HP_WORKER: u32 = 5;
    /// Device tracks from here on: LP worker w (host device) is `DEVICE0 + w`.
    pub const DEVICE0: u32 = 10;
}

/// One track of the timeline: a process (a run, a mode) and a thread within it (a queue, a worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Track {
    pub pid: u32,
    pub tid: u32,
}

#[derive(Debug, Clone, Serialize)]
struct Event {
    name: String,
    cat: &'static str,
    ph: &'static str,
    /// Start, in ns on the host clock (rebased and converted when written).
    #[serde(skip)]
    start_ns: u64,
    #[serde(skip)]
    dur_ns: Option<u64>,
    #[serde(skip)]
    meta: bool,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Value::is_null")]
    args: Value,
}

/// A timeline being built.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    events: Vec<Event>,
}

impl Trace {
    /// A span from `start_ns` to `end_ns` (an end before the start is written as an empty span).
    pub fn span(
        &mut self,
        t: Track,
        cat: &'static str,
        name: impl Into<String>,
        start_ns: u64,
        end_ns: u64,
        args: Value,
    ) {
        self.events.push(Event {
            name: name.into(),
            cat,
            ph: "X",
            start_ns,
            dur_ns: Some(end_ns.saturating_sub(start_ns)),
            meta: false,
            pid: t.pid,
            tid: t.tid,
            args,
        });
    }

    /// A moment (an HP request's arrival, a probe's start).
    pub fn instant(&mut self, t: Track, cat: &'static str, name: impl Into<String>, at_ns: u64, args: Value) {
        self.events.push(Event {
            name: name.into(),
            cat,
            ph: "i",
            start_ns: at_ns,
            dur_ns: None,
            meta: false,
            pid: t.pid,
            tid: t.tid,
            args,
        });
    }

    /// Names a process track.
    pub fn name_process(&mut self, pid: u32, name: impl Into<String>) {
        self.meta("process_name", Track { pid, tid: 0 }, name.into());
    }

    /// Names a thread track.
    pub fn name_thread(&mut self, t: Track, name: impl Into<String>) {
        self.meta("thread_name", t, name.into());
    }

    fn meta(&mut self, what: &'static str, t: Track, name: String) {
        self.events.push(Event {
            name: what.into(),
            cat: "__metadata",
            ph: "M",
            start_ns: 0,
            dur_ns: None,
            meta: true,
            pid: t.pid,
            tid: t.tid,
            args: json!({ "name": name }),
        });
    }

    /// Writes `{"traceEvents": [...], ...}`; `ts`/`dur` in µs from the earliest stamp, which is
    /// recorded as `otherData.clock_zero_ns` (host `CLOCK_MONOTONIC`).
    #[allow(clippy::cast_precision_loss)] // ns offsets within a run: far below 2^52
    pub fn write(&self, note: &str, w: &mut dyn Write) -> io::Result<()> {
        let zero = self
            .events
            .iter()
            .filter(|e| !e.meta)
            .map(|e| e.start_ns)
            .min()
            .unwrap_or(0);
        let us = |ns: u64| ns as f64 / 1000.0;
        let events: Vec<Value> = self
            .events
            .iter()
            .map(|e| {
                let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                // Metadata events carry ts 0 too: some importers expect every event to have one.
                v["ts"] = if e.meta { json!(0) } else { json!(us(e.start_ns - zero)) };
                if let Some(d) = e.dur_ns {
                    v["dur"] = json!(us(d));
                }
                if e.ph == "i" {
                    v["s"] = json!("t");
                }
                v
            })
            .collect();
        let doc = json!({
            "traceEvents": events,
            "displayTimeUnit": "ns",
            "otherData": {
                "clock": "host CLOCK_MONOTONIC",
                "clock_zero_ns": zero,
                "note": note,
                "git_revision": crate::env::git_revision(),
            },
        });
        serde_json::to_writer(&mut *w, &doc)?;
        writeln!(w)
    }
}

/// Writes `trace` to `path`.
pub fn write_file(trace: &Trace, note: &str, path: &std::path::Path) -> Result<(), String> {
    crate::atomic_file::write_file(path, |w| trace.write(note, w)).map_err(|e| format!("--trace {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_instants_are_rebased_to_microseconds() {
        let mut t = Trace::default();
        let tr = Track { pid: 1, tid: 2 };
        t.name_process(1, "lv3");
        t.name_thread(tr, "LP worker 0");
        t.span(tr, "lp", "LP 0", 5_000, 7_500, Value::Null);
        t.instant(tr, "hp", "HP request 0", 6_000, json!({"i": 0}));
        t.span(tr, "lp", "odd", 9_000, 8_000, Value::Null);
        let mut out = Vec::new();
        t.write("test", &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        assert_eq!(ev.len(), 5);
        assert_eq!(ev[0]["ph"], "M");
        assert_eq!(ev[0]["args"]["name"], "lv3");
        assert_eq!((ev[2]["ts"].as_f64(), ev[2]["dur"].as_f64()), (Some(0.0), Some(2.5)));
        assert_eq!((ev[3]["ts"].as_f64(), ev[3]["s"].as_str()), (Some(1.0), Some("t")));
        assert_eq!(
            ev[4]["dur"].as_f64(),
            Some(0.0),
            "an end before the start is an empty span"
        );
        assert_eq!(v["otherData"]["clock_zero_ns"], 5000);
    }
}
