//! Ctrl-C and SIGTERM on the host device, every wait bounded: the first signal stops at the next
//! boundary and writes what was measured; a second one ends the process at once whatever it holds
//! (stdout blocked on a full pipe included), and no host worker outlives it.
mod common;

use common::{alive_after, children, drain, preempt_lat, signal, wait_or_kill, wait_until};
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

/// Ended by `sig` as the shell sees it: exit status 128 + signo, or death by the signal itself.
fn ended_by(st: ExitStatus, sig: Signal) -> bool {
    st.code() == Some(128 + sig as i32) || st.signal() == Some(sig as i32)
}

/// With the result going to stdout and stdout blocked (a full pipe nobody reads), the main thread
/// holds the stdout lock inside `write`; an exit path that flushes stdout would wait for that lock
/// forever. The second SIGINT must end the process promptly.
#[test]
fn a_second_signal_ends_the_process_while_stdout_is_blocked() {
    let mut child = preempt_lat()
        .args([
            "--device",
            "host",
            "--level",
            "3",
            "--t-ms",
            "0.01",
            "--samples",
            "3000",
            "--warmup",
            "0",
            "--format",
            "json",
            "--quiet",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let pid = child.id();
    let err = drain(child.stderr.take().expect("stderr"));
    // stdout is held open and never read: 3000 samples of JSON are far more than a pipe holds.
    let _stdout = child.stdout.take();
    let blocked = wait_until(Duration::from_secs(120), || {
        std::fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w.contains("pipe_write"))
    });
    if !blocked {
        let _ = wait_or_kill(&mut child, Duration::ZERO);
        panic!("preempt-lat never blocked writing its result: {}", err.join().unwrap());
    }
    signal(pid, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    signal(pid, Signal::SIGINT);
    let st = wait_or_kill(&mut child, Duration::from_secs(10));
    let err = err.join().unwrap();
    let st = st.unwrap_or_else(|| panic!("a second SIGINT did not end the process within 10 s (killed): {err}"));
    assert!(ended_by(st, Signal::SIGINT), "{st:?}: {err}");
    assert!(err.contains("SIGINT again: exiting now"), "{err}");
}

/// A long sample (Lv1, T = 10 s, results to stdout), with SIGTERM: the first signal says it stops
/// after the current sample, the second ends the process promptly, and its host workers
/// (mid-command) die with it rather than being left running or stopped.
#[test]
fn a_second_sigterm_ends_a_long_sample_and_its_workers() {
    let mut child = preempt_lat()
        .args([
            "--device",
            "host",
            "--level",
            "1",
            "--t-ms",
            "10000",
            "--samples",
            "5",
            "--quiet",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let pid = child.id();
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    // The LP workers and the HP worker.
    let mut workers = Vec::new();
    let started = wait_until(Duration::from_secs(30), || {
        workers = children(pid);
        workers.len() >= 2
    });
    assert!(started, "no host workers started");
    std::thread::sleep(Duration::from_millis(500));
    signal(pid, Signal::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    signal(pid, Signal::SIGTERM);
    let st = wait_or_kill(&mut child, Duration::from_secs(10));
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let st = st.unwrap_or_else(|| panic!("a second SIGTERM did not end the process within 10 s (killed): {err}"));
    assert!(ended_by(st, Signal::SIGTERM), "{st:?}: {err}");
    assert!(err.contains("stopping after the current sample"), "{err}");
    assert!(out.is_empty(), "nothing half-written: {out}");
    let left = alive_after(&workers, Duration::from_secs(5));
    assert!(left.is_empty(), "host workers outlived preempt-lat: {left:?}");
}

/// `priority`'s first Ctrl-C is honoured while it waits for the next HP arrival or for the end
/// of the mode's duration (it slept through both, up to --duration-s), and what was measured is
/// written, marked interrupted.
#[test]
fn priority_stops_promptly_while_waiting_for_an_arrival() {
    let dir = common::scratch("prio-int");
    let mut child = preempt_lat()
        .args([
            "priority",
            "--device",
            "host",
            "--modes",
            "standalone-hp",
            "--hp-rate",
            "0.05",
            "--arrival",
            "fixed",
            "--duration-s",
            "60",
            "--format",
            "json",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let pid = child.id();
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    assert!(
        wait_until(Duration::from_secs(30), || !children(pid).is_empty()),
        "no HP worker started"
    );
    std::thread::sleep(Duration::from_millis(500));
    signal(pid, Signal::SIGINT);
    let st = wait_or_kill(&mut child, Duration::from_secs(10));
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let st = st.unwrap_or_else(|| panic!("one SIGINT did not stop priority within 10 s (killed): {err}"));
    assert_eq!(st.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["modes"][0]["interrupted"], true, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep stopped before it measured anything writes what it has (no run with a sample) and no
/// plot, instead of failing with `plot ...: no data` (exit 1).
#[test]
fn a_sweep_stopped_before_its_first_sample_writes_its_files_without_a_plot() {
    let dir = common::scratch("sweep-int");
    let mut child = preempt_lat()
        .args([
            "sweep",
            "t",
            "--device",
            "host",
            "--levels",
            "3",
            "--t-ms",
            "5",
            "--warmup",
            "1000",
            "--samples",
            "5",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let pid = child.id();
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    assert!(
        wait_until(Duration::from_secs(30), || !children(pid).is_empty()),
        "no host worker started"
    );
    std::thread::sleep(Duration::from_millis(300));
    signal(pid, Signal::SIGINT);
    let st = wait_or_kill(&mut child, Duration::from_secs(30));
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{err}");
    assert!(out.contains("sweep-t.{csv,json};"), "{out}");
    assert!(dir.join("sweep-t.json").is_file() && !dir.join("sweep-t.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A second signal while `priority`'s Lv3 mode holds the LP workers stopped (SIGSTOP, HP requests
/// of 500 ms) resumes them, says so, and no worker outlives the process, stopped or not.
#[test]
fn a_second_signal_while_lp_workers_are_stopped_leaves_none_behind() {
    let dir = common::scratch("prio-stopped");
    let mut child = preempt_lat()
        .args([
            "priority",
            "--device",
            "host",
            "--modes",
            "lv3",
            "--hp-rate",
            "1.5",
            "--hp-t-ms",
            "500",
            "--arrival",
            "fixed",
            "--duration-s",
            "30",
            "--quiet",
            "--out-dir",
            dir.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let pid = child.id();
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    // The first request arrives after ~0.67 s and holds the LP workers stopped for 0.5 s.
    let mut workers = Vec::new();
    let stopped = wait_until(Duration::from_secs(30), || {
        workers = children(pid);
        workers.iter().any(|&w| common::state(w) == Some('T'))
    });
    assert!(stopped, "the LP workers were never stopped: {workers:?}");
    signal(pid, Signal::SIGINT);
    // (Apart: two of one signal pending at once are one.)
    std::thread::sleep(Duration::from_millis(150));
    signal(pid, Signal::SIGINT);
    let st = wait_or_kill(&mut child, Duration::from_secs(10));
    let (_, err) = (out.join().unwrap(), err.join().unwrap());
    let st = st.unwrap_or_else(|| panic!("a second SIGINT did not end priority within 10 s (killed): {err}"));
    assert!(ended_by(st, Signal::SIGINT), "{st:?}: {err}");
    let left = alive_after(&workers, Duration::from_secs(5));
    assert!(left.is_empty(), "workers outlived preempt-lat: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
