//! Sessions scheduled by the `preempt-sched` daemon (`Options::scheduler`) on the host device:
//! another process's high-priority block suspends this process's streams, and the daemon's
//! death resumes them (docs/scheduler-daemon.md); and clients without a session
//! (`SchedClient::connect_standalone`), whose objects are any `Schedulable`, the same way. The
//! daemon and the high-priority process are preempt-sched's binaries as cargo built them (`cargo
//! build -p preempt-sched` first; `cargo test --workspace` builds them); every wait is bounded.
//!
//! One test binary, long on purpose: each binary links the crate and its device stack again, which
//! costs a 2-core CI machine minutes.
mod common;

use common::wait_until;
use host_device::proc_state;
use preempt_api::sched::proto::Device;
use preempt_api::sched::{ClientError, ClientOptions, SchedClient, Schedulable};
use preempt_api::{DeviceSpec, ErrorKind, Level, Options, Session};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
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

/// A client without a session: what it registers is any `Schedulable`. This one counts the
/// daemon's suspends and resumes and records a misuse of the daemon's hold (a resume it did not
/// suspend, a second suspend).
struct Fake {
    id: u64,
    device: Option<Device>,
    log: Mutex<FakeLog>,
}

#[derive(Debug, Default, Clone)]
struct FakeLog {
    held: bool,
    suspends: u32,
    resumes: u32,
    misuse: Vec<String>,
}

impl Fake {
    fn new(id: u64, device: Option<Device>) -> Arc<Fake> {
        Arc::new(Fake {
            id,
            device,
            log: Mutex::new(FakeLog::default()),
        })
    }

    fn log(&self) -> FakeLog {
        self.log.lock().unwrap().clone()
    }

    fn held(&self) -> bool {
        self.log().held
    }
}

impl Schedulable for Fake {
    fn sched_id(&self) -> u64 {
        self.id
    }

    fn sched_device(&self) -> Option<Device> {
        self.device
    }

    fn daemon_suspend(&self) -> preempt_api::Result<()> {
        let mut l = self.log.lock().unwrap();
        if std::mem::replace(&mut l.held, true) {
            l.misuse.push("suspended twice".into());
        }
        l.suspends += 1;
        Ok(())
    }

    fn daemon_resume(&self) -> preempt_api::Result<()> {
        let mut l = self.log.lock().unwrap();
        if !std::mem::replace(&mut l.held, false) {
            l.misuse.push("resumed without its suspend".into());
        }
        l.resumes += 1;
        Ok(())
    }
}

fn standalone_options(lease: Duration) -> ClientOptions {
    ClientOptions {
        lease,
        reply_timeout: STEP,
        ..ClientOptions::default()
    }
}

/// A client without a session on host:0 with a fake object at low priority: another client's
/// block on host:0 (in this process, without a session either) suspends it and its leave
/// resumes it; another process's block on host:1 leaves it alone, its block on host:0 does not;
/// the daemon's SIGKILL resumes it within the lease, and nothing ever resumes what the daemon did
/// not suspend.
#[test]
fn a_client_without_a_session_schedules_its_own_objects() {
    common::bounded(|| {
        let dir = temp_dir("standalone");
        let socket = dir.0.join("s.sock");
        let mut daemon = Daemon::start(&socket);
        // Long enough that only the daemon's death (its end of the socket) may resume on this
        // loaded machine, short enough to bound the resume.
        let lease = Duration::from_secs(3);
        let lp = SchedClient::connect_standalone(&socket, Device::host(0), standalone_options(lease)).unwrap();
        assert_eq!(lp.device(), Some(Device::host(0)));
        let fake = Fake::new(7, None);
        lp.register_obj(fake.clone(), 0).unwrap();
        assert!(lp.is_registered(7));

        // Another client without a session, in this process: its block on host:0.
        let hp = SchedClient::connect_standalone(&socket, Device::host(0), standalone_options(STEP)).unwrap();
        let e = hp.enter(1).unwrap();
        assert!(e.scheduled && e.suspended == 1 && e.failed == 0 && e.late == 0, "{e:?}");
        assert!(fake.held(), "suspended once the other client's enter returned");
        assert_eq!(lp.held(), vec![7]);
        hp.leave(1).unwrap();
        assert!(wait_until(STEP, || !fake.held()), "resumed once the block left");
        assert!(wait_until(STEP, || lp.held().is_empty()));

        // Another process's block on host:1: nothing of host:0 is suspended.
        let mut hp1 = HpProcess::spawn_on(&socket, "host:1");
        let e = hp1.cmd("enter 1");
        assert!(e.starts_with("entered scheduled=true suspended=0"), "{e}");
        assert!(!fake.held() && lp.held().is_empty());
        assert_eq!(hp1.cmd("leave 1"), "left");

        // This client's own block on host:1 (enter_on): its host:0 object runs on.
        let e = lp.enter_on(Device::host(1), 1).unwrap();
        assert!(e.scheduled && e.suspended == 0, "{e:?}");
        assert!(!fake.held() && lp.active_blocks() == 1);
        lp.leave_on(Device::host(1), 1).unwrap();
        assert_eq!(lp.active_blocks(), 0);

        // Another process's block on host:0, then the daemon dies with it active.
        let mut hp0 = HpProcess::spawn(&socket);
        let e = hp0.cmd("enter 1");
        assert!(
            e.starts_with("entered scheduled=true suspended=1 failed=0 late=0"),
            "{e}"
        );
        assert!(fake.held());
        daemon.kill9();
        let killed = std::time::Instant::now();
        assert!(
            wait_until(STEP, || !fake.held()),
            "still suspended after the daemon died"
        );
        let took = killed.elapsed();
        assert!(took < lease, "the fail-safe took {took:?}, past the lease ({lease:?})");
        let stats = lp.stats();
        assert_eq!((stats.failsafe_resumes, stats.lease_expiries), (1, 0), "{stats:?}");
        assert!(wait_until(STEP, || !lp.connected()));

        let log = fake.log();
        assert!(log.misuse.is_empty(), "{:?}", log.misuse);
        assert_eq!((log.suspends, log.resumes), (2, 2), "{log:?}");
        assert!(lp.close().is_empty());
        assert_eq!(fake.log().resumes, 2, "close resumes nothing the daemon does not hold");
    });
}

/// What a client without a session refuses and what it resumes on its way out.
#[test]
fn a_client_without_a_session_keeps_its_objects_apart() {
    common::bounded(|| {
        let dir = temp_dir("standalone-rules");
        let socket = dir.0.join("s.sock");
        let _daemon = Daemon::start(&socket);
        let e = SchedClient::connect_standalone(&socket, Device::kfd(0), standalone_options(STEP)).unwrap_err();
        assert!(e.to_string().contains("never 0"), "a CPU node's id is no GPU: {e}");
        let lp = SchedClient::connect_standalone(&socket, Device::host(0), standalone_options(STEP)).unwrap();
        let (a, b) = (Fake::new(1, None), Fake::new(2, Some(Device::host(1))));
        lp.register_obj(a.clone(), 0).unwrap();
        lp.register_obj(b.clone(), 0).unwrap();
        // The same object again changes its priority; another object under its id is refused.
        lp.register_obj(a.clone(), 0).unwrap();
        let e = lp.register_obj(Fake::new(1, None), 0).unwrap_err();
        assert!(
            matches!(e, ClientError::Invalid(_)) && e.to_string().contains("another object"),
            "{e}"
        );
        let e = lp.register_obj(Fake::new(1, Some(Device::host(1))), 0).unwrap_err();
        assert!(e.to_string().contains("registered on host:0"), "{e}");

        // A session's stream has no place in a client without a session, nor an object in a
        // session's client.
        let s = scheduled(&socket);
        let stream = s.create_lp_stream(Level::Lv3).unwrap();
        let e = lp.register(&stream, 0).unwrap_err();
        assert!(e.to_string().contains("register_obj"), "{e}");
        let e = s.scheduler().unwrap().register_obj(Fake::new(9, None), 0).unwrap_err();
        assert!(e.to_string().contains("its session's"), "{e}");

        // b is on host:1, its own device: a block there suspends it, not a.
        let hp = SchedClient::connect_standalone(&socket, Device::host(1), standalone_options(STEP)).unwrap();
        let e = hp.enter(1).unwrap();
        assert!(e.suspended == 1, "{e:?}");
        assert!(b.held() && !a.held());
        // Unregistered while held: resumed by the client, the daemon's hold only.
        lp.unregister_obj(2).unwrap();
        assert!(!b.held() && !lp.is_registered(2));
        assert!(matches!(lp.unregister_obj(2), Err(ClientError::Invalid(_))));
        hp.leave(1).unwrap();
        // Closing while held resumes it too.
        let e = hp.enter_on(Device::host(0), 1).unwrap();
        assert!(e.suspended == 1 && a.held(), "{e:?}");
        assert!(lp.close().is_empty());
        assert!(!a.held());
        for f in [&a, &b] {
            let log = f.log();
            assert!(log.misuse.is_empty() && log.suspends == log.resumes, "{log:?}");
        }
        hp.leave_on(Device::host(0), 1).unwrap();
        s.close().unwrap();
    });
}
