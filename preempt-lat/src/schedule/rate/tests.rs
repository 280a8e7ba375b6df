use super::plot::{latency_panels, rate_scale, throughput_panel};
use super::*;
use crate::options::PolicyKind;
use crate::plot::Scale;
use crate::schedule::result::{ClassCheck, ClassResult, ScheduleParams};
use crate::stats::Summary;

fn summary(p50: u64, p99: u64) -> Summary {
    Summary {
        count: 10,
        min: p50 / 2,
        p50,
        p90: p99,
        p95: p99,
        p99,
        p99_9: p99,
        max: p99,
        mean: 0.0,
    }
}

fn class(spec: &str, p50_ms: u64, p99_ms: u64, req_s: f64) -> ClassResult {
    let spec = class::parse(spec).unwrap();
    let saturates = spec.saturates();
    ClassResult {
        spec,
        arrived: 10,
        unfinished: 0,
        oldest_unfinished_ns: None,
        finished: 10,
        late: 1,
        latency_ns: (!saturates).then(|| summary(p50_ms * 1_000_000, p99_ms * 1_000_000)),
        p99_vs_first: None,
        requests_per_s: req_s,
        work_per_s: 0.1,
        share_achieved_percent: 50.0,
        share_asked_percent: None,
        share_error_points: None,
        check: ClassCheck {
            submitted: 10,
            exactly_once: 10,
            ok: Some(true),
            problems: Vec::new(),
            abandoned: 0,
        },
        alone: None,
        p99_vs_alone: None,
    }
}

fn point(rate: f64, classes: Vec<ClassResult>) -> RatePoint {
    RatePoint {
        offered_rate: rate,
        result: ScheduleResult {
            params: ScheduleParams {
                policy: PolicyKind::Kedf.name(),
                k: 1,
                round_ms: 10.0,
                arrival: Arrival::Lognormal,
                sigma: 2.0,
                duration_s: 1.0,
                threshold: 8,
                batch: 4,
                seed: 1,
                workers: 2,
                preset: None,
            },
            env: crate::env::host(preempt_api::Mechanism::Sigstop),
            mechanism: "sigstop".into(),
            classes,
            combined_work_per_s: 0.2,
            suspends: 3,
            resumes: 3,
            failed_actions: Vec::new(),
            window_s: 1.0,
            interrupted: false,
            wall_time_s: 1.1,
            standalone: None,
        },
    }
}

/// Two request classes and a saturating one at 100 and 200 req/s.
fn sweep() -> RateSweep {
    let at = |rate: f64, slow: u64| {
        point(
            rate,
            vec![
                class("a:rate=75:deadline=10", 1, 4 * slow, rate * 0.75),
                class("b:rate=25:deadline=50", 2, 8 * slow, rate * 0.25),
                class("bg:deadline=1000", 0, 0, 300.0),
            ],
        )
    };
    RateSweep {
        sweep: "rate",
        params: RateParams {
            rates: vec![100.0, 200.0],
            policy: PolicyKind::Kedf.name(),
            k: 1,
            arrival: Arrival::Lognormal,
            sigma: 2.0,
            round_ms: 10.0,
            duration_s: 1.0,
            template: vec![class::parse("a:rate=3:deadline=10").unwrap()],
            built_in: false,
            threshold: 8,
            batch: 4,
            seed: 1,
            workers: 2,
            preset: None,
        },
        env: crate::env::host(preempt_api::Mechanism::Sigstop),
        points: vec![at(100.0, 1), at(200.0, 2)],
        compared: None,
        interrupted: false,
        wall_time_s: 2.5,
    }
}

#[test]
fn the_rate_axis_is_linear_over_a_narrow_range_and_log_over_a_wide_one() {
    assert_eq!(rate_scale(&[100.0, 400.0, 1200.0]), Scale::Linear);
    assert_eq!(rate_scale(&[10.0, 100.0, 1000.0]), Scale::Log);
    assert_eq!(rate_scale(&[50.0]), Scale::Linear);
}

#[test]
fn a_latency_panel_per_request_class_with_its_p99_band_and_deadline() {
    let s = sweep();
    let (panels, cols) = latency_panels(&s);
    let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(titles, ["a", "b"], "the saturating class has no request latency");
    assert_eq!(cols, 2);
    let a = &panels[0].series[0];
    assert_eq!(
        a.points,
        [(100.0, 4.0), (200.0, 8.0)],
        "x = offered rate, y = P99 in ms"
    );
    assert_eq!(
        a.spread,
        [(100.0, 1.0, 4.0), (200.0, 1.0, 8.0)],
        "the band is p50 to p99"
    );
    // kedf: each panel carries its own class's deadline, under one legend label.
    let d: Vec<f64> = panels.iter().map(|p| p.refs[0].points[0].1).collect();
    assert_eq!(d, [10.0, 50.0]);
    assert_eq!(panels[0].refs[0].label, panels[1].refs[0].label);
    let mut up = sweep();
    up.params.policy = PolicyKind::Up.name();
    assert!(
        latency_panels(&up).0.iter().all(|p| p.refs.is_empty()),
        "a deadline only explains kedf"
    );
}

#[test]
fn the_throughput_panel_puts_completed_over_arrived_and_offered() {
    let mut s = sweep();
    s.points[1].result.window_s = 2.0;
    let p = throughput_panel(&s);
    assert_eq!(p.series.len(), 1);
    // The request classes only (the saturating one's commands are no requests).
    assert_eq!(p.series[0].points, [(100.0, 100.0), (200.0, 200.0)]);
    assert_eq!(p.refs[0].points, [(100.0, 100.0), (200.0, 200.0)], "offered");
    // 10 arrivals in each of a and b, over the window.
    assert_eq!(p.refs[1].points, [(100.0, 20.0), (200.0, 10.0)], "arrived");
}

#[test]
fn every_format_carries_every_rate_and_class() {
    let s = sweep();
    let mut out = Vec::new();
    crate::output::export(crate::options::Format::Csv, &s, &mut out).unwrap();
    let csv = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * 3, "a header and a row per rate and class: {csv}");
    assert!(
        lines[0].starts_with("device,policy,k,offered_rate,class,class_rate,"),
        "{csv}"
    );
    let row = format!("host,{},1,200.0,a,75.0,", PolicyKind::Kedf.name());
    assert!(lines[4].starts_with(&row), "{csv}");
    let mut out = Vec::new();
    crate::output::export(crate::options::Format::Json, &s, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["sweep"], "rate");
    assert_eq!(v["points"][1]["offered_rate"], 200.0);
    // Each point is a whole class-experiment result (what `report` judges schedule.json by).
    assert_eq!(v["points"][1]["classes"][0]["name"], "a");
    assert!(v["points"][1]["combined_work_per_s"].is_number());
    let mut out = Vec::new();
    s.text(&mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("host figures, not GPU figures"), "{t}");
    assert!(t.contains("| 200 | bg | saturating |"), "{t}");
}

/// The CSV columns and cells of a sweep and of one class-experiment run, byte for byte: the two
/// files share one row type, each with its own columns.
#[test]
fn the_csv_of_a_sweep_and_of_one_run() {
    let mut s = sweep();
    s.points[1].result.standalone = Some(crate::schedule::standalone::Standalone::of(
        0.1,
        &[(0.1, false), (0.1, false)],
    ));
    s.points[1].result.classes[0].p99_vs_alone = Some(1.5);
    let mut out = Vec::new();
    crate::output::export(crate::options::Format::Csv, &s, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "device,policy,k,offered_rate,class,class_rate,t_ms,deadline_ms,finished,late,p50_ms,p90_ms,p99_ms,max_ms,\
         requests_per_s,work_per_s,p99_vs_alone,throughput_loss_percent,exactly_once\n\
         host,k-edf,1,100.0,a,75.0,0.5,10.0,10,1,1.0,4.0,4.0,4.0,75.0,0.1,,,true\n\
         host,k-edf,1,100.0,b,25.0,0.5,50.0,10,1,2.0,8.0,8.0,8.0,25.0,0.1,,,true\n\
         host,k-edf,1,100.0,bg,0.0,0.5,1000.0,10,1,,,,,300.0,0.1,,,true\n\
         host,k-edf,1,200.0,a,75.0,0.5,10.0,10,1,1.0,8.0,8.0,8.0,150.0,0.1,1.5,50.0,true\n\
         host,k-edf,1,200.0,b,25.0,0.5,50.0,10,1,2.0,16.0,16.0,16.0,50.0,0.1,,50.0,true\n\
         host,k-edf,1,200.0,bg,0.0,0.5,1000.0,10,1,,,,,300.0,0.1,,50.0,true\n"
    );
    let mut r = s.points[0].result.clone();
    r.classes[0].share_asked_percent = Some(75.0);
    r.classes[1].p99_vs_alone = Some(1.5);
    r.classes[1].check.ok = None;
    let mut out = Vec::new();
    crate::output::export(crate::options::Format::Csv, &r, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "device,policy,mechanism,class,rate,t_ms,finished,late,p50_ms,p90_ms,p99_ms,max_ms,requests_per_s,\
         share_achieved_percent,share_asked_percent,p99_vs_alone,exactly_once\n\
         host,k-edf,sigstop,a,75.0,0.5,10,1,1.0,4.0,4.0,4.0,75.0,50.0,75.0,,true\n\
         host,k-edf,sigstop,b,25.0,0.5,10,1,2.0,8.0,8.0,8.0,25.0,50.0,,1.5,\n\
         host,k-edf,sigstop,bg,0.0,0.5,10,1,,,,,300.0,50.0,,,true\n"
    );
    let mut out = Vec::new();
    r.text(&mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(
        t.contains(
            "\n| a | 75/s lognormal | 0.5 | 10 | 1 | 1.00 | 4.00 | 4.00 | 4.00 | - | 75.0 | 75.0 % | 50.0 % | yes |\n"
        ),
        "{t}"
    );
}
