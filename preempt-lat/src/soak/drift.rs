//! A soak's series read as drift: the HP P99 of the last third of an experiment's windows against
//! the first third's (medians, so one slow window moves neither end), and what this process held
//! after its last window against after its second (both experiments warmed up: the first
//! window of each allocates what the run keeps).
use super::process::Held;
use crate::options::Preset;
use serde::Serialize;

/// The two experiments a soak alternates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `priority --preset 7.2.1`'s load, lv3 mode.
    Priority,
    /// `priority --preset 8.3.1`: the HP client's latency against an LP client (hpf).
    Classes,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Priority => "priority",
            Kind::Classes => "classes",
        }
    }

    /// The experiment its windows run, as `priority --preset` defines it.
    pub fn preset(self) -> Preset {
        match self {
            Kind::Priority => Preset::Fig9,
            Kind::Classes => Preset::Fig15a,
        }
    }
}

/// One window of the series.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// From 0, in run order.
    pub index: u32,
    pub kind: Kind,
    /// The test plan's section the window's experiment is (`7.2.1`, `8.3.1`).
    pub preset: &'static str,
    /// When it started, seconds after the soak's start.
    pub start_s: f64,
    pub duration_s: f64,
    pub hp_requests: u64,
    pub hp_p50_ms: Option<f64>,
    pub hp_p99_ms: Option<f64>,
    /// Every LP command of the window exactly once (`None`: a stop left the check incomplete).
    pub correct: Option<bool>,
    /// After the window, its sessions closed.
    #[serde(flatten)]
    pub held: Held,
}

/// One experiment's HP P99 over the run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencyDrift {
    pub kind: Kind,
    /// Windows with a P99.
    pub windows: usize,
    /// Median P99 of the first third of them, ms.
    pub first_p99_ms: f64,
    /// Median P99 of the last third, ms.
    pub last_p99_ms: f64,
    /// last / first: above 1 the tail grew over the run.
    pub ratio: f64,
    pub min_p99_ms: f64,
    pub max_p99_ms: f64,
}

/// What this process held after its last window against after its second.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct HeldDrift {
    /// The window the growth is counted from (the second: index 1).
    pub from_window: u32,
    pub to_window: u32,
    pub rss_from_kib: u64,
    pub rss_to_kib: u64,
    pub rss_growth_kib: i64,
    pub rss_max_kib: u64,
    pub fds_growth: i64,
    pub threads_growth: i64,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// `kind`'s P99 drift, where it has at least two windows with a P99.
pub fn latency(windows: &[Window], kind: Kind) -> Option<LatencyDrift> {
    let p99: Vec<f64> = windows
        .iter()
        .filter(|w| w.kind == kind)
        .filter_map(|w| w.hp_p99_ms)
        .collect();
    let n = p99.len();
    if n < 2 {
        return None;
    }
    let third = (n / 3).max(1);
    let (first, last) = (median(&p99[..third]), median(&p99[n - third..]));
    Some(LatencyDrift {
        kind,
        windows: n,
        first_p99_ms: first,
        last_p99_ms: last,
        ratio: if first > 0.0 { last / first } else { f64::NAN },
        min_p99_ms: p99.iter().copied().fold(f64::INFINITY, f64::min),
        max_p99_ms: p99.iter().copied().fold(0.0, f64::max),
    })
}

fn growth(from: u64, to: u64) -> i64 {
    i64::try_from(to).unwrap_or(i64::MAX) - i64::try_from(from).unwrap_or(i64::MAX)
}

/// From the second window to the last, where there are at least three.
pub fn held(windows: &[Window]) -> Option<HeldDrift> {
    let (from, to) = (windows.get(1)?, windows.last()?);
    if windows.len() < 3 {
        return None;
    }
    Some(HeldDrift {
        from_window: from.index,
        to_window: to.index,
        rss_from_kib: from.held.rss_kib,
        rss_to_kib: to.held.rss_kib,
        rss_growth_kib: growth(from.held.rss_kib, to.held.rss_kib),
        rss_max_kib: windows.iter().map(|w| w.held.rss_kib).max().unwrap_or(0),
        fds_growth: growth(from.held.fds, to.held.fds),
        threads_growth: growth(from.held.threads, to.held.threads),
    })
}

/// What fails the soak (empty: it passed): a window whose LP commands did not each complete
/// exactly once, RSS grown past `rss_bound_kib`, descriptors or threads grown at all (each
/// window's sessions are closed when it is read: what they opened must be gone).
pub fn problems(windows: &[Window], held: Option<&HeldDrift>, rss_bound_kib: u64) -> Vec<String> {
    let mut out: Vec<String> = windows
        .iter()
        .filter(|w| w.correct == Some(false))
        .map(|w| {
            format!(
                "window {} ({}): an LP command did not complete exactly once",
                w.index,
                w.kind.name()
            )
        })
        .collect();
    if let Some(h) = held {
        let span = format!("from window {} to window {}", h.from_window, h.to_window);
        if h.rss_growth_kib > i64::try_from(rss_bound_kib).unwrap_or(i64::MAX) {
            out.push(format!(
                "RSS grew {} KiB {span} (at most {rss_bound_kib} KiB: --rss-growth-mib)",
                h.rss_growth_kib
            ));
        }
        if h.fds_growth > 0 {
            out.push(format!("{} more open descriptors {span}", h.fds_growth));
        }
        if h.threads_growth > 0 {
            out.push(format!("{} more threads {span}", h.threads_growth));
        }
    }
    out
}

#[cfg(test)]
mod tests;
