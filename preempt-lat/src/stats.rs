//! Latency statistics: an HDR histogram in nanoseconds and the percentiles preempt-lat reports.
use hdrhistogram::Histogram;
use serde::Serialize;

/// Percentiles of one latency metric, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    pub mean: f64,
}

/// Collects one metric. Values are clamped to [1 ns, 1 h]; 3 significant digits.
pub struct Recorder {
    h: Histogram<u64>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            h: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds"),
        }
    }
}

impl Recorder {
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    pub fn summary(&self) -> Option<Summary> {
        if self.h.is_empty() {
            return None;
        }
        let q = |p: f64| self.h.value_at_quantile(p);
        Some(Summary {
            count: self.h.len(),
            min: self.h.min(),
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p99_9: q(0.999),
            max: self.h.max(),
            mean: self.h.mean(),
        })
    }
}

/// One point of a latency distribution: the fraction `q` of the samples at or below `ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CdfPoint {
    pub q: f64,
    pub ns: u64,
}

/// The fractions a CDF is drawn at: every 5 % and, for the tail the targets are about, finer
/// steps up to the maximum.
const CDF_QUANTILES: [f64; 27] = [
    0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.96,
    0.97, 0.98, 0.99, 0.995, 0.999, 1.0,
];

impl Recorder {
    /// The distribution at [`CDF_QUANTILES`] (empty without samples): what a CDF plot draws.
    pub fn cdf(&self) -> Vec<CdfPoint> {
        if self.h.is_empty() {
            return Vec::new();
        }
        CDF_QUANTILES
            .iter()
            .map(|&q| CdfPoint {
                q,
                ns: self.h.value_at_quantile(q),
            })
            .collect()
    }
}

/// `s`'s P99 over `base`'s: how much worse a tail got (`None`: either has no samples, or the base
/// P99 is 0).
#[allow(clippy::cast_precision_loss)] // ns: far below 2^52
pub fn p99_ratio(s: Option<Summary>, base: Option<Summary>) -> Option<f64> {
    match (s, base) {
        (Some(s), Some(b)) if b.p99 > 0 => Some(s.p99 as f64 / b.p99 as f64),
        _ => None,
    }
}

/// The nearest-rank `q` quantile (0 < q <= 1) of sorted values: exact, for figures made of a few
/// samples, where [`Recorder`]'s histogram is for many.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = crate::num::ceil_u32(q * n as f64).max(1) as usize;
    sorted.get(rank.min(n) - 1).copied()
}

/// The median of sorted values: the middle one, the upper of the two middle ones for an even
/// count (what the min / median / max figures over runs report).
pub fn median<T: Copy>(sorted: &[T]) -> Option<T> {
    sorted.get(sorted.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut r = Recorder::default();
        for v in 1..=1000u64 {
            r.record(v * 1000);
        }
        let s = r.summary().unwrap();
        assert_eq!(s.count, 1000);
        // 3 significant digits: values are exact to within 0.1%.
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 0.001 + 1.0;
        assert!(near(s.p50, 500_000), "{s:?}");
        assert!(near(s.p99, 990_000), "{s:?}");
        assert!(near(s.p99_9, 999_000), "{s:?}");
        assert!(near(s.max, 1_000_000) && near(s.min, 1000), "{s:?}");
    }

    #[test]
    fn empty_has_no_summary_and_zero_is_clamped() {
        let mut r = Recorder::default();
        assert!(r.summary().is_none());
        r.record(0);
        assert_eq!(r.summary().unwrap().min, 1);
    }

    #[test]
    fn a_p99_over_another() {
        let of = |p99: u64| {
            Some(Summary {
                count: 1,
                min: p99,
                p50: p99,
                p90: p99,
                p95: p99,
                p99,
                p99_9: p99,
                max: p99,
                mean: 0.0,
            })
        };
        assert_eq!(p99_ratio(of(3000), of(1000)), Some(3.0));
        assert_eq!(p99_ratio(of(3000), None), None);
        assert_eq!(p99_ratio(None, of(1000)), None);
        assert_eq!(p99_ratio(of(3000), of(0)), None, "no ratio to a zero base");
    }

    #[test]
    fn nearest_rank_and_median_of_a_few_samples() {
        for n in [1usize, 2, 7, 100, 1000] {
            let v: Vec<usize> = (1..=n).collect();
            for q in [0.5, 0.99, 1.0] {
                let want = (crate::num::ceil_u32(q * n as f64) as usize).max(1);
                assert_eq!(nearest_rank(&v, q), Some(want), "n {n} q {q}");
            }
        }
        assert_eq!(nearest_rank(&[10, 20, 30, 40], 0.5), Some(20), "the lower middle one");
        assert_eq!(nearest_rank::<u64>(&[], 0.5), None);
        assert_eq!(median(&[1, 2, 3]), Some(2));
        assert_eq!(median(&[1, 2, 3, 4]), Some(3), "the upper of the two middle ones");
        assert_eq!(median::<f64>(&[]), None);
    }
}
