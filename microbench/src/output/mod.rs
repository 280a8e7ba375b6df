//! Every result leaves through here: one exporter per [`Format`], shared by run, sweep, doctor
//! and validate. JSON is the result serialized whole; CSV is one row per record through the
//! `csv` crate (quoting and escaping are its job); text is written per report, for people.
pub mod text;

use crate::measure::RunResult;
use crate::options::Format;
use serde::Serialize;
use std::io::{self, Write};

/// Pretty JSON and a newline.
pub fn json<T: Serialize + ?Sized>(value: &T, w: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value)?;
    writeln!(w)
}

/// A header from the row type's field names, then one row per record.
pub fn csv<R: Serialize>(rows: impl IntoIterator<Item = R>, w: &mut dyn Write) -> io::Result<()> {
    let mut out = csv::Writer::from_writer(w);
    for r in rows {
        out.serialize(r).map_err(io::Error::other)?;
    }
    out.flush()
}

/// One row of a run's CSV: one per latency metric, every parameter and the environment on each.
#[derive(Debug, Serialize)]
pub struct RunRow<'a> {
    pub device: &'a str,
    pub mechanism: &'a str,
    pub level: u8,
    pub t_ms: f64,
    pub threshold: u32,
    pub batch: u32,
    pub samples: u32,
    pub warmup: u32,
    pub seed: u64,
    pub workers: u32,
    pub kernel: &'a str,
    pub kfd_version: &'a str,
    pub git_revision: &'a str,
    /// The grace period that applied (see `Environment::grace_period`).
    pub grace_period: &'a str,
    pub metric: &'static str,
    pub count: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
    /// Rounded to 0.1 ns.
    pub mean_ns: f64,
    pub correct: bool,
    pub interrupted: bool,
}

/// The CSV rows of one run (metrics without samples are left out).
pub fn run_rows(r: &RunResult) -> Vec<RunRow<'_>> {
    let (p, e, m) = (&r.params, &r.env, &r.latency_ns);
    [
        ("suspend", &m.suspend),
        ("preempt_call", &m.preempt_call),
        ("hp_start", &m.hp_start),
        ("resume", &m.resume),
    ]
    .into_iter()
    .filter_map(|(metric, s)| s.as_ref().map(|s| (metric, s)))
    .map(|(metric, s)| RunRow {
        device: &e.device,
        mechanism: &e.mechanism,
        level: p.level.number(),
        t_ms: p.t_ms,
        threshold: p.threshold,
        batch: p.batch,
        samples: p.samples,
        warmup: p.warmup,
        seed: p.seed,
        workers: p.workers,
        kernel: &e.kernel,
        kfd_version: e.kfd_version.as_deref().unwrap_or(""),
        git_revision: e.git_revision,
        grace_period: &e.grace_period,
        metric,
        count: s.count,
        min_ns: s.min,
        p50_ns: s.p50,
        p90_ns: s.p90,
        p95_ns: s.p95,
        p99_ns: s.p99,
        p99_9_ns: s.p99_9,
        max_ns: s.max,
        mean_ns: (s.mean * 10.0).round() / 10.0,
        correct: r.correctness.ok,
        interrupted: r.interrupted,
    })
    .collect()
}

/// A run's result in `format`.
pub fn run(r: &RunResult, format: Format, w: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Json => json(r, w),
        Format::Csv => csv(run_rows(r), w),
        Format::Text => text::run(r, w),
    }
}
