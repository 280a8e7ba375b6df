//! `SchedClient` in-process, over preempt-api sessions on the host device, against a daemon
//! process: what a Rust program relies on (the sessions scheduled through `Options::scheduler`
//! are preempt-api's tests, `preempt-api/tests/host_sched.rs`).
mod common;
use common::{Daemon, STEP, temp_dir};
use preempt_api::sched::{ClientError, ClientOptions, SchedClient};
use preempt_api::{DeviceSpec, ErrorKind, Level, Options, Session};

fn session() -> Session {
    let opts = Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 1,
        ..Options::default()
    };
    Session::open(DeviceSpec::HOST, opts).unwrap()
}

fn opts() -> ClientOptions {
    ClientOptions {
        lease: STEP,
        reply_timeout: STEP,
        ..ClientOptions::default()
    }
}

#[test]
fn the_api_suspends_only_own_streams_and_never_resumes_a_hand_made_suspension() {
    let dir = temp_dir("api");
    let d = Daemon::start(&dir, &[]);
    let (lp_s, hp_s, other) = (session(), session(), session());
    let a = lp_s.create_lp_stream(Level::Lv3).unwrap();
    let b = lp_s.create_lp_stream(Level::Lv3).unwrap();
    let foreign = other.create_lp_stream(Level::Lv3).unwrap();
    let lp = SchedClient::connect(&d.socket, &lp_s, opts()).unwrap();
    let hp = SchedClient::connect(&d.socket, &hp_s, opts()).unwrap();
    assert!(matches!(lp.register(&foreign, 0), Err(ClientError::Invalid(_))));
    lp.register(&a, 0).unwrap();
    // Suspended by hand before the daemon asks: the daemon's hold is its own beside the
    // user's, and its resume releases only that one.
    b.suspend().unwrap();
    lp.register(&b, 0).unwrap();
    let e = hp.enter(1).unwrap();
    assert!(e.scheduled);
    assert_eq!((e.suspended, e.failed, e.late), (2, 0, 0), "{e:?}");
    assert!(a.is_suspended());
    assert_eq!(lp.held(), vec![a.id(), b.id()]);
    // The daemon's suspension is not the user's to lift (the in-process helper's rule).
    assert_eq!(a.resume().unwrap_err().kind, ErrorKind::Busy);
    hp.leave(1).unwrap();
    assert!(common::wait_until(STEP, || !a.is_suspended()));
    assert!(common::wait_until(STEP, || lp.held().is_empty()));
    assert!(b.is_suspended(), "the user's own suspension stays");
    b.resume().unwrap();
    // Unregistering a stream the daemon holds resumes it here; b, resumed by its user, is the
    // daemon's to suspend again.
    assert_eq!(hp.enter(1).unwrap().suspended, 2);
    assert!(a.is_suspended() && b.is_suspended());
    lp.unregister(&a).unwrap();
    assert!(!a.is_suspended());
    assert_eq!(lp.held(), vec![b.id()]);
    assert!(matches!(lp.unregister(&a), Err(ClientError::Invalid(_))));
    // Closing the client resumes what it holds, the block still active.
    assert!(lp.close().is_empty());
    assert!(!b.is_suspended());
    hp.leave(1).unwrap();
    assert!(
        matches!(hp.leave(1), Err(ClientError::Invalid(_))),
        "a leave without its enter"
    );
    assert_eq!(hp.stats().orders_done, 0, "the HP client had nothing to carry out");
    drop(hp);
    for s in [lp_s, hp_s, other] {
        s.close().unwrap();
    }
}

#[test]
fn without_a_daemon_connect_fails_and_start_runs_unscheduled() {
    let dir = temp_dir("none");
    let s = session();
    let socket = dir.join("nobody.sock");
    match SchedClient::connect(&socket, &s, opts()) {
        Err(ClientError::Connect(m)) => assert!(m.contains("connecting to"), "{m}"),
        other => panic!("{other:?}"),
    }
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    let c = SchedClient::start(&socket, &s, opts()).unwrap();
    c.register(&lp, 0).unwrap();
    let e = c.enter(1).unwrap();
    assert!(!e.scheduled);
    assert!(!lp.is_suspended());
    // A daemon appears while the block is active: the block and the stream are replayed to it,
    // and this client's own stream is suspended for its own block.
    let d = Daemon::start_at(&socket, &[]);
    assert!(common::wait_until(STEP, || lp.is_suspended()), "{}", d.log_text());
    c.leave(1).unwrap();
    assert!(common::wait_until(STEP, || !lp.is_suspended()));
    assert_eq!(lp.resume().unwrap_err().kind, ErrorKind::NotSuspended);
    drop(c);
    s.close().unwrap();
}
