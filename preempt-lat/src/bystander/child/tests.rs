//! The handle against stand-in workers written in sh: the protocol, every way a worker can end,
//! and that no process outlives its handle.
use super::*;
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

const READY: &str = r#"{"line":"ready","device":"sh","kernel_ns":1000,"pid":1}"#;

fn sh(script: &str) -> Worker {
    Worker::spawn(Path::new("/bin/sh"), &["-c".to_string(), script.to_string()]).expect("spawn sh")
}

/// The process is gone (reaped: not even a zombie).
fn gone(pid: u32) -> bool {
    kill(Pid::from_raw(i32::try_from(pid).unwrap()), None) == Err(Errno::ESRCH)
}

#[test]
fn a_worker_that_stops_on_stdin_eof_gives_its_kernels_and_done() {
    let script = format!(
        "echo '{READY}'; echo '{{\"line\":\"kernel\",\"start_ns\":10,\"end_ns\":20}}'; \
         echo '{{\"line\":\"kernel\",\"start_ns\":30,\"end_ns\":45}}'; cat >/dev/null; \
         echo '{{\"line\":\"done\",\"kernels\":2,\"stopped_ns\":99,\"reason\":\"stdin closed\"}}'"
    );
    let mut w = sh(&script);
    let r = w.wait_ready(Duration::from_secs(10)).unwrap();
    assert_eq!(
        r,
        Ready {
            device: "sh".into(),
            kernel_ns: 1000,
            pid: 1
        }
    );
    assert!(w.running(), "it waits for its stdin to close");
    let pid = w.pid();
    let rec = w.finish(Duration::from_secs(10));
    assert_eq!(
        rec.kernels,
        [Span { from_ns: 10, to_ns: 20 }, Span { from_ns: 30, to_ns: 45 }]
    );
    assert_eq!(rec.stopped_ns, Some(99));
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    assert!(rec.ended.contains("exit status: 0"), "{}", rec.ended);
    assert!(gone(pid));
}

#[test]
fn a_worker_that_refuses_says_why_before_ready() {
    let mut w = sh("echo 'hip:0 cannot run here: no GPU' >&2; exit 1");
    let e = w.wait_ready(Duration::from_secs(10)).unwrap_err().to_string();
    assert!(e.contains("ended before it was ready"), "{e}");
    assert!(e.contains("exit status: 1"), "{e}");
    // Its stderr reader may lag its exit by a moment; the message is in the tail by now.
    std::thread::sleep(Duration::from_millis(100));
    assert!(w.stderr_tail().contains("no GPU"), "{}", w.stderr_tail());
}

#[test]
fn a_worker_that_never_gets_ready_is_killed_on_drop() {
    let mut w = sh("exec sleep 30");
    let e = w.wait_ready(Duration::from_millis(100)).unwrap_err().to_string();
    assert!(e.contains("not ready within"), "{e}");
    let pid = w.pid();
    drop(w);
    assert!(gone(pid), "the handle's drop kills and reaps it");
}

#[test]
fn a_worker_that_ignores_stdin_eof_is_killed_and_has_no_done() {
    let mut w = sh(&format!("echo '{READY}'; exec sleep 30"));
    w.wait_ready(Duration::from_secs(10)).unwrap();
    let pid = w.pid();
    let rec = w.finish(Duration::from_millis(200));
    assert!(rec.ended.contains("killed"), "{}", rec.ended);
    assert_eq!(rec.stopped_ns, None);
    assert!(gone(pid));
}

#[test]
fn a_worker_that_dies_mid_run_keeps_its_kernels_but_no_done() {
    let script =
        format!("echo '{READY}'; echo '{{\"line\":\"kernel\",\"start_ns\":1,\"end_ns\":2}}'; echo boom >&2; exit 7");
    let mut w = sh(&script);
    w.wait_ready(Duration::from_secs(10)).unwrap();
    let rec = w.finish(Duration::from_secs(10));
    assert_eq!(rec.kernels.len(), 1);
    assert_eq!(rec.stopped_ns, None);
    assert!(rec.ended.contains("exit status: 7"), "{}", rec.ended);
}

#[test]
fn unreadable_lines_are_problems() {
    let mut w = sh(&format!("echo '{READY}'; echo 'not json'; cat >/dev/null"));
    w.wait_ready(Duration::from_secs(10)).unwrap();
    let rec = w.finish(Duration::from_secs(10));
    assert_eq!(rec.problems.len(), 1);
    assert!(rec.problems[0].contains("not json"), "{:?}", rec.problems);
}

#[test]
fn a_missing_program_is_an_error() {
    let e = Worker::spawn(Path::new("/nonexistent/preempt-lat"), &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("starting the bystander process /nonexistent/preempt-lat"),
        "{e}"
    );
}
