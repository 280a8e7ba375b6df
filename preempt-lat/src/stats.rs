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
}
