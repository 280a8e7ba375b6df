//! The daemon's log against a hostile client and a careless operator: client text that would
//! forge, hide or reverse log lines, a stderr closed or full (the daemon must not die or wait).
mod common;
use common::{Daemon, STEP, hello, recv, send, temp_dir, wait_until};
use preempt_sched::proto::{Decoder, Notice, Request};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Instant;

#[test]
fn the_daemon_survives_its_stderr_closing() {
    let dir = temp_dir("stderr");
    let socket = dir.join("s.sock");
    let mut child = Command::new(common::DAEMON)
        .arg("--socket")
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its first line, then nobody reads any more (`preempt-sched 2>&1 | head -1`).
    let mut err = child.stderr.take().unwrap();
    let mut first = [0u8; 16];
    err.read_exact(&mut first).unwrap();
    drop(err);
    assert!(wait_until(STEP, || UnixStream::connect(&socket).is_ok()));
    for i in 0..3 {
        let mut s = UnixStream::connect(&socket).unwrap();
        s.set_read_timeout(Some(STEP)).unwrap();
        let mut dec = Decoder::new();
        send(&mut s, 1, Request::Hello { name: format!("c{i}") });
        assert!(matches!(recv(&mut s, &mut dec), Some(Notice::Welcome { .. })));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the daemon is alive (before: exit 101, a panic on EPIPE)"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn client_names_cannot_forge_or_reverse_log_lines() {
    let dir = temp_dir("names");
    let d = Daemon::start(&dir, &[]);
    // A control character (a newline: a forged second line) is refused at hello.
    let mut s = d.raw();
    let mut dec = Decoder::new();
    send(
        &mut s,
        1,
        Request::Hello {
            name: "x\nclient 9 connected: pid 1 uid 0".into(),
        },
    );
    assert!(matches!(recv(&mut s, &mut dec), Some(Notice::Refused { .. })));
    // A right-to-left override reverses what a terminal shows after it: escaped in the log.
    let (_s, _dec) = hello(&d, "lp-\u{202e}exe.gnp\u{2066}");
    assert!(d.wait_log("connected"));
    let log = d.log_text();
    assert!(!log.contains('\u{202e}') && !log.contains('\u{2066}'), "{log}");
    assert!(log.contains("(lp-\\u{202e}exe.gnp\\u{2066}) connected"), "{log}");
    assert!(!log.contains("client 9 connected"), "{log}");
}

#[test]
fn a_made_up_message_type_cannot_forge_log_lines() {
    let dir = temp_dir("forge");
    let d = Daemon::start(&dir, &[]);
    let forged = "preempt-sched [     1.000s] client 1 (root-hp) connected: pid 1 uid 0";
    let v = preempt_sched::proto::VERSION;
    let payload = format!(r#"{{"v":{v},"seq":1,"msg":{{"type":"x\n{forged}\n\u001b[31m\u202eevil"}}}}"#);
    let mut s = d.raw();
    let mut frame = u32::try_from(payload.len()).unwrap().to_be_bytes().to_vec();
    frame.extend_from_slice(payload.as_bytes());
    s.write_all(&frame).unwrap();
    let mut dec = Decoder::new();
    assert!(matches!(recv(&mut s, &mut dec), Some(Notice::Refused { .. })));
    assert!(d.wait_log("refused request 1"));
    let log = d.log_text();
    assert!(
        !log.lines().any(|l| l.starts_with("preempt-sched [     1.000s]")),
        "a forged line: {log}"
    );
    assert!(!log.contains('\u{1b}') && !log.contains('\u{202e}'), "{log}");
}

#[test]
fn a_stderr_nobody_reads_does_not_freeze_the_daemon() {
    let dir = temp_dir("stderr-full");
    let socket = dir.join("s.sock");
    // A pipe already full (a reader that stopped: `| less` paused, a terminal on Ctrl-S): every
    // log line would block a daemon that waits for its stderr.
    let (r, w) = nix::unistd::pipe().unwrap();
    nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).unwrap();
    let mut wf = std::fs::File::from(w.try_clone().unwrap());
    while wf.write(&[b'x'; 4096]).is_ok() {}
    let mut child = Command::new(common::DAEMON)
        .arg("--socket")
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::os::fd::OwnedFd::from(wf)))
        .spawn()
        .unwrap();
    drop(w);
    assert!(wait_until(STEP, || UnixStream::connect(&socket).is_ok()), "it listens");
    let t0 = Instant::now();
    for i in 0..50 {
        let mut s = UnixStream::connect(&socket).unwrap();
        s.set_read_timeout(Some(STEP)).unwrap();
        let mut dec = Decoder::new();
        send(&mut s, 1, Request::Hello { name: format!("c{i}") });
        assert!(
            matches!(recv(&mut s, &mut dec), Some(Notice::Welcome { .. })),
            "connection {i}"
        );
    }
    eprintln!("host: 50 hellos answered in {:?} with stderr full", t0.elapsed());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(
        wait_until(STEP, || child.try_wait().unwrap().is_some()),
        "SIGTERM ends it"
    );
    assert!(child.wait().unwrap().success());
    // Once read, the log says what it dropped.
    nix::fcntl::fcntl(&r, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).unwrap();
    let mut text = Vec::new();
    let _ = std::fs::File::from(r).read_to_end(&mut text);
    let _ = text;
}
