//! The Lv1 launcher driving the host device, alone and interleaved with host Lv3.

use host_device::{HostCommand, HostDevice, KernelRecord, WorkerExe, proc_state};
use lv1::{Config, SuspendMode, XQueue};
use std::collections::BTreeMap;
use std::time::Duration;

const MS: u64 = 1_000_000;
const LONG: Duration = Duration::from_secs(30);

fn device() -> HostDevice {
    HostDevice::spawn(&WorkerExe::new(env!("CARGO_BIN_EXE_preempt-host-worker")), 1).unwrap()
}

/// Records by id, asserting each id ran exactly once and correctly.
fn by_id(recs: Vec<KernelRecord>) -> BTreeMap<u64, KernelRecord> {
    let mut m = BTreeMap::new();
    for r in recs {
        assert!(r.is_correct(), "{r:?}");
        assert!(m.insert(r.id, r).is_none(), "command {} ran twice", r.id);
    }
    m
}

#[test]
fn every_command_runs_once_and_stamps_bracket_the_run() {
    let dev = device();
    let xq = XQueue::new(dev.lp().clone(), Config::new(4, 2).unwrap()).unwrap();
    let rx = xq.take_completions().unwrap();
    for _ in 0..30 {
        xq.submit(HostCommand::delay_ns(MS));
    }
    xq.wait_idle_for(LONG).unwrap();
    let recs = by_id(dev.lp().take_records());
    assert_eq!(recs.keys().copied().collect::<Vec<_>>(), (0..30).collect::<Vec<_>>());
    let done: Vec<_> = rx.try_iter().collect();
    assert_eq!(
        done.iter().map(|c| c.id).collect::<Vec<_>>(),
        (0..30).collect::<Vec<_>>()
    );
    for c in &done {
        let r = &recs[&c.id];
        assert!(c.outcome.is_ok());
        assert!(
            c.stamps.launched_ns <= r.start_ns,
            "started before it was launched: {c:?} {r:?}"
        );
        assert!(
            r.end_ns <= c.stamps.completed_ns,
            "observed before it ended: {c:?} {r:?}"
        );
        assert!(r.end_ns - r.start_ns >= MS);
    }
    let order: Vec<u64> = {
        let mut v: Vec<_> = recs.values().collect();
        v.sort_by_key(|r| r.start_ns);
        v.iter().map(|r| r.id).collect()
    };
    assert_eq!(
        order,
        (0..30).collect::<Vec<_>>(),
        "the device ran commands out of order"
    );
}

#[test]
fn lv1_and_lv3_cycles_under_concurrent_submission_lose_nothing() {
    let dev = device();
    let pid = dev.lp().pids()[0];
    let xq = XQueue::new(dev.lp().clone(), Config::new(4, 2).unwrap()).unwrap();
    let rx = xq.take_completions().unwrap();
    let mut recs = Vec::new();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let xq = &xq;
            s.spawn(move || {
                for _ in 0..30 {
                    xq.submit(HostCommand::delay_ns(2 * MS));
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        }
        for _ in 0..4 {
            std::thread::sleep(Duration::from_millis(15));
            // Lv1: once drained, everything launched has run to its end on the device.
            xq.suspend(SuspendMode::Drain).unwrap();
            let st = xq.stats();
            assert_eq!(st.in_flight, 0);
            recs.extend(dev.lp().take_records());
            assert_eq!(recs.len() as u64, st.launched, "drained, yet the device is not done");
            xq.resume();
            std::thread::sleep(Duration::from_millis(15));
            // Lv3: the worker is stopped under the launcher's feet, then continued.
            let g = dev.lp().suspend().unwrap();
            assert_eq!(proc_state(pid).unwrap(), 'T');
            std::thread::sleep(Duration::from_millis(5));
            drop(g);
        }
    });
    xq.wait_idle_for(LONG).unwrap();
    assert_eq!(
        rx.try_iter().map(|c| c.id).collect::<Vec<_>>(),
        (0..60).collect::<Vec<_>>()
    );
    let s = xq.stats();
    assert_eq!((s.submitted, s.completed, s.errors, s.dropped), (60, 60, 0, 0));
    recs.extend(dev.lp().take_records());
    assert_eq!(by_id(recs).into_keys().collect::<Vec<_>>(), (0..60).collect::<Vec<_>>());
}

#[test]
fn drained_and_dropped_commands_partition_the_submissions() {
    let dev = device();
    let xq = XQueue::new(dev.lp().clone(), Config::new(2, 1).unwrap()).unwrap();
    let rx = xq.take_completions().unwrap();
    // With the worker stopped, the launcher fills the threshold (2) and then must hold the
    // rest, whatever the scheduling: the split below is deterministic.
    let stopped = dev.lp().suspend().unwrap();
    for _ in 0..40 {
        xq.submit(HostCommand::delay_ns(2 * MS));
    }
    while xq.stats().launched < 2 {
        std::thread::sleep(Duration::from_millis(1));
    }
    xq.suspend(SuspendMode::Stop).unwrap();
    stopped.resume().unwrap();
    xq.suspend(SuspendMode::Drain).unwrap();
    let dropped: Vec<u64> = xq.resume_dropping_pending().iter().map(|d| d.id).collect();
    xq.wait_idle_for(LONG).unwrap();
    let completed: Vec<u64> = rx.try_iter().map(|c| c.id).collect();
    let ran: Vec<u64> = by_id(dev.lp().take_records()).into_keys().collect();
    assert_eq!(completed, vec![0, 1]);
    assert_eq!(ran, completed, "what ran is exactly what completed");
    assert_eq!(dropped, (2..40).collect::<Vec<_>>());
    let s = xq.stats();
    assert_eq!((s.submitted, s.completed, s.dropped, s.launched), (40, 2, 38, 2));
}
