//! The host device: delay kernels, host Lv3 (stop/continue), the guard, the HP probe, and
//! process cleanup. Assertions are about behaviour; durations only appear as lower bounds
//! that follow from the work a command must do.

use host_device::{Ended, HostCommand, HostDevice, HostError, HostQueue, WorkerExe, proc_state};
use lv1::HwQueue;
use lv1::clock::now_ns;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;
const LONG: Duration = Duration::from_secs(30);

fn exe() -> WorkerExe {
    WorkerExe::new(env!("CARGO_BIN_EXE_preempt-host-worker"))
}

fn state(pid: i32) -> char {
    proc_state(pid).expect("worker alive")
}

/// Stopping is confirmed by the kernel before `suspend` returns, but a continued process
/// may still be on its way out of the stopped state when we look; allow it time.
fn wait_not_stopped(pid: i32) {
    let deadline = Instant::now() + LONG;
    while state(pid) == 'T' {
        assert!(Instant::now() < deadline, "worker {pid} still stopped");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn delay_commands_run_in_order_for_at_least_t() {
    let q = HostQueue::spawn(&exe(), 1).unwrap();
    for id in 0..5 {
        q.launch(id, HostCommand::delay(Duration::from_millis(3))).unwrap();
    }
    q.synchronize().unwrap();
    let recs = q.take_records();
    assert_eq!(
        recs.iter().map(|r| r.id).collect::<Vec<_>>(),
        (0..5).collect::<Vec<_>>()
    );
    for r in &recs {
        assert!(r.end_ns - r.start_ns >= 3 * MS, "{r:?} ran less than T");
        assert!(r.is_correct() && r.worker == 0 && r.work_ns == 3 * MS, "{r:?}");
    }
    assert!(
        recs.windows(2).all(|w| w[1].start_ns >= w[0].end_ns),
        "commands overlapped"
    );
}

#[test]
fn every_worker_runs_every_command() {
    let q = HostQueue::spawn(&exe(), 2).unwrap();
    let mut recs = q.run(7, HostCommand::delay_ns(2 * MS)).unwrap();
    recs.sort_by_key(|r| r.worker);
    assert_eq!(
        recs.iter().map(|r| (r.id, r.worker)).collect::<Vec<_>>(),
        vec![(7, 0), (7, 1)]
    );
    assert!(recs.iter().all(|r| r.is_correct() && r.end_ns - r.start_ns >= 2 * MS));
}

#[test]
fn a_stopped_command_continues_where_it_stopped() {
    let q = HostQueue::spawn(&exe(), 1).unwrap();
    let pid = q.pids()[0];
    let t = 100 * MS;
    q.launch(0, HostCommand::delay_ns(t)).unwrap();
    assert!(q.wait_started(1, LONG).unwrap());
    std::thread::sleep(Duration::from_millis(20));
    let guard = q.suspend().unwrap();
    let stopped_from = now_ns();
    assert_eq!(state(pid), 'T', "suspend returned but the worker is not stopped");
    // Far longer than the rest of the command: a wall-clock spin would finish meanwhile.
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(state(pid), 'T');
    assert!(q.take_records().is_empty(), "the command finished while stopped");
    let stopped_for = now_ns() - stopped_from;
    guard.resume().unwrap();
    wait_not_stopped(pid);
    q.synchronize().unwrap();
    let r = q.take_records_for(0)[0];
    assert!(r.start_ns < stopped_from, "the command had started before the stop");
    assert!(
        r.end_ns - r.start_ns >= t + stopped_for,
        "{r:?}: lost work across the stop"
    );
    assert!(r.is_correct());
}

#[test]
fn the_guard_resumes_on_drop_and_a_second_suspend_is_refused() {
    let q = HostQueue::spawn(&exe(), 1).unwrap();
    let pid = q.pids()[0];
    for cycle in 0..3 {
        let g = q.suspend().unwrap();
        assert_eq!(state(pid), 'T', "cycle {cycle}");
        assert!(matches!(q.suspend(), Err(HostError::AlreadySuspended)));
        drop(g);
        wait_not_stopped(pid);
    }
    assert_eq!(q.run(1, HostCommand::delay_ns(MS)).unwrap().len(), 1);
}

#[test]
fn the_guard_resumes_on_panic() {
    let q = HostQueue::spawn(&exe(), 1).unwrap();
    let pid = q.pids()[0];
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = q.suspend().unwrap();
        assert_eq!(state(pid), 'T');
        panic!("deliberate panic while suspended");
    }));
    assert!(r.is_err());
    wait_not_stopped(pid);
    assert_eq!(
        q.run(1, HostCommand::delay_ns(MS)).unwrap().len(),
        1,
        "queue works after the panic"
    );
}

#[test]
fn hp_probe_runs_while_lp_is_suspended() {
    let dev = HostDevice::spawn(&exe(), 1).unwrap();
    dev.lp().launch(0, HostCommand::delay_ns(50 * MS)).unwrap();
    let _g = dev.lp().suspend().unwrap();
    let requested = now_ns();
    let p = dev.probe_hp(42).unwrap();
    assert_eq!((p.id, p.work_ns), (42, 0));
    assert!(p.is_correct());
    assert!(
        requested <= p.start_ns && p.start_ns <= p.end_ns,
        "{p:?} vs request {requested}"
    );
}

#[test]
fn dropping_the_device_kills_and_reaps_all_workers_even_stopped_ones() {
    let dev = HostDevice::spawn(&exe(), 2).unwrap();
    let pids: Vec<i32> = dev.lp().pids().into_iter().chain(dev.hp().pids()).collect();
    assert_eq!(pids.len(), 3);
    dev.lp()
        .launch(0, HostCommand::delay(Duration::from_secs(600)))
        .unwrap();
    assert!(dev.lp().wait_started(1, LONG).unwrap());
    // Leak the guard: the workers stay stopped until the device goes.
    std::mem::forget(dev.lp().suspend().unwrap());
    assert!(pids[..2].iter().all(|&p| state(p) == 'T'));
    drop(dev);
    for pid in pids {
        // Gone from /proc means killed *and* reaped: a zombie or stopped orphan would remain.
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "worker {pid} left behind"
        );
    }
}

#[test]
fn a_worker_killed_from_outside_is_an_error_not_a_hang() {
    let q = HostQueue::spawn(&exe(), 1).unwrap();
    let pid = nix::unistd::Pid::from_raw(q.pids()[0]);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let r = q.launch(0, HostCommand::delay_ns(MS)).and_then(|()| q.synchronize());
    assert!(
        matches!(
            r,
            Err(HostError::WorkerDied {
                worker: 0,
                ended: Ended::Killed(Signal::SIGKILL),
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn suspending_a_worker_killed_from_outside_is_an_error_not_a_hang() {
    let q = HostQueue::spawn(&exe(), 2).unwrap();
    let pid = nix::unistd::Pid::from_raw(q.pids()[1]);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let r = q.suspend().map(|g| g.stopped_ns());
    let killed = |r: &Result<u64, HostError>| matches!(r, Err(HostError::WorkerDied { worker: 1, pid: p, ended: Ended::Killed(Signal::SIGKILL) }) if *p == pid.as_raw());
    assert!(killed(&r), "{r:?}");
    // The living worker was continued again, and the queue is not left marked suspended.
    wait_not_stopped(q.pids()[0]);
    let again = q.suspend().map(|g| g.stopped_ns());
    assert!(killed(&again), "{again:?}");
}

#[test]
fn spawning_something_that_is_not_a_worker_fails() {
    assert!(matches!(
        HostQueue::spawn(&WorkerExe::new("/nonexistent/worker"), 1),
        Err(HostError::Spawn(_))
    ));
    let echo = WorkerExe::new("/bin/echo").arg("hello");
    assert!(matches!(HostQueue::spawn(&echo, 1), Err(HostError::Protocol(_))));
    assert!(matches!(
        HostQueue::spawn(&WorkerExe::new("/bin/true"), 1),
        Err(HostError::WorkerDied { .. })
    ));
}
