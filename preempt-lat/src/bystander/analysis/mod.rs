//! The bystander's cost of our preemptions, from two timelines on `CLOCK_MONOTONIC`: the
//! bystander's kernels (host stamps around each launch-and-wait, one after another) and our
//! preemptions (suspend call start to resume call end). Pure: no device, no process.
//!
//! - Baseline: the kernels that ran wholly inside the baseline window (no preemption), their
//!   median and p99 duration and their rate (kernels that ended in the window per second).
//! - Measured window (preempting at a fixed period): each kernel that overlaps a preemption
//!   belongs to the first one it overlaps; its extra latency is its duration minus the baseline
//!   median. Per kernel: p50/p99 of that extra. Per preemption: the sum of the extras of its
//!   kernels (how much later the bystander's stream got), p50/p99 over the preemptions that
//!   some kernel overlapped.
//! - Throughput: kernels per second in both windows, the loss fraction, and that loss as time
//!   per preemption (loss x window / preemptions): a cross-check of the per-preemption delay
//!   that also catches a delay spilling past the end of a preemption.
//!
//! A bystander that stopped (no `done` line, or stopped before the measured window ended) gives
//! no figures: its timeline does not cover the window.
use crate::stats::nearest_rank;
use serde::Serialize;

/// A closed interval of `CLOCK_MONOTONIC` ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Span {
    pub fn len_ns(self) -> u64 {
        self.to_ns.saturating_sub(self.from_ns)
    }
    fn overlaps(self, o: Span) -> bool {
        self.from_ns < o.to_ns && o.from_ns < self.to_ns
    }
    fn contains(self, o: Span) -> bool {
        self.from_ns <= o.from_ns && o.to_ns <= self.to_ns
    }
    /// The span's end lies in (from, to].
    fn ends_in(self, w: Span) -> bool {
        w.from_ns < self.to_ns && self.to_ns <= w.to_ns
    }
}

/// What one mechanism's run recorded.
#[derive(Debug, Clone)]
pub struct Timeline<'a> {
    /// The bystander's kernels, in any order.
    pub kernels: &'a [Span],
    pub baseline: Span,
    pub measured: Span,
    /// Our preemptions (suspend call start .. resume call end), inside `measured`.
    pub preemptions: &'a [Span],
    /// When the bystander said it stopped (its `done` line); `None`: it died without saying so.
    pub bystander_stopped_ns: Option<u64>,
}

/// Why a timeline gives no figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The bystander died (no `done` line) or stopped before the measured window ended.
    BystanderStopped {
        stopped_ns: Option<u64>,
        window_end_ns: u64,
    },
    /// No bystander kernel ran wholly inside the baseline window.
    NoBaselineKernel,
    /// No bystander kernel ended inside the measured window.
    NoMeasuredKernel,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::BystanderStopped { stopped_ns: None, .. } => {
                write!(f, "the bystander process died without finishing (no `done` line)")
            }
            Problem::BystanderStopped {
                stopped_ns: Some(s),
                window_end_ns,
            } => write!(
                f,
                "the bystander process stopped {} us before the measured window ended",
                window_end_ns.saturating_sub(*s) / 1000
            ),
            Problem::NoBaselineKernel => write!(f, "no bystander kernel ran wholly inside the baseline window"),
            Problem::NoMeasuredKernel => write!(f, "no bystander kernel ended inside the measured window"),
        }
    }
}

/// The bystander's cost; every figure from the timelines, units in the names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    pub preemptions: usize,
    /// Preemptions that at least one bystander kernel overlapped.
    pub preemptions_overlapped: usize,
    pub baseline_kernels: usize,
    pub baseline_kernel_p50_ns: u64,
    pub baseline_kernel_p99_ns: u64,
    /// Kernels of the measured window that overlapped a preemption.
    pub overlapping_kernels: usize,
    /// Duration minus the baseline median, per overlapping kernel (may be negative: noise).
    pub overlapping_kernel_extra_p50_ns: Option<i64>,
    pub overlapping_kernel_extra_p99_ns: Option<i64>,
    /// Per overlapped preemption: the sum of its kernels' extra latency.
    pub delay_per_preemption_p50_ns: Option<i64>,
    pub delay_per_preemption_p99_ns: Option<i64>,
    pub baseline_kernels_per_s: f64,
    pub measured_kernels_per_s: f64,
    /// 1 - measured / baseline rate (negative if the bystander ran faster).
    pub throughput_loss_fraction: f64,
    /// The throughput loss as bystander time lost per preemption.
    pub lost_time_per_preemption_ns: Option<f64>,
}

/// A duration difference in ns; durations are far below i64::MAX.
fn diff_ns(a: u64, b: u64) -> i64 {
    i64::try_from(i128::from(a) - i128::from(b)).unwrap_or(if a > b { i64::MAX } else { i64::MIN })
}

fn rate_per_s(kernels: &[Span], w: Span) -> f64 {
    let n = kernels.iter().filter(|k| k.ends_in(w)).count();
    if w.len_ns() == 0 {
        0.0
    } else {
        n as f64 / (w.len_ns() as f64 / 1e9)
    }
}

/// The cost, or why the timeline gives none.
pub fn analyze(t: &Timeline<'_>) -> Result<Cost, Problem> {
    match t.bystander_stopped_ns {
        Some(s) if s >= t.measured.to_ns => {}
        stopped_ns => {
            return Err(Problem::BystanderStopped {
                stopped_ns,
                window_end_ns: t.measured.to_ns,
            });
        }
    }
    let mut base: Vec<u64> = t
        .kernels
        .iter()
        .filter(|k| t.baseline.contains(**k))
        .map(|k| k.len_ns())
        .collect();
    base.sort_unstable();
    let (Some(base_p50), Some(base_p99)) = (nearest_rank(&base, 0.5), nearest_rank(&base, 0.99)) else {
        return Err(Problem::NoBaselineKernel);
    };
    if !t.kernels.iter().any(|k| k.ends_in(t.measured)) {
        return Err(Problem::NoMeasuredKernel);
    }
    let mut per_preemption: Vec<Option<i64>> = vec![None; t.preemptions.len()];
    let mut extras = Vec::new();
    for k in t.kernels.iter().filter(|k| k.overlaps(t.measured)) {
        if let Some(j) = t.preemptions.iter().position(|p| k.overlaps(*p)) {
            let extra = diff_ns(k.len_ns(), base_p50);
            extras.push(extra);
            let d = per_preemption[j].get_or_insert(0);
            *d = d.saturating_add(extra);
        }
    }
    extras.sort_unstable();
    let mut delays: Vec<i64> = per_preemption.into_iter().flatten().collect();
    delays.sort_unstable();
    let baseline_kernels_per_s = rate_per_s(t.kernels, t.baseline);
    let measured_kernels_per_s = rate_per_s(t.kernels, t.measured);
    let throughput_loss_fraction = 1.0 - measured_kernels_per_s / baseline_kernels_per_s;
    Ok(Cost {
        preemptions: t.preemptions.len(),
        preemptions_overlapped: delays.len(),
        baseline_kernels: base.len(),
        baseline_kernel_p50_ns: base_p50,
        baseline_kernel_p99_ns: base_p99,
        overlapping_kernels: extras.len(),
        overlapping_kernel_extra_p50_ns: nearest_rank(&extras, 0.5),
        overlapping_kernel_extra_p99_ns: nearest_rank(&extras, 0.99),
        delay_per_preemption_p50_ns: nearest_rank(&delays, 0.5),
        delay_per_preemption_p99_ns: nearest_rank(&delays, 0.99),
        baseline_kernels_per_s,
        measured_kernels_per_s,
        throughput_loss_fraction,
        lost_time_per_preemption_ns: (!t.preemptions.is_empty())
            .then(|| throughput_loss_fraction * t.measured.len_ns() as f64 / t.preemptions.len() as f64),
    })
}

#[cfg(test)]
mod tests;
