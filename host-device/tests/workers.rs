//! Worker processes against what happens to them from outside the library: a worker that dies
//! (the caller gets an error naming it, never SIGPIPE), the thread that spawned a queue exiting,
//! and terminal job control (Ctrl-Z then `fg`, Ctrl-C) sent to the application's process group.
//! Job control runs in a child process in a process group of its own, as a shell runs a job, so
//! the test runner itself is never stopped; the child gets SIGINT's and SIGTSTP's default actions
//! even when the runner was started with them ignored. Every wait is bounded.

use host_device::{HostCommand, HostQueue, PROTOCOL_VERSION, WorkerExe, proc_state};
use lv1::HwQueue;
use nix::sys::signal::{SigSet, Signal, kill, killpg};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;
const LONG: Duration = Duration::from_secs(20);
/// Set (to the child's mode) by these tests for the child process they start.
const CHILD_ENV: &str = "PREEMPT_TEST_SIGNALS_CHILD";

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
    let script = format!("echo \"ready {PROTOCOL_VERSION} $$\"; read line; exit 7");
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
    let script = format!("echo \"ready {PROTOCOL_VERSION} $$\"; exec >&-; exec sleep 600");
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

/// The child half of the job-control tests (a no-op unless the parent set [`CHILD_ENV`]): a queue
/// of two workers with a command started, suspended; `READY <pid> <pid>`; then, once stdin
/// closes, resume, synchronize and `DONE <records>`.
#[test]
fn job_control_child_mode() {
    if std::env::var(CHILD_ENV).as_deref() != Ok("job-control") {
        return;
    }
    let q = HostQueue::spawn(&exe(), 2).unwrap();
    q.launch(0, HostCommand::delay_ns(50 * MS)).unwrap();
    assert!(q.wait_started(1, LONG).unwrap());
    let guard = q.suspend().unwrap();
    let pids = q.pids();
    println!("READY {} {}", pids[0], pids[1]);
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    guard.resume().unwrap();
    q.synchronize().unwrap();
    let recs = q.take_records();
    println!("DONE {}", recs.iter().filter(|r| r.is_correct()).count());
}

/// A child running [`job_control_child_mode`] as a shell runs a job: in a process group of its
/// own. Dropping it kills the whole group and reaps the child.
struct Job {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    seen: String,
}

impl Job {
    fn start() -> (Job, Vec<i32>) {
        // With SIGINT and SIGTSTP at their default actions, whatever this runner inherited: an
        // ignored signal stays ignored across fork and exec (`Command` resets only the signal
        // mask and SIGPIPE), and a runner started as a non-interactive shell's `cmd &` ignores
        // SIGINT, so the job would never die of the Ctrl-C below (nor stop on a Ctrl-Z if
        // SIGTSTP were ignored). Setting a disposition takes `unsafe`, which the workspace
        // denies: coreutils' `env` (8.31 or later) sets them and execs the test binary, which
        // keeps env's pid and process group.
        let mut child = Command::new("env")
            .arg("--default-signal=INT,TSTP")
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "job_control_child_mode", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "job-control")
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut job = Job {
            child,
            stdin,
            out,
            seen: String::new(),
        };
        let ready = job.line_with("READY");
        let pids = ready.split_whitespace().skip(1).map(|p| p.parse().unwrap()).collect();
        (job, pids)
    }

    fn pgrp(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    /// The rest of the first line that contains `word` (libtest prints `test ... ` before it).
    /// The child writes it within seconds or ends (EOF), so this read is bounded.
    fn line_with(&mut self, word: &str) -> String {
        loop {
            let mut line = String::new();
            assert!(
                self.out.read_line(&mut line).unwrap() > 0,
                "the child ended before {word}: {}",
                self.seen
            );
            self.seen.push_str(&line);
            if let Some(i) = line.find(word) {
                return line[i..].trim().to_string();
            }
        }
    }

    /// Wait (bounded) for the child to end.
    fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + LONG;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "the child did not end: {}", self.seen);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = killpg(self.pgrp(), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Ctrl-Z then `fg`: the terminal sends SIGTSTP to the foreground process group, the shell then
/// SIGCONT. Workers in the application's group were continued by it while the library still held
/// them suspended; a worker the library stopped must stay stopped until the library resumes it.
#[test]
fn job_control_does_not_continue_a_suspended_worker() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let (mut job, workers) = Job::start();
    let app = i32::try_from(job.child.id()).unwrap();
    killpg(job.pgrp(), Signal::SIGTSTP).unwrap();
    eventually("the application is stopped by SIGTSTP", || {
        proc_state(app).is_ok_and(|s| s == 'T')
    });
    killpg(job.pgrp(), Signal::SIGCONT).unwrap();
    eventually("the application runs again after SIGCONT", || {
        proc_state(app).is_ok_and(|s| s != 'T')
    });
    // SIGCONT wakes every stopped process it reaches before killpg returns; look a while longer.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        for &w in &workers {
            let st = proc_state(w).unwrap();
            assert_eq!(st, 'T', "worker {w} was continued by the job's SIGCONT while suspended");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // The library still resumes them, and nothing was lost.
    drop(job.stdin.take());
    assert_eq!(job.line_with("DONE"), "DONE 2");
    assert!(job.wait().success(), "{}", job.seen);
}

/// Ctrl-C sends SIGINT to the application's process group: the application dies of it, and its
/// workers (stopped ones too) die with it, through the parent-death signal.
#[test]
fn ctrl_c_of_the_application_still_ends_its_workers() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let (mut job, workers) = Job::start();
    killpg(job.pgrp(), Signal::SIGINT).unwrap();
    let st = job.wait();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(Signal::SIGINT as i32),
        "{}",
        job.seen
    );
    for w in workers {
        eventually(&format!("worker {w} ended with the application"), || ended(w));
    }
    let mut rest = String::new();
    let _ = job.out.read_to_string(&mut rest);
}
