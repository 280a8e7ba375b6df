use super::*;
use crate::options::Format;

fn m(wall_ms: u64, cpu_ms: u64) -> Measured {
    Measured {
        wall_ns: wall_ms * 1_000_000,
        cpu_ns: cpu_ms * 1_000_000,
        exactly_once: true,
    }
}

fn setups() -> Vec<(Setup, String, String)> {
    [
        Setup::Native,
        Setup::Scheduled(Level::Lv1),
        Setup::Scheduled(Level::Lv3),
    ]
    .into_iter()
    .map(|s| (s, format!("how {}", s.name()), "x".to_string()))
    .collect()
}

/// Three runs: native 100, 200, 100 ms; lv1 2 %, 1 %, 4 % slower; lv3 as native.
fn per_run() -> Vec<Vec<Measured>> {
    vec![
        vec![m(100, 10), m(102, 13), m(100, 10)],
        vec![m(200, 10), m(202, 12), m(200, 10)],
        vec![m(100, 20), m(104, 22), m(100, 20)],
    ]
}

fn result() -> OverheadResult {
    OverheadResult {
        params: OverheadParams {
            t_ms: 0.5,
            commands: 200,
            runs: 3,
            threshold: 8,
            batch: 4,
            workers: 1,
        },
        env: crate::env::host(preempt_api::Mechanism::Sigstop),
        setups: summarize(&setups(), &per_run()),
        runs_done: 3,
        interrupted: false,
        note: NOTE,
        wall_time_s: 1.0,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn setups_take_turns_starting_a_run() {
    assert_eq!(order(3, 0), [0, 1, 2]);
    assert_eq!(order(3, 1), [1, 2, 0]);
    assert_eq!(order(3, 2), [2, 0, 1]);
    assert_eq!(order(3, 3), [0, 1, 2]);
    assert_eq!(order(1, 7), [0]);
}

#[test]
fn each_setup_is_compared_with_the_native_run_of_the_same_run() {
    let s = summarize(&setups(), &per_run());
    assert_eq!(s.iter().map(|s| s.setup).collect::<Vec<_>>(), ["native", "lv1", "lv3"]);
    assert!(s[0].time_overhead_percent.is_none() && s[0].cpu_increase_points.is_none());
    // Paired per run: 2 %, 1 %, 4 % (not 102 + 202 + 104 against 100 + 200 + 100).
    let t = s[1].time_overhead_percent.as_ref().unwrap();
    assert!(close(t.min, 1.0) && close(t.median, 2.0) && close(t.max, 4.0), "{t:?}");
    let lv3 = s[2].time_overhead_percent.as_ref().unwrap();
    assert!(close(lv3.max, 0.0) && close(lv3.min, 0.0), "{lv3:?}");
    // CPU: native 10 %, 5 %, 20 % of a core; lv1 12.745 %, 5.94 %, 21.15 %.
    let c = s[1].cpu_increase_points.as_ref().unwrap();
    let native: Vec<f64> = per_run().iter().map(|r| r[0].core_percent()).collect();
    let lv1: Vec<f64> = per_run().iter().map(|r| r[1].core_percent()).collect();
    let mut inc: Vec<f64> = native.iter().zip(&lv1).map(|(n, l)| l - n).collect();
    inc.sort_by(f64::total_cmp);
    assert!(
        close(c.min, inc[0]) && close(c.median, inc[1]) && close(c.max, inc[2]),
        "{c:?}"
    );
    assert!(close(s[0].cpu_percent_of_core.median, 10.0));
    assert!(s.iter().all(|s| s.exactly_once));
    let mut bad = per_run();
    bad[2][2].exactly_once = false;
    let s = summarize(&setups(), &bad);
    assert!(s[0].exactly_once && s[1].exactly_once && !s[2].exactly_once);
}

#[test]
fn its_json_is_judged_against_the_overhead_and_scheduler_cpu_targets() {
    let r = result();
    let js = crate::targets::judge(&serde_json::to_value(&r).unwrap(), "o.json");
    let got: Vec<(&str, &str)> = js
        .iter()
        .map(|j| (j.target, j.from.split(':').nth(1).unwrap_or("").trim()))
        .collect();
    assert_eq!(
        got,
        [
            ("overhead", "lv1 against native, median of 3 runs"),
            ("scheduler-cpu", "lv1 against native, median of 3 runs"),
            ("overhead", "lv3 against native, median of 3 runs"),
            ("scheduler-cpu", "lv3 against native, median of 3 runs"),
        ]
    );
    let lv1 = &r.setups[1];
    assert!(close(
        js[0].measured,
        lv1.time_overhead_percent.as_ref().unwrap().median
    ));
    assert!(close(js[1].measured, lv1.cpu_increase_points.as_ref().unwrap().median));
    assert!(js.iter().all(|j| j.host_figures), "host figures are labelled");
    assert!(js[0].pass, "2 % is below 3.4 %");
}

#[test]
fn every_format_carries_every_setup() {
    let r = result();
    let out = |f| {
        let mut w = Vec::new();
        crate::output::export(f, &r, &mut w).unwrap();
        String::from_utf8(w).unwrap()
    };
    let csv = out(Format::Csv);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 3, "a header and a row per setup: {csv}");
    assert!(
        lines[0].starts_with("device,setup,mechanism,t_ms,commands,runs,"),
        "{csv}"
    );
    assert!(lines[2].starts_with("host,lv1,x,0.5,200,3,"), "{csv}");
    let v: serde_json::Value = serde_json::from_str(&out(Format::Json)).unwrap();
    let median = v["setups"][1]["time_overhead_percent"]["median"].as_f64().unwrap();
    assert!(close(
        median,
        r.setups[1].time_overhead_percent.as_ref().unwrap().median
    ));
    assert!(v["setups"][0]["time_overhead_percent"].is_null());
    let t = out(Format::Text);
    assert!(t.contains("host device: host figures, not GPU figures"), "{t}");
    assert!(t.contains("| lv1 | how lv1 (x) |"), "{t}");
    assert!(
        t.lines()
            .filter(|l| l.starts_with("target overhead (Fig. 12a") && l.ends_with("(host figure)"))
            .count()
            == 2,
        "{t}"
    );
}
