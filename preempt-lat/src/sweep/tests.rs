use super::*;
use crate::exit::Failure;
use crate::measure::fake_gpu_run as run;

#[test]
fn state_panels_put_each_level_and_metric_against_the_wave_state() {
    let runs = [
        run(Level::Lv1, LpState::Light, 64, 4000),
        run(Level::Lv1, LpState::Heavy, 576, 4000),
        run(Level::Lv3, LpState::Light, 64, 40),
        run(Level::Lv3, LpState::Heavy, 576, 90),
    ];
    let target = |level| flat_ref(LV3_TARGET, 100.0, [64.0, 576.0].into_iter()).filter(|_| level == Level::Lv3);
    let (p, cols) = latency_panels(&runs, &[Level::Lv1, Level::Lv3], state_kib, |l| {
        target(l).into_iter().collect()
    });
    let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(
        titles,
        ["Lv1: suspend", "Lv3: suspend", "Lv1: HP start", "Lv3: HP start"]
    );
    assert_eq!(cols, 2, "a column per level, a row per metric");
    // One line per panel, labelled by level so that a level keeps its colour in every panel.
    assert!(p.iter().all(|p| p.series.len() == 1));
    assert_eq!(p[1].series[0].label, "Lv3 P99");
    assert_eq!(p[3].series[0].label, "Lv3 P99");
    // Only Lv3's panels carry its target.
    assert!(p[0].refs.is_empty() && p[1].refs.len() == 1 && p[1].refs[0].label == LV3_TARGET);
    // x = KiB per CU, y = the run's P99 in us (within the histogram's 3 significant digits).
    let lv3 = &p[1].series[0].points;
    assert_eq!(lv3.iter().map(|p| p.0).collect::<Vec<_>>(), [64.0, 576.0]);
    assert!(
        (lv3[0].1 - 40.0).abs() < 0.1 && (lv3[1].1 - 90.0).abs() < 0.1,
        "{lv3:?}"
    );
    assert_eq!(
        state_axis(&runs, &[LpState::Light, LpState::Heavy]),
        "wave state per CU, KiB (light 64, heavy 576)"
    );
    // A level without runs gives no panel; a run without an LP kernel (host) no point.
    assert!(
        latency_panels(&runs[..2], &[Level::Lv3], state_kib, |_| Vec::new())
            .0
            .is_empty()
    );
    let mut host = run(Level::Lv3, LpState::Light, 0, 10);
    host.lp_kernel = None;
    assert!(
        latency_panels(&[host], &[Level::Lv3], state_kib, |_| Vec::new())
            .0
            .is_empty()
    );
}

#[test]
fn sweep_t_panels_carry_threshold_x_t_for_lv1_one_t_for_lv2_and_the_target_for_lv3() {
    let mut a = run(Level::Lv1, LpState::Light, 64, 4000);
    a.params.t_ms = 0.5;
    let mut m = run(Level::Lv2, LpState::Light, 64, 400);
    m.params.t_ms = 0.5;
    let mut b = run(Level::Lv3, LpState::Light, 64, 40);
    b.params.t_ms = 0.5;
    let (p, cols) = sweep_t_panels(&[a, m, b], &[Level::Lv1, Level::Lv2, Level::Lv3], 8);
    assert_eq!(cols, 3, "a column per level");
    assert_eq!(p[1].title, "Lv2: suspend");
    let lv1 = &p[0].refs[0];
    assert!(lv1.label.starts_with("threshold x T (8 x T)"), "{}", lv1.label);
    // 8 x T in µs at the padded ends of T = 0.5 ms.
    assert!((lv1.points[0].1 - 8.0 * 0.5 / 1.3 * 1000.0).abs() < 1e-6);
    // Lv2's panels: 1 x T, the rest of the running command at most.
    for lv2 in [&p[1], &p[4]] {
        assert_eq!(lv2.refs.len(), 1);
        assert!(lv2.refs[0].label.starts_with("1 x T"), "{}", lv2.refs[0].label);
        let ends: Vec<(f64, f64)> = [0.5 / 1.3, 0.5 * 1.3].iter().map(|&t| (t, t * 1000.0)).collect();
        for (got, want) in lv2.refs[0].points.iter().zip(&ends) {
            assert!(
                (got.0 - want.0).abs() < 1e-9 && (got.1 - want.1).abs() < 1e-6,
                "{got:?} vs {want:?}"
            );
        }
    }
    assert_eq!(p[2].refs[0].label, LV3_TARGET);
}

#[test]
fn the_state_sweep_refuses_the_host_device() {
    let o = SweepStateOptions {
        levels: crate::options::Levels { list: vec![Level::Lv3] },
        states: LpState::ALL.to_vec(),
        t_ms: 0.5,
        per_point: crate::options::PerPoint { samples: 1, warmup: 0 },
        out_dir: std::env::temp_dir().join("preempt-lat-never-written"),
        common: crate::options::Common {
            lv1: crate::options::Lv1Options { threshold: 8, batch: 4 },
            device: crate::options::DeviceSpec::Auto,
            seed: 1,
            mechanism: preempt_api::MechanismChoice::Auto,
            grace: None,
            workers: None,
            quiet: true,
        },
    };
    match state(&o, Device::Host(1)) {
        Err(Failure::Usage(m)) => assert!(m.starts_with("sweep state needs an AMD GPU"), "{m}"),
        other => panic!("the host device must be refused: {other:?}"),
    }
    assert!(!o.out_dir.exists(), "nothing is written when refused");
}
