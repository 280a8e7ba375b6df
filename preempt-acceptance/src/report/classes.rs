//! The rows of the class experiment's results (`priority --policy ...` with classes:
//! `schedule.json`; `sweep rate`: one set per offered rate): one row per class, its request
//! latency (arrival to completion) and its P99 against the class alone where `--standalone` ran.
use super::{Row, group, s};
use serde_json::Value;

/// One row per class of a `schedule.json` (or of one point of a rate sweep, `at` naming it).
pub fn schedule_rows(v: &Value, file: &str, at: &str) -> Vec<Row> {
    let policy = v["params"]["policy"].as_str().unwrap_or("?");
    let mut g = group(&v["env"]);
    if let Some(m) = v["mechanism"].as_str() {
        g.mechanism = m.to_string();
    }
    v["classes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let lat = &c["latency_ns"];
            Row {
                t_ms: c["t_ms"].as_f64(),
                p50_ns: lat["p50"].as_u64(),
                p99_ns: lat["p99"].as_u64(),
                max_ns: lat["max"].as_u64(),
                hp_p99_vs_standalone: c["p99_vs_alone"].as_f64(),
                count: c["finished"].as_u64(),
                correct: c["check"]["ok"].as_bool(),
                ..Row::new(
                    g.clone(),
                    format!("{policy}{at}:{}", s(&c["name"])),
                    file,
                    s(&v["env"]["git_revision"]),
                )
            }
        })
        .collect()
}

/// The rows of a rate sweep (`sweep-rate.json`): every point's classes.
pub fn sweep_rate_rows(v: &Value, file: &str) -> Vec<Row> {
    v["points"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| {
            let rate = p["offered_rate"].as_f64().unwrap_or(f64::NAN);
            schedule_rows(p, file, &format!("@{rate}/s"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schedule(policy: &str) -> Value {
        json!({
            "env": {"device": "host", "mechanism": "x", "kernel": "k", "git_revision": "r"},
            "mechanism": "sigstop",
            "params": {"policy": policy},
            "combined_work_per_s": 0.5,
            "classes": [
                {"name": "high", "t_ms": 1.0, "finished": 9, "latency_ns": {"p50": 1, "p99": 2, "max": 3},
                 "p99_vs_alone": 1.2, "check": {"ok": true}},
                {"name": "low", "t_ms": 2.0, "finished": 0, "latency_ns": null, "p99_vs_alone": null,
                 "check": {"ok": false}},
            ],
        })
    }

    #[test]
    fn every_class_of_every_policy_is_a_row() {
        for policy in ["k-edf", "laxity", "highest-priority-first", "utilization-partition"] {
            let r = super::super::rows_of(&schedule(policy), "s.json").unwrap();
            assert_eq!(r.len(), 2, "{policy}");
            assert_eq!(r[0].kind, format!("{policy}:high"));
            assert_eq!(
                (r[0].p99_ns, r[0].hp_p99_vs_standalone, r[0].count, r[0].correct),
                (Some(2), Some(1.2), Some(9), Some(true))
            );
            assert_eq!((r[1].p99_ns, r[1].correct), (None, Some(false)));
            assert_eq!(r[0].mechanism, "sigstop");
        }
        let sweep = json!({"sweep": "rate", "points": [
            {"offered_rate": 100.0, "env": {"device": "host"}, "params": {"policy": "k-edf"}, "classes": [{"name": "a"}]},
            {"offered_rate": 200.0, "env": {"device": "host"}, "params": {"policy": "k-edf"}, "classes": [{"name": "a"}]},
        ]});
        let r = super::super::rows_of(&sweep, "r.json").unwrap();
        assert_eq!(
            r.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
            ["k-edf@100/s:a", "k-edf@200/s:a"]
        );
    }
}
