//! Which of the launcher's threads observes the sync points, and what that must not change:
//! at the threshold the launcher waits itself; the completion thread only while the launcher
//! sleeps (idle, suspended) or after it ended (closing). Completions stay exactly once and in
//! launch order whoever delivers them. No assertion is about how fast anything is.

use lv1::XQueue;
use lv1::fake::FakeQueue;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

mod common;
use common::{LONG, QUIET, Rng, cfg, drain_in_background, expect_completions, manual, wait_for};

const LAUNCHER: &str = "lv1-launcher";
const COMPLETER: &str = "lv1-completer";

/// Submit commands 0..n so that the launcher sees them all at once (submitted while
/// suspended): its batches, hence its sync points, then do not depend on thread timing.
fn submit_at_once(xq: &XQueue<FakeQueue>, n: u64) {
    xq.suspend(lv1::SuspendMode::Stop).unwrap();
    for i in 0..n {
        assert_eq!(xq.submit(i), i);
    }
    xq.resume();
}

#[test]
fn the_launcher_observes_at_the_threshold_and_the_completer_once_it_sleeps() {
    let (fake, xq, _release, rx) = manual(4, 2);
    submit_at_once(&xq, 10);
    // At the threshold with work pending: the launcher waits on the oldest sync point itself.
    assert!(fake.wait_waiting(&[LAUNCHER], LONG), "{:?}", fake.waiting_threads());
    for step in 0..3 {
        wait_for("the refill", || fake.launched_count() >= 4 + 2 * step);
        assert_eq!(fake.complete(2), 2);
        expect_completions(&rx, 2 * step as u64, 2);
    }
    // All 10 launched, nothing pending: the launcher sleeps and the completer takes over.
    assert!(fake.wait_waiting(&[COMPLETER], LONG), "{:?}", fake.waiting_threads());
    fake.complete(4);
    expect_completions(&rx, 6, 4);
    xq.wait_idle_for(LONG).unwrap();
    assert!(rx.try_recv().is_err());
    let waits: BTreeMap<String, usize> = [(LAUNCHER.to_owned(), 3), (COMPLETER.to_owned(), 2)].into();
    assert_eq!(fake.waits_by_thread(), waits, "who waited on the 5 sync points");
}

#[test]
fn suspending_while_the_launcher_waits_on_a_sync_point() {
    let (fake, xq, _release, rx) = manual(4, 2);
    submit_at_once(&xq, 10);
    assert!(fake.wait_waiting(&[LAUNCHER], LONG), "{:?}", fake.waiting_threads());
    // The launcher is blocked on the device, not launching: Stop returns at once.
    xq.suspend(lv1::SuspendMode::Stop).unwrap();
    let s = xq.stats();
    assert_eq!((s.launched, s.in_flight, s.pending), (4, 4, 6));
    let done = drain_in_background(&xq);
    assert!(done.recv_timeout(QUIET).is_err(), "Drain returned with 4 in flight");
    fake.complete(2);
    expect_completions(&rx, 0, 2);
    // Suspended, the launcher sleeps after delivering its sync point; the completer takes the next.
    assert!(fake.wait_waiting(&[COMPLETER], LONG), "{:?}", fake.waiting_threads());
    assert!(done.recv_timeout(QUIET).is_err(), "Drain returned with 2 in flight");
    fake.complete(2);
    done.recv_timeout(LONG).expect("Drain returns once drained").unwrap();
    expect_completions(&rx, 2, 2);
    let s = xq.stats();
    assert_eq!((s.launched, s.in_flight, s.pending, s.completed), (4, 0, 6, 4));
    assert_eq!(fake.launched_count(), 4, "launched while suspended");
    xq.resume();
    fake.set_auto(true);
    xq.wait_idle_for(LONG).unwrap();
    expect_completions(&rx, 4, 6);
    assert!(rx.try_recv().is_err());
}

/// Drop `xq` on another thread; the receiver gets `()` once the drop has returned.
fn drop_in_background<T: Send + 'static>(xq: T) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(xq);
        let _ = tx.send(());
    });
    rx
}

#[test]
fn closing_while_both_threads_sleep() {
    let fake = FakeQueue::auto();
    let xq = XQueue::new(fake.clone(), cfg(4, 2)).unwrap();
    let rx = xq.take_completions().unwrap();
    for i in 0..5 {
        xq.submit(i);
    }
    xq.wait_idle_for(LONG).unwrap();
    assert!(fake.waiting_threads().is_empty());
    drop_in_background(xq).recv_timeout(LONG).expect("the drop returns");
    assert_eq!(rx.iter().map(|c| c.id).collect::<Vec<_>>(), (0..5).collect::<Vec<_>>());
}

#[test]
fn closing_while_a_thread_waits_on_a_sync_point_completes_everything() {
    // (threshold, batch, commands, who waits): a partial batch with nothing pending (the
    // launcher recorded it and sleeps; the completer waits), then commands pending at the
    // threshold (the launcher waits itself).
    for (t, b, n, waiter) in [(8, 4, 3, COMPLETER), (2, 1, 10, LAUNCHER)] {
        let (fake, xq, _release, rx) = manual(t, b);
        submit_at_once(&xq, n);
        assert!(
            fake.wait_waiting(&[waiter], LONG),
            "{waiter}: {:?}",
            fake.waiting_threads()
        );
        let dropped = drop_in_background(xq);
        assert!(
            dropped.recv_timeout(QUIET).is_err(),
            "{waiter}: closed with commands in flight"
        );
        fake.set_auto(true);
        dropped.recv_timeout(LONG).expect("the drop returns once all completed");
        assert_eq!(rx.iter().map(|c| c.id).collect::<Vec<_>>(), (0..n).collect::<Vec<_>>());
        assert_eq!(fake.launched_count() as u64, n);
    }
}

#[test]
fn completions_stay_exactly_once_and_in_order_under_random_completion_delays() {
    const N: u64 = 1500;
    for (seed, (t, b)) in [(1, (4, 2)), (2, (16, 8)), (3, (3, 1)), (4, (5, 5)), (5, (8, 4))] {
        let (fake, xq, _release, rx) = manual(t, b);
        let stop = AtomicBool::new(false);
        let idle = Mutex::new(None);
        std::thread::scope(|s| {
            // The device: completes 0-3 commands, then pauses up to 200 us.
            s.spawn(|| {
                let mut r = Rng::new(seed);
                while !stop.load(Ordering::Relaxed) {
                    fake.complete(usize::try_from(r.below(4)).unwrap());
                    std::thread::sleep(Duration::from_micros(r.below(200)));
                }
            });
            // Bursts of submissions with pauses, so that the launcher both reaches the
            // threshold (it observes) and runs dry (it sleeps and the completer observes).
            let mut r = Rng::new(seed + 100);
            for i in 0..N {
                xq.submit(i);
                if r.below(8) == 0 {
                    std::thread::sleep(Duration::from_micros(r.below(300)));
                }
            }
            *idle.lock().unwrap() = Some(xq.wait_idle_for(LONG));
            stop.store(true, Ordering::Relaxed);
        });
        let ctx = format!("seed {seed}, threshold {t}, batch {b}");
        idle.into_inner()
            .unwrap()
            .unwrap()
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        expect_completions(&rx, 0, N);
        assert!(rx.try_recv().is_err(), "{ctx}: a command completed twice");
        assert!(fake.max_unobserved() <= t, "{ctx}: {} in flight", fake.max_unobserved());
        let s = xq.stats();
        assert_eq!(
            (s.submitted, s.launched, s.completed, s.pending, s.in_flight),
            (N, N, N, 0, 0),
            "{ctx}"
        );
        let waits = fake.waits_by_thread();
        assert!(
            waits.keys().all(|k| k == LAUNCHER || k == COMPLETER),
            "{ctx}: {waits:?}"
        );
        assert_eq!(
            waits.values().sum::<usize>() as u64,
            s.sync_points,
            "{ctx}: one wait per sync point"
        );
    }
}
