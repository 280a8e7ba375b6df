//! A latency run as the exporters see it: one CSV row per latency metric, the text for people
//! in [`text`]. The exporters themselves, shared by every subcommand, are preempt-cli's
//! (re-exported here, so that `crate::output::export` is the one dispatch wherever it is called).
pub mod text;

pub use preempt_cli::output::*;

use crate::measure::RunResult;
use serde::Serialize;
use std::io::{self, Write};

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
    /// Empty where the check could not be made (a stop abandoned LP commands still running).
    pub correct: Option<bool>,
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

/// A run: JSON is the result whole, CSV one row per latency metric.
impl Export for RunResult {
    type Whole = Self;
    type Row<'a> = RunRow<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<RunRow<'_>> {
        run_rows(self)
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        text::run(self, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::fake_gpu_run;
    use crate::options::Format;
    use crate::options::{Level, LpState};

    /// JSON is the result whole, byte for byte what serde writes of it.
    #[test]
    fn json_is_the_result_whole() {
        let r = fake_gpu_run(Level::Lv3, LpState::Light, 64, 50);
        assert_eq!(out(Format::Json, &r), serde_json::to_string_pretty(&r).unwrap() + "\n");
        let runs = [r.clone(), r];
        let mut both = Vec::new();
        export(Format::Csv, &runs[..], &mut both).unwrap();
        assert_eq!(
            String::from_utf8(both).unwrap().lines().count(),
            1 + 2 * 4,
            "one header, every run's rows"
        );
    }

    fn out(format: Format, r: &RunResult) -> String {
        let mut out = Vec::new();
        export(format, r, &mut out).unwrap();
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
        let csv_text = out(Format::Csv, &r);
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
        let t = out(Format::Text, &r);
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
        (r.env.device, r.env.host_figures) = ("host".into(), true);
        assert!(
            run_rows(&r)
                .iter()
                .all(|row| row.lp_state.is_none() && row.achieved_t_ms.is_none())
        );
        let csv_text = out(Format::Csv, &r);
        let header: Vec<&str> = csv_text.lines().next().unwrap().split(',').collect();
        let col = header.iter().position(|&h| h == "lp_state").unwrap();
        assert!(
            csv_text.lines().skip(1).all(|l| l.split(',').nth(col) == Some("")),
            "empty = n.a.: {csv_text}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["params"]["lp_state"].is_null() && v["lp_kernel"].is_null() && v["achieved_t"].is_null());
        let t = out(Format::Text, &r);
        assert!(t.contains("LP state n.a. (host device"), "{t}");
        assert!(!t.contains("achieved T"), "{t}");
        assert!(t.contains("note: host device figures"), "{t}");
        assert!(v["env"].get("host_figures").is_none(), "not written");
    }
}
