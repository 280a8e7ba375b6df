//! Client processes on the host device scheduled by the daemon: two clients, blocks scoped to
//! their device (`host:0`, `host:1`), and clients that die by SIGKILL while suspended or while
//! holding a high-priority block.
mod common;
use common::{Client, Daemon, STEP, state, stopped, temp_dir, wait_until};

#[test]
fn an_hp_block_in_one_process_suspends_the_lp_stream_of_another() {
    let dir = temp_dir("two");
    let d = Daemon::start(&dir, &[]);
    let mut lp = Client::spawn(&d.socket, &["--lp", "1", "--workers", "2"]);
    let mut hp = Client::spawn(&d.socket, &["--lp", "0"]);
    assert_eq!(lp.workers.len(), 2);
    lp.submit(5, 2_000_000); // busy workers are stopped mid-command
    let (scheduled, suspended, failed, late) = hp.enter(1);
    assert!(scheduled);
    assert_eq!((suspended, failed, late), (1, 0, 0));
    assert!(
        lp.workers.iter().all(|&w| stopped(w)),
        "every worker of the other process is stopped when enter returns"
    );
    assert_eq!(lp.cmd("held"), "held 1");
    assert_eq!(hp.cmd("leave 1"), "left");
    assert!(wait_until(STEP, || lp.workers.iter().all(|&w| !stopped(w))));
    assert_eq!(lp.cmd("held"), "held 0");
    // A block of equal priority suspends nothing; the stream's own process may enter too.
    assert_eq!(hp.enter(0), (true, 0, 0, 0));
    assert_eq!(hp.cmd("leave 0"), "left");
    assert_eq!(
        lp.enter(1).1,
        1,
        "a process's own HP block suspends its own LP stream too"
    );
    assert!(lp.workers.iter().all(|&w| stopped(w)));
    assert_eq!(lp.cmd("leave 1"), "left");
    assert!(wait_until(STEP, || lp.workers.iter().all(|&w| !stopped(w))));
    assert!(
        hp.cmd("leave 1").starts_with("error"),
        "a leave without its enter is refused"
    );
    lp.assert_exactly_once(5);
    lp.quit();
    hp.quit();
}

/// Two host devices stand in for two GPUs of one node: an HP block on `host:0` suspends the LP
/// stream on `host:0` and leaves the one on `host:1` running; a block on each device suspends
/// each device's own stream, and leaving one of them resumes only its device's.
#[test]
fn a_block_suspends_only_the_streams_on_its_own_device() {
    let dir = temp_dir("devices");
    let d = Daemon::start(&dir, &[]);
    let mut lp0 = Client::spawn(&d.socket, &["--lp", "1", "--device", "host:0"]);
    let mut lp1 = Client::spawn(&d.socket, &["--lp", "1", "--device", "host:1"]);
    let mut hp0 = Client::spawn(&d.socket, &["--lp", "0", "--device", "host"]);
    let mut hp1 = Client::spawn(&d.socket, &["--lp", "0", "--device", "host:1"]);
    lp0.submit(3, 2_000_000);
    lp1.submit(3, 2_000_000);
    assert_eq!(hp0.enter(1), (true, 1, 0, 0), "one stream on host:0 to suspend");
    assert!(lp0.workers.iter().all(|&w| stopped(w)));
    assert!(lp1.workers.iter().all(|&w| !stopped(w)), "the stream on host:1 runs on");
    assert_eq!(lp1.cmd("held"), "held 0");
    assert_eq!(
        hp1.enter(1),
        (true, 1, 0, 0),
        "host:1's block waits for host:1's stream only"
    );
    assert!(lp1.workers.iter().all(|&w| stopped(w)));
    assert_eq!(hp0.cmd("leave 1"), "left");
    assert!(wait_until(STEP, || lp0.workers.iter().all(|&w| !stopped(w))));
    assert!(
        lp1.workers.iter().all(|&w| stopped(w)),
        "host:0's leave does not resume host:1's stream"
    );
    assert_eq!(lp1.cmd("held"), "held 1");
    assert_eq!(hp1.cmd("leave 1"), "left");
    assert!(wait_until(STEP, || lp1.workers.iter().all(|&w| !stopped(w))));
    match common::status(&d) {
        preempt_sched::proto::Notice::Status {
            streams,
            blocks,
            devices,
            ..
        } => assert_eq!((streams, blocks, devices), (2, 0, 2)),
        n => panic!("{n:?}"),
    }
    lp0.assert_exactly_once(3);
    lp1.assert_exactly_once(3);
    for c in [lp0, lp1, hp0, hp1] {
        c.quit();
    }
}

#[test]
fn a_client_killed_while_suspended_is_dropped_and_leaves_nothing_stopped() {
    let dir = temp_dir("kill-suspended");
    let mut d = Daemon::start(&dir, &[]);
    let mut victim = Client::spawn(&d.socket, &["--lp", "1"]);
    let other = Client::spawn(&d.socket, &["--lp", "1"]);
    let mut hp = Client::spawn(&d.socket, &["--lp", "0"]);
    assert_eq!(hp.enter(1).1, 2);
    let workers = victim.workers.clone();
    assert!(workers.iter().all(|&w| stopped(w)));
    victim.kill9();
    assert!(d.wait_log(&format!("pid {}) closed", victim.pid)), "{}", d.log_text());
    assert!(d.wait_log("1 streams and 0 blocks dropped, plan recomputed"));
    // Its workers die with it (PR_SET_PDEATHSIG), stopped or not: none is left stopped.
    assert!(
        wait_until(STEP, || workers.iter().all(|&w| state(w).is_none_or(|s| s == 'Z'))),
        "{:?}",
        workers.iter().map(|&w| state(w)).collect::<Vec<_>>()
    );
    // The plan goes on for the others.
    assert_eq!(hp.cmd("leave 1"), "left");
    assert!(wait_until(STEP, || other.workers.iter().all(|&w| !stopped(w))));
    assert_eq!(hp.enter(1).1, 1, "only the living stream is suspended");
    assert_eq!(hp.cmd("leave 1"), "left");
    assert!(d.alive());
    other.quit();
    hp.quit();
}

#[test]
fn a_client_killed_inside_its_hp_block_ends_the_block() {
    let dir = temp_dir("kill-hp");
    let mut d = Daemon::start(&dir, &[]);
    let mut lp = Client::spawn(&d.socket, &["--lp", "1"]);
    let mut hp = Client::spawn(&d.socket, &["--lp", "0"]);
    assert_eq!(hp.enter(5).1, 1);
    assert!(lp.workers.iter().all(|&w| stopped(w)));
    hp.kill9();
    assert!(
        d.wait_log("0 streams and 1 blocks dropped, plan recomputed"),
        "{}",
        d.log_text()
    );
    assert!(
        wait_until(STEP, || lp.workers.iter().all(|&w| !stopped(w))),
        "the dead client's block no longer holds the others"
    );
    assert!(wait_until(STEP, || lp.cmd("held") == "held 0"));
    assert!(d.alive());
    lp.quit();
}
