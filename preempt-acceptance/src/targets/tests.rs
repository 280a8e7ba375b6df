use super::*;
use serde_json::{Value, json};

fn run(level: u64, t_ms: f64, suspend_p99_ns: u64, hp_p99_ns: u64, device: &str) -> Value {
    json!({
        "params": {"level": level, "t_ms": t_ms, "threshold": 8, "lp_state": null},
        "env": {"device": device},
        "latency_ns": {"suspend": {"p99": suspend_p99_ns}, "hp_start": {"p99": hp_p99_ns}},
    })
}

fn ids(js: &[Judgement]) -> Vec<&str> {
    js.iter().map(|j| j.target).collect()
}

#[test]
fn every_target_id_is_unique_and_every_bound_is_sane() {
    for (i, t) in TARGETS.iter().enumerate() {
        assert!(TARGETS[i + 1..].iter().all(|u| u.id != t.id), "{} twice", t.id);
        assert_eq!(target(t.id).id, t.id);
    }
    assert!(Bound::Below(1.0).holds(0.99) && !Bound::Below(1.0).holds(1.0));
    assert!(Bound::AtMost(1.3).holds(1.3) && !Bound::AtMost(1.3).holds(f64::NAN));
    assert!(Bound::Within(0.5, 1.5).holds(0.5) && !Bound::Within(0.5, 1.5).holds(1.51));
}

#[test]
fn a_lv3_run_at_half_a_millisecond_is_judged_against_100_us() {
    let js = judge(&run(3, 0.5, 40_000, 120_000, "hip:0"), "r.json");
    assert_eq!(ids(&js), ["lv3-p99", "lv3-hp-start-p99"]);
    assert!(js[0].pass && (js[0].measured - 40.0).abs() < 1e-9);
    assert!(!js[1].pass, "120 us is over the target");
    assert!(!js[0].host_figures && js[0].from.contains("Lv3, T = 0.5 ms"));
    assert!(
        judge(&run(3, 1.0, 40_000, 1, "hip:0"), "r").is_empty(),
        "other T: not this target"
    );
}

#[test]
fn lv1_is_judged_against_threshold_x_t() {
    // threshold 8, T = 0.5 ms: 4 ms expected; 3.6 ms is 0.9 x.
    let js = judge(&run(1, 0.5, 3_600_000, 1, "host"), "r");
    assert_eq!(ids(&js), ["lv1-threshold-x-t"]);
    assert!(js[0].pass && (js[0].measured - 0.9).abs() < 1e-9);
    assert!(js[0].host_figures, "a host run is labelled as host");
    let js = judge(&run(1, 0.5, 9_000_000, 1, "host"), "r");
    assert!(!js[0].pass, "2.25 x is outside 0.5-1.5");
}

#[test]
fn lv2_is_judged_against_one_t_at_every_t_and_labelled_host() {
    // T = 0.5 ms: 0.49 ms is 0.98 x; 0.2 ms (0.4 x) did not wait for the running command; 0.8 ms
    // (1.6 x) waited for more than one.
    for (p99_ns, ratio, pass) in [(490_000, 0.98, true), (200_000, 0.4, false), (800_000, 1.6, false)] {
        let js = judge(&run(2, 0.5, p99_ns, 1, "host"), "r");
        assert_eq!(ids(&js), ["lv2-one-t"]);
        assert!(
            (js[0].measured - ratio).abs() < 1e-9 && js[0].pass == pass,
            "{:?}",
            js[0]
        );
        assert!(
            js[0].host_figures && js[0].from.contains("Lv2, T = 0.5 ms"),
            "{:?}",
            js[0]
        );
    }
    // Every T: 2 ms at T = 2 ms is 1 x.
    let js = judge(&run(2, 2.0, 2_000_000, 1, "host"), "r");
    assert!(js[0].pass && (js[0].measured - 1.0).abs() < 1e-9);
}

#[test]
fn a_sweep_judges_each_run_and_lv3_flatness_over_t() {
    let sweep = json!([
        run(3, 0.1, 30_000, 1, "hip:0"),
        run(3, 0.5, 33_000, 1, "hip:0"),
        run(3, 2.0, 60_000, 1, "hip:0"),
        run(1, 0.5, 4_000_000, 1, "hip:0"),
    ]);
    let js = judge(&sweep, "sweep-t.json");
    assert_eq!(
        ids(&js),
        [
            "lv3-p99",
            "lv3-hp-start-p99",
            "lv1-threshold-x-t",
            "lv3-vs-lv1",
            "lv3-flat-in-t"
        ]
    );
    // 4.1.1's ratio: the Lv1 and Lv3 runs at the same T, and only those.
    let ratio = &js[3];
    assert!(
        (ratio.measured - 4_000_000.0 / 33_000.0).abs() < 1e-9 && ratio.pass,
        "{ratio:?}"
    );
    assert!(ratio.from.contains("T = 0.5 ms"), "{}", ratio.from);
    let slow_lv3 = json!([run(3, 0.5, 200_000, 1, "host"), run(1, 0.5, 4_000_000, 1, "host")]);
    let r = judge(&slow_lv3, "f")
        .into_iter()
        .find(|j| j.target == "lv3-vs-lv1")
        .unwrap();
    assert!(
        !r.pass && (r.measured - 20.0).abs() < 1e-9 && r.host_figures,
        "20x < 40x: {r:?}"
    );
    let other_t = json!([run(3, 0.5, 30_000, 1, "hip:0"), run(1, 2.0, 4_000_000, 1, "hip:0")]);
    assert!(
        !ids(&judge(&other_t, "f")).contains(&"lv3-vs-lv1"),
        "a ratio across two T says nothing of the mechanism"
    );
    let flat = js.last().unwrap();
    assert!((flat.measured - 2.0).abs() < 1e-9 && !flat.pass, "60 / 30 = 2 > 1.5");
    let one_t = json!([run(3, 0.5, 30_000, 1, "hip:0")]);
    assert!(
        !ids(&judge(&one_t, "f")).contains(&"lv3-flat-in-t"),
        "one T says nothing of flatness"
    );
}

#[test]
fn the_threshold_sweep_takes_the_worst_overhead_at_threshold_10_and_above() {
    let p = |t: f64, th: u64, o: f64| json!({"device": "host", "t_ms": t, "threshold": th, "overhead_percent": o});
    let pts = json!([
        p(0.1, 1, 30.0),
        p(0.1, 10, 0.4),
        p(0.1, 16, 0.8),
        p(1.0, 16, 2.5),
        p(1.0, 4, 0.1)
    ]);
    let js = judge(&pts, "sweep-threshold.json");
    assert_eq!(ids(&js), ["lv1-overhead", "lv1-overhead"]);
    assert!(
        js[0].pass && (js[0].measured - 0.8).abs() < 1e-9,
        "threshold 1's 30 % is not judged"
    );
    assert!(!js[1].pass && js[1].from.contains("T = 1 ms"));
}

#[test]
fn priority_judges_the_scheduled_modes_twice_and_skips_the_baselines() {
    let v = json!({
        "target_p99_ratio": 1.3,
        "env": {"device": "host"},
        "modes": [
            {"mode": "standalone-hp", "hp_p99_vs_standalone": 1.0},
            {"mode": "native", "hp_p99_vs_standalone": 4.0},
            {"mode": "lv3", "hp_p99_vs_standalone": 1.2},
        ],
    });
    let js = judge(&v, "priority.json");
    assert_eq!(ids(&js), ["hp-p99-fig9", "hp-p99-fig15a"]);
    assert!(
        js[0].pass && !js[1].pass,
        "1.2 x meets Fig. 9's 1.30 but not Fig. 15a's 1.10"
    );
    // Every scheduled mode is judged, lv2 (the host device's) among them; the baselines are not.
    let v = json!({
        "target_p99_ratio": 1.3,
        "env": {"device": "host"},
        "modes": [
            {"mode": "standalone-lp"},
            {"mode": "lv1", "hp_p99_vs_standalone": 1.5},
            {"mode": "lv2", "hp_p99_vs_standalone": 1.05},
            {"mode": "lv3", "hp_p99_vs_standalone": 1.2},
        ],
    });
    let js = judge(&v, "priority.json");
    let from: Vec<&str> = js.iter().map(|j| j.from.as_str()).collect();
    assert_eq!(
        from,
        [
            "priority.json: mode lv1",
            "priority.json: mode lv1",
            "priority.json: mode lv2",
            "priority.json: mode lv2",
            "priority.json: mode lv3",
            "priority.json: mode lv3"
        ]
    );
    assert!(
        js[2].pass && js[3].pass && js[2].host_figures,
        "lv2's 1.05 x meets both, a host figure"
    );
}

#[test]
fn launcher_cost_and_example5_are_judged() {
    let lc = json!({
        "launcher_cpu_ns_per_cmd": 1.0, "device": "host",
        "figures": [
            {"name": "launcher_core_percent.t_0.01ms", "median": 7.0},
            {"name": "launcher_core_percent.t_1ms", "median": 0.1},
            {"name": "null_device.cpu_ns_per_cmd", "median": 500.0},
        ],
    });
    let js = judge(&lc, "lc.json");
    assert_eq!(ids(&js), ["scheduler-cpu"]);
    assert!(!js[0].pass && (js[0].measured - 7.0).abs() < 1e-9, "the worst T counts");
    let e5 = json!({"device": "host", "runs": {"phase2": {}}, "summary": {"throughput_loss_vs_test2": 0.02}});
    let js = judge(&e5, "e5.json");
    assert_eq!(ids(&js), ["throughput-loss"]);
    assert!(js[0].pass && (js[0].measured - 2.0).abs() < 1e-9);
    // Per level: each level's three figures, each against its target.
    let e5 = json!({"device": "host", "runs": {"phase2_lv1": {}, "phase2_lv3": {}}, "summary_by_level": {
        "lv1": {"throughput_loss_vs_test2": 0.2, "high_p99_vs_test2": 0.9, "low_high_p99": 1.2},
        "lv3": {"throughput_loss_vs_test2": 0.05, "high_p99_vs_test2": 0.5, "low_high_p99": 3.0},
    }});
    let js = judge(&e5, "e5.json");
    let verdicts: Vec<(&str, bool, &str)> = js.iter().map(|j| (j.target, j.pass, j.from.as_str())).collect();
    assert_eq!(
        verdicts,
        [
            ("throughput-loss", false, "e5.json: Phase 2 at lv1 vs Test 2"),
            (
                "example5-high-vs-baseline",
                false,
                "e5.json: Phase 2 at lv1, high vs Test 2"
            ),
            ("example5-low-high", false, "e5.json: Phase 2 at lv1, low vs high"),
            ("throughput-loss", true, "e5.json: Phase 2 at lv3 vs Test 2"),
            (
                "example5-high-vs-baseline",
                true,
                "e5.json: Phase 2 at lv3, high vs Test 2"
            ),
            ("example5-low-high", true, "e5.json: Phase 2 at lv3, low vs high"),
        ]
    );
    assert!(
        !Bound::Above(1.5).holds(1.5) && Bound::Above(1.5).holds(1.51),
        "the seed's 'above 1.5x'"
    );
    assert!(judge(&json!({"something": "else"}), "x").is_empty());
}

#[test]
fn an_overhead_stopped_before_its_first_run_is_not_judged() {
    let o = |runs: u64| {
        json!({
            "env": {"device": "host"}, "runs_done": runs,
            "setups": [{"setup": "lv1", "time_overhead_percent": {"median": 0.0}, "cpu_increase_points": {"median": 0.0}}],
        })
    };
    assert!(judge(&o(0), "o.json").is_empty(), "median of 0 runs judged");
    assert_eq!(ids(&judge(&o(3), "o.json")), ["overhead", "scheduler-cpu"]);
}

/// Every policy's class experiment is judged where a target applies: the loss against the
/// classes alone (any policy with --standalone), the top class's P99 against itself alone
/// (hpf), the shares (up only).
#[test]
fn class_experiments_of_every_policy_are_judged() {
    let schedule = |policy: &str| {
        json!({
            "env": {"device": "host"},
            "params": {"policy": policy},
            "combined_work_per_s": 0.5,
            "standalone": {"throughput_loss_percent": 12.0, "reference": "sum of the classes alone"},
            "classes": [
                {"name": "low", "prio": 0, "p99_vs_alone": 3.0, "share_error_points": 1.0},
                {"name": "high", "prio": 2, "p99_vs_alone": 1.2, "share_error_points": -1.0},
            ],
        })
    };
    let js = judge(&schedule(preempt_api::Policy::HighestFirst.name()), "s.json");
    assert_eq!(ids(&js), ["throughput-loss", "hp-p99-fig9"]);
    assert!(!js[0].pass, "12 % lost: above 10 %");
    assert!(
        js[1].pass && (js[1].measured - 1.2).abs() < 1e-9,
        "the highest prio class, not the first"
    );
    assert!(js[1].from.contains("class high"), "{}", js[1].from);
    let js = judge(&schedule(preempt_api::Policy::KEdf.name()), "s.json");
    assert_eq!(ids(&js), ["throughput-loss"]);
    let js = judge(&schedule(preempt_api::Policy::Partition.name()), "s.json");
    assert_eq!(
        ids(&js),
        ["throughput-loss", "partition-overhead", "partition", "partition"]
    );
    assert!(
        !js[1].pass && (js[1].measured - 12.0).abs() < 1e-9,
        "12 % > 1.5 %: {:?}",
        js[1]
    );
    let mut alone_not_run = schedule(preempt_api::Policy::Laxity.name());
    alone_not_run["standalone"] = Value::Null;
    assert!(judge(&alone_not_run, "s.json").is_empty());
}

#[test]
fn the_table_lists_every_target_measured_or_not() {
    let js = judge(&run(3, 0.5, 40_000, 50_000, "host"), "r.json");
    let mut out = Vec::new();
    text(&js, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    for t in &TARGETS {
        assert!(out.contains(t.what), "{} missing", t.id);
    }
    assert!(out.contains("PASS") && out.contains("host (host figure, not a GPU figure)"));
    assert_eq!(out.matches("not measured").count(), TARGETS.len() - 2);
}
