//! The daemon and test clients as processes, every wait bounded (a test never hangs the suite).
#![allow(dead_code)] // each test file uses a part

use preempt_sched::proto::{self, Decoder, Notice, Request, encode_request};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// The device the protocol-level tests' streams and blocks are on.
pub const HOST0: proto::Device = proto::Device::host(0);

/// The longest any single step waits (a spawn, a reply, a state change) before the test fails:
/// long enough for a loaded 2-core machine, short enough that a hang is a failure, not a stall.
pub const STEP: Duration = Duration::from_secs(20);

/// Unless a test is about them, the daemon's ack timeout and the clients' lease are made
/// [`STEP`]-long: on a loaded 2-core machine a 500 ms ack or a 50 ms pong can be missed, which
/// the daemon and the client handle (reported late; resumed and reconnected: the tests of those
/// paths set their own values) but which would make the other tests' "stopped once enter
/// returns" race the scheduler of the machine.
const CALM_ACK: [&str; 2] = ["--ack-timeout-ms", "20000"];
const CALM_LEASE: [&str; 2] = ["--lease-ms", "20000"];
const CALM_TIMEOUT: [&str; 2] = ["--timeout-ms", "20000"];
/// The daemon ends the blocks of a client it has not heard from: calm too.
const CALM_SILENCE: [&str; 2] = ["--block-silence-ms", "60000"];

pub const DAEMON: &str = env!("CARGO_BIN_EXE_preempt-sched");
/// An example program of this package, as `cargo test` built it.
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> -> target/<profile>/examples/<name>
    let p = exe.parent().and_then(Path::parent).unwrap().join("examples").join(name);
    assert!(
        p.is_file(),
        "{} is not built: cargo test builds it (or cargo build --examples -p preempt-sched)",
        p.display()
    );
    p
}

/// The test client, an example of this package (`cargo test` builds examples): it is a
/// preempt-api session, which the daemon's own binary does not link.
pub static CLIENT: std::sync::LazyLock<PathBuf> = std::sync::LazyLock::new(|| example("preempt-sched-client"));

/// A fresh directory under the temp dir, 0755 (another uid must reach a socket in it), removed
/// when dropped.
pub struct Dir(PathBuf);

impl std::ops::Deref for Dir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn temp_dir(tag: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("preempt-sched-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    Dir(d)
}

/// Polls `f` until it holds, at most `limit`.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The process's state letter (`T`: stopped), `None` once it is gone (reaped or never was).
pub fn state(pid: i32) -> Option<char> {
    host_device::proc_state(pid).ok()
}

pub fn stopped(pid: i32) -> bool {
    state(pid) == Some('T')
}

pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts a daemon on `dir/s.sock` with `extra` arguments and waits until it answers.
    pub fn start(dir: &Path, extra: &[&str]) -> Daemon {
        Self::start_at(&dir.join("s.sock"), extra)
    }

    /// Starts a daemon on `socket` (its log beside it).
    pub fn start_at(socket: &Path, extra: &[&str]) -> Daemon {
        let socket = socket.to_path_buf();
        let log = unique(socket.with_file_name("daemon.log"));
        let child = Command::new(DAEMON)
            .arg("--socket")
            .arg(&socket)
            .args(extra)
            .args(if extra.contains(&CALM_ACK[0]) {
                &[][..]
            } else {
                &CALM_ACK[..]
            })
            .args(if extra.contains(&CALM_SILENCE[0]) {
                &[][..]
            } else {
                &CALM_SILENCE[..]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the daemon starts");
        let mut d = Daemon { child, socket, log };
        assert!(
            wait_until(STEP, || d.log_text().contains("listening on")),
            "the daemon did not start: {}",
            d.log_text()
        );
        assert!(d.child.try_wait().unwrap().is_none());
        d
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn wait_log(&self, needle: &str) -> bool {
        wait_until(STEP, || self.log_text().contains(needle))
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// A raw connection to the daemon (for malformed input).
    pub fn raw(&self) -> UnixStream {
        let s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(STEP)).unwrap();
        s.set_write_timeout(Some(STEP)).unwrap();
        s
    }
}

/// `p`, or `p.N` for the first N that does not exist yet.
fn unique(p: PathBuf) -> PathBuf {
    (0..)
        .map(|n| {
            if n == 0 {
                p.clone()
            } else {
                PathBuf::from(format!("{}.{n}", p.display()))
            }
        })
        .find(|c| !c.exists())
        .unwrap()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct Client {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub pid: i32,
    pub workers: Vec<i32>,
    pub stderr: PathBuf,
}

impl Client {
    /// Spawns `preempt-sched-client --socket S args...` and waits for its `ready` line.
    pub fn spawn(socket: &Path, args: &[&str]) -> Client {
        Self::spawn_with(Command::new(&*CLIENT), socket, args).expect_ready()
    }

    /// Spawns through `cmd` (e.g. `setpriv ... CLIENT`), without waiting.
    pub fn spawn_with(mut cmd: Command, socket: &Path, args: &[&str]) -> Client {
        let worker = host_device::testing::built_worker();
        let stderr = unique(socket.with_file_name(format!("client-{}.err", std::process::id())));
        let mut child = cmd
            .arg("--socket")
            .arg(socket)
            .args(args)
            .args(if args.contains(&CALM_LEASE[0]) {
                &[][..]
            } else {
                &CALM_LEASE[..]
            })
            .args(if args.contains(&CALM_TIMEOUT[0]) {
                &[][..]
            } else {
                &CALM_TIMEOUT[..]
            })
            .env(host_device::WORKER_ENV, &worker.program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("the client starts");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = i32::try_from(child.id()).unwrap();
        Client {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            pid,
            workers: Vec::new(),
            stderr,
        }
    }

    /// Waits for `ready` and reads the workers' pids from it.
    pub fn expect_ready(mut self) -> Client {
        let line = self.line();
        assert!(line.starts_with("ready "), "{line:?}; stderr: {}", self.stderr_text());
        let workers = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("workers="))
            .unwrap();
        self.workers = workers
            .split(',')
            .filter(|w| !w.is_empty())
            .map(|w| w.parse().unwrap())
            .collect();
        self
    }

    /// The next line, or a failure after [`STEP`] (or when the client's output ended).
    pub fn line(&mut self) -> String {
        match self.lines.recv_timeout(STEP) {
            Ok(l) => l,
            Err(e) => panic!("client {}: no line ({e:?}); stderr: {}", self.pid, self.stderr_text()),
        }
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends one command and returns its reply line.
    pub fn cmd(&mut self, line: &str) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        self.line()
    }

    /// `enter P` as its fields: (scheduled, suspended, failed, late).
    pub fn enter(&mut self, p: i32) -> (bool, u32, u32, u32) {
        let l = self.cmd(&format!("enter {p}"));
        assert!(l.starts_with("entered "), "{l}");
        let field = |k: &str| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .unwrap()
                .to_owned()
        };
        (
            field("scheduled") == "true",
            field("suspended").parse().unwrap(),
            field("failed").parse().unwrap(),
            field("late").parse().unwrap(),
        )
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Submits `n` delay commands of `ns` on every stream.
    pub fn submit(&mut self, n: usize, ns: u64) {
        for _ in 0..n {
            assert_eq!(self.cmd(&format!("submit {ns}")), "submitted");
        }
    }

    /// Asserts the exactly-once check of every command submitted so far: `expected` commands.
    pub fn assert_exactly_once(&mut self, expected: usize) {
        let want = format!("check submitted={expected} exactly_once={expected} ok=true");
        assert_eq!(self.cmd("check"), want);
    }

    /// Ends it with `quit` and waits (at most [`STEP`]) for exit status 0.
    pub fn quit(mut self) {
        let stdin = self.stdin.as_mut().unwrap();
        let _ = writeln!(stdin, "quit");
        drop(self.stdin.take());
        let end = Instant::now() + STEP;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "client {} exited {st}: {}", self.pid, self.stderr_text());
                return;
            }
            assert!(Instant::now() < end, "client {} did not quit", self.pid);
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the process to exit, at most [`STEP`]; its status.
    pub fn exit_status(&mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let end = Instant::now() + STEP;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < end, "client {} did not exit", self.pid);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes one request on a raw connection.
pub fn send(s: &mut UnixStream, seq: u64, msg: Request) {
    s.write_all(&encode_request(seq, msg)).unwrap();
}

/// The next notice on a raw connection (every read bounded by the socket's timeout); `None` once
/// it ends.
pub fn recv(s: &mut UnixStream, dec: &mut Decoder) -> Option<Notice> {
    loop {
        if let Some(p) = dec.next_frame().unwrap() {
            return Some(proto::decode_notice(&p).unwrap());
        }
        let mut buf = [0u8; 4096];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => dec.push(&buf[..n]),
        }
    }
}

/// A raw connection that said hello and got its welcome.
pub fn hello(d: &Daemon, name: &str) -> (UnixStream, Decoder) {
    let mut s = d.raw();
    let mut dec = Decoder::new();
    send(&mut s, 1, Request::Hello { name: name.into() });
    assert!(matches!(recv(&mut s, &mut dec), Some(Notice::Welcome { .. })));
    (s, dec)
}

/// The daemon's status, through a connection of its own.
pub fn status(d: &Daemon) -> Notice {
    let (mut s, mut dec) = hello(d, "status");
    send(&mut s, 2, Request::Status {});
    recv(&mut s, &mut dec).unwrap()
}

/// A raw LP client with one stream (id 1, priority 0) that acknowledges every order `delay`
/// after it came; the thread returns how many orders it got once the connection ends.
pub fn acker(d: &Daemon, name: &str, delay: Duration) -> std::thread::JoinHandle<usize> {
    let (mut lp, mut dec) = hello(d, name);
    send(
        &mut lp,
        2,
        Request::Register {
            stream: 1,
            priority: 0,
            device: HOST0,
        },
    );
    let mut w = lp.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut orders = 0;
        let mut seq = 100;
        while let Some(n) = recv(&mut lp, &mut dec) {
            if let Notice::Order { order, .. } = n {
                orders += 1;
                std::thread::sleep(delay);
                seq += 1;
                let ack = Request::Ack {
                    order,
                    ok: true,
                    error: None,
                };
                if w.write_all(&encode_request(seq, ack)).is_err() {
                    break;
                }
            }
        }
        orders
    })
}
