//! A worker reaped by the application (a C or Python program that waits for any child, or ignores
//! SIGCHLD) is no longer ours, and its pid may go to an unrelated process. The queue must then
//! report the worker as ended and never signal whoever holds the pid now. Each scenario runs in a
//! child process (this test binary again, one test, one thread), so that the reaping and the pid
//! games never touch the test runner's own children; every wait is bounded.

use host_device::{Ended, HostError, HostQueue, WorkerExe, proc_state};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::waitpid;
use nix::unistd::{Pid, geteuid};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(30);
/// Set (to the scenario's name) by these tests for the child process they start.
const CHILD_ENV: &str = "PREEMPT_TEST_SIGNALS_CHILD";
/// Where the next pid of this pid namespace is chosen from (root only; CONFIG_CHECKPOINT_RESTORE).
const NS_LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";
/// Tries to give a freed pid to a sleeper while other processes on the machine fork too.
const PID_TRIES: usize = 50;

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

/// Whether this process is the child started for `scenario`.
fn is_child(scenario: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(scenario)
}

/// Run the test `name` of this binary alone in a child process with [`CHILD_ENV`] = `name`; it
/// must pass within [`LONG`] (killed otherwise). Returns what it printed.
fn run_child(name: &str) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + LONG;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let seen = format!("{}{}", out.join().unwrap(), err.join().unwrap());
    let status = status.unwrap_or_else(|| panic!("the child {name} did not end within {LONG:?}:\n{seen}"));
    assert!(status.success(), "the child {name} failed ({status}):\n{seen}");
    assert!(seen.contains("1 passed"), "the child {name} ran no test:\n{seen}");
    seen
}

/// What the application does to worker `worker` of `q`: SIGKILL, then reap it (`waitpid`, as a
/// program waiting for any child, or the kernel for one that ignores SIGCHLD). Returns its pid,
/// which is free from then on.
fn kill_and_reap(q: &HostQueue, worker: usize) -> i32 {
    let pid = q.pids()[worker];
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    waitpid(Pid::from_raw(pid), None).unwrap();
    pid
}

/// Whether `r` is worker `worker` (pid `pid`) reported as reaped by someone else.
fn reaped<T>(r: &Result<T, HostError>, worker: usize, pid: i32) -> bool {
    matches!(r, Err(HostError::WorkerDied { worker: w, pid: p, ended: Ended::Reaped }) if *w == worker && *p == pid)
}

/// A process we started that must not outlive the test, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn pid(&self) -> i32 {
        i32::try_from(self.0.id()).unwrap()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sleep 30` with pid `pid` (free now): the next pid handed out after `ns_last_pid` = `pid - 1`.
/// Another process of the machine may fork in between and take it: then the sleeper is stopped
/// and the next try begins.
fn sleeper_with_pid(pid: i32) -> Sleeper {
    for _ in 0..PID_TRIES {
        std::fs::write(NS_LAST_PID, (pid - 1).to_string()).unwrap();
        let s = Sleeper(Command::new("sleep").arg("30").spawn().unwrap());
        if s.pid() == pid {
            return s;
        }
        drop(s);
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("pid {pid} went to other processes {PID_TRIES} times: the machine forks too fast for this test");
}

/// The application reaps a worker while the queue is suspended, and again while it runs: the
/// resume, the next suspend and the drop report it as reaped (never a hang, never a signal that
/// reaches a process of the same pid), and the other worker is continued each time.
#[test]
fn a_worker_reaped_by_the_application_is_reported_as_ended() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    run_child("reaped_child");
}

#[test]
fn reaped_child() {
    if !is_child("reaped_child") {
        return;
    }
    let q = HostQueue::spawn(&exe(), 2).unwrap();
    let alive = q.pids()[0];
    let guard = q.suspend().unwrap();
    let gone = kill_and_reap(&q, 1);
    let r = guard.resume();
    assert!(reaped(&r, 1, gone), "{r:?}");
    eventually("the living worker is continued", || proc_state(alive).unwrap() != 'T');
    let r = q.suspend().map(|g| g.stopped_ns());
    assert!(reaped(&r, 1, gone), "{r:?}");
    eventually("the living worker is continued again", || {
        proc_state(alive).unwrap() != 'T'
    });
    let r = q.health();
    assert!(reaped(&r, 1, gone), "{r:?}");
    drop(q);
    assert!(
        !std::path::Path::new(&format!("/proc/{alive}")).exists(),
        "the living worker was killed and reaped by the drop"
    );
}

/// The pid of a reaped worker given to another process (forced through `ns_last_pid`, root
/// only): a suspend of the queue must not stop that process, `continue_workers` not continue it,
/// `kill_workers` and the queue's drop not kill (or reap) it. Signalling by pid did all of it.
#[test]
fn a_reaped_workers_pid_reused_by_another_process_is_never_signalled() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    if !geteuid().is_root() {
        println!(
            "SKIPPED a_reaped_workers_pid_reused_by_another_process_is_never_signalled: not root (writing {NS_LAST_PID} needs it)"
        );
        return;
    }
    if !std::path::Path::new(NS_LAST_PID).exists() {
        println!(
            "SKIPPED a_reaped_workers_pid_reused_by_another_process_is_never_signalled: no {NS_LAST_PID} (a kernel without CONFIG_CHECKPOINT_RESTORE)"
        );
        return;
    }
    let seen = run_child("reused_child");
    // The child's own skip (a kernel without pidfds), made visible here.
    if let Some(skip) = seen.lines().find(|l| l.contains("SKIPPED")) {
        println!("{skip}");
    }
}

#[test]
fn reused_child() {
    if !is_child("reused_child") {
        return;
    }
    let q = HostQueue::spawn(&exe(), 2).unwrap();
    if !q.uses_pidfds() {
        // The documented fallback (the crate docs' reaping discipline): by pid, as before pidfds.
        println!("SKIPPED reused_child: this kernel has no pidfds, so the workers are signalled by pid");
        return;
    }
    let alive = q.pids()[0];
    let gone = kill_and_reap(&q, 1);
    let sleeper = sleeper_with_pid(gone);
    let r = q.suspend();
    // Looked at while the suspension (if any) holds: the guard resumes when it goes.
    let state = proc_state(gone).unwrap();
    let r = r.map(|g| g.stopped_ns());
    assert_ne!(
        state, 'T',
        "suspending the queue stopped the process that has the reaped worker's pid ({r:?})"
    );
    assert!(reaped(&r, 1, gone), "{r:?}");
    eventually("the living worker is continued", || proc_state(alive).unwrap() != 'T');
    // The queue's other signals (an application API's resume on SIGINT, its abandon at close) go
    // the same way: the sleeper, stopped here by the test, is neither continued nor killed.
    kill(Pid::from_raw(gone), Signal::SIGSTOP).unwrap();
    eventually("the test stopped the sleeper", || proc_state(gone).unwrap() == 'T');
    let r = q.continue_workers();
    assert!(reaped(&r, 1, gone), "{r:?}");
    let state = proc_state(gone).unwrap();
    assert_eq!(
        state, 'T',
        "continue_workers continued the process that has the reaped worker's pid"
    );
    kill(Pid::from_raw(gone), Signal::SIGCONT).unwrap();
    q.kill_workers();
    eventually("kill_workers killed the living worker", || {
        proc_state(alive).map_or(true, |s| s == 'Z')
    });
    let state = proc_state(gone);
    assert!(
        state.as_ref().is_ok_and(|&s| s != 'Z'),
        "kill_workers killed the process that has the reaped worker's pid: {state:?}"
    );
    drop(q);
    let state = proc_state(gone);
    assert!(
        state.as_ref().is_ok_and(|&s| s != 'Z' && s != 'T'),
        "dropping the queue signalled the process that has the reaped worker's pid: {state:?}"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{alive}")).exists(),
        "the living worker was reaped by the drop"
    );
    drop(sleeper);
}
