//! The judges: every kind of result read for the figures the targets bound.
use super::{Judgement, judgement};
use serde_json::Value;

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// A soak: its problems counted (the windows it ran and the minutes asked say how long).
fn judge_soak(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    let Some(problems) = v["problems"].as_array() else {
        return;
    };
    let device = v["env"]["device"].as_str().unwrap_or("?");
    let ran = v["windows"].as_array().map_or(0, Vec::len);
    let from = format!(
        "{file}: {ran} of {} windows, {} min asked{}",
        v["params"]["windows"],
        v["params"]["minutes"],
        if v["interrupted"] == Value::Bool(true) {
            ", interrupted"
        } else {
            ""
        }
    );
    #[allow(clippy::cast_precision_loss)] // a handful of lines
    out.push(judgement("soak-stable", problems.len() as f64, device, from));
}

/// One run (`RunResult`'s JSON): Lv3's P99 at T = 0.5 ms, Lv1's P99 against threshold x T.
fn judge_run(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    let p = &v["params"];
    let (Some(level), Some(t_ms)) = (p["level"].as_u64(), f(&p["t_ms"])) else {
        return;
    };
    let device = v["env"]["device"].as_str().unwrap_or("?");
    let p99 = |m: &str| f(&v["latency_ns"][m]["p99"]);
    let from = format!("{file}: Lv{level}, T = {t_ms} ms");
    match level {
        3 if (t_ms - 0.5).abs() < 1e-9 => {
            if let Some(ns) = p99("suspend") {
                out.push(judgement("lv3-p99", ns / 1e3, device, from.clone()));
            }
            if let Some(ns) = p99("hp_start") {
                out.push(judgement("lv3-hp-start-p99", ns / 1e3, device, from));
            }
        }
        2 => {
            if let Some(ns) = p99("suspend").filter(|_| t_ms > 0.0) {
                out.push(judgement("lv2-one-t", ns / (t_ms * 1e6), device, from));
            }
        }
        1 => {
            if let (Some(ns), Some(th)) = (p99("suspend"), f(&p["threshold"])) {
                let expected_ns = th * t_ms * 1e6;
                if expected_ns > 0.0 {
                    out.push(judgement("lv1-threshold-x-t", ns / expected_ns, device, from));
                }
            }
        }
        _ => {}
    }
}

/// Several runs (a sweep): each run, and Lv3's flatness over T where it has two T or more.
fn judge_runs(runs: &[Value], file: &str, out: &mut Vec<Judgement>) {
    for r in runs {
        judge_run(r, file, out);
    }
    let lv3: Vec<(f64, f64)> = runs
        .iter()
        .filter(|r| {
            r["params"]["level"].as_u64() == Some(3) && r["params"]["lp_state"] == runs[0]["params"]["lp_state"]
        })
        .filter_map(|r| Some((f(&r["params"]["t_ms"])?, f(&r["latency_ns"]["suspend"]["p99"])?)))
        .collect();
    let distinct_t = {
        let mut t: Vec<f64> = lv3.iter().map(|p| p.0).collect();
        t.sort_by(f64::total_cmp);
        t.dedup();
        t.len()
    };
    judge_lv3_vs_lv1(runs, file, out);
    if distinct_t >= 2 {
        let (lo, hi) = lv3
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        if lo > 0.0 {
            let device = runs[0]["env"]["device"].as_str().unwrap_or("?");
            out.push(judgement(
                "lv3-flat-in-t",
                hi / lo,
                device,
                format!("{file}: Lv3 over {distinct_t} values of T"),
            ));
        }
    }
}

/// Lv1's suspend P99 over Lv3's at each T (and LP state) where the sweep ran both.
fn judge_lv3_vs_lv1(runs: &[Value], file: &str, out: &mut Vec<Judgement>) {
    let p99_at = |level: u64, t: f64, state: &Value| {
        runs.iter()
            .find(|r| {
                let p = &r["params"];
                p["level"].as_u64() == Some(level) && f(&p["t_ms"]) == Some(t) && &p["lp_state"] == state
            })
            .and_then(|r| f(&r["latency_ns"]["suspend"]["p99"]))
    };
    for r in runs.iter().filter(|r| r["params"]["level"].as_u64() == Some(3)) {
        let (Some(t), state) = (f(&r["params"]["t_ms"]), &r["params"]["lp_state"]) else {
            continue;
        };
        if let (Some(lv1), Some(lv3)) = (p99_at(1, t, state), p99_at(3, t, state))
            && lv3 > 0.0
        {
            let device = r["env"]["device"].as_str().unwrap_or("?");
            let from = format!(
                "{file}: Lv1 {:.1} us / Lv3 {:.1} us at T = {t} ms",
                lv1 / 1e3,
                lv3 / 1e3
            );
            out.push(judgement("lv3-vs-lv1", lv1 / lv3, device, from));
        }
    }
}

/// The threshold sweep's points: the worst overhead at threshold >= 10, per T.
fn judge_threshold(points: &[Value], file: &str, out: &mut Vec<Judgement>) {
    let mut ts: Vec<f64> = points.iter().filter_map(|p| f(&p["t_ms"])).collect();
    ts.sort_by(f64::total_cmp);
    ts.dedup();
    for t in ts {
        let worst = points
            .iter()
            .filter(|p| f(&p["t_ms"]) == Some(t) && p["threshold"].as_u64().is_some_and(|th| th >= 10))
            .filter_map(|p| f(&p["overhead_percent"]))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        if let Some(w) = worst {
            let device = points[0]["device"].as_str().unwrap_or("?");
            out.push(judgement("lv1-overhead", w, device, format!("{file}: T = {t} ms")));
        }
    }
}

/// `priority`: each scheduled mode's HP P99 against standalone (Fig. 9 top and Fig. 15a): lv1,
/// lv2 (host device) and lv3, every mode that suspends the LP stream at a level.
fn judge_priority(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    let device = v["env"]["device"].as_str().unwrap_or("?");
    let scheduled = |name: &str| {
        crate::options::Mode::ALL
            .into_iter()
            .any(|m| m.level().is_some() && m.name() == name)
    };
    for m in v["modes"].as_array().into_iter().flatten() {
        let mode = m["mode"].as_str().unwrap_or("?");
        if !scheduled(mode) {
            continue;
        }
        if let Some(r) = f(&m["hp_p99_vs_standalone"]) {
            for id in ["hp-p99-fig9", "hp-p99-fig15a"] {
                out.push(judgement(id, r, device, format!("{file}: mode {mode}")));
            }
        }
    }
}

/// `launcher-cost`: the launcher's worst share of a core over Fig. 12b's T (medians).
fn judge_launcher(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    let worst = v["figures"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|fig| {
            fig["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("launcher_core_percent."))
        })
        .filter_map(|fig| f(&fig["median"]))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    if let Some(w) = worst {
        let device = v["device"].as_str().unwrap_or("?");
        out.push(judgement(
            "scheduler-cpu",
            w,
            device,
            format!("{file}: median of --runs"),
        ));
    }
}

/// `overhead`: each scheduled setup's median whole-run time overhead against native (Fig. 12a)
/// and its CPU increase over native in points of one core (Fig. 12b: the seeds' CPU_xsched -
/// CPU_native).
fn judge_overhead(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    let device = v["env"]["device"].as_str().unwrap_or("?");
    let runs = v["runs_done"].as_u64().unwrap_or(0);
    // Stopped before a whole run: nothing was measured (its zeros are no figures).
    if runs == 0 {
        return;
    }
    for s in v["setups"].as_array().into_iter().flatten() {
        let setup = s["setup"].as_str().unwrap_or("?");
        for (id, key) in [
            ("overhead", "time_overhead_percent"),
            ("scheduler-cpu", "cpu_increase_points"),
        ] {
            if let Some(m) = f(&s[key]["median"]) {
                let from = format!("{file}: {setup} against native, median of {runs} runs");
                out.push(judgement(id, m, device, from));
            }
        }
    }
}

/// The Example 5 example's JSON: per level of Phase 2, the combined throughput lost against
/// Test 2, high's P99 against Test 2's and low's P99 against high's. A JSON from before the
/// levels has one `summary`, judged as Phase 2's.
fn judge_example5(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    let device = v["device"].as_str().unwrap_or("?");
    let levels: Vec<(String, &Value)> = match v["summary_by_level"].as_object() {
        Some(m) => m.iter().map(|(lv, s)| (format!("Phase 2 at {lv}"), s)).collect(),
        None => vec![("Phase 2".to_string(), &v["summary"])],
    };
    for (phase, s) in levels {
        if let Some(loss) = f(&s["throughput_loss_vs_test2"]) {
            out.push(judgement(
                "throughput-loss",
                loss * 100.0,
                device,
                format!("{file}: {phase} vs Test 2"),
            ));
        }
        if let Some(r) = f(&s["high_p99_vs_test2"]) {
            let from = format!("{file}: {phase}, high vs Test 2");
            out.push(judgement("example5-high-vs-baseline", r, device, from));
        }
        if let Some(r) = f(&s["low_high_p99"]) {
            let from = format!("{file}: {phase}, low vs high");
            out.push(judgement("example5-low-high", r, device, from));
        }
    }
}

/// The class experiment (`priority --policy ...` with classes): under `up` each class's achieved
/// share against asked; with `--standalone` the combined throughput lost against the classes
/// alone, and under `hpf` the top class's P99 against itself alone (Fig. 9 top's HP, with classes).
fn judge_schedule(v: &Value, file: &str, out: &mut Vec<Judgement>) {
    let device = v["env"]["device"].as_str().unwrap_or("?");
    let policy = v["params"]["policy"].as_str();
    // A preset is one of the seeds' experiments: its own targets, not Fig. 9's (its top class
    // is 8.3.1's HP client, 8.1.1's production job, ...).
    let preset = v["params"]["preset"].as_str();
    if let Some(p) = preset {
        super::cases::judge_preset(v, p, file, device, out);
    }
    if let Some(loss) = f(&v["standalone"]["throughput_loss_percent"]) {
        let from = format!(
            "{file}: combined vs {}",
            v["standalone"]["reference"].as_str().unwrap_or("the classes alone")
        );
        out.push(judgement("throughput-loss", loss, device, from));
    }
    if policy == Some(preempt_api::Policy::HighestFirst.name()) && preset.is_none() {
        let classes = v["classes"].as_array().map(Vec::as_slice).unwrap_or_default();
        let top = classes.iter().max_by_key(|c| c["prio"].as_i64().unwrap_or(i64::MIN));
        if let Some(c) = top
            && let Some(r) = f(&c["p99_vs_alone"])
        {
            let from = format!(
                "{file}: class {} (the highest prio) vs alone",
                c["name"].as_str().unwrap_or("?")
            );
            out.push(judgement("hp-p99-fig9", r, device, from));
        }
    }
    if policy != Some(preempt_api::Policy::Partition.name()) {
        return;
    }
    if let Some(loss) = f(&v["standalone"]["throughput_loss_percent"]) {
        out.push(judgement(
            "partition-overhead",
            loss,
            device,
            format!("{file}: combined vs the classes alone"),
        ));
    }
    for c in v["classes"].as_array().into_iter().flatten() {
        if let Some(err) = f(&c["share_error_points"]) {
            let from = format!(
                "{file}: class {} asked {:.1} %, got {:.1} %",
                c["name"].as_str().unwrap_or("?"),
                f(&c["share_asked_percent"]).unwrap_or(f64::NAN),
                f(&c["share_achieved_percent"]).unwrap_or(f64::NAN)
            );
            out.push(judgement("partition", err, device, from));
        }
    }
}

/// Every target a result measures, whatever its kind (unknown kinds: none).
pub fn judge(v: &Value, file: &str) -> Vec<Judgement> {
    let mut out = Vec::new();
    match v {
        Value::Array(items) if items.iter().all(|i| i.get("overhead_percent").is_some()) => {
            judge_threshold(items, file, &mut out);
        }
        Value::Array(items) if items.iter().all(|i| i.get("latency_ns").is_some()) => {
            judge_runs(items, file, &mut out);
        }
        Value::Object(o) if o.contains_key("latency_ns") => judge_run(v, file, &mut out),
        Value::Object(o) if o.contains_key("target_p99_ratio") => judge_priority(v, file, &mut out),
        Value::Object(o) if o.contains_key("launcher_cpu_ns_per_cmd") => judge_launcher(v, file, &mut out),
        Value::Object(o) if o.contains_key("setups") && o.contains_key("runs_done") => {
            judge_overhead(v, file, &mut out);
        }
        Value::Object(o) if o.contains_key("combined_work_per_s") => judge_schedule(v, file, &mut out),
        Value::Object(o) if o.contains_key("held_drift") => judge_soak(v, file, &mut out),
        Value::Object(o) if o.get("sweep").and_then(Value::as_str) == Some("rate") => {
            for p in o.get("points").and_then(Value::as_array).into_iter().flatten() {
                let rate = f(&p["offered_rate"]).unwrap_or(f64::NAN);
                judge_schedule(p, &format!("{file}: {rate} req/s"), &mut out);
            }
            super::cases::judge_fig15b(v, file, &mut out);
        }
        // Example 5: Phase 2 once (older JSON) or per level (`phase2_lv3`, ...).
        Value::Object(o)
            if o.get("runs")
                .and_then(Value::as_object)
                .is_some_and(|r| r.keys().any(|k| k == "phase2" || k.starts_with("phase2_"))) =>
        {
            judge_example5(v, file, &mut out);
        }
        _ => {}
    }
    out
}
