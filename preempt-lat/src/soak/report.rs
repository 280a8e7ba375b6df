//! A soak for people (a table of windows, the drift, the verdict) and as CSV (a row per window).
use super::SoakResult;
use super::drift::Window;
use crate::output::{Export, opt};
use serde::Serialize;
use std::io::{self, Write};

#[allow(clippy::cast_precision_loss)] // KiB of one process: far below 2^52
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn check_word(c: Option<bool>) -> &'static str {
    match c {
        Some(true) => "OK",
        Some(false) => "FAILED",
        None => "not checked",
    }
}

/// The line printed after each window.
pub fn progress(w: &Window, windows: u32) -> String {
    format!(
        "window {}/{windows} {} ({}): HP P50/P99 {}/{} ms, exactly once {}, RSS {:.1} MiB, {} fds, {} threads",
        w.index + 1,
        w.kind.name(),
        w.preset,
        opt(w.hp_p50_ms, 2),
        opt(w.hp_p99_ms, 2),
        check_word(w.correct),
        mib(w.held.rss_kib),
        w.held.fds,
        w.held.threads
    )
}

/// One CSV row per window, with the run's parameters and device (spelled out: CSV cannot
/// flatten a nested struct).
#[derive(Debug, Serialize)]
pub struct Row<'a> {
    pub device: &'a str,
    pub host_figures: bool,
    pub minutes: f64,
    pub window_s: f64,
    pub index: u32,
    pub kind: &'static str,
    pub preset: &'static str,
    pub start_s: f64,
    pub duration_s: f64,
    pub hp_requests: u64,
    pub hp_p50_ms: Option<f64>,
    pub hp_p99_ms: Option<f64>,
    pub correct: Option<bool>,
    pub rss_kib: u64,
    pub fds: u64,
    pub threads: u64,
}

impl Export for SoakResult {
    type Whole = Self;
    type Row<'a> = Row<'a>;

    fn whole(&self) -> &Self {
        self
    }

    fn rows(&self) -> Vec<Row<'_>> {
        self.windows
            .iter()
            .map(|x| Row {
                device: &self.env.device,
                host_figures: self.env.host_figures,
                minutes: self.params.minutes,
                window_s: self.params.window_s,
                index: x.index,
                kind: x.kind.name(),
                preset: x.preset,
                start_s: x.start_s,
                duration_s: x.duration_s,
                hp_requests: x.hp_requests,
                hp_p50_ms: x.hp_p50_ms,
                hp_p99_ms: x.hp_p99_ms,
                correct: x.correct,
                rss_kib: x.held.rss_kib,
                fds: x.held.fds,
                threads: x.held.threads,
            })
            .collect()
    }

    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = &self.params;
        writeln!(
            w,
            "preempt-lat soak on device {} ({}): {} of {} windows of {} s, {} (lv3) and {} in turn, {:.1} min; seed {}; rev {}",
            self.env.device,
            self.env.device_detail,
            self.windows.len(),
            p.windows,
            p.window_s,
            p.priority_preset,
            p.classes_preset,
            self.wall_time_s / 60.0,
            p.seed,
            self.env.git_revision
        )?;
        writeln!(
            w,
            "{:>6} {:<9} {:>8} {:>8} {:>10} {:>10} {:>12} {:>8} {:>5} {:>7}",
            "window", "kind", "start s", "HP reqs", "P50 ms", "P99 ms", "exactly once", "RSS MiB", "fds", "threads"
        )?;
        for x in &self.windows {
            writeln!(
                w,
                "{:>6} {:<9} {:>8.1} {:>8} {:>10} {:>10} {:>12} {:>8.1} {:>5} {:>7}",
                x.index,
                x.kind.name(),
                x.start_s,
                x.hp_requests,
                opt(x.hp_p50_ms, 2),
                opt(x.hp_p99_ms, 2),
                check_word(x.correct),
                mib(x.held.rss_kib),
                x.held.fds,
                x.held.threads
            )?;
        }
        for d in &self.p99_drift {
            writeln!(
                w,
                "P99 drift, {}: {:.2} ms (first third) -> {:.2} ms (last third) = {:.2}x; min {:.2}, max {:.2} over {} windows",
                d.kind.name(),
                d.first_p99_ms,
                d.last_p99_ms,
                d.ratio,
                d.min_p99_ms,
                d.max_p99_ms,
                d.windows
            )?;
        }
        if let Some(h) = &self.held_drift {
            writeln!(
                w,
                "held, window {} -> {}: RSS {:.1} -> {:.1} MiB ({:+} KiB; at most {} MiB; peak {:.1} MiB), fds {:+}, threads {:+}",
                h.from_window,
                h.to_window,
                mib(h.rss_from_kib),
                mib(h.rss_to_kib),
                h.rss_growth_kib,
                p.rss_growth_mib,
                mib(h.rss_max_kib),
                h.fds_growth,
                h.threads_growth
            )?;
        }
        if self.problems.is_empty() {
            writeln!(
                w,
                "verdict: PASS{}",
                if self.interrupted { " (interrupted)" } else { "" }
            )?;
        } else {
            writeln!(w, "verdict: FAIL: {}", self.problems.join("; "))?;
        }
        if self.env.host_figures {
            writeln!(w, "note: host device figures (CPU worker processes), not GPU figures")?;
        }
        Ok(())
    }
}
