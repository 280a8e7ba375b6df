//! Host Lv2 (`HostQueue::hold`): a worker finishes the command it runs and takes no new one; the
//! commands held back run after resume, in order, each once. Every wait is bounded: a hold runs
//! on a thread of its own and the test gives up after [`LONG`].

use host_device::{Ended, HostCommand, HostError, HostQueue, WorkerExe, proc_state};
use lv1::HwQueue;
use lv1::clock::now_ns;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;
const LONG: Duration = Duration::from_secs(30);

fn exe() -> WorkerExe {
    WorkerExe::new(env!("CARGO_BIN_EXE_preempt-host-worker"))
}

/// `f` on a thread of its own, given up (a failure) after [`LONG`]: a hold that never comes back
/// fails the test instead of hanging the suite.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(LONG)
        .unwrap_or_else(|_| panic!("{what}: not done after {LONG:?}"))
}

/// Whether every worker of `q` has started `n` commands within `wait`.
fn started(q: &HostQueue, n: u64, wait: Duration) -> bool {
    q.wait_started(n, wait).unwrap()
}

#[test]
fn the_running_command_finishes_the_next_waits_and_runs_once_after_resume() {
    let q = Arc::new(HostQueue::spawn(&exe(), 1).unwrap());
    let pid = q.pids()[0];
    // Command 0 long enough that it still runs when the hold is asked, even on a loaded machine.
    let (t0, t1) = (300 * MS, 5 * MS);
    q.launch(0, HostCommand::delay_ns(t0)).unwrap();
    q.launch(1, HostCommand::delay_ns(t1)).unwrap();
    assert!(started(&q, 1, LONG));
    let asked = now_ns();
    let held = bounded("hold", {
        let q = Arc::clone(&q);
        move || q.hold_shared().unwrap()
    });
    let first = q.take_records_for(0);
    assert_eq!(
        first.len(),
        1,
        "the command running at the hold finished before it returned"
    );
    assert!(first[0].is_correct());
    assert!(
        asked < first[0].end_ns && first[0].end_ns <= held.held_ns(),
        "{first:?}: it ended after the hold was asked and before it was granted ({asked}..{})",
        held.held_ns()
    );
    // Far longer than command 1 needs: it must not start while held.
    std::thread::sleep(Duration::from_millis(150));
    assert!(!started(&q, 2, Duration::ZERO), "command 1 started while held");
    assert!(q.take_records_for(1).is_empty(), "command 1 ran while held");
    let state = proc_state(pid).unwrap();
    assert_eq!(state, 'S', "a held worker sleeps (not stopped, not running)");
    let resumed = now_ns();
    held.resume().unwrap();
    bounded("synchronize after resume", {
        let q = Arc::clone(&q);
        move || q.synchronize().unwrap()
    });
    let second = q.take_records_for(1);
    assert_eq!(second.len(), 1, "the held command ran once: {second:?}");
    assert!(second[0].is_correct() && second[0].start_ns >= resumed, "{second:?}");
    assert!(second[0].end_ns - second[0].start_ns >= t1);
    assert!(q.take_records().is_empty(), "nothing else ran");
}

#[test]
fn an_idle_queue_is_held_at_once_and_what_is_launched_meanwhile_waits() {
    let q = Arc::new(HostQueue::spawn(&exe(), 2).unwrap());
    let held = bounded("hold of an idle queue", {
        let q = Arc::clone(&q);
        move || q.hold_shared().unwrap()
    });
    q.launch(0, HostCommand::delay_ns(MS)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!started(&q, 1, Duration::ZERO), "a command started on a held queue");
    held.resume().unwrap();
    let recs = bounded("run after resume", {
        let q = Arc::clone(&q);
        move || {
            q.synchronize().unwrap();
            q.take_records()
        }
    });
    let mut workers: Vec<_> = recs.iter().map(|r| (r.id, r.worker, r.is_correct())).collect();
    workers.sort_unstable();
    assert_eq!(workers, [(0, 0, true), (0, 1, true)], "once on each worker");
}

#[test]
fn many_holds_while_commands_run_lose_and_repeat_nothing() {
    let q = Arc::new(HostQueue::spawn(&exe(), 2).unwrap());
    let n = 40;
    for id in 0..n {
        q.launch(id, HostCommand::delay_ns(2 * MS)).unwrap();
    }
    let q2 = Arc::clone(&q);
    bounded("10 hold/resume cycles and the rest", move || {
        for _ in 0..10 {
            let g = q2.hold().unwrap();
            // Held: nothing runs, so nothing completes until the resume.
            let done = q2.take_records().len();
            std::thread::sleep(Duration::from_millis(3));
            assert!(
                q2.take_records().is_empty(),
                "a record arrived while held (after {done})"
            );
            g.resume().unwrap();
            std::thread::sleep(Duration::from_millis(3));
        }
        q2.synchronize().unwrap();
    });
    drop(q.take_records());
    // Every command ran exactly once on each worker: the sync point counts them all, and a
    // second look finds no stragglers.
    let q2 = Arc::clone(&q);
    bounded("a last command", move || q2.run(n, HostCommand::delay_ns(1)).unwrap());
    assert!(q.take_records().is_empty());
}

#[test]
fn each_command_of_a_held_stream_runs_exactly_once_per_worker() {
    let q = Arc::new(HostQueue::spawn(&exe(), 2).unwrap());
    let n = 30;
    for id in 0..n {
        q.launch(id, HostCommand::delay_ns(MS)).unwrap();
    }
    let recs = bounded("holds while 30 commands run", {
        let q = Arc::clone(&q);
        move || {
            for _ in 0..5 {
                q.hold().unwrap().resume().unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
            q.synchronize().unwrap();
            q.take_records()
        }
    });
    for w in 0..2 {
        let ids: Vec<u64> = recs.iter().filter(|r| r.worker == w).map(|r| r.id).collect();
        assert_eq!(ids, (0..n).collect::<Vec<_>>(), "worker {w}: in order, each once");
    }
    assert!(recs.iter().all(|r| r.is_correct()));
}

#[test]
fn a_second_suspend_of_either_level_is_refused_and_the_guard_resumes_on_drop() {
    let q = Arc::new(HostQueue::spawn(&exe(), 1).unwrap());
    let q2 = Arc::clone(&q);
    bounded("holds and refusals", move || {
        for _ in 0..3 {
            let g = q2.hold().unwrap();
            assert!(matches!(q2.hold(), Err(HostError::AlreadySuspended)));
            assert!(matches!(q2.suspend(), Err(HostError::AlreadySuspended)));
            drop(g);
        }
        let s = q2.suspend().unwrap();
        assert!(matches!(q2.hold(), Err(HostError::AlreadySuspended)));
        drop(s);
        // Released on drop: a command runs.
        assert_eq!(q2.run(1, HostCommand::delay_ns(MS)).unwrap().len(), 1);
    });
}

#[test]
fn the_guard_releases_on_panic() {
    let q = Arc::new(HostQueue::spawn(&exe(), 1).unwrap());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = q.hold().unwrap();
        panic!("deliberate panic while held");
    }));
    assert!(r.is_err());
    let q2 = Arc::clone(&q);
    let ran = bounded("a command after the panic", move || {
        q2.run(1, HostCommand::delay_ns(MS)).unwrap().len()
    });
    assert_eq!(ran, 1);
}

#[test]
fn holding_a_queue_with_a_dead_worker_is_an_error_naming_it_not_a_hang() {
    let q = Arc::new(HostQueue::spawn(&exe(), 2).unwrap());
    let pid = q.pids()[1];
    q.launch(0, HostCommand::delay_ns(50 * MS)).unwrap();
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let q2 = Arc::clone(&q);
    let r = bounded("hold", move || q2.hold().map(|g| g.held_ns()));
    let killed = matches!(&r, Err(HostError::WorkerDied { worker: 1, pid: p, ended: Ended::Killed(Signal::SIGKILL) }) if *p == pid);
    assert!(killed, "{r:?}");
    // The living worker was released and the queue is not left marked suspended.
    let q2 = Arc::clone(&q);
    let again = bounded("hold again", move || q2.hold().map(|g| g.held_ns()));
    assert!(
        matches!(again, Err(HostError::WorkerDied { worker: 1, .. })),
        "{again:?}"
    );
    // Its command completes: the failed holds released it.
    let deadline = Instant::now() + LONG;
    while q.take_records_for(0).is_empty() {
        assert!(Instant::now() < deadline, "the living worker was left held");
        std::thread::sleep(Duration::from_millis(1));
    }
}
