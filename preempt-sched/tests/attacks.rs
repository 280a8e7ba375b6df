//! A hostile or careless local user against the daemon, as real processes, every wait bounded:
//! floods that must cost the others nothing, stalled and stopped clients that must not hold HP
//! blocks or LP streams, idle connections, and the file-system traps (a symlink at the lock
//! file). The attacks on the log are in `attacks_log.rs`, those that need a second uid in
//! `attacks_uid.rs`.
mod common;
use common::{Client, Daemon, HOST0, STEP, hello, recv, send, status, stopped, temp_dir, wait_until};
use preempt_sched::proto::{self, Decoder, Notice, Request, encode_request};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One ping round trip on a hello'd connection.
fn ping(s: &mut UnixStream, dec: &mut Decoder, seq: u64) -> Duration {
    let t0 = Instant::now();
    send(s, seq, Request::Ping {});
    loop {
        match recv(s, dec) {
            Some(Notice::Pong { re }) if re == seq => return t0.elapsed(),
            Some(_) => {}
            None => panic!("the connection ended while waiting for pong {seq}"),
        }
    }
}

/// CPU seconds the process has used (utime + stime from /proc, in clock ticks of 10 ms).
fn cpu_s(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[test]
fn a_flood_of_refused_frames_costs_the_others_little_and_stops_when_the_flood_does() {
    let dir = temp_dir("flood");
    let d = Daemon::start(&dir, &[]);
    let socket = d.socket.clone();
    // 16,000 empty frames (each a malformed request) per connection, reconnecting for 2 s.
    let flood = std::thread::spawn(move || {
        let frames = vec![0u8; 16_000 * 4];
        let end = Instant::now() + Duration::from_secs(2);
        let mut conns = 0;
        while Instant::now() < end {
            let Ok(mut s) = UnixStream::connect(&socket) else {
                continue;
            };
            s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
            let _ = s.write_all(&frames);
            conns += 1;
        }
        conns
    });
    let (mut c, mut dec) = hello(&d, "bystander");
    let mut worst = Duration::ZERO;
    let mut seq = 10;
    while !flood.is_finished() {
        worst = worst.max(ping(&mut c, &mut dec, seq));
        seq += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    let conns = flood.join().unwrap();
    eprintln!("host: {conns} flooding connections in 2 s; the bystander's slowest ping {worst:?}");
    // Before: the daemon decoded every frame it had read (16,000 refusals a connection) and
    // stayed busy for minutes after the flood; other clients' requests timed out.
    assert!(worst < Duration::from_secs(2), "a ping took {worst:?} during the flood");
    // Once the flood stops, the daemon finishes the connections already queued and idles (before:
    // it stayed busy for minutes).
    let stop = Instant::now();
    let idle = wait_until(STEP, || {
        let before = cpu_s(d.pid());
        std::thread::sleep(Duration::from_millis(500));
        cpu_s(d.pid()) - before < 0.05
    });
    assert!(idle, "the daemon is still busy {:?} after the flood", stop.elapsed());
    eprintln!(
        "host: the daemon idle again within {:?} of the flood's end",
        stop.elapsed()
    );
    // The log stays bounded: lines about one uid's misbehaving connections are rate-limited.
    let lines = log_lines(&d);
    assert!(
        lines <= 70 * (conns + 2),
        "{lines} log lines for {conns} refused connections"
    );
    assert!(lines < 2000, "{lines} log lines for a 2 s flood");
}

fn log_lines(d: &Daemon) -> usize {
    d.log_text().lines().count()
}

#[test]
fn nothing_after_a_fatal_refusal_in_the_same_read_is_acted_on() {
    let dir = temp_dir("fatal");
    let d = Daemon::start(&dir, &[]);
    let mut s = d.raw();
    let bad = format!(
        r#"{{"v":{},"seq":1,"msg":{{"type":"hello","name":"future"}}}}"#,
        proto::VERSION + 1
    );
    let mut all = u32::try_from(bad.len()).unwrap().to_be_bytes().to_vec();
    all.extend_from_slice(bad.as_bytes());
    all.extend(encode_request(2, Request::Hello { name: "after".into() }));
    all.extend(encode_request(
        3,
        Request::Register {
            stream: 1,
            priority: 0,
            device: HOST0,
        },
    ));
    s.write_all(&all).unwrap();
    let mut dec = Decoder::new();
    match recv(&mut s, &mut dec) {
        Some(Notice::Refused { code, .. }) => assert_eq!(code, proto::Code::Version),
        other => panic!("{other:?}"),
    }
    assert!(
        recv(&mut s, &mut dec).is_none(),
        "closed after the refusal, nothing else sent"
    );
    match status(&d) {
        Notice::Status { streams, .. } => assert_eq!(streams, 0, "the register after it was not acted on"),
        other => panic!("{other:?}"),
    }
    assert!(!d.log_text().contains("(after) connected"), "{}", d.log_text());
}

#[test]
fn a_flood_of_blocks_does_not_disconnect_a_reading_lp_client() {
    let dir = temp_dir("blockflood");
    let mut d = Daemon::start(&dir, &[]);
    // A well-behaved LP client: reads and acknowledges every order at once.
    let reader = common::acker(&d, "lp", Duration::ZERO);
    // One client flips a block 20,000 times as fast as it can write.
    let mut flood = d.raw();
    let mut bytes = Vec::new();
    for i in 0..20_000 {
        bytes.extend(encode_request(
            2 * i,
            Request::Enter {
                priority: 1,
                device: HOST0,
            },
        ));
        bytes.extend(encode_request(
            2 * i + 1,
            Request::Leave {
                priority: 1,
                device: HOST0,
            },
        ));
    }
    send(&mut flood, 1, Request::Hello { name: "flood".into() });
    let writer = std::thread::spawn(move || {
        let _ = flood.write_all(&bytes);
        flood
    });
    let flood = writer.join().unwrap();
    assert!(
        wait_until(STEP, || matches!(
            status(&d),
            Notice::Status {
                blocks: 0,
                unacked: 0,
                ..
            }
        )),
        "the flood is served to its end"
    );
    let log = d.log_text();
    assert!(
        !log.lines().any(|l| l.contains("client 1 (pid") && l.contains("closed")),
        "the LP client was dropped: {}",
        &log[..log.len().min(3000)]
    );
    match status(&d) {
        Notice::Status { streams, suspended, .. } => {
            assert_eq!((streams, suspended), (1, 0), "the LP client is still there, running")
        }
        other => panic!("{other:?}"),
    }
    drop(flood);
    d.kill9();
    let orders = reader.join().unwrap();
    eprintln!("host: 40,000 enter/leave from one client cost the LP client {orders} orders");
    assert!(orders >= 2 && orders.is_multiple_of(2), "{orders}");
}

#[test]
fn a_stopped_lp_process_costs_the_first_block_the_ack_timeout_and_no_later_one() {
    let dir = temp_dir("stalled");
    let d = Daemon::start(&dir, &["--ack-timeout-ms", "300"]);
    let lp = Client::spawn(&d.socket, &["--lp", "1"]);
    let mut hp = Client::spawn(&d.socket, &["--lp", "0"]);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(lp.pid), nix::sys::signal::Signal::SIGSTOP).unwrap();
    let (scheduled, suspended, failed, late) = hp.enter(1);
    assert!(scheduled);
    assert_eq!((suspended, failed, late), (0, 0, 1), "the first block waited for it");
    assert_eq!(hp.cmd("leave 1"), "left");
    for _ in 0..5 {
        // Before: every block waited the ack timeout again (late = 1 each time).
        assert_eq!(hp.enter(1), (true, 0, 0, 0), "a stalled client is not waited for");
        assert_eq!(hp.cmd("leave 1"), "left");
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(lp.pid), nix::sys::signal::Signal::SIGCONT).unwrap();
    assert!(d.wait_log("waited for again"), "{}", d.log_text());
    assert_eq!(hp.enter(1), (true, 1, 0, 0), "acknowledged again: waited for again");
    assert_eq!(hp.cmd("leave 1"), "left");
    lp.quit();
    hp.quit();
}

#[test]
fn a_block_is_ended_when_its_process_stops_or_holds_it_too_long() {
    let dir = temp_dir("lease");
    let d = Daemon::start(&dir, &["--block-silence-ms", "300", "--max-block-ms", "2000"]);
    let lp = Client::spawn(&d.socket, &["--lp", "1"]);
    let mut hp = Client::spawn(&d.socket, &["--lp", "0"]);
    assert_eq!(hp.enter(1).1, 1);
    assert!(lp.workers.iter().all(|&w| stopped(w)));
    // A live HP process inside its block pings: 1 s later its block still holds.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        lp.workers.iter().all(|&w| stopped(w)),
        "a live HP process's block ended"
    );
    // The HP process is stopped inside its block (Ctrl-Z, a debugger): the LP stream resumes.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(hp.pid), nix::sys::signal::Signal::SIGSTOP).unwrap();
    assert!(
        wait_until(STEP, || lp.workers.iter().all(|&w| !stopped(w))),
        "the stopped HP process's block ended"
    );
    assert!(d.wait_log("silent for more than 300 ms while holding 1 blocks"));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(hp.pid), nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!(hp.cmd("leave 1"), "left", "its leave of the ended block is done");
    // A live process that enters and never leaves: the block ends after --max-block-ms.
    let t0 = Instant::now();
    assert_eq!(hp.enter(1).1, 1);
    assert!(lp.workers.iter().all(|&w| stopped(w)));
    assert!(wait_until(STEP, || lp.workers.iter().all(|&w| !stopped(w))));
    assert!(t0.elapsed() >= Duration::from_millis(2000), "{:?}", t0.elapsed());
    assert!(d.wait_log("active for more than 2000 ms"));
    assert_eq!(hp.cmd("leave 1"), "left");
    lp.quit();
    hp.quit();
}

#[test]
fn a_hung_daemon_costs_an_hp_block_the_bound_and_never_blocks_open_or_close() {
    let dir = temp_dir("hung");
    let mut d = Daemon::start(&dir, &[]);
    let lp = Client::spawn(&d.socket, &["--lp", "1"]);
    let mut hp = Client::spawn(&d.socket, &["--lp", "0", "--timeout-ms", "200"]);
    let daemon = nix::unistd::Pid::from_raw(d.pid());
    nix::sys::signal::kill(daemon, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t0 = Instant::now();
    // Before: 5 s and an error, every call.
    assert_eq!(
        hp.enter(1),
        (false, 0, 0, 0),
        "past the bound the block runs unscheduled"
    );
    let enter = t0.elapsed();
    assert_eq!(hp.cmd("leave 1"), "left");
    assert!(enter < Duration::from_secs(2), "enter took {enter:?}");
    assert!(
        hp.stderr_text().contains("did not answer within 200ms"),
        "{}",
        hp.stderr_text()
    );
    assert!(lp.workers.iter().all(|&w| !stopped(w)));
    // Fill the stopped daemon's listen backlog: a new session's connect must fail at once.
    let mut held = Vec::new();
    for _ in 0..16_384 {
        let fd = nix::sys::socket::socket(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::Stream,
            nix::sys::socket::SockFlag::SOCK_NONBLOCK,
            None,
        )
        .unwrap();
        let addr = nix::sys::socket::UnixAddr::new(&d.socket).unwrap();
        let full = nix::sys::socket::connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr).is_err();
        held.push(fd);
        if full {
            break;
        }
    }
    let t0 = Instant::now();
    let mut late = Client::spawn_with(
        Command::new(&*common::CLIENT),
        &d.socket,
        &["--lp", "0", "--timeout-ms", "200"],
    );
    assert_eq!(late.exit_status().code(), Some(1));
    assert!(t0.elapsed() < Duration::from_secs(5), "open took {:?}", t0.elapsed());
    let err = late.stderr_text();
    assert!(
        err.contains("backlog is full") || err.contains("no connection within the reply timeout"),
        "{err}"
    );
    // Close never waits on the hung daemon either.
    let t0 = Instant::now();
    hp.quit();
    lp.quit();
    assert!(t0.elapsed() < Duration::from_secs(5), "close took {:?}", t0.elapsed());
    drop(held);
    nix::sys::signal::kill(daemon, nix::sys::signal::Signal::SIGCONT).unwrap();
    d.kill9();
}

#[test]
fn idle_connections_are_closed_without_hello_and_limited_per_uid_and_cost_no_turn() {
    let dir = temp_dir("idle");
    let d = Daemon::start(
        &dir,
        &[
            "--hello-timeout-ms",
            "300",
            "--max-per-uid",
            "8",
            "--max-clients",
            "600",
        ],
    );
    let idle: Vec<UnixStream> = (0..8).map(|_| d.raw()).collect();
    // The ninth of this uid is refused.
    let mut ninth = d.raw();
    let mut dec = Decoder::new();
    match recv(&mut ninth, &mut dec) {
        Some(Notice::Refused { code, message, .. }) => {
            assert_eq!(code, proto::Code::Limit);
            assert!(message.contains("per uid"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Without hello they are closed after 300 ms (before: never).
    for mut s in idle {
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).unwrap(), 0);
    }
    assert!(d.wait_log("no hello within 300 ms"));
    // Idle connections that said hello cost a turn nothing.
    drop(d);
    let d = Daemon::start(&dir, &["--max-per-uid", "600", "--max-clients", "600"]);
    let idle: Vec<(UnixStream, Decoder)> = (0..500).map(|i| hello(&d, &format!("idle {i}"))).collect();
    let (mut c, mut dec) = hello(&d, "pinger");
    for i in 0..300 {
        ping(&mut c, &mut dec, 10 + i);
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.pid()), nix::sys::signal::Signal::SIGTERM).unwrap();
    assert!(d.wait_log("connection events served"));
    let log = d.log_text();
    let tail = log
        .lines()
        .rev()
        .find(|l| l.contains("connection events served"))
        .unwrap();
    let nums: Vec<f64> = tail
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    let (turns, visits) = (nums[nums.len() - 2], nums[nums.len() - 1]);
    eprintln!("host: {turns} turns, {visits} connection events with 500 idle connections");
    assert!(
        visits / turns < 4.0,
        "{visits} connection events in {turns} turns: idle ones are visited"
    );
    drop(idle);
}

#[test]
fn a_symlink_at_the_lock_file_is_not_followed_and_its_target_is_untouched() {
    let dir = temp_dir("lock");
    let target = dir.join("precious");
    std::fs::write(&target, "precious data\n").unwrap();
    let socket = dir.join("s.sock");
    std::os::unix::fs::symlink(&target, dir.join("s.sock.lock")).unwrap();
    let out = Command::new(common::DAEMON)
        .arg("--socket")
        .arg(&socket)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("symlink: not following it") && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "precious data\n",
        "not truncated"
    );
    assert!(!socket.exists());
}

#[test]
fn max_clients_above_the_descriptor_limit_is_refused_at_start() {
    let dir = temp_dir("nofile");
    let run = |max: &str| {
        Command::new("prlimit")
            .args(["--nofile=64:64", "--"])
            .arg(common::DAEMON)
            .arg("--socket")
            .arg(dir.join("s.sock"))
            .args(["--max-clients", max])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let out = run("100").wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--max-clients 100 needs 148 open files, but the limit is 64") && err.lines().count() == 1,
        "{err}"
    );
    // Within the limit it starts; more connections than --max-clients are refused, and the
    // daemon does not spin.
    let mut child = run("10");
    assert!(wait_until(STEP, || UnixStream::connect(dir.join("s.sock")).is_ok()));
    let pid = i32::try_from(child.id()).unwrap();
    let conns: Vec<UnixStream> = (0..60)
        .filter_map(|_| UnixStream::connect(dir.join("s.sock")).ok())
        .collect();
    let before = cpu_s(pid);
    std::thread::sleep(Duration::from_millis(500));
    assert!(cpu_s(pid) - before < 0.2, "the daemon spins");
    assert!(child.try_wait().unwrap().is_none());
    drop(conns);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_client_that_acknowledges_just_in_time_costs_a_block_one_ack_timeout() {
    let dir = temp_dir("just-in-time");
    let d = Daemon::start(&dir, &["--ack-timeout-ms", "400"]);
    // An LP client that acknowledges every order 330 ms late: never late, always slow.
    let _slow = common::acker(&d, "slow lp", Duration::from_millis(330));
    let mut hp = Client::spawn(&d.socket, &["--lp", "0"]);
    let mut worst = Duration::ZERO;
    for _ in 0..3 {
        let t0 = Instant::now();
        let (scheduled, ..) = hp.enter(1);
        worst = worst.max(t0.elapsed());
        assert!(scheduled);
        // Left at once: the resume is on its way when the next block enters.
        assert_eq!(hp.cmd("leave 1"), "left");
    }
    eprintln!("host: the slowest enter took {worst:?} (ack timeout 400 ms, acks 330 ms late)");
    // Before: an enter waited for the resume's ack, then the suspend's: ~660 ms.
    assert!(worst < Duration::from_millis(600), "an enter took {worst:?}");
}
