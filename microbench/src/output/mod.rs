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
    /// `light`/`heavy` on a GPU; empty on the host device (n.a.).
    pub lp_state: Option<&'static str>,
    /// The LP kernel's resident wave state per CU (empty on the host device).
    pub lp_state_bytes_per_cu: Option<u64>,
    /// T as the run's commands achieved it (empty on the host device).
    pub achieved_t_ms: Option<f64>,
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
        lp_state: p.lp_state.map(|s| s.name()),
        lp_state_bytes_per_cu: r.lp_kernel.as_ref().map(|k| k.state_bytes_per_cu),
        achieved_t_ms: r.achieved_t.map(|a| a.ms),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::fake_gpu_run;
    use crate::options::{Level, LpState};

    fn text(r: &RunResult) -> String {
        let mut out = Vec::new();
        run(r, Format::Text, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_format_says_which_lp_state_ran() {
        let r = fake_gpu_run(Level::Lv3, LpState::Heavy, 576, 50);
        let rows = run_rows(&r);
        assert_eq!(rows.len(), 4, "suspend, preempt_call, hp_start, resume");
        assert!(rows.iter().all(|row| row.lp_state == Some("heavy")
            && row.lp_state_bytes_per_cu == Some(576 * 1024)
            && row.achieved_t_ms == Some(0.501)));
        let mut csv_out = Vec::new();
        csv(run_rows(&r), &mut csv_out).unwrap();
        let csv_text = String::from_utf8(csv_out).unwrap();
        let header: Vec<&str> = csv_text.lines().next().unwrap().split(',').collect();
        let col = header
            .iter()
            .position(|&h| h == "lp_state")
            .expect("an lp_state column");
        assert!(
            csv_text.lines().skip(1).all(|l| l.split(',').nth(col) == Some("heavy")),
            "{csv_text}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["params"]["lp_state"], "heavy");
        assert_eq!(v["lp_kernel"]["name"], "delay_kernel_heavy");
        assert_eq!(v["achieved_t"]["commands"], 40);
        let t = text(&r);
        assert!(t.contains("LP state heavy: delay_kernel_heavy on 80x256"), "{t}");
        assert!(t.contains("= 576 KiB of wave state per CU"), "{t}");
        assert!(
            t.contains("achieved T 0.5010 ms (+0.2%): median of 40 LP commands (10 left out"),
            "{t}"
        );
    }

    #[test]
    fn the_host_device_has_no_lp_state() {
        let mut r = fake_gpu_run(Level::Lv3, LpState::Light, 0, 50);
        (r.params.lp_state, r.lp_kernel, r.achieved_t) = (None, None, None);
        r.env.device = "host".into();
        assert!(
            run_rows(&r)
                .iter()
                .all(|row| row.lp_state.is_none() && row.achieved_t_ms.is_none())
        );
        let mut csv_out = Vec::new();
        csv(run_rows(&r), &mut csv_out).unwrap();
        let csv_text = String::from_utf8(csv_out).unwrap();
        let header: Vec<&str> = csv_text.lines().next().unwrap().split(',').collect();
        let col = header.iter().position(|&h| h == "lp_state").unwrap();
        assert!(
            csv_text.lines().skip(1).all(|l| l.split(',').nth(col) == Some("")),
            "empty = n.a.: {csv_text}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["params"]["lp_state"].is_null() && v["lp_kernel"].is_null() && v["achieved_t"].is_null());
        let t = text(&r);
        assert!(t.contains("LP state n.a. (host device"), "{t}");
        assert!(!t.contains("achieved T"), "{t}");
    }
}
