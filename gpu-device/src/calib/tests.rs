use super::*;

#[test]
fn gfx_target_parse_and_round_trip() {
    let t = GfxTarget::parse("gfx942:sramecc+:xnack-").unwrap();
    assert_eq!(t.processor, "gfx942");
    assert_eq!(
        t.features,
        vec![("sramecc".to_string(), true), ("xnack".to_string(), false)]
    );
    assert_eq!(t.offload_arch(), "gfx942:sramecc+:xnack-");
    assert!(t.is_gfx94x());
    let a = GfxTarget::parse("gfx90a").unwrap();
    assert!(a.features.is_empty() && !a.is_gfx94x());
    assert_eq!(GfxTarget::parse("gfx1100").unwrap().processor, "gfx1100");
    for bad in [
        "",
        "gfx",
        "gfx9",
        "sm_90",
        "gfx942:",
        "gfx942:xnack",
        "gfx942:x y+",
        "gfxzzz",
        "AMD Instinct MI300X",
    ] {
        assert!(GfxTarget::parse(bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn grid_occupies_every_cu() {
    // MI300X: 304 CUs, one 4-wave block per CU.
    assert_eq!(
        grid_for(304, 1, 4, 64).unwrap(),
        Grid {
            blocks: 304,
            threads: 256
        }
    );
    assert_eq!(
        grid_for(228, 2, 1, 64).unwrap(),
        Grid {
            blocks: 456,
            threads: 64
        }
    );
    assert_eq!(grid_for(120, 1, 16, 64).unwrap().threads, 1024);
    assert!(grid_for(0, 1, 4, 64).is_err());
    assert!(grid_for(304, 1, 17, 64).is_err());
    assert!(grid_for(304, 1, 0, 64).is_err());
    assert!(grid_for(u32::MAX, 2, 1, 64).is_err());
}

#[test]
fn line_fit_exact_and_degenerate() {
    let l = fit_line(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
    assert!((l.slope - 2.0).abs() < 1e-12 && (l.intercept - 1.0).abs() < 1e-12);
    assert_eq!(fit_line(&[(1.0, 1.0)]), None);
    assert_eq!(fit_line(&[(1.0, 1.0), (1.0, 2.0)]), None);
}

fn samples(ticks_per_ms: f64, wall_off: f64, event_rate: f64, event_off: f64) -> Vec<CalSample> {
    [5_000u64, 25_000, 50_000, 100_000, 100_000]
        .iter()
        .map(|&t| CalSample {
            ticks: t,
            wall_ms: t as f64 / ticks_per_ms + wall_off,
            event_ms: t as f64 / event_rate + event_off,
        })
        .collect()
}

#[test]
fn calibration_recovers_rate_and_overhead() {
    // A 100 MHz wall clock = 1e5 ticks/ms; 3 us of fixed cost on the stamps, 12 us on events.
    let c = Calibration::fit(&samples(1e5, 0.003, 1e5, 0.012)).unwrap();
    assert!((c.ticks_per_ms - 1e5).abs() < 1e-3, "{c:?}");
    assert!((c.event_overhead_ms - 0.012).abs() < 1e-9 && (c.wall_overhead_ms - 0.003).abs() < 1e-9);
    assert!(!c.rates_disagree);
    // The overhead is taken off the request: 0.5 ms asks for 0.497 ms of spin.
    assert_eq!(c.ticks_for(0.5), 49_700);
    assert_eq!(c.ticks_for(0.001), 0);
    // A 25 MHz clock (gfx90a) read as 100 MHz would make the stamps say 4x the events: flagged.
    let c = Calibration::fit(&samples(1e5, 0.0, 2.5e4, 0.0)).unwrap();
    assert!(c.rates_disagree);
}

#[test]
fn calibration_rejects_useless_samples() {
    let one = CalSample {
        ticks: 1000,
        event_ms: 1.0,
        wall_ms: 1.0,
    };
    assert!(Calibration::fit(&[]).is_err());
    assert!(Calibration::fit(&[one, one]).is_err());
    let shrinking = [
        one,
        CalSample {
            ticks: 2000,
            event_ms: 0.5,
            wall_ms: 0.5,
        },
    ];
    assert!(Calibration::fit(&shrinking).is_err());
}

#[test]
fn achieved_flags_more_than_five_percent() {
    assert!(!achieved(1.0, 1.04).off);
    assert!(!achieved(1.0, 0.951).off);
    let a = achieved(0.5, 0.6);
    assert!(a.off && (a.error - 0.2).abs() < 1e-12);
    assert!(achieved(0.5, f64::NAN).off);
    assert_eq!(ticks_to_ms(100_000, 100_000), 1.0);
}

fn pair(ticks: u64, before: u64, after: u64) -> ClockPair {
    ClockPair {
        gpu_ticks: ticks,
        host_before_ns: before,
        host_after_ns: after,
    }
}

#[test]
fn clock_map_offset_from_narrowest_window_and_nominal_rate() {
    // GPU tick t <-> host ns 5_000 + 10 * (t - 1_000_000); brackets of varying width.
    let truth = |t: u64| 5_000.0 + 10.0 * (t as f64 - 1_000_000.0);
    let pairs = [
        pair(1_000_000, 4_000, 8_000),
        pair(1_000_500, 9_900, 10_100),
        pair(1_001_000, 14_000, 16_400),
    ];
    let m = ClockMap::fit(&pairs, 100_000).unwrap();
    assert_eq!(m.anchor_ticks, 1_000_500);
    assert_eq!(m.late_bias_max_ns, 200.0);
    assert!((m.ns_per_tick - 10.0).abs() < 0.1, "{m:?}");
    for t in [1_000_000u64, 1_000_500, 1_001_000, 2_000_000] {
        let err = m.to_host_ns(t) - truth(t);
        assert!((0.0..=m.late_bias_max_ns).contains(&err), "t={t}: {err}");
    }
}

/// With a realistic bracket (launch + dispatch of 10 us before the stamp, 0.5 us for it to reach
/// the host after), mapped times are late by about the short way back, never early; the midpoint
/// anchor would have made them ~4.75 us early.
#[test]
fn clock_map_anchors_where_the_stamp_was_seen_so_mapped_times_are_never_early() {
    let (launch, back) = (10_000u64, 500u64);
    let pairs: Vec<ClockPair> = (0..32u64)
        .map(|i| {
            let t = 1_000_000 + i * 100_000; // 1 ms apart at 100 MHz
            let h = 50_000_000 + i * 1_000_000; // the stamp's true host time
            pair(t, h - launch, h + back)
        })
        .collect();
    let m = ClockMap::fit(&pairs, 100_000).unwrap();
    for i in 0..32u64 {
        let err = m.to_host_ns(1_000_000 + i * 100_000) - (50_000_000 + i * 1_000_000) as f64;
        assert!(
            (back as f64 - 1.0..=back as f64 + 1.0).contains(&err),
            "pair {i}: late by {err} ns"
        );
    }
    assert_eq!(m.late_bias_max_ns, (launch + back) as f64);
}

#[test]
fn clock_map_fits_drift_over_a_long_span() {
    // 100 MHz nominal, 0.01% fast, over 10 s: the fitted rate should see it.
    let ns = 10.0 / 1.0001;
    let pairs: Vec<ClockPair> = (0..10u64)
        .map(|i| {
            let t = 5_000_000_000u64 + i * 100_000_000;
            let h = crate::num::round_u64(1e9 + (t - 5_000_000_000) as f64 * ns);
            pair(t, h - 50, h + 50)
        })
        .collect();
    let m = ClockMap::fit(&pairs, 100_000).unwrap();
    assert!((m.ns_per_tick - ns).abs() < 1e-6, "{m:?}");
    // Anchored where each stamp was seen: late by the 50 ns after-window, never early.
    assert!((m.to_host_ns(5_900_000_000) - (1e9 + 9e8 * ns) - 50.0).abs() < 2.0);
}

#[test]
fn clock_map_rejects_bad_input() {
    assert!(ClockMap::fit(&[], 100_000).is_err());
    assert!(ClockMap::fit(&[pair(1, 10, 5)], 100_000).is_err());
    assert!(ClockMap::fit(&[pair(1, 5, 10)], 0).is_err());
    // A single pair: nominal rate.
    let m = ClockMap::fit(&[pair(1_000, 0, 2_000)], 100_000).unwrap();
    assert_eq!(m.ns_per_tick, 10.0);
    assert_eq!(m.to_host_ns(1_100), 3_000.0);
}

#[test]
fn host_ns_is_monotonic() {
    let a = host_ns(Instant::now());
    let b = host_ns(Instant::now());
    assert!(b >= a);
}

#[test]
fn hiprtc_target_minimum_versions() {
    assert_eq!(min_hip_for_target("gfx942"), Some((6, 0)));
    assert_eq!(min_hip_for_target("gfx950"), Some((7, 0)));
    assert_eq!(min_hip_for_target("gfx1100"), Some((5, 4)));
    assert_eq!(min_hip_for_target("gfx90a"), None);
    assert_eq!(min_hip_for_target("gfx906"), None);
    assert_eq!(min_hip_for_target("gfx1030"), None);
    assert_eq!(min_hip_for_target("gfx803"), None);
    assert_eq!(min_hip_for_target("gfx999"), Some((99, 0)));
    assert_eq!(min_hip_for_target("gfx9999"), Some((99, 0)));
}
