//! Host streams whose worker processes meet the outside world: created by a thread that then
//! exits (the parent-death signal is per thread), or killed (from outside, while suspended, while
//! a command runs). A stream with a dead worker answers every call with an error naming the
//! worker, and close still works; every wait here is bounded.
use host_device::proc_state;
use preempt_api::{DeviceSpec, Error, ErrorKind, Level, LpStream, Options, Session};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;
const LONG: Duration = Duration::from_secs(20);

fn host(workers: usize) -> Session {
    let opts = Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: workers,
        ..Options::default()
    };
    Session::open(DeviceSpec::HOST, opts).expect("the host device opens")
}

/// Gone from /proc, or a zombie.
fn ended(pid: i32) -> bool {
    proc_state(pid).map_or(true, |s| s == 'Z' || s == 'X')
}

fn kill(pid: i32) {
    use nix::sys::signal::{Signal, kill};
    kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let deadline = Instant::now() + LONG;
    while !ended(pid) {
        assert!(Instant::now() < deadline, "worker {pid} did not die of SIGKILL");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The error of a call on a stream whose worker `pid` was killed: a device error naming it.
fn names_dead_worker(r: Result<impl std::fmt::Debug, Error>, pid: i32, call: &str) {
    let e = r.expect_err(&format!("{call} on a stream whose worker {pid} is dead succeeded"));
    assert_eq!(e.kind, ErrorKind::Device, "{call}: {e}");
    let m = e.to_string();
    assert!(m.contains(&format!("(pid {pid}) was killed by SIGKILL")), "{call}: {m}");
}

/// Run `f` with a time limit (a hang fails the test instead of the suite).
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(LONG)
        .unwrap_or_else(|_| panic!("{what} did not return within {LONG:?}"))
}

#[test]
fn streams_created_by_a_thread_that_exits_keep_working() {
    let s = host(1);
    let s2 = s.clone();
    // As a pool thread does: create, hand over, end. The HP stream is made on first use.
    let lp = std::thread::spawn(move || {
        let lp = s2.create_lp_stream(Level::Lv3).unwrap();
        s2.hp_stream().unwrap().submit_delay(MS).unwrap();
        lp
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..5 {
        lp.submit_delay(MS).unwrap();
    }
    lp.suspend().unwrap();
    lp.resume().unwrap();
    lp.synchronize().unwrap();
    let c = lp.check().unwrap();
    assert!(c.ok() && c.exactly_once == 5, "{c:?}");
    let hp = s.hp_stream().unwrap();
    hp.submit_delay(MS).unwrap();
    hp.synchronize().unwrap();
    let c = hp.check();
    assert!(c.ok() && c.exactly_once == 2, "{c:?}");
    s.close().unwrap();
}

/// Every call on the stream after its worker died is an error naming it; check says so; close
/// works.
fn assert_dead(s: &Session, lp: &LpStream, pid: i32) {
    names_dead_worker(lp.submit_delay(MS), pid, "submit_delay");
    names_dead_worker(lp.synchronize(), pid, "synchronize");
    names_dead_worker(lp.suspend(), pid, "suspend");
    assert!(!lp.is_suspended());
    let c = lp.check().unwrap();
    assert!(
        !c.ok()
            && c.problems
                .iter()
                .any(|p| p.contains(&format!("(pid {pid}) was killed by SIGKILL"))),
        "{c:?}"
    );
    s.close().unwrap();
}

#[test]
fn a_worker_killed_from_outside_fails_every_later_call() {
    let s = host(2);
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    lp.submit_delay(MS).unwrap();
    lp.synchronize().unwrap();
    let pid = lp.host_pids()[1];
    kill(pid);
    assert_dead(&s, &lp, pid);
}

#[test]
fn an_lv1_stream_with_a_dead_worker_fails_too() {
    let s = host(1);
    let lp = s.create_lp_stream(Level::Lv1).unwrap();
    let pid = lp.host_pids()[0];
    kill(pid);
    assert_dead(&s, &lp, pid);
}

#[test]
fn a_worker_killed_while_suspended_fails_the_resume_and_the_rest_runs_again() {
    let s = host(2);
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    lp.submit_delay(20 * MS).unwrap();
    lp.suspend().unwrap();
    let pids = lp.host_pids();
    kill(pids[0]);
    names_dead_worker(lp.resume(), pids[0], "resume");
    assert!(!lp.is_suspended(), "a failed resume still gives the suspension up");
    assert_ne!(proc_state(pids[1]).unwrap(), 'T', "the living worker was continued");
    assert_dead(&s, &lp, pids[0]);
}

#[test]
fn a_worker_killed_while_a_command_runs_ends_the_wait_with_an_error() {
    let s = host(1);
    let lp = std::sync::Arc::new(s.create_lp_stream(Level::Lv3).unwrap());
    lp.submit_delay(9_000 * MS).unwrap(); // under the 10 s maximum; killed after 50 ms
    let pid = lp.host_pids()[0];
    let waiting = std::sync::Arc::clone(&lp);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(waiting.synchronize());
    });
    std::thread::sleep(Duration::from_millis(50));
    kill(pid);
    let r = rx.recv_timeout(LONG).expect("synchronize returns once the worker died");
    names_dead_worker(r, pid, "synchronize (waiting when the worker died)");
    let lp2 = std::sync::Arc::clone(&lp);
    bounded("the calls after the death", move || assert_dead(&s, &lp2, pid));
}
