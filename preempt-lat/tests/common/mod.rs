//! What the integration tests that must never hang share: preempt-lat is run with a time limit
//! and killed (SIGKILL; its host workers die with it, `PR_SET_PDEATHSIG`) when it overstays.
// Each test crate uses a part of this module.
#![allow(dead_code)]

pub mod only_stage;

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// preempt-lat as a user starts it from a terminal: SIGINT and SIGTERM at their default
/// actions, whatever the test runner inherited (a runner started as a background job of a
/// non-interactive shell has SIGINT ignored, and an ignored signal stays ignored across exec:
/// the Ctrl-C tests would then see preempt-lat's last resort, not the signal). `env` execs in
/// place: the child's pid is preempt-lat's (coreutils >= 8.31).
pub fn preempt_lat() -> Command {
    let mut c = Command::new("env");
    c.arg("--default-signal=INT,TERM")
        .arg(env!("CARGO_BIN_EXE_preempt-lat"));
    c
}

/// Waits for `child` at most `limit`; after that kills and reaps it and returns `None`.
pub fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads a child's pipe to its end on a thread of its own (so that the child never blocks on it).
pub fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = pipe.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    })
}

/// What a bounded run ended with.
pub struct Ran {
    /// `None`: killed after the limit.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs preempt-lat with `args`, at most `limit`.
pub fn run_bounded(args: &[&str], limit: Duration) -> Ran {
    let mut child = preempt_lat()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let status = wait_or_kill(&mut child, limit);
    Ran {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// Runs preempt-lat with `args` like `Command::output` (both pipes drained as it runs, so a long
/// output never blocks it), but kills it and fails the test if it runs past `limit`.
pub fn output_within(args: &[&str], limit: Duration) -> std::process::Output {
    let r = run_bounded(args, limit);
    let status = r
        .status
        .unwrap_or_else(|| panic!("preempt-lat {args:?} did not end within {limit:?}: {}", r.stderr));
    std::process::Output {
        status,
        stdout: r.stdout.into_bytes(),
        stderr: r.stderr.into_bytes(),
    }
}

/// Asserts a bounded run was refused as bad input: exit 2, one line on stderr naming `want`.
pub fn assert_refused(args: &[&str], want: &str, limit: Duration) {
    let r = run_bounded(args, limit);
    assert!(
        r.status.is_some(),
        "{args:?}: still running after {limit:?} (killed): {}",
        r.stderr
    );
    assert_eq!(r.status.and_then(|s| s.code()), Some(2), "{args:?}: {}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{args:?}: one line: {}", r.stderr);
    assert!(r.stderr.starts_with("preempt-lat: "), "{args:?}: {}", r.stderr);
    assert!(r.stderr.contains(want), "{args:?}: stderr lacks {want:?}: {}", r.stderr);
}

/// The pids of `pid`'s children (every thread's), from /proc.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    out.sort_unstable();
    out
}

/// A process's state letter from /proc (`R`, `S`, `T`, `Z`, ...); `None` once it is gone.
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Waits at most `limit` until every process of `pids` is gone or a zombie (dead, not yet
/// reaped by whoever inherited it); returns those still alive (with their state) after that.
pub fn alive_after(pids: &[u32], limit: Duration) -> Vec<(u32, char)> {
    let t0 = Instant::now();
    loop {
        let alive: Vec<(u32, char)> = pids
            .iter()
            .filter_map(|&p| state(p).filter(|&s| s != 'Z' && s != 'X').map(|s| (p, s)))
            .collect();
        if alive.is_empty() || t0.elapsed() > limit {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` to process `pid`.
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid.cast_signed()), sig).expect("kill");
}

/// Waits at most `limit` until `pred` holds; false if it never did.
pub fn wait_until(limit: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while !pred() {
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A run stopped by one SIGINT ([`interrupt_once`]).
pub struct Interrupted {
    /// `None`: still running `bound` after the signal (then killed).
    pub status: Option<ExitStatus>,
    /// From the signal until the process ended (or was killed).
    pub took: Duration,
    pub stdout: String,
    pub stderr: String,
    /// Its host workers (children) as they were when the signal was sent.
    pub workers: Vec<u32>,
}

/// Runs preempt-lat with `args`; once it has at least `workers` children (its host workers) and
/// `settle` more has passed, sends it one SIGINT and waits at most `bound` for it to end
/// (SIGKILL after that). Panics if the workers never start.
pub fn interrupt_once(args: &[&str], workers: usize, settle: Duration, bound: Duration) -> Interrupted {
    let mut child = preempt_lat()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let pid = child.id();
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let started = wait_until(Duration::from_secs(60), || children(pid).len() >= workers);
    if !started {
        let _ = wait_or_kill(&mut child, Duration::ZERO);
        panic!(
            "{args:?}: no {workers} host workers within 60 s: {}",
            err.join().unwrap()
        );
    }
    std::thread::sleep(settle);
    let workers = children(pid);
    signal(pid, nix::sys::signal::Signal::SIGINT);
    let t0 = Instant::now();
    let status = wait_or_kill(&mut child, bound);
    let took = t0.elapsed();
    Interrupted {
        status,
        took,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        workers,
    }
}

/// A scratch directory of this test process, made empty.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("preempt-lat-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}
