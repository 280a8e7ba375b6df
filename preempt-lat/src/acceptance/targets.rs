//! The seeds' targets that `acceptance` can measure today, judged from the result files its
//! stages wrote: the targets as constants ([`Target`], thresholds beside them) and one pure
//! function per target over a result's JSON, so that the shared target table of the evaluation
//! work (issue 23) can take this module whole.
//! A host figure is judged like a GPU one and labelled as a host figure.
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Lv3 P99 suspend latency at T = 0.5 ms, in us (the seeds' test 4.1.1).
pub const LV3_P99_US: f64 = 100.0;
/// Lv3 is flat in T: max/min of P99 suspend over the T sweep.
pub const LV3_FLAT_RATIO: f64 = 1.5;
/// Lv1 P99 suspend against threshold x T (XSched's ~1 x threshold x T).
pub const LV1_BAND: (f64, f64) = (0.5, 1.5);
/// Lv1 overhead at a threshold of at least [`LV1_OVERHEAD_THRESHOLD`], in percent.
pub const LV1_OVERHEAD_PERCENT: f64 = 1.0;
pub const LV1_OVERHEAD_THRESHOLD: u64 = 10;
/// HP P99 under priority scheduling against HP alone (Fig. 9 top).
pub const HP_RATIO: f64 = crate::priority::TARGET_P99_RATIO;

/// A target: its id and what it asks, for people.
pub struct Target {
    pub id: &'static str,
    pub text: &'static str,
}

pub const LV3_P99: Target = Target {
    id: "lv3-p99",
    text: "Lv3 P99 suspend < 100 us at T = 0.5 ms",
};
pub const LV3_FLAT: Target = Target {
    id: "lv3-flat-in-t",
    text: "Lv3 flat in T: max/min of P99 suspend over T <= 1.5",
};
pub const LV1_IN_BAND: Target = Target {
    id: "lv1-threshold-x-t",
    text: "Lv1 P99 suspend within 0.5-1.5 x threshold x T at T = 0.5 ms",
};
pub const LV1_OVERHEAD: Target = Target {
    id: "lv1-overhead",
    text: "Lv1 overhead < 1 % at threshold >= 10",
};
pub const HP_VS_STANDALONE: Target = Target {
    id: "hp-p99-vs-standalone",
    text: "HP P99 under Lv3 priority scheduling <= 1.30 x standalone",
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    #[serde(rename = "PASS")]
    Pass,
    #[serde(rename = "FAIL")]
    Fail,
    /// Nothing to judge (the stage that measures it did not pass).
    #[serde(rename = "N/A")]
    NotMeasured,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NotMeasured => "N/A",
        }
    }
}

/// One target judged on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    pub id: String,
    pub target: String,
    /// What it was measured on: a mechanism (`dbg-trap`, `sigstop`), `lv1`, a mode.
    pub scope: String,
    /// The measured value in the target's unit (us, a ratio, percent); none when not measured.
    pub measured: Option<f64>,
    /// The value as shown (`37.2 us`, `1.12x`).
    pub shown: String,
    pub verdict: Verdict,
    pub host_figures: bool,
    /// The result file it was judged from, or the stage that did not measure it.
    pub source: String,
    /// Detail: the numbers behind the verdict, or why nothing was measured.
    pub note: String,
}

impl Judged {
    fn new(t: &Target, scope: &str, source: &str, host_figures: bool) -> Self {
        Judged {
            id: t.id.into(),
            target: t.text.into(),
            scope: scope.into(),
            measured: None,
            shown: "-".into(),
            verdict: Verdict::NotMeasured,
            host_figures,
            source: source.into(),
            note: String::new(),
        }
    }

    /// Nothing measured it: `why` (e.g. the stage's status and reason).
    pub fn not_measured(t: &Target, scope: &str, why: String) -> Self {
        Judged {
            note: why,
            ..Judged::new(t, scope, "-", false)
        }
    }

    fn judge(mut self, value: f64, shown: String, ok: bool, note: String) -> Self {
        (self.measured, self.shown, self.note) = (Some(value), shown, note);
        self.verdict = if ok { Verdict::Pass } else { Verdict::Fail };
        self
    }

    /// `target (scope)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.target, self.scope)
    }

    /// The measured value and its detail, for one line.
    pub fn detail(&self) -> String {
        let host = if self.host_figures { " [host figure]" } else { "" };
        match self.verdict {
            Verdict::NotMeasured => format!("not measured: {}", self.note),
            _ => format!("{}{host}; {}", self.shown, self.note),
        }
    }
}

fn is_host(v: &Value) -> bool {
    v["env"]["device"].as_str().is_some_and(crate::env::is_host_device)
}

#[allow(clippy::cast_precision_loss)] // latencies in ns: far below 2^52
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// [`LV3_P99`] from a Lv3 run's JSON (`preempt-lat --level 3 --format json`).
pub fn lv3_p99(run: &Value, scope: &str, source: &str) -> Judged {
    let j = Judged::new(&LV3_P99, scope, source, is_host(run));
    let (Some(p99), Some(t)) = (
        run["latency_ns"]["suspend"]["p99"].as_u64(),
        run["params"]["t_ms"].as_f64(),
    ) else {
        return Judged {
            note: "the run has no suspend P99".into(),
            ..j
        };
    };
    let n = run["latency_ns"]["suspend"]["count"].as_u64().unwrap_or(0);
    let p = us(p99);
    j.judge(
        p,
        format!("{p:.1} us"),
        p < LV3_P99_US,
        format!("P99 of {n} suspends at T = {t} ms"),
    )
}

/// [`LV1_IN_BAND`] from a Lv1 run's JSON: P99 suspend / (threshold x T).
pub fn lv1_in_band(run: &Value, source: &str) -> Judged {
    let j = Judged::new(&LV1_IN_BAND, "lv1", source, is_host(run));
    let p = &run["params"];
    let (Some(p99), Some(t), Some(th)) = (
        run["latency_ns"]["suspend"]["p99"].as_u64(),
        p["t_ms"].as_f64(),
        p["threshold"].as_u64(),
    ) else {
        return Judged {
            note: "the run has no suspend P99, T or threshold".into(),
            ..j
        };
    };
    #[allow(clippy::cast_precision_loss)] // a threshold: a u32
    let expected_us = th as f64 * t * 1000.0;
    let ratio = us(p99) / expected_us;
    j.judge(
        ratio,
        format!("{ratio:.2}x"),
        (LV1_BAND.0..=LV1_BAND.1).contains(&ratio),
        format!("P99 {:.1} us against {th} x {t} ms = {expected_us:.0} us", us(p99)),
    )
}

/// [`LV3_FLAT`] from `sweep-t.json`: the Lv3 runs' P99 suspend, max over min across T (scope
/// `lv3`; the mechanism, which the runs record, is in the note).
pub fn lv3_flat(sweep: &Value, source: &str) -> Judged {
    let runs: Vec<&Value> = sweep
        .as_array()
        .map(|a| a.iter().filter(|r| r["params"]["level"] == 3).collect())
        .unwrap_or_default();
    let host = runs.first().is_some_and(|r| is_host(r));
    let j = Judged::new(&LV3_FLAT, "lv3", source, host);
    let mechanism = runs.first().and_then(|r| r["env"]["mechanism"].as_str()).unwrap_or("-");
    let pts: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| {
            Some((
                r["params"]["t_ms"].as_f64()?,
                us(r["latency_ns"]["suspend"]["p99"].as_u64()?),
            ))
        })
        .collect();
    if pts.len() < 2 {
        return Judged {
            note: format!("{} Lv3 point(s) in the sweep: two T values are needed", pts.len()),
            ..j
        };
    }
    let (lo, hi) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let ratio = hi / lo.max(1e-9);
    let at: Vec<String> = pts.iter().map(|(t, p)| format!("{t} ms: {p:.1}")).collect();
    j.judge(
        ratio,
        format!("{ratio:.2}x"),
        ratio <= LV3_FLAT_RATIO,
        format!("{mechanism}; P99 us by T: {}", at.join(", ")),
    )
}

/// [`LV1_OVERHEAD`] from `sweep-threshold.json`: the worst overhead at a threshold of at least
/// [`LV1_OVERHEAD_THRESHOLD`], over every T.
pub fn lv1_overhead(points: &Value, source: &str) -> Judged {
    let host = points
        .as_array()
        .and_then(|a| a.first())
        .and_then(|p| p["device"].as_str())
        .is_some_and(crate::env::is_host_device);
    let j = Judged::new(&LV1_OVERHEAD, "lv1", source, host);
    let pts: Vec<(f64, u64, f64)> = points
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    let th = p["threshold"].as_u64()?;
                    (th >= LV1_OVERHEAD_THRESHOLD).then_some((p["t_ms"].as_f64()?, th, p["overhead_percent"].as_f64()?))
                })
                .collect()
        })
        .unwrap_or_default();
    let Some(worst) = pts.iter().copied().max_by(|a, b| a.2.total_cmp(&b.2)) else {
        return Judged {
            note: format!("no point at a threshold >= {LV1_OVERHEAD_THRESHOLD} in the sweep"),
            ..j
        };
    };
    j.judge(
        worst.2,
        format!("{:+.2} %", worst.2),
        worst.2 < LV1_OVERHEAD_PERCENT,
        format!(
            "worst of {} point(s), at T = {} ms, threshold {}",
            pts.len(),
            worst.0,
            worst.1
        ),
    )
}

/// [`HP_VS_STANDALONE`] from `priority.json`: the lv3 mode's HP P99 / standalone-hp's.
pub fn hp_vs_standalone(prio: &Value, source: &str) -> Judged {
    let modes = prio["modes"].as_array().map(Vec::as_slice).unwrap_or_default();
    let lv3 = modes.iter().find(|m| m["mode"] == "lv3");
    let mechanism = lv3.and_then(|m| m["mechanism"].as_str()).unwrap_or("-");
    let j = Judged::new(&HP_VS_STANDALONE, "lv3 mode", source, is_host(prio));
    let Some(ratio) = lv3.and_then(|m| m["hp_p99_vs_standalone"].as_f64()) else {
        return Judged {
            note: "the priority run has no lv3 mode with a standalone-hp reference".into(),
            ..j
        };
    };
    j.judge(
        ratio,
        format!("{ratio:.2}x"),
        ratio <= HP_RATIO,
        format!("the lv3 mode's ({mechanism}) HP request P99 over standalone-hp's"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(device: &str, level: u64, t: f64, p99_ns: u64) -> Value {
        json!({
            "params": {"level": level, "t_ms": t, "threshold": 8},
            "env": {"device": device},
            "latency_ns": {"suspend": {"p99": p99_ns, "count": 300}},
        })
    }

    #[test]
    fn lv3_p99_is_judged_against_100_us_and_host_figures_say_so() {
        let ok = lv3_p99(&run("hip:0", 3, 0.5, 99_000), "dbg-trap", "r.json");
        assert_eq!((ok.verdict, ok.host_figures), (Verdict::Pass, false));
        assert_eq!(ok.measured, Some(99.0));
        let over = lv3_p99(&run("host", 3, 0.5, 100_000), "sigstop", "r.json");
        assert_eq!((over.verdict, over.host_figures), (Verdict::Fail, true));
        assert!(over.detail().contains("[host figure]"), "{}", over.detail());
        let empty = lv3_p99(&json!({}), "x", "r.json");
        assert_eq!(empty.verdict, Verdict::NotMeasured);
    }

    #[test]
    fn lv1_is_judged_against_threshold_times_t() {
        // threshold 8 x 0.5 ms = 4000 us: the band is 2000-6000 us.
        let at = |p99_us: u64| lv1_in_band(&run("hip:0", 1, 0.5, p99_us * 1000), "r.json").verdict;
        assert_eq!(at(4000), Verdict::Pass);
        assert_eq!(at(2000), Verdict::Pass);
        assert_eq!(at(1999), Verdict::Fail);
        assert_eq!(at(6001), Verdict::Fail);
    }

    #[test]
    fn lv3_flatness_is_max_over_min_of_the_lv3_points() {
        let sweep = json!([
            run("hip:0", 1, 0.1, 900_000),
            run("hip:0", 3, 0.1, 40_000),
            run("hip:0", 3, 1.0, 60_000),
        ]);
        let j = lv3_flat(&sweep, "s.json");
        assert_eq!((j.verdict, j.measured), (Verdict::Pass, Some(1.5)), "{j:?}");
        let steep = json!([run("hip:0", 3, 0.1, 40_000), run("hip:0", 3, 1.0, 61_000)]);
        assert_eq!(lv3_flat(&steep, "s").verdict, Verdict::Fail);
        let one = json!([run("hip:0", 3, 0.1, 40_000)]);
        assert_eq!(lv3_flat(&one, "s").verdict, Verdict::NotMeasured);
    }

    #[test]
    fn lv1_overhead_takes_the_worst_point_at_threshold_10_or_more() {
        let p = |th: u64, t: f64, o: f64| json!({"device": "host", "threshold": th, "t_ms": t, "overhead_percent": o});
        let pts = json!([p(1, 0.01, 40.0), p(10, 0.01, 0.9), p(10, 1.0, 0.2)]);
        let j = lv1_overhead(&pts, "t.json");
        assert_eq!(
            (j.verdict, j.measured, j.host_figures),
            (Verdict::Pass, Some(0.9), true)
        );
        let bad = json!([p(10, 0.01, 1.0)]);
        assert_eq!(lv1_overhead(&bad, "t").verdict, Verdict::Fail);
        let none = json!([p(4, 0.01, 0.1)]);
        assert_eq!(lv1_overhead(&none, "t").verdict, Verdict::NotMeasured);
    }

    #[test]
    fn hp_ratio_is_the_lv3_modes() {
        let prio = |r: f64| {
            json!({"env": {"device": "hip:1"}, "modes": [
                {"mode": "lv1", "mechanism": "lv1-stop", "hp_p99_vs_standalone": 9.0},
                {"mode": "lv3", "mechanism": "dbg-trap", "hp_p99_vs_standalone": r},
            ]})
        };
        let j = hp_vs_standalone(&prio(HP_RATIO), "p.json");
        assert_eq!((j.verdict, j.scope.as_str()), (Verdict::Pass, "lv3 mode"));
        assert!(j.note.contains("(dbg-trap)"), "{}", j.note);
        assert_eq!(hp_vs_standalone(&prio(HP_RATIO + 0.01), "p").verdict, Verdict::Fail);
        assert_eq!(
            hp_vs_standalone(&json!({"modes": []}), "p").verdict,
            Verdict::NotMeasured
        );
        assert_eq!(serde_json::to_value(Verdict::NotMeasured).unwrap(), "N/A");
    }
}
