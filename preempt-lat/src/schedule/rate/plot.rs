//! sweep-rate.svg: per-class P99 with its p50 band against the offered rate (small multiples
//! sharing axes) above the requests completed per second against it.
use super::{RatePoint, RateSweep};
use crate::error::Error;
use crate::num::ms;
use crate::plot::{self, Axis, Grid, Panel, RefLine, Scale, Series};
use crate::schedule::result::ClassResult;
use std::path::Path;

/// The x axis of the rates: linear over a narrow range (Fig. 15b's 100 to 1200), logarithmic
/// where the rates span more than a factor of 20.
pub fn rate_scale(rates: &[f64]) -> Scale {
    let (lo, hi) = rates
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &r| (a.min(r), b.max(r)));
    if lo > 0.0 && hi / lo > 20.0 {
        Scale::Log
    } else {
        Scale::Linear
    }
}

/// The latency panels: one per request class (saturating classes have no request latency),
/// each its P99 in ms against the offered rate with the p50-p99 band, and its deadline where it
/// has one (kedf's rule works against it). Panels in a near-square grid.
pub fn latency_panels(s: &RateSweep) -> (Vec<Panel>, usize) {
    let Some(first) = s.points.first() else {
        return (Vec::new(), 1);
    };
    let kedf = s.params.policy == preempt_api::Policy::KEdf.name();
    let (lo, hi) = s.points.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(p.offered_rate), b.max(p.offered_rate))
    });
    let mut panels = Vec::new();
    for (i, c) in first.result.classes.iter().enumerate() {
        if c.spec.saturates() {
            continue;
        }
        let spread: Vec<(f64, f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| {
                let l = p.result.classes.get(i)?.latency_ns?;
                Some((p.offered_rate, ms(l.p50), ms(l.p99)))
            })
            .collect();
        if spread.is_empty() {
            continue;
        }
        let refs = c
            .spec
            .deadline_ms
            .filter(|_| kedf)
            .map(|d| RefLine {
                label: "the class's deadline".into(),
                points: vec![(lo * 0.9, d), (hi * 1.1, d)],
            })
            .into_iter()
            .collect();
        panels.push(Panel {
            title: c.spec.name.clone(),
            series: vec![Series {
                label: "P99".into(),
                points: spread.iter().map(|&(x, _, p99)| (x, p99)).collect(),
                spread,
                connect: true,
            }],
            refs,
        });
    }
    // A near-square grid: 2 panels side by side, 4 in 2 x 2, 9 in 3 x 3.
    let mut cols = 1;
    while cols * cols < panels.len() {
        cols += 1;
    }
    (panels, cols)
}

/// The throughput panel: requests completed per second (all request classes together) against
/// the offered rate, over the requests that arrived per second and the offered rate itself.
/// Arrivals are shown because bursty arrivals (log-normal, sigma 2) over a short run rarely add
/// up to the offered rate: the device kept up where completed meets arrived.
#[allow(clippy::cast_precision_loss)] // counts of one run: far below 2^52
pub fn throughput_panel(s: &RateSweep) -> Panel {
    let per_s = |p: &RatePoint, f: &dyn Fn(&ClassResult) -> f64| -> f64 {
        let sum: f64 = p.result.classes.iter().filter(|c| !c.spec.saturates()).map(f).sum();
        sum
    };
    let line = |label: &str, f: &dyn Fn(&RatePoint) -> f64| Series {
        label: label.into(),
        points: s.points.iter().map(|p| (p.offered_rate, f(p))).collect(),
        spread: Vec::new(),
        connect: true,
    };
    let (lo, hi) = s.points.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(p.offered_rate), b.max(p.offered_rate))
    });
    let arrived = |p: &RatePoint| {
        if p.result.window_s > 0.0 {
            per_s(p, &|c| c.arrived as f64) / p.result.window_s
        } else {
            0.0
        }
    };
    // Arrived and offered as reference lines under the one measured line: where completed
    // covers arrived, every request that came was served.
    Panel {
        title: String::new(),
        series: vec![line("completed", &|p| per_s(p, &|c| c.requests_per_s))],
        refs: vec![
            RefLine {
                label: "offered (the swept rate)".into(),
                points: vec![(lo, lo), (hi, hi)],
            },
            RefLine {
                label: "arrived (the arrivals drawn)".into(),
                points: s.points.iter().map(|p| (p.offered_rate, arrived(p))).collect(),
            },
        ],
    }
}

/// Draws sweep-rate.svg at `path`: the latency panels above the throughput panel.
pub fn draw(s: &RateSweep, path: &Path) -> Result<(), Error> {
    let device = plot::device_label(&s.env.device, s.env.host_figures);
    let p = &s.params;
    let policy = if p.policy == preempt_api::Policy::KEdf.name() {
        format!("{} K = {}", p.policy, p.k)
    } else {
        p.policy.to_string()
    };
    let rates = rate_scale(&p.rates);
    let x = || Axis {
        title: "offered load (requests per second, all classes)".into(),
        scale: rates,
    };
    let (panels, cols) = latency_panels(s);
    let latency_title = format!(
        "Request latency vs offered load, per class ({policy}, {} arrivals; {device})",
        p.arrival.name()
    );
    let throughput_title = format!("Requests completed and arrived vs offered load ({device})");
    let mut grids = Vec::new();
    if !panels.is_empty() {
        grids.push(Grid {
            title: &latency_title,
            x: x(),
            y: Axis {
                title: "latency (ms): P99, band p50-p99".into(),
                scale: Scale::Log,
            },
            panels,
            cols,
            x_names: &[],
        });
    }
    grids.push(Grid {
        title: &throughput_title,
        x: x(),
        y: Axis {
            title: "requests per second, all request classes".into(),
            scale: rates,
        },
        panels: vec![throughput_panel(s)],
        cols: 1,
        x_names: &[],
    });
    plot::draw_stack(path, &grids)
}
