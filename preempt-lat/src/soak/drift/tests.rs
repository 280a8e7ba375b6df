use super::*;

fn window(index: u32, kind: Kind, p99: Option<f64>, rss_kib: u64, fds: u64) -> Window {
    Window {
        index,
        kind,
        preset: "x",
        start_s: f64::from(index),
        duration_s: 1.0,
        hp_requests: 10,
        hp_p50_ms: p99.map(|p| p / 2.0),
        hp_p99_ms: p99,
        correct: Some(true),
        held: Held {
            rss_kib,
            fds,
            threads: 4,
        },
    }
}

/// Priority windows with P99s `p`, classes windows between them at 100 ms.
fn series(p: &[f64]) -> Vec<Window> {
    let mut out = Vec::new();
    for (i, &v) in (0u32..).zip(p) {
        out.push(window(2 * i, Kind::Priority, Some(v), 1000, 10));
        out.push(window(2 * i + 1, Kind::Classes, Some(100.0), 1000, 10));
    }
    out
}

#[test]
fn the_ends_are_medians_of_thirds_of_one_experiment() {
    // Nine priority windows: thirds of 3; one slow window at each end moves neither median.
    let w = series(&[1.0, 9.0, 1.2, 1.1, 1.0, 1.3, 2.0, 50.0, 2.2]);
    let d = latency(&w, Kind::Priority).unwrap();
    assert_eq!((d.windows, d.first_p99_ms, d.last_p99_ms), (9, 1.2, 2.2));
    assert!((d.ratio - 2.2 / 1.2).abs() < 1e-12);
    assert_eq!((d.min_p99_ms, d.max_p99_ms), (1.0, 50.0));
    let c = latency(&w, Kind::Classes).unwrap();
    assert_eq!((c.first_p99_ms, c.last_p99_ms, c.ratio), (100.0, 100.0, 1.0));
}

#[test]
fn too_few_windows_or_no_requests_give_no_drift() {
    assert_eq!(latency(&series(&[1.0]), Kind::Priority), None);
    let mut w = series(&[1.0, 2.0, 3.0]);
    for x in &mut w {
        x.hp_p99_ms = None;
    }
    assert_eq!(latency(&w, Kind::Priority), None);
    assert_eq!(held(&w[..2]), None);
}

#[test]
fn growth_counts_from_the_second_window() {
    let mut w = series(&[1.0, 1.0, 1.0]);
    // The first window allocates what the run keeps: not growth.
    w[0].held.rss_kib = 100;
    w[1].held.rss_kib = 5000;
    w[5].held.rss_kib = 5200;
    w[3].held.rss_kib = 9000;
    let h = held(&w).unwrap();
    assert_eq!(
        (h.from_window, h.to_window, h.rss_growth_kib, h.rss_max_kib),
        (1, 5, 200, 9000)
    );
    assert_eq!((h.fds_growth, h.threads_growth), (0, 0));
    assert!(problems(&w, Some(&h), 200).is_empty());
    assert_eq!(
        problems(&w, Some(&h), 199),
        ["RSS grew 200 KiB from window 1 to window 5 (at most 199 KiB: --rss-growth-mib)"]
    );
}

#[test]
fn a_leaked_descriptor_or_thread_and_a_failed_window_each_fail() {
    let mut w = series(&[1.0, 1.0, 1.0]);
    w[5].held.fds += 2;
    w[5].held.threads += 1;
    w[2].correct = Some(false);
    w[3].correct = None;
    let h = held(&w).unwrap();
    assert_eq!(
        problems(&w, Some(&h), 1 << 20),
        [
            "window 2 (priority): an LP command did not complete exactly once",
            "2 more open descriptors from window 1 to window 5",
            "1 more threads from window 1 to window 5",
        ]
    );
}
