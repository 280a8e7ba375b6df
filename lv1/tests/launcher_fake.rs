//! The Lv1 launcher against the deterministic fake hardware queue.
//! Timeouts are generous and only bound waits; no assertion is about how fast anything is.

use lv1::fake::FakeQueue;
use lv1::{Config, ConfigError, SuspendMode, XQueue};

mod common;
use common::{LONG, QUIET, cfg, drain_in_background, expect_completions, manual, wait_for};

#[test]
fn config_is_validated() {
    assert_eq!(Config::new(0, 0), Err(ConfigError::ZeroThreshold));
    assert_eq!(Config::new(0, 1), Err(ConfigError::ZeroThreshold));
    assert_eq!(Config::new(4, 0), Err(ConfigError::ZeroBatch));
    assert_eq!(
        Config::new(2, 4),
        Err(ConfigError::ThresholdBelowBatch { threshold: 2, batch: 4 })
    );
    let c = Config::new(4, 4).unwrap();
    assert_eq!((c.threshold(), c.batch()), (4, 4));
    let d = Config::default();
    assert_eq!((d.threshold(), d.batch()), (8, 4));
    assert!(
        ConfigError::ThresholdBelowBatch { threshold: 2, batch: 4 }
            .to_string()
            .contains("2")
    );
}

#[test]
fn in_flight_never_exceeds_threshold() {
    let (fake, xq, _release, rx) = manual(4, 2);
    for i in 0..20 {
        xq.submit(i);
    }
    assert!(fake.wait_launched(4, LONG));
    std::thread::sleep(QUIET);
    assert_eq!(fake.launched_count(), 4, "launched past the threshold");
    assert_eq!(xq.stats().in_flight, 4);
    // Complete one command at a time; the launcher refills as sync points are observed.
    wait_for("all 20 completed", || {
        fake.complete(1);
        xq.stats().completed == 20
    });
    expect_completions(&rx, 0, 20);
    assert_eq!(fake.max_unobserved(), 4);
    assert_eq!(xq.stats().max_in_flight, 4);
}

#[test]
fn order_and_exactly_once_across_configs() {
    for (t, b) in [(1, 1), (2, 1), (8, 4), (5, 3), (16, 16)] {
        let fake = FakeQueue::auto();
        let xq = XQueue::new(fake.clone(), cfg(t, b)).unwrap();
        let rx = xq.take_completions().unwrap();
        for i in 0..300 {
            assert_eq!(xq.submit(1000 + i), i);
        }
        xq.wait_idle_for(LONG).unwrap();
        expect_completions(&rx, 0, 300);
        assert!(rx.try_recv().is_err(), "a command completed twice");
        let launched = fake.launched();
        assert_eq!(launched, (0..300).map(|i| (i, 1000 + i)).collect::<Vec<_>>());
        assert!(
            fake.max_unobserved() <= t,
            "({t},{b}): {} in flight",
            fake.max_unobserved()
        );
        let s = xq.stats();
        assert_eq!(
            (s.submitted, s.launched, s.completed, s.pending, s.in_flight),
            (300, 300, 300, 0, 0)
        );
        // A sync point per batch, plus at most one flush each time the launcher went idle.
        assert!(
            s.sync_points >= 300 / b as u64,
            "({t},{b}): {} sync points",
            s.sync_points
        );
    }
}

#[test]
fn many_threads_submit_in_order() {
    const THREADS_N: usize = 4;
    const THREADS: u64 = THREADS_N as u64;
    const PER: u64 = 250;
    let fake = FakeQueue::auto();
    let xq = XQueue::new(fake.clone(), cfg(3, 2)).unwrap();
    let rx = xq.take_completions().unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let xq = &xq;
            s.spawn(move || {
                let ids: Vec<u64> = (0..PER).map(|i| xq.submit(t << 32 | i)).collect();
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids of one thread not increasing");
            });
        }
    });
    xq.wait_idle_for(LONG).unwrap();
    expect_completions(&rx, 0, THREADS * PER);
    let launched = fake.launched();
    assert_eq!(launched.len() as u64, THREADS * PER);
    let mut next = [0u64; THREADS_N];
    for (k, (id, payload)) in launched.iter().enumerate() {
        assert_eq!(*id, k as u64, "launch order is not id order");
        let (t, i) = ((payload >> 32) as usize, payload & 0xffff_ffff);
        assert_eq!(i, next[t], "thread {t}'s commands out of order or duplicated");
        next[t] += 1;
    }
    assert!(next.iter().all(|&n| n == PER));
    assert!(fake.max_unobserved() <= 3);
}

#[test]
fn suspend_stop_does_not_wait_and_holds_commands() {
    let (fake, xq, _release, rx) = manual(4, 2);
    for i in 0..10 {
        xq.submit(i);
    }
    assert!(fake.wait_launched(4, LONG));
    // Nothing completes, yet Stop returns.
    xq.suspend(SuspendMode::Stop).unwrap();
    assert!(xq.is_suspended());
    assert_eq!(xq.stats().in_flight, 4);
    assert_eq!(fake.complete(4), 4);
    expect_completions(&rx, 0, 4);
    xq.submit(10);
    std::thread::sleep(QUIET);
    assert_eq!(fake.launched_count(), 4, "launched while suspended");
    assert_eq!(xq.stats().pending, 7);
    xq.resume();
    fake.set_auto(true);
    xq.wait_idle_for(LONG).unwrap();
    expect_completions(&rx, 4, 7);
    assert_eq!(
        fake.launched().iter().map(|l| l.0).collect::<Vec<_>>(),
        (0..11).collect::<Vec<_>>()
    );
}

#[test]
fn suspend_drain_waits_for_in_flight_then_pending_can_be_dropped() {
    let (fake, xq, _release, rx) = manual(4, 2);
    for i in 0..10 {
        xq.submit(100 + i);
    }
    assert!(fake.wait_launched(4, LONG));
    let done = drain_in_background(&xq);
    assert!(
        done.recv_timeout(QUIET).is_err(),
        "Drain returned with 4 commands in flight"
    );
    fake.complete(3);
    assert!(
        done.recv_timeout(QUIET).is_err(),
        "Drain returned with 1 command in flight"
    );
    fake.complete(1);
    done.recv_timeout(LONG).expect("Drain returns once drained").unwrap();
    let s = xq.stats();
    assert_eq!((s.in_flight, s.completed, s.pending, s.launched), (0, 4, 6, 4));
    expect_completions(&rx, 0, 4);
    let dropped = xq.resume_dropping_pending();
    let got: Vec<(u64, u64)> = dropped.iter().map(|d| (d.id, d.cmd)).collect();
    assert_eq!(got, (4..10).map(|i| (i, 100 + i)).collect::<Vec<_>>());
    assert!(!xq.is_suspended());
    std::thread::sleep(QUIET);
    assert_eq!(fake.launched_count(), 4, "a dropped command was launched");
    let s = xq.stats();
    assert_eq!((s.submitted, s.completed + s.dropped, s.pending), (10, 10, 0));
    xq.wait_idle_for(LONG).unwrap();
    assert!(rx.try_recv().is_err());
}

#[test]
fn drain_covers_a_partial_batch() {
    let (fake, xq, _release, _rx) = manual(8, 4);
    for i in 0..3 {
        xq.submit(i);
    }
    assert!(fake.wait_launched(3, LONG));
    let done = drain_in_background(&xq);
    assert!(done.recv_timeout(QUIET).is_err());
    fake.complete(3);
    done.recv_timeout(LONG)
        .expect("Drain must not wait for a full batch")
        .unwrap();
    assert_eq!(xq.stats().completed, 3);
}

#[test]
fn resume_dropping_pending_while_running() {
    let (fake, xq, _release, rx) = manual(4, 4);
    for i in 0..10 {
        xq.submit(i);
    }
    assert!(fake.wait_launched(4, LONG));
    let dropped = xq.resume_dropping_pending();
    assert_eq!(
        dropped.iter().map(|d| d.id).collect::<Vec<_>>(),
        (4..10).collect::<Vec<_>>()
    );
    fake.complete(4);
    xq.wait_idle_for(LONG).unwrap();
    expect_completions(&rx, 0, 4);
    assert!(rx.try_recv().is_err());
    assert_eq!(fake.launched_count(), 4);
}
