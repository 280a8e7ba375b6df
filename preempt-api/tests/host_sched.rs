//! Sessions scheduled by the `preempt-sched` daemon (`Options::scheduler`) on the host device:
//! another process's high-priority block suspends this process's streams, and the daemon's
//! death resumes them (docs/scheduler-daemon.md). The daemon and the high-priority process are
//! preempt-sched's binaries as cargo built them (`cargo build -p preempt-sched` first; `cargo
//! test --workspace` builds them); every wait is bounded.
mod common;

use common::wait_until;
use host_device::proc_state;
use preempt_api::sched::{ClientOptions, SchedClient};
use preempt_api::{DeviceSpec, ErrorKind, Level, Options, Session};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// The longest one step may take on a loaded 2-core machine before the test fails (a hang is a
/// failure, never a stall of the suite).
const STEP: Duration = Duration::from_secs(20);
const MS: u64 = 1_000_000;

/// A binary of preempt-sched beside the worker cargo built (`target/<profile>/`).
fn built(name: &str) -> PathBuf {
    let worker = host_device::testing::built_worker().program;
    let p = worker.parent().expect("the profile directory").join(name);
    assert!(
        p.is_file(),
        "{} is not built: run `cargo build -p preempt-sched --bins --examples` (`cargo test --workspace` builds it)",
        p.display()
    );
    p
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("preempt-api-sched-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

/// A daemon on `socket` (its ack timeout STEP-long: a loaded machine must not make a test's
/// "suspended once enter returns" race), killed when dropped.
struct Daemon(Child);

impl Daemon {
    fn start(socket: &Path) -> Daemon {
        let log = socket.with_extension("log");
        let child = Command::new(built("preempt-sched"))
            .arg("--socket")
            .arg(socket)
            .args(["--ack-timeout-ms", "20000", "--block-silence-ms", "60000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the daemon starts");
        let listening = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("listening on")
        };
        assert!(wait_until(STEP, listening), "the daemon did not start");
        Daemon(child)
    }

    fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Another process with a session scheduled by the same daemon and no stream of its own: the
/// high-priority side (`preempt-sched-client --lp 0`, commands on its stdin).
struct HpProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl HpProcess {
    fn spawn(socket: &Path) -> HpProcess {
        Self::spawn_on(socket, "host")
    }

    /// [`HpProcess::spawn`] with its session on `device` (`host:N`).
    fn spawn_on(socket: &Path, device: &str) -> HpProcess {
        let mut child = Command::new(built("examples/preempt-sched-client"))
            .arg("--socket")
            .arg(socket)
            .args([
                "--lp",
                "0",
                "--lease-ms",
                "20000",
                "--timeout-ms",
                "20000",
                "--device",
                device,
            ])
            .env(host_device::WORKER_ENV, &host_device::testing::built_worker().program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the HP process starts");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut p = HpProcess { child, stdin, lines };
        let ready = p.line();
        assert!(ready.starts_with("ready "), "{ready}");
        p
    }

    fn line(&mut self) -> String {
        self.lines.recv_timeout(STEP).expect("a reply from the HP process")
    }

    fn cmd(&mut self, c: &str) -> String {
        writeln!(self.stdin, "{c}").unwrap();
        self.stdin.flush().unwrap();
        self.line()
    }
}

impl Drop for HpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scheduled(socket: &Path) -> Session {
    Session::open(DeviceSpec::HOST, scheduled_options(socket)).expect("a session scheduled by the daemon")
}

fn scheduled_options(socket: &Path) -> Options {
    Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 2,
        scheduler: Some(socket.to_path_buf()),
        // STEP-long: only the daemon's death (seen at once as the end of the socket) may resume.
        scheduler_client: ClientOptions {
            lease: STEP,
            reply_timeout: STEP,
            ..ClientOptions::default()
        },
        ..Options::default()
    }
}

fn states(pids: &[i32]) -> Vec<Option<char>> {
    pids.iter().map(|&p| proc_state(p).ok()).collect()
}

#[test]
fn another_process_s_block_suspends_the_session_and_the_daemon_s_death_resumes_it() {
    let dir = temp_dir("kill");
    let socket = dir.0.join("s.sock");
    let mut daemon = Daemon::start(&socket);
    let s = scheduled(&socket);
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    s.helper_register(&lp, 0).unwrap();
    for _ in 0..10 {
        lp.submit_delay(20 * MS).unwrap();
    }
    let workers = lp.host_pids();
    let mut hp = HpProcess::spawn(&socket);

    let entered = hp.cmd("enter 1");
    assert!(
        entered.starts_with("entered scheduled=true suspended=1 failed=0 late=0"),
        "{entered}"
    );
    assert!(lp.is_suspended(), "suspended for another process's block");
    assert!(
        states(&workers).iter().all(|&st| st == Some('T')),
        "every worker stopped once the other process's enter returned: {:?}",
        states(&workers)
    );
    let sched = s.scheduler().expect("opened with a scheduler");
    assert_eq!(sched.held(), vec![lp.id()]);
    assert_eq!(s.helper_active(), 0, "the block is the other process's");
    assert_eq!(
        lp.resume().unwrap_err().kind,
        ErrorKind::Busy,
        "the daemon's suspension"
    );

    // The daemon dies with the block active: the fail-safe resumes the stream by itself.
    daemon.kill9();
    assert!(
        wait_until(STEP, || !lp.is_suspended()),
        "still suspended after the daemon died"
    );
    assert!(
        wait_until(STEP, || states(&workers).iter().all(|&st| st != Some('T'))),
        "a worker left stopped: {:?}",
        states(&workers)
    );
    assert_eq!(sched.stats().failsafe_resumes, 1);
    assert!(!sched.connected());
    lp.wait_idle_for(STEP).unwrap();
    let c = lp.check().unwrap();
    assert!(c.ok() && c.exactly_once == 10, "{c:?}");
    s.close().unwrap();
    assert!(
        states(&workers).iter().all(|&st| st != Some('T')),
        "{:?}",
        states(&workers)
    );
}

/// Sessions on `host:0` and `host:1` (two GPUs' stand-ins) in this process, scheduled by one
/// daemon: another process's block on `host:1` suspends the `host:1` session's stream only, and
/// this process's own block on `host:0` the `host:0` session's only.
#[test]
fn a_block_suspends_only_the_sessions_on_its_device() {
    let dir = temp_dir("devices");
    let socket = dir.0.join("s.sock");
    let _daemon = Daemon::start(&socket);
    let open = |n| Session::open(DeviceSpec::Host(n), scheduled_options(&socket)).unwrap();
    let (s0, s1) = (open(0), open(1));
    assert_eq!(s1.device().to_string(), "host:1");
    assert_eq!(s1.sched_device(), Some(preempt_api::sched::proto::Device::host(1)));
    let lp0 = s0.create_lp_stream(Level::Lv3).unwrap();
    let lp1 = s1.create_lp_stream(Level::Lv3).unwrap();
    s0.helper_register(&lp0, 0).unwrap();
    s1.helper_register(&lp1, 0).unwrap();
    for lp in [&lp0, &lp1] {
        for _ in 0..4 {
            lp.submit_delay(5 * MS).unwrap();
        }
    }
    let mut hp1 = HpProcess::spawn_on(&socket, "host:1");
    let entered = hp1.cmd("enter 1");
    assert!(
        entered.starts_with("entered scheduled=true suspended=1 failed=0 late=0"),
        "{entered}"
    );
    assert!(lp1.is_suspended() && !lp0.is_suspended());
    assert!(states(&lp1.host_pids()).iter().all(|&st| st == Some('T')));
    assert!(states(&lp0.host_pids()).iter().all(|&st| st != Some('T')));
    assert_eq!(hp1.cmd("leave 1"), "left");
    assert!(wait_until(STEP, || !lp1.is_suspended()));
    // This process's own block on host:0: its host:1 session's stream runs on.
    s0.helper_enter(1).unwrap();
    assert!(lp0.is_suspended() && !lp1.is_suspended());
    s0.helper_leave(1).unwrap();
    assert!(wait_until(STEP, || !lp0.is_suspended()));
    for lp in [&lp0, &lp1] {
        lp.wait_idle_for(STEP).unwrap();
        let c = lp.check().unwrap();
        assert!(c.ok() && c.exactly_once == 4, "{c:?}");
    }
    s0.close().unwrap();
    s1.close().unwrap();
}

#[test]
fn closing_a_stream_unregisters_it_and_closing_the_session_resumes_first() {
    let dir = temp_dir("close");
    let socket = dir.0.join("s.sock");
    let _daemon = Daemon::start(&socket);
    let s = scheduled(&socket);
    let (a, b) = (
        s.create_lp_stream(Level::Lv3).unwrap(),
        s.create_lp_stream(Level::Lv3).unwrap(),
    );
    s.helper_register(&a, 0).unwrap();
    s.helper_register(&b, 0).unwrap();
    let mut hp = HpProcess::spawn(&socket);
    // A closed stream is unregistered: the daemon orders no suspend of it (one would fail).
    s.close_stream(a.id()).unwrap();
    let e = hp.cmd("enter 1");
    assert!(e.starts_with("entered scheduled=true suspended=1 failed=0"), "{e}");
    assert!(b.is_suspended());
    // This process's own block: its streams of lower priority are suspended too, and
    // helper_active counts it.
    assert_eq!(hp.cmd("leave 1"), "left");
    assert!(wait_until(STEP, || !b.is_suspended()));
    s.helper_enter(1).unwrap();
    assert!(b.is_suspended(), "its own block suspends its own lower stream");
    assert_eq!(s.helper_active(), 1);
    s.helper_leave(1).unwrap();
    assert!(wait_until(STEP, || !b.is_suspended()));
    assert_eq!(s.helper_leave(1).unwrap_err().kind, ErrorKind::InvalidArgument);
    // Closing the session while the other process's block holds b: the client lets go of b
    // first, nothing is left stopped, and close reports no failure.
    assert!(hp.cmd("enter 1").contains("suspended=1"));
    let workers = b.host_pids();
    assert!(states(&workers).iter().all(|&st| st == Some('T')));
    s.close().unwrap();
    assert!(wait_until(STEP, || states(&workers).iter().all(|&st| st != Some('T'))));
    assert_eq!(s.helper_enter(1).unwrap_err().kind, ErrorKind::Closed);
}

#[test]
fn a_daemon_that_cannot_be_reached_fails_the_open_and_a_second_client_is_refused() {
    let dir = temp_dir("none");
    let socket = dir.0.join("nobody.sock");
    let opts = Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 1,
        scheduler: Some(socket.clone()),
        ..Options::default()
    };
    let e = Session::open(DeviceSpec::HOST, opts).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Scheduler);
    assert!(
        e.message.contains(&socket.display().to_string()) && !e.message.contains('\n'),
        "one line naming the socket: {e}"
    );
    let _daemon = Daemon::start(&socket);
    let s = scheduled(&socket);
    let second = SchedClient::connect(&socket, &s, ClientOptions::default()).unwrap_err();
    assert!(second.to_string().contains("its own scheduler client"), "{second}");
    s.close().unwrap();
}

/// A session's time-driven policy runs in its own process beside the daemon's blocks: each is a
/// hold of its own, and the daemon's death leaves the policy's choice standing
/// (docs/scheduler-daemon.md).
#[test]
fn the_policy_runs_in_process_beside_the_daemon_s_blocks() {
    let dir = temp_dir("policy");
    let socket = dir.0.join("s.sock");
    let mut daemon = Daemon::start(&socket);
    let s = Session::open(
        DeviceSpec::HOST,
        Options {
            policy: Some(preempt_api::PolicyChoice::KEdf { k: 1 }),
            ..scheduled_options(&socket)
        },
    )
    .expect("a session with a policy, scheduled by the daemon");
    let due_first = s.create_lp_stream(Level::Lv3).unwrap();
    let later = s.create_lp_stream(Level::Lv3).unwrap();
    for (lp, ms) in [(&due_first, 10), (&later, 1000)] {
        s.helper_register(lp, 0).unwrap();
        s.helper_schedule(lp, preempt_api::PolicyParams::Deadline(Duration::from_millis(ms)))
            .unwrap();
    }
    for _ in 0..10 {
        later.submit_delay(20 * MS).unwrap();
        due_first.submit_delay(20 * MS).unwrap();
    }
    assert!(
        later.is_suspended() && !due_first.is_suspended(),
        "K-EDF (k = 1) in this process"
    );
    let mut hp = HpProcess::spawn(&socket);
    let entered = hp.cmd("enter 1");
    assert!(entered.contains("suspended=2"), "{entered}");
    assert!(
        due_first.is_suspended(),
        "the other process's block stops the policy's choice too"
    );
    daemon.kill9();
    // The daemon's hold goes with it; the policy's stays: the due-first stream runs again,
    // the other is still the policy's.
    assert!(
        wait_until(STEP, || !due_first.is_suspended()),
        "the daemon's death did not resume the policy's choice"
    );
    assert!(later.is_suspended(), "the policy's hold is not the daemon's to release");
    drop(hp);
    for lp in [&due_first, &later] {
        s.helper_unregister(lp).unwrap();
        lp.synchronize().unwrap();
        assert!(lp.check().unwrap().ok(), "every command ran exactly once");
    }
    s.close().unwrap();
}
