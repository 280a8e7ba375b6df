//! Timelines as Chrome trace-event JSON (the format Perfetto and chrome://tracing open): spans
//! ("X" events) and instants ("i") on named process and thread tracks, stamped on the host clock
//! (`CLOCK_MONOTONIC` ns) and written in microseconds from the earliest stamp.
use crate::error::{Context, Error};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
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

/// One event as kept: small (its arguments as JSON text), since a trace may hold
/// [`MAX_EVENTS`] of them per process.
#[derive(Debug, Clone)]
struct Event {
    name: String,
    cat: &'static str,
    ph: &'static str,
    /// Start, in ns on the host clock (rebased and converted when written).
    start_ns: u64,
    dur_ns: Option<u64>,
    meta: bool,
    pid: u32,
    tid: u32,
    /// The arguments, as JSON text (`None`: no arguments).
    args: Option<Box<str>>,
}

/// One event as written, the way Chrome's trace format has it (its arguments, kept as JSON
/// text, are appended to it).
#[derive(Serialize)]
struct Written<'a> {
    name: &'a str,
    cat: &'static str,
    ph: &'static str,
    /// µs from the trace's zero (metadata events carry 0 too: some importers expect every event
    /// to have one).
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    /// An instant's scope: its thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    pid: u32,
    tid: u32,
}

/// Arguments as kept: their JSON text, none for null.
fn args_text(args: &Value) -> Option<Box<str>> {
    (!args.is_null()).then(|| args.to_string().into_boxed_str())
}

/// The most events a trace keeps of one process (a run, a `priority` mode), metadata aside: the
/// first ones recorded; later ones are counted, and the written trace and stderr say how many were
/// dropped. An event takes ~150 bytes in memory and about as much in the file: a run's length must
/// not decide how much of either it takes.
pub const MAX_EVENTS: usize = 200_000;

/// A timeline being built, keeping at most `limit` events per process.
#[derive(Debug, Clone)]
pub struct Trace {
    events: Vec<Event>,
    limit: usize,
    /// Events kept per process (metadata aside).
    kept: BTreeMap<u32, usize>,
    dropped: u64,
}

impl Default for Trace {
    /// At most [`MAX_EVENTS`] events per process.
    fn default() -> Self {
        Trace::with_limit(MAX_EVENTS)
    }
}

impl Trace {
    /// At most `limit` events per process.
    pub fn with_limit(limit: usize) -> Self {
        Trace {
            events: Vec::new(),
            limit,
            kept: BTreeMap::new(),
            dropped: 0,
        }
    }

    /// A trace nobody asked for: it keeps nothing (and counts nothing dropped).
    pub fn off() -> Self {
        Trace::with_limit(0)
    }

    /// An empty trace with this one's limit (on or off), to be absorbed into it later.
    pub fn empty_like(&self) -> Trace {
        Trace::with_limit(self.limit)
    }

    /// Whether events are kept at all (callers skip building what nobody keeps).
    pub fn is_on(&self) -> bool {
        self.limit > 0
    }

    /// Events recorded beyond the limit, and dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Counts `n` events left out by the caller for the limit's sake.
    pub fn count_dropped(&mut self, n: u64) {
        if self.is_on() {
            self.dropped += n;
        }
    }

    /// Keeps `e` if its process is under the limit (metadata always).
    fn push(&mut self, e: Event) {
        self.push_counted(e, true);
    }

    fn push_counted(&mut self, e: Event, counted: bool) {
        if !self.is_on() {
            return;
        }
        if counted && !e.meta {
            let n = self.kept.entry(e.pid).or_insert(0);
            if *n >= self.limit {
                self.dropped += 1;
                return;
            }
            *n += 1;
        }
        self.events.push(e);
    }

    /// Adds another trace's events (and what it dropped) to this one, within this one's limit.
    pub fn absorb(&mut self, other: Trace) {
        self.count_dropped(other.dropped);
        for e in other.events {
            self.push(e);
        }
    }

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
        self.push(Event {
            name: name.into(),
            cat,
            ph: "X",
            start_ns,
            dur_ns: Some(end_ns.saturating_sub(start_ns)),
            meta: false,
            pid: t.pid,
            tid: t.tid,
            args: args_text(&args),
        });
    }

    /// A span kept whatever the limit (a run, a measured window: a few per process, which the
    /// rest is read against).
    pub fn landmark(&mut self, t: Track, cat: &'static str, name: &str, start_ns: u64, end_ns: u64, args: Value) {
        let e = Event {
            name: name.to_string(),
            cat,
            ph: "X",
            start_ns,
            dur_ns: Some(end_ns.saturating_sub(start_ns)),
            meta: false,
            pid: t.pid,
            tid: t.tid,
            args: args_text(&args),
        };
        self.push_counted(e, false);
    }

    /// A moment (an HP request's arrival, a probe's start).
    pub fn instant(&mut self, t: Track, cat: &'static str, name: impl Into<String>, at_ns: u64, args: Value) {
        self.push(Event {
            name: name.into(),
            cat,
            ph: "i",
            start_ns: at_ns,
            dur_ns: None,
            meta: false,
            pid: t.pid,
            tid: t.tid,
            args: args_text(&args),
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
        self.push(Event {
            name: what.into(),
            cat: "__metadata",
            ph: "M",
            start_ns: 0,
            dur_ns: None,
            meta: true,
            pid: t.pid,
            tid: t.tid,
            args: args_text(&json!({ "name": name })),
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
        // Written one event at a time: a whole document built first would take ~4 KB per event.
        w.write_all(b"{\"traceEvents\":[")?;
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            let out = Written {
                name: &e.name,
                cat: e.cat,
                ph: e.ph,
                ts: if e.meta { 0.0 } else { us(e.start_ns - zero) },
                dur: e.dur_ns.map(us),
                s: (e.ph == "i").then_some("t"),
                pid: e.pid,
                tid: e.tid,
            };
            let mut text = serde_json::to_vec(&out)?;
            if let Some(args) = &e.args {
                // `text` is an object with members: its closing brace makes way for one more.
                text.pop();
                text.extend_from_slice(b",\"args\":");
                text.extend_from_slice(args.as_bytes());
                text.push(b'}');
            }
            w.write_all(&text)?;
        }
        let rest = json!({
            "displayTimeUnit": "ns",
            "otherData": {
                "clock": "host CLOCK_MONOTONIC",
                "clock_zero_ns": zero,
                "note": note,
                "git_revision": crate::env::git_revision(),
                "max_events_per_process": self.limit,
                "dropped_events": self.dropped,
            },
        });
        // `rest` is an object: its members follow the events' array in the one document.
        let rest = rest.to_string();
        w.write_all(b"],")?;
        w.write_all(rest.get(1..).unwrap_or("}").as_bytes())?;
        writeln!(w)
    }
}

/// Writes `trace` to `path`, and says on stderr if it dropped events.
pub fn write_file(trace: &Trace, note: &str, path: &std::path::Path) -> Result<(), Error> {
    crate::atomic_file::write_io(path, |w| trace.write(note, w))
        .with_context(|| format!("--trace {}: cannot write", path.display()))?;
    if trace.dropped() > 0 {
        eprintln!(
            "preempt-lat: --trace {}: kept the first {} events of each run or mode, dropped {} later ones",
            path.display(),
            trace.limit,
            trace.dropped()
        );
    }
    Ok(())
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
        assert_eq!(v["otherData"]["dropped_events"], 0);
    }

    /// A trace keeps at most its limit of events per process, whatever a run's length, counts the
    /// rest, and says so in the file; off, it keeps nothing.
    #[test]
    fn a_trace_keeps_a_bounded_number_of_events_per_process() {
        let limit = 10;
        let mut t = Trace::with_limit(limit);
        let (a, b) = (Track { pid: 1, tid: 0 }, Track { pid: 2, tid: 0 });
        t.name_process(1, "one");
        for i in 0..3 * limit as u64 {
            t.span(a, "lp", "x", i, i + 1, Value::Null);
        }
        let mut other = Trace::with_limit(limit);
        for i in 0..limit as u64 + 1 {
            other.instant(b, "hp", "y", i, Value::Null);
        }
        t.absorb(other);
        t.landmark(a, "run", "run", 0, 100, Value::Null);
        assert_eq!(
            t.events.len(),
            2 + 2 * limit,
            "metadata, the landmark and each process's first events"
        );
        assert_eq!(t.dropped(), 2 * limit as u64 + 1);
        let mut out = Vec::new();
        t.write("test", &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["otherData"]["dropped_events"], 2 * limit as u64 + 1);
        assert_eq!(v["otherData"]["max_events_per_process"], limit);
        let mut off = Trace::off();
        off.name_process(1, "one");
        off.span(a, "lp", "x", 0, 1, Value::Null);
        assert!(off.events.is_empty() && off.dropped() == 0 && !off.is_on());
    }
}
