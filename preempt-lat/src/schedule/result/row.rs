//! The CSV row of the class experiment, one type for both files that have a row per class:
//! `schedule.csv` (one run) and `sweep-rate.csv` (one run per offered rate).
use super::{ClassResult, ScheduleResult};
use crate::num::ms;
use serde::Serialize;

/// A column of one of the two files only: `None` leaves it out of the other.
type Only<T> = Option<T>;

/// One CSV row: a class of a run (`schedule.csv`), or of the run at one rate of a sweep
/// (`sweep-rate.csv`). The columns both have come from the class ([`Row::of`]); each file adds
/// its own and leaves the other's out.
#[derive(Debug, Serialize)]
pub struct Row<'a> {
    pub device: &'a str,
    pub policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k: Only<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_rate: Only<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Only<&'a str>,
    pub class: &'a str,
    /// The sweep's name for `rate`: the class's own part of the offered rate (0: saturating).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_rate: Only<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Only<f64>,
    pub t_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Only<Option<f64>>,
    pub finished: u64,
    pub late: u64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub requests_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_per_s: Only<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_achieved_percent: Only<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_asked_percent: Only<Option<f64>>,
    /// `--standalone`: P99 here over P99 alone.
    pub p99_vs_alone: Option<f64>,
    /// `--standalone`: the point's combined throughput loss against the classes alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_loss_percent: Only<Option<f64>>,
    /// Empty where a stop abandoned commands still running (the check could not be made).
    pub exactly_once: Option<bool>,
}

impl<'a> Row<'a> {
    /// Class `c` of `r`: the columns both files have, none of either's own.
    pub fn of(r: &'a ScheduleResult, c: &'a ClassResult) -> Self {
        Row {
            device: &r.env.device,
            policy: r.params.policy,
            k: None,
            offered_rate: None,
            mechanism: None,
            class: &c.spec.name,
            class_rate: None,
            rate: None,
            t_ms: c.spec.t_ms,
            deadline_ms: None,
            finished: c.finished,
            late: c.late,
            p50_ms: c.latency_ns.map(|s| ms(s.p50)),
            p90_ms: c.latency_ns.map(|s| ms(s.p90)),
            p99_ms: c.latency_ns.map(|s| ms(s.p99)),
            max_ms: c.latency_ns.map(|s| ms(s.max)),
            requests_per_s: c.requests_per_s,
            work_per_s: None,
            share_achieved_percent: None,
            share_asked_percent: None,
            p99_vs_alone: c.p99_vs_alone,
            throughput_loss_percent: None,
            exactly_once: c.verdict(),
        }
    }
}
