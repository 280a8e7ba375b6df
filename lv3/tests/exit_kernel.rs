//! Every way out of a process that holds debug mode on must end it in bounded time, against the
//! real amdkfd (the QEMU guest). With debug mode on, the kernel's runtime disable waits for a
//! debugger acknowledgement and destroying a suspended queue waits for a resume; a process that
//! leaves through a path that skips the undo must still be ended by the kernel's release of
//! /dev/kfd, not hang.
//!
//! The parent re-runs this binary as a child in one of the modes below; the child opens a
//! dbg-trap mechanism (runtime enable + DBG_TRAP ENABLE on itself) and leaves that way. The
//! parent gives it [`BOUND`] to end and checks how it ended. The guest's kernel log is checked
//! for splats by the harness afterwards. On a machine without /dev/kfd the test says SKIPPED.
use kfd::{GracePeriod, Kfd};
use lv3::mechanism::{DbgTrap, Preemptor};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kfd::testing::kfd_or_skip;

const CHILD_ENV: &str = "PREEMPT_TEST_EXIT_CHILD";
/// How long a child may take to end after it was told to (generous for TCG).
const BOUND: Duration = Duration::from_secs(20);

/// The child half: a no-op unless the parent set `PREEMPT_TEST_EXIT_CHILD=<mode>`.
#[test]
fn exit_child_mode() {
    let Some(mode) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let mode = mode.to_string_lossy().into_owned();
    if mode == "signal" {
        lv3::signals::install_resume_on_signals(|r| {
            eprintln!("child: {} received, {} entries resumed", r.signal, r.results.len());
            lv3::signals::exit_now(lv3::signals::exit_code(r.signal));
        })
        .unwrap();
    }
    let kfd = Kfd::open().expect("the parent checked /dev/kfd");
    let p = Preemptor::new(DbgTrap::setup(kfd, GracePeriod::Default).expect("dbg-trap set-up on self"));
    // An entry like the one a failed resume leaves behind, for the signal path to run.
    let reg = lv3::signals::register("exit test entry".into(), Box::new(|| Ok(())));
    println!("READY debug on");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    match mode.as_str() {
        "return" => {
            if let Some(r) = reg {
                r.deregister();
            }
            drop(p);
        }
        "exit" => std::process::exit(3),
        "exit-now" => lv3::signals::exit_now(4),
        "panic" => panic!("child: panicking with debug mode on"),
        "signal" => {
            std::thread::sleep(BOUND * 2);
            eprintln!("child: no signal arrived");
            std::process::exit(1);
        }
        other => panic!("unknown mode {other}"),
    }
}

/// Runs the child in `mode`; optionally signals it once it is ready; returns how it ended.
fn run_child(mode: &str, signal: Option<nix::sys::signal::Signal>) -> std::process::ExitStatus {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "exit_child_mode", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("READY debug on"));
    assert!(ready, "{mode}: the child did not get debug mode on (see its stderr)");
    if let Some(sig) = signal {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, sig).unwrap();
    }
    // Keep draining the child's stdout: its harness still prints, and a closed pipe would end it
    // with EPIPE instead of the way under test.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let _ = drain.join();
            eprintln!("observed: {mode}: ended in {:?} with {st}", t0.elapsed());
            return st;
        }
        if t0.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{mode}: the process did not end within {BOUND:?} with debug mode on");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_exit_path_ends_a_debugged_process_in_bounded_time() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let Some(_kfd) = kfd_or_skip("every_exit_path_ends_a_debugged_process_in_bounded_time") else {
        return;
    };
    // libtest runs tests on threads: the child's signal mode installs its own mask, but the
    // child's main thread must block SIGTERM too, and a blocked mask survives exec.
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGTERM);
    set.thread_block().unwrap();

    assert!(run_child("return", None).success(), "drops undo the session");
    assert_eq!(run_child("exit", None).code(), Some(3), "exit() with debug on");
    assert_eq!(run_child("exit-now", None).code(), Some(4), "_exit with debug on");
    assert_eq!(
        run_child("panic", None).code(),
        Some(101),
        "a panic unwinds and fails the child test"
    );
    let st = run_child("signal", Some(nix::sys::signal::Signal::SIGTERM));
    assert_eq!(st.code(), Some(143), "SIGTERM: resume the registry, then exit_now(143)");
    set.thread_unblock().unwrap();
}
