//! The class experiment against its classes alone (`--standalone`): each class first runs by
//! itself (same arrivals, same duration, same policy: one stream, so nothing is ever suspended),
//! then all of them together. Per class: its P99 together over its P99 alone; for the run: the
//! combined throughput (device work per second, commands x T, so that classes of different T add
//! up) against what the classes did alone.
//!
//! What "alone" adds up to depends on the classes. Classes with requests each use part of the
//! device, and alone they sum: the reference is the sum of their throughputs alone. A saturating
//! class alone keeps the device busy all the time: its throughput alone *is* the device's
//! capacity, and two saturating classes together can never do twice that. So where a class
//! saturates, the reference is the smaller of that sum and the capacity measured (the most work
//! per second a saturating class did alone); `reference` in the JSON says which applied.
use super::ScheduleResult;
use crate::stats::Summary;
use serde::Serialize;

/// One class run alone.
#[derive(Debug, Clone, Serialize)]
pub struct Alone {
    pub latency_ns: Option<Summary>,
    pub requests_per_s: f64,
    /// Device time its completed commands represent, per second (commands x T).
    pub work_per_s: f64,
    /// Every command of the run alone completed exactly once (null: a stop abandoned some, the
    /// check could not be made).
    pub exactly_once: Option<bool>,
}

/// The run's combined throughput against its classes alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standalone {
    /// The classes' device work per second alone, summed.
    pub sum_alone_work_per_s: f64,
    /// The device's capacity as measured: the most work per second a saturating class did
    /// alone (`None`: no class saturates).
    pub capacity_work_per_s: Option<f64>,
    /// What the combined throughput is compared with: `sum of the classes alone`, or `device
    /// capacity (a saturating class alone)` where that is smaller.
    pub reference: &'static str,
    pub reference_work_per_s: f64,
    /// The run's combined device work per second.
    pub combined_work_per_s: f64,
    /// (1 - combined / reference) x 100: what running together cost (negative: together did
    /// more, within the noise).
    pub throughput_loss_percent: f64,
}

pub const SUM_OF_ALONE: &str = "sum of the classes alone";
pub const CAPACITY: &str = "device capacity (a saturating class alone)";

impl Standalone {
    /// The comparison of `combined` (work per second together) with the classes alone, each
    /// given as (its work per second alone, whether it saturates).
    pub fn of(combined: f64, alone: &[(f64, bool)]) -> Standalone {
        let sum: f64 = alone.iter().map(|a| a.0).sum();
        let capacity = alone
            .iter()
            .filter(|a| a.1)
            .map(|a| a.0)
            .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))));
        let (reference, value) = match capacity {
            Some(c) if c < sum => (CAPACITY, c),
            _ => (SUM_OF_ALONE, sum),
        };
        Standalone {
            sum_alone_work_per_s: sum,
            capacity_work_per_s: capacity,
            reference,
            reference_work_per_s: value,
            combined_work_per_s: combined,
            throughput_loss_percent: if value > 0.0 {
                (1.0 - combined / value) * 100.0
            } else {
                0.0
            },
        }
    }
}

/// Fills in `r` (all classes together) against `alone` (one result per class, in `r`'s order,
/// each with that class only).
pub fn compare(r: &mut ScheduleResult, alone: &[ScheduleResult]) {
    let mut figures = Vec::new();
    for (c, a) in r.classes.iter_mut().zip(alone) {
        let Some(ac) = a.classes.first() else { continue };
        c.p99_vs_alone = crate::stats::p99_ratio(c.latency_ns, ac.latency_ns);
        c.alone = Some(Alone {
            latency_ns: ac.latency_ns,
            requests_per_s: ac.requests_per_s,
            work_per_s: ac.work_per_s,
            exactly_once: ac.check.ok,
        });
        figures.push((ac.work_per_s, c.spec.saturates()));
    }
    r.standalone = Some(Standalone::of(r.combined_work_per_s, &figures));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_classes_are_compared_with_their_sum_alone() {
        let s = Standalone::of(0.45, &[(0.3, false), (0.2, false)]);
        assert_eq!((s.reference, s.reference_work_per_s), (SUM_OF_ALONE, 0.5));
        assert!((s.throughput_loss_percent - 10.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.capacity_work_per_s, None);
    }

    #[test]
    fn saturating_classes_are_compared_with_the_capacity_they_measure_alone() {
        // Two saturating queues each fill the device alone: together they can only share it.
        let s = Standalone::of(0.95, &[(1.0, true), (0.98, true)]);
        assert_eq!((s.reference, s.reference_work_per_s), (CAPACITY, 1.0));
        assert_eq!(s.sum_alone_work_per_s, 1.98);
        assert!((s.throughput_loss_percent - 5.0).abs() < 1e-9, "{s:?}");
        // A light request class beside a saturating one: still the capacity.
        let s = Standalone::of(1.0, &[(0.1, false), (0.97, true)]);
        assert_eq!((s.reference, s.reference_work_per_s), (CAPACITY, 0.97));
        assert!(s.throughput_loss_percent < 0.0, "together did more than alone: {s:?}");
        // Nothing ran alone: no loss to speak of, and no division by zero.
        assert_eq!(Standalone::of(0.0, &[(0.0, false)]).throughput_loss_percent, 0.0);
    }
}
