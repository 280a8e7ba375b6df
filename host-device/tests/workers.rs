//! Worker processes against what happens to them from outside the library: a worker that dies
//! (the caller gets an error naming it, never SIGPIPE), the thread that spawned a queue exiting.
//! Every wait is bounded.

use host_device::{HostCommand, HostQueue, WorkerExe, proc_state};
use lv1::HwQueue;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;
const LONG: Duration = Duration::from_secs(20);

fn exe() -> WorkerExe {
    WorkerExe::new(env!("CARGO_BIN_EXE_preempt-host-worker"))
}

/// Poll `what` until it holds, at most [`LONG`].
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Gone from /proc, or a zombie: the process has ended.
fn ended(pid: i32) -> bool {
    proc_state(pid).map_or(true, |s| s == 'Z' || s == 'X')
}

/// Whether SIGPIPE is pending for the calling thread or the process (`/proc/thread-self/status`).
fn sigpipe_pending() -> bool {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let bit = 1u64 << (Signal::SIGPIPE as u32 - 1);
    ["SigPnd:", "ShdPnd:"].iter().any(|key| {
        let hex = status.lines().find_map(|l| l.strip_prefix(key)).unwrap();
        u64::from_str_radix(hex.trim(), 16).unwrap() & bit != 0
    })
}

/// A write to a dead worker used to raise SIGPIPE, whose default action kills a C application
/// (exit 141; Rust and Python ignore it). With SIGPIPE blocked in this thread, a raised one stays
/// pending where the test can see it.
#[test]
fn a_dead_worker_is_an_error_naming_it_and_raises_no_sigpipe() {
    let mut pipe = SigSet::empty();
    pipe.add(Signal::SIGPIPE);
    pipe.thread_block().unwrap();
    let q = HostQueue::spawn(&exe(), 2).unwrap();
    let pid = q.pids()[1];
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    eventually("the killed worker has ended", || ended(pid));
    let launched = q.launch(0, HostCommand::delay_ns(MS));
    let pending = sigpipe_pending();
    pipe.thread_unblock().unwrap();
    assert!(
        !pending,
        "writing to a dead worker raised SIGPIPE (a C caller dies of it)"
    );
    let e = launched.unwrap_err().to_string();
    assert!(
        e.contains(&format!("host worker 1 (pid {pid})")) && e.contains("killed by SIGKILL"),
        "{e}"
    );
    let e = q.synchronize().unwrap_err().to_string();
    assert!(
        e.contains(&format!("pid {pid}")) && e.contains("killed by SIGKILL"),
        "{e}"
    );
}

/// How a worker ended is in the error: here a program that exits with status 7 after its first
/// command.
#[test]
fn a_worker_that_exits_is_an_error_with_its_exit_status() {
    let script = "echo \"ready 1 $$\"; read line; exit 7";
    let q = HostQueue::spawn(&WorkerExe::new("/bin/sh").arg("-c").arg(script), 1).unwrap();
    let pid = q.pids()[0];
    let e = q.run(0, HostCommand::delay_ns(MS)).unwrap_err().to_string();
    assert!(
        e.contains(&format!("host worker 0 (pid {pid})")) && e.contains("exited with status 7"),
        "{e}"
    );
}

/// A worker program that closes its output but goes on running is dead to its queue as well.
#[test]
fn a_worker_that_closes_its_pipes_is_an_error_too() {
    let script = "echo \"ready 1 $$\"; exec >&-; exec sleep 600";
    let q = HostQueue::spawn(&WorkerExe::new("/bin/sh").arg("-c").arg(script), 1).unwrap();
    let pid = q.pids()[0];
    let e = q.run(0, HostCommand::delay_ns(MS)).unwrap_err().to_string();
    assert!(
        e.contains(&format!("host worker 0 (pid {pid}) closed its pipes without exiting")),
        "{e}"
    );
    assert!(q.health().is_err(), "health agrees");
    drop(q);
    assert!(ended(pid), "dropping the queue still ends it");
}

/// PR_SET_PDEATHSIG fires when the *thread* that forked the worker exits: a queue spawned by a
/// short-lived thread (a pool thread, a request handler) used to lose its workers with it.
#[test]
fn a_queue_spawned_by_a_thread_that_exits_keeps_its_workers() {
    let q = std::thread::spawn(|| HostQueue::spawn(&exe(), 2).unwrap())
        .join()
        .unwrap();
    // The parent-death signal, if it came, was sent when the thread exited: look a while.
    std::thread::sleep(Duration::from_millis(100));
    for pid in q.pids() {
        assert!(!ended(pid), "worker {pid} died with the thread that spawned it");
    }
    let recs = q.run(0, HostCommand::delay_ns(MS)).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r.is_correct()));
}
