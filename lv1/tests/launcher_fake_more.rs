//! More launcher behaviour against the fake: reconfiguration, drop, errors, wait_idle.

use lv1::fake::FakeQueue;
use lv1::{Config, SuspendMode, WaitIdleError, XQueue};

mod common;
use common::{LONG, QUIET, cfg, manual, wait_for};

#[test]
fn lowering_the_threshold_while_running_takes_effect_without_loss() {
    let (fake, xq, _release, rx) = manual(8, 4);
    for i in 0..20 {
        xq.submit(i);
    }
    assert!(fake.wait_launched(8, LONG));
    xq.set_config(cfg(2, 1));
    assert_eq!(xq.config(), cfg(2, 1));
    fake.complete(8);
    wait_for("8 completions", || xq.stats().completed == 8);
    assert!(fake.wait_launched(10, LONG));
    std::thread::sleep(QUIET);
    assert_eq!(fake.launched_count(), 10, "new threshold 2 not honoured");
    xq.set_config(cfg(5, 5));
    fake.complete(2);
    assert!(fake.wait_launched(15, LONG));
    std::thread::sleep(QUIET);
    assert_eq!(fake.launched_count(), 15, "raised threshold 5 not honoured");
    fake.set_auto(true);
    xq.wait_idle_for(LONG).unwrap();
    let ids: Vec<u64> = rx.try_iter().map(|c| c.id).collect();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
    assert_eq!(fake.launched(), (0..20).map(|i| (i, i)).collect::<Vec<_>>());
}

#[test]
fn config_changes_under_concurrent_submission_lose_nothing() {
    let fake = FakeQueue::auto();
    let xq = XQueue::new(fake.clone(), cfg(8, 4)).unwrap();
    let rx = xq.take_completions().unwrap();
    let configs = [cfg(1, 1), cfg(3, 2), cfg(8, 4), cfg(6, 6)];
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let xq = &xq;
            s.spawn(move || {
                (0..500).for_each(|i| {
                    let _ = xq.submit(t << 32 | i);
                })
            });
        }
        let xq = &xq;
        s.spawn(move || {
            for k in 0..200 {
                xq.set_config(configs[k % configs.len()]);
                if k % 50 == 0 {
                    xq.suspend(SuspendMode::Stop).unwrap();
                    xq.resume();
                }
                std::thread::yield_now();
            }
        });
    });
    xq.wait_idle_for(LONG).unwrap();
    let ids: Vec<u64> = rx.try_iter().map(|c| c.id).collect();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>());
    let launched = fake.launched();
    assert_eq!(
        launched.iter().map(|l| l.0).collect::<Vec<_>>(),
        (0..1000).collect::<Vec<_>>()
    );
    for t in 0..2u64 {
        let seq: Vec<u64> = launched
            .iter()
            .filter(|l| l.1 >> 32 == t)
            .map(|l| l.1 & 0xffff_ffff)
            .collect();
        assert_eq!(seq, (0..500).collect::<Vec<_>>());
    }
    assert!(fake.max_unobserved() <= 8);
}

#[test]
fn drop_launches_and_completes_everything_even_when_suspended() {
    let fake = FakeQueue::auto();
    let xq = XQueue::new(fake.clone(), cfg(2, 1)).unwrap();
    let rx = xq.take_completions().unwrap();
    xq.suspend(SuspendMode::Drain).unwrap();
    for i in 0..30 {
        xq.submit(i);
    }
    std::thread::sleep(QUIET);
    assert_eq!(fake.launched_count(), 0);
    drop(xq);
    // The channel closes once the launcher is gone, so this collects everything.
    let ids: Vec<u64> = rx.iter().map(|c| c.id).collect();
    assert_eq!(ids, (0..30).collect::<Vec<_>>());
    assert_eq!(fake.launched_count(), 30);
}

#[test]
fn wait_idle_refuses_to_wait_on_a_suspended_queue() {
    let fake = FakeQueue::auto();
    let xq = XQueue::new(fake.clone(), Config::default()).unwrap();
    xq.suspend(SuspendMode::Stop).unwrap();
    xq.submit(1);
    assert_eq!(xq.wait_idle(), Err(WaitIdleError::Suspended { pending: 1 }));
    xq.resume();
    xq.wait_idle_for(LONG).unwrap();
    assert_eq!(xq.stats().completed, 1);
}

#[test]
fn a_failed_launch_completes_once_with_its_error() {
    let fake = FakeQueue::auto();
    fake.fail_launch_of(3);
    let xq = XQueue::new(fake.clone(), cfg(2, 2)).unwrap();
    let rx = xq.take_completions().unwrap();
    for i in 0..6 {
        xq.submit(i);
    }
    xq.wait_idle_for(LONG).unwrap();
    let mut got: Vec<_> = rx.try_iter().map(|c| (c.id, c.outcome.is_ok())).collect();
    got.sort();
    assert_eq!(
        got,
        vec![(0, true), (1, true), (2, true), (3, false), (4, true), (5, true)]
    );
    let s = xq.stats();
    assert_eq!((s.launched, s.completed, s.errors), (5, 6, 1));
    assert_eq!(
        fake.launched().iter().map(|l| l.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 4, 5]
    );
}

#[test]
fn wait_idle_returns_when_the_last_launches_fail() {
    // Nothing ever gets in flight, so no completion of a sync point can wake the waiter.
    let fake = FakeQueue::auto();
    fake.fail_launch_of(0);
    fake.fail_launch_of(4);
    let xq = XQueue::new(fake.clone(), cfg(4, 2)).unwrap();
    let rx = xq.take_completions().unwrap();
    xq.submit(0);
    xq.wait_idle_for(LONG).unwrap();
    for i in 1..5 {
        xq.submit(i);
    }
    xq.wait_idle_for(LONG).unwrap();
    // A failed launch completes at once, ahead of the commands still in flight.
    let mut got: Vec<_> = rx.try_iter().map(|c| (c.id, c.outcome.is_ok())).collect();
    got.sort();
    assert_eq!(got, vec![(0, false), (1, true), (2, true), (3, true), (4, false)]);
    let s = xq.stats();
    assert_eq!(
        (s.submitted, s.launched, s.completed, s.errors, s.in_flight),
        (5, 3, 5, 2, 0)
    );
}

#[test]
fn completions_after_the_receiver_is_dropped_are_still_counted() {
    let fake = FakeQueue::auto();
    let xq = XQueue::new(fake, cfg(2, 1)).unwrap();
    drop(xq.take_completions());
    assert!(xq.take_completions().is_none(), "the receiver is handed out once");
    for i in 0..10 {
        xq.submit(i);
    }
    xq.wait_idle_for(LONG).unwrap();
    assert_eq!(xq.stats().completed, 10);
}
