//! Two unmodified processes at two priorities under the scheduler daemon (`preempt-sched`), on
//! the stand-in runtime (host device `host:0` in both): the high-priority process's requests
//! suspend the other process's low-priority stream through the daemon, and the daemon's death
//! resumes it. Every wait is bounded.
mod support;
use hip_testkit::{KillOnDrop, marked};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{ExitLine, command, finish, settled};

const LIMIT: Duration = Duration::from_secs(120);

struct Daemon {
    child: Child,
    dir: PathBuf,
}

impl Daemon {
    fn start(tag: &str) -> Daemon {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sched-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("daemon.log");
        let child = Command::new(hip_testkit::built("preempt-sched", "preempt-sched"))
            .arg("--socket")
            .arg(dir.join("s.sock"))
            .args(["--ack-timeout-ms", "20000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the daemon starts");
        let t0 = Instant::now();
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("listening on")
        {
            assert!(t0.elapsed() < Duration::from_secs(20), "the daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, dir }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("s.sock")
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn under(socket: &Path, args: &[&str]) -> Child {
    let mut c = command(true, args);
    c.env("PREEMPT_SCHEDULER", format!("unix:{}", socket.display()));
    c.spawn().expect("the program starts")
}

/// A (the low job, `a`, started first) beside B (30 high-priority requests) under the daemon
/// `d`: both must exit 0 and every LP command of A complete exactly once; A's run is returned,
/// its exit line checked (every suspend resumed, no failure).
fn a_beside_b(d: &Daemon, mut a: Command) -> (hip_testkit::Run, ExitLine) {
    a.env("PREEMPT_SCHEDULER", format!("unix:{}", d.socket().display()));
    let a = a.spawn().expect("A starts");
    std::thread::sleep(Duration::from_millis(300));
    let b = finish(under(&d.socket(), &["--no-lp", "--hp", "30", "--gap-ms", "5"]), LIMIT);
    let a = finish(a, LIMIT);
    assert_eq!(
        (a.code, b.code),
        (Some(0), Some(0)),
        "A:\n{}\nB:\n{}",
        a.stderr,
        b.stderr
    );
    assert_eq!(a.get("lp_exactly_once"), 60.0, "every LP command of A exactly once");
    let e = settled(&a.stderr, "A");
    (a, e)
}

#[test]
fn another_processs_requests_suspend_the_low_stream_through_the_daemon() {
    let d = Daemon::start("two");
    // A: 60 LP commands of 20 ms and a single request of its own.
    let (a, e) = a_beside_b(
        &d,
        command(true, &["--lp", "60", "--lp-ms", "20", "--hp", "1", "--gap-ms", "0"]),
    );
    assert!(
        a.stderr.contains("scheduler daemon at"),
        "A is the daemon's client:\n{}",
        a.stderr
    );
    assert!(
        e.suspends >= 10,
        "B's requests suspended A's LP stream through the daemon ({} suspends; A made 1 request itself)",
        e.suspends
    );
}

#[test]
fn the_daemons_death_resumes_what_it_held() {
    let mut d = Daemon::start("death");
    let marker = format!("PREEMPT_DAEMON_TEST={}", std::process::id());
    let mut c = command(true, &["--lp", "60", "--lp-ms", "20", "--hp", "1", "--gap-ms", "0"]);
    c.env("PREEMPT_SCHEDULER", format!("unix:{}", d.socket().display()))
        .env("PREEMPT_DAEMON_TEST", std::process::id().to_string());
    let a = c.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // B's requests back to back: A's stream is held nearly all the time; the daemon dies while
    // one of A's workers is seen stopped.
    let b = KillOnDrop(under(&d.socket(), &["--no-lp", "--hp", "100000", "--gap-ms", "0"]));
    let t0 = Instant::now();
    while !marked(&marker)
        .iter()
        .any(|(pid, s)| *s == 'T' && i64::from(*pid) != i64::from(a.id()))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "A's LP stream was never seen suspended: {:?}",
            marked(&marker)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    d.kill();
    // A must finish on its own: whatever the daemon held was released by A's client.
    let a = finish(a, LIMIT);
    drop(b);
    assert_eq!(a.code, Some(0), "A:\n{}", a.stderr);
    assert_eq!(a.get("lp_exactly_once"), 60.0);
    settled(&a.stderr, "A, after the daemon died");
}

#[test]
fn a_program_declared_low_is_held_on_its_default_stream_through_the_daemon() {
    // A puts all its work on the null stream (PyTorch's default stream) and says only
    // PREEMPT_PRIORITY=1: that work goes to a stream of the interposer's, which B's requests
    // have the daemon hold.
    let d = Daemon::start("null");
    let mut a = command(
        true,
        &[
            "--lp-on-null",
            "--lp",
            "60",
            "--lp-ms",
            "20",
            "--hp",
            "1",
            "--gap-ms",
            "0",
        ],
    );
    a.env("PREEMPT_PRIORITY", "1");
    let (a, e) = a_beside_b(&d, a);
    assert!(
        a.stderr.contains("the null stream's work goes to stream"),
        "A's default stream was taken over:\n{}",
        a.stderr
    );
    assert!(
        e.suspends >= 10,
        "B's requests held A's default-stream work ({} suspends)",
        e.suspends
    );
}
