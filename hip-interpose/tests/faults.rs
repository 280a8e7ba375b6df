//! Faults and hard cases, each bounded in time: the interposed program killed while its
//! low-priority stream is suspended (no process may be left stopped), fork and exec inside it
//! (one interposer per process), a thousand streams (the bound on queues of their own).
mod support;
use hip_testkit::{KillOnDrop, marked};
use std::time::{Duration, Instant};

#[test]
fn a_program_killed_mid_suspension_leaves_no_worker_stopped() {
    let marker = format!("PREEMPT_FAULT_TEST={}-{}", std::process::id(), line!());
    let (k, v) = marker.split_once('=').unwrap();
    // HP requests back to back: the LP stream is suspended nearly all the time.
    let mut c = support::command(
        true,
        &["--lp", "500", "--lp-ms", "20", "--hp", "100000", "--gap-ms", "0"],
    );
    c.env(k, v);
    let mut child = KillOnDrop(c.spawn().unwrap());
    let t0 = Instant::now();
    let mut saw_stopped = false;
    while t0.elapsed() < Duration::from_secs(30) && !saw_stopped {
        std::thread::sleep(Duration::from_millis(50));
        saw_stopped = marked(&marker)
            .iter()
            .any(|(pid, s)| *s == 'T' && i64::from(*pid) != i64::from(child.0.id()));
    }
    assert!(
        saw_stopped,
        "a worker of the LP stream was seen stopped: {:?}",
        marked(&marker)
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // The workers were stopped in process groups orphaned by the kill: the kernel sends them
    // SIGHUP and SIGCONT, and they end.
    let t1 = Instant::now();
    let mut left = marked(&marker);
    while !left.is_empty() && t1.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
        left = marked(&marker);
    }
    assert!(left.is_empty(), "processes left behind (pid, state): {left:?}");
}

#[test]
fn fork_and_exec_in_an_interposed_program_start_one_interposer_per_process() {
    // The program forks once its streams exist; the child execs the program again (LD_PRELOAD
    // is inherited). Each process must have exactly one interposer of its own: one start line
    // and one exit line per pid, with everything it suspended resumed.
    let r = support::run(
        true,
        &["--lp", "20", "--lp-ms", "10", "--hp", "10", "--spawn-child"],
        Duration::from_secs(120),
    );
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!((r.get("child_failed"), r.get("lp_exactly_once")), (0.0, 20.0));
    let pid_of = |l: &str| {
        l.strip_prefix("preempt-hip: pid ")?
            .split_whitespace()
            .next()
            .map(str::to_string)
    };
    let starts: Vec<String> = r
        .stderr
        .lines()
        .filter(|l| l.contains(" on the stand-in "))
        .filter_map(pid_of)
        .collect();
    let exits: Vec<String> = r
        .stderr
        .lines()
        .filter(|l| l.contains(" exits: "))
        .filter_map(pid_of)
        .collect();
    assert_eq!(starts.len(), 2, "one start per process:\n{}", r.stderr);
    assert_ne!(starts[0], starts[1], "two processes, two interposers");
    let (mut a, mut b) = (starts.clone(), exits.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "each process that started one also ended it:\n{}", r.stderr);
    for line in r.stderr.lines().filter(|l| l.contains(" exits: ")) {
        let l = support::ExitLine::parse(line).expect("an exit line");
        assert_eq!((l.suspends, l.failures), (l.resumes, 0), "{line}");
    }
}

#[test]
fn a_program_with_a_thousand_streams_gets_at_most_the_bound_of_queues_of_its_own() {
    // Queues of their own are a per-process resource: past PREEMPT_MAX_OWN_QUEUES (64) a stream
    // is created as the program asked and never suspended; the run still ends with everything
    // resumed, every LP command exactly once.
    let r = support::run(
        true,
        &[
            "--extra-streams",
            "1000",
            "--lp",
            "10",
            "--lp-ms",
            "5",
            "--hp",
            "5",
            "--gap-ms",
            "2",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_exactly_once"), 10.0);
    let own = r
        .stderr
        .lines()
        .filter(|l| l.contains("has a queue of its own"))
        .count();
    assert_eq!(own, 64, "the bound, not 1001");
    let support::ExitLine {
        suspends: s,
        resumes: res,
        failures: f,
        ..
    } = support::exit_line(&r.stderr);
    assert_eq!((s, f), (res, 0));
    assert!(
        s >= 64,
        "each request suspends every stream with a queue of its own: {s}"
    );
}
