//! acceptance's view of the seeds' targets: the one judge ([`crate::targets`], where every
//! target and bound lives) applied to the result files its stages wrote, each judgement a row
//! of the device's summary with a verdict of N/A where no stage measured the target.
//! A host figure is judged like a GPU one and labelled as a host figure.
use crate::targets::{Judgement, TARGETS};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// The value as shown (`37.200 us`, `1.120 x`).
    pub shown: String,
    pub verdict: Verdict,
    pub host_figures: bool,
    /// The result file it was judged from, or the stage that did not measure it.
    pub source: String,
    /// Detail: where in the result the figure comes from, or why nothing was measured.
    pub note: String,
}

/// `what bound` of the target `id` (e.g. `Lv3 suspend P99 at T = 0.5 ms < 100 us`).
pub fn target_text(id: &str) -> String {
    TARGETS.iter().find(|t| t.id == id).map_or_else(
        || id.to_string(),
        |t| format!("{} {}", t.what, t.bound.describe(t.unit)),
    )
}

impl Judged {
    /// Nothing measured target `id`: `why` (e.g. the stage's status and reason).
    pub fn not_measured(id: &str, scope: &str, why: String) -> Self {
        Judged {
            id: id.into(),
            target: target_text(id),
            scope: scope.into(),
            measured: None,
            shown: "-".into(),
            verdict: Verdict::NotMeasured,
            host_figures: false,
            source: "-".into(),
            note: why,
        }
    }

    fn of(j: &Judgement, scope: &str, source: &str) -> Self {
        Judged {
            id: j.target.into(),
            target: target_text(j.target),
            scope: scope.into(),
            measured: Some(j.measured),
            shown: format!("{:.3} {}", j.measured, j.unit),
            verdict: if j.pass { Verdict::Pass } else { Verdict::Fail },
            host_figures: j.host_figures,
            source: source.into(),
            note: j.from.clone(),
        }
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

/// Target `id` judged in result `v` (read from `source`) by the shared judge, keeping the
/// judgements `keep` accepts; where several remain (e.g. the threshold sweep's T), the first
/// that fails stands for them, else the first. N/A when the result holds no figure for it.
pub fn judged(v: &Value, source: &str, id: &str, scope: &str, keep: &dyn Fn(&Judgement) -> bool) -> Judged {
    let js: Vec<Judgement> = crate::targets::judge(v, source)
        .into_iter()
        .filter(|j| j.target == id && keep(j))
        .collect();
    match js.iter().find(|j| !j.pass).or(js.first()) {
        Some(j) => Judged::of(j, scope, source),
        None => Judged::not_measured(id, scope, format!("{source} holds no figure for it")),
    }
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

    fn all(_: &Judgement) -> bool {
        true
    }

    #[test]
    fn a_judgement_of_the_shared_judge_becomes_a_row_and_host_figures_say_so() {
        let ok = judged(&run("hip:0", 3, 0.5, 99_000), "r.json", "lv3-p99", "dbg-trap", &all);
        assert_eq!(
            (ok.verdict, ok.host_figures, ok.measured),
            (Verdict::Pass, false, Some(99.0))
        );
        assert_eq!(
            ok.target, "Lv3 suspend P99 at T = 0.5 ms < 100 us",
            "the text comes from the one table"
        );
        let over = judged(&run("host", 3, 0.5, 100_000), "r.json", "lv3-p99", "sigstop", &all);
        assert_eq!((over.verdict, over.host_figures), (Verdict::Fail, true));
        assert!(over.detail().contains("[host figure]"), "{}", over.detail());
        let empty = judged(&json!({}), "r.json", "lv3-p99", "x", &all);
        assert_eq!(empty.verdict, Verdict::NotMeasured);
        assert!(empty.note.contains("holds no figure"), "{}", empty.note);
    }

    #[test]
    fn of_several_judgements_a_failing_one_stands_for_them() {
        let p = |th: u64, t: f64, o: f64| json!({"device": "host", "threshold": th, "t_ms": t, "overhead_percent": o});
        let pts = json!([p(10, 0.01, 0.2), p(10, 1.0, 1.5)]);
        let j = judged(&pts, "t.json", "lv1-overhead", "lv1", &all);
        assert_eq!((j.verdict, j.measured), (Verdict::Fail, Some(1.5)));
        let prio = json!({"target_p99_ratio": 1.3, "env": {"device": "hip:1"}, "modes": [
            {"mode": "lv1", "hp_p99_vs_standalone": 9.0},
            {"mode": "lv3", "hp_p99_vs_standalone": 1.2},
        ]});
        let lv3 = judged(&prio, "p.json", "hp-p99-fig9", "lv3 mode", &|j| {
            j.from.ends_with("mode lv3")
        });
        assert_eq!(
            (lv3.verdict, lv3.measured),
            (Verdict::Pass, Some(1.2)),
            "the lv1 mode is left out"
        );
        assert_eq!(serde_json::to_value(Verdict::NotMeasured).unwrap(), "N/A");
    }
}
