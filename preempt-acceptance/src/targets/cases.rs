//! The judges of the seeds' chapter 8 case studies, read from the class experiment's JSON of a
//! `--preset` run (`params.preset` names the test plan's section; the preset fixes the class
//! names, so the judge finds its classes by name).
use super::{Judgement, judgement};
use serde_json::Value;

fn class<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["classes"].as_array()?.iter().find(|c| c["name"] == name)
}

/// A class's throughput together over alone (device work per second: commands x T).
fn vs_alone(c: &Value) -> Option<f64> {
    let (together, alone) = (c["work_per_s"].as_f64()?, c["alone"]["work_per_s"].as_f64()?);
    (alone > 0.0).then(|| together / alone)
}

/// What each 8.2.1 variant is, for the `from` column: the seeds' Fig. 14 has a row per policy.
fn videoconf_variant(preset: &str) -> Option<&'static str> {
    match preset {
        "8.2.1" => Some("laxity"),
        "8.2.1-fixed" => Some("fixed-priority baseline"),
        "8.2.1-native" => Some("native baseline"),
        _ => None,
    }
}

/// A `priority --preset` result of the class experiment: 8.1.1's throughputs against alone,
/// 8.2.1's frame P99 and speech completion (each variant: laxity and its two baselines, so the
/// table has the seeds' three rows), 8.3.1's HP P99 against alone.
#[allow(clippy::cast_precision_loss)] // ns of one run: far below 2^52
pub fn judge_preset(v: &Value, preset: &str, file: &str, device: &str, out: &mut Vec<Judgement>) {
    let from = |what: &str| format!("{file}: preset {preset}, {what}");
    match preset {
        "8.1.1" => {
            for (id, name) in [("harvest-pjob", "pjob"), ("harvest-ojob", "ojob")] {
                if let Some(r) = class(v, name).and_then(vs_alone) {
                    out.push(judgement(id, r, device, from(&format!("{name} together vs alone"))));
                }
            }
        }
        "8.3.1" => {
            if let Some(r) = class(v, "hp").and_then(|c| c["p99_vs_alone"].as_f64()) {
                out.push(judgement("hp-p99-fig15a", r, device, from("class hp vs alone")));
            }
        }
        p => {
            let Some(variant) = videoconf_variant(p) else { return };
            if let Some(ns) = class(v, "frames").and_then(|c| c["latency_ns"]["p99"].as_f64()) {
                out.push(judgement(
                    "videoconf-frames-p99",
                    ns / 1e6,
                    device,
                    from(&format!("{variant}, class frames")),
                ));
            }
            // The slowest speech request: the longest that finished, or one still running at
            // the end that is already older (it finishes no sooner than that).
            let Some(s) = class(v, "speech") else { return };
            let worst = [&s["latency_ns"]["max"], &s["oldest_unfinished_ns"]]
                .into_iter()
                .filter_map(Value::as_f64)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            if let Some(ns) = worst {
                let n = s["finished"].as_u64().unwrap_or(0);
                let what = format!("{variant}, class speech: the slowest of {n} finished and those still running");
                out.push(judgement("videoconf-speech", ns / 1e9, device, from(&what)));
            }
        }
    }
}

/// `sweep rate --preset 8.3.2`: at the comparison rate, the worst client's P99 with no
/// scheduling over the worst client's P99 under K-EDF (native stands in for the seeds' Paella).
pub fn judge_fig15b(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    if v["params"]["preset"] != "8.3.2" {
        return;
    }
    let worst = |r: &Value| {
        r["classes"]
            .as_array()?
            .iter()
            .filter_map(|c| c["latency_ns"]["p99"].as_f64())
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
    };
    let native = &v["compared"];
    let Some(rate) = native["offered_rate"].as_f64() else {
        return;
    };
    let Some(at) = v["points"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["offered_rate"].as_f64() == Some(rate)))
    else {
        return;
    };
    if let (Some(n), Some(k)) = (worst(native), worst(at))
        && k > 0.0
    {
        let device = v["env"]["device"].as_str().unwrap_or("?");
        let from = format!(
            "{file}: {rate} req/s, worst client P99 {:.2} ms native / {:.2} ms {} (no Paella here: native stands in)",
            n / 1e6,
            k / 1e6,
            v["params"]["policy"].as_str().unwrap_or("?")
        );
        out.push(judgement("fig15b-vs-native", n / k, device, from));
    }
}

#[cfg(test)]
mod tests {
    use super::super::judge;
    use serde_json::{Value, json};

    fn ids(js: &[super::Judgement]) -> Vec<&str> {
        js.iter().map(|j| j.target).collect()
    }

    fn schedule(preset: &str, policy: &str, classes: Value) -> Value {
        json!({
            "env": {"device": "hip:0"},
            "params": {"policy": policy, "preset": preset},
            "combined_work_per_s": 1.0,
            "classes": classes,
        })
    }

    #[test]
    fn harvest_judges_each_job_against_itself_alone() {
        let v = schedule(
            "8.1.1",
            "highest-priority-first",
            json!([
                {"name": "pjob", "prio": 1, "work_per_s": 0.78, "alone": {"work_per_s": 0.8}, "p99_vs_alone": 0.9},
                {"name": "ojob", "prio": 0, "work_per_s": 0.05, "alone": {"work_per_s": 1.0}},
            ]),
        );
        let js = judge(&v, "s.json");
        assert_eq!(ids(&js), ["harvest-pjob", "harvest-ojob"], "a preset is not Fig. 9");
        assert!(js[0].pass && (js[0].measured - 0.975).abs() < 1e-9, "{:?}", js[0]);
        assert!(!js[1].pass, "5 % of alone is below 10 %");
        assert!(!js[0].host_figures && js[0].from.contains("preset 8.1.1"));
    }

    #[test]
    fn videoconf_counts_a_speech_request_still_running_and_names_each_variant() {
        let classes = |max_ns: u64, unfinished: Option<u64>| {
            json!([
                {"name": "frames", "latency_ns": {"p99": 40_000_000, "max": 50_000_000}},
                {"name": "speech", "finished": 3, "latency_ns": {"p99": max_ns, "max": max_ns},
                 "oldest_unfinished_ns": unfinished},
            ])
        };
        let lax = judge(&schedule("8.2.1", "laxity", classes(2_000_000_000, None)), "s.json");
        assert_eq!(ids(&lax), ["videoconf-frames-p99", "videoconf-speech"]);
        assert!(lax.iter().all(|j| j.pass && j.from.contains("laxity")), "{lax:?}");
        assert!((lax[0].measured - 40.0).abs() < 1e-9 && (lax[1].measured - 2.0).abs() < 1e-9);
        // A request running for 3.5 s at the end is already late, whatever finished before it.
        let fixed = judge(
            &schedule(
                "8.2.1-fixed",
                "highest-priority-first",
                classes(2_000_000_000, Some(3_500_000_000)),
            ),
            "s.json",
        );
        assert_eq!(ids(&fixed), ["videoconf-frames-p99", "videoconf-speech"]);
        assert!(!fixed[1].pass && fixed[1].from.contains("fixed-priority baseline"));
        let native = judge(
            &schedule("8.2.1-native", "highest-priority-first", classes(1, Some(1))),
            "s.json",
        );
        assert!(native[0].from.contains("native baseline"), "{native:?}");
    }

    #[test]
    fn fig15a_is_judged_from_its_preset_only() {
        let classes = json!([
            {"name": "hp", "prio": 1, "p99_vs_alone": 1.05},
            {"name": "lp", "prio": 0},
        ]);
        let js = judge(&schedule("8.3.1", "highest-priority-first", classes.clone()), "s.json");
        assert_eq!(ids(&js), ["hp-p99-fig15a"]);
        assert!(js[0].pass);
        let mut plain = schedule("8.3.1", "highest-priority-first", classes);
        plain["params"]["preset"] = Value::Null;
        assert_eq!(ids(&judge(&plain, "s.json")), ["hp-p99-fig9"], "no preset: Fig. 9's HP");
    }

    #[test]
    fn fig15b_compares_the_worst_client_at_the_comparison_rate() {
        let run =
            |p99s: [u64; 2]| json!({"classes": [{"latency_ns": {"p99": p99s[0]}}, {"latency_ns": {"p99": p99s[1]}}]});
        let point = |rate: f64, p99s| {
            let mut r = run(p99s);
            r["offered_rate"] = json!(rate);
            r
        };
        let sweep = |preset: Value| {
            json!({
                "sweep": "rate",
                "env": {"device": "host"},
                "params": {"policy": "kedf", "preset": preset},
                "points": [point(100.0, [1, 2]), point(1000.0, [10_000_000, 20_000_000])],
                "compared": point(1000.0, [30_000_000, 13_000_000]),
            })
        };
        let js: Vec<_> = judge(&sweep(json!("8.3.2")), "r.json")
            .into_iter()
            .filter(|j| j.target == "fig15b-vs-native")
            .collect();
        assert_eq!(js.len(), 1);
        assert!(js[0].pass && (js[0].measured - 1.5).abs() < 1e-9, "{:?}", js[0]);
        assert!(js[0].host_figures && js[0].from.contains("native stands in"));
        let none = judge(&sweep(Value::Null), "r.json");
        assert!(
            none.iter().all(|j| j.target != "fig15b-vs-native"),
            "only the preset's sweep"
        );
    }
}
