//! The API's contracts where a careless or hostile caller meets them (docs/c-api.md#contracts), on
//! the host device: who holds a suspension (the user by hand, the helper, or both), delay commands
//! past the documented maximum, and a close that is bounded whatever is in flight. Every wait here
//! is bounded by the test itself: a regression fails, it never hangs the suite.
use host_device::proc_state;
use preempt_api::{CLOSE_WAIT, DeviceSpec, ErrorKind, Level, LpStream, MAX_DELAY_NS, Options, Session};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

fn host() -> Session {
    let o = Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 1,
        ..Options::default()
    };
    Session::open(DeviceSpec::HOST, o).expect("the host device opens")
}

/// Every worker of `lp` is stopped (state `T`), or every one runs.
fn stopped(lp: &LpStream) -> bool {
    lp.host_pids().iter().all(|&p| proc_state(p).is_ok_and(|s| s == 'T'))
}

fn running(lp: &LpStream) -> bool {
    lp.host_pids().iter().all(|&p| proc_state(p).is_ok_and(|s| s != 'T'))
}

/// `f` in a thread, with its result if it returned within `limit` (a hang is `None`, and the
/// thread is left behind rather than the suite hanging).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// A careless caller's sequence: enter, hand resume, hand suspend, leave. The helper's suspension
/// is the helper's: a hand resume of it is refused (BUSY) and the stream stays stopped for the
/// block; a hand suspend inside the block is the user's, and survives the block.
#[test]
fn a_hand_resume_inside_a_block_is_busy_and_a_hand_suspend_outlives_the_block() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    lp.submit_delay(200 * MS).unwrap();
    s.helper_register(&lp, 0).unwrap();
    s.helper_enter(1).unwrap();
    assert!(lp.is_suspended() && stopped(&lp));
    let e = lp.resume().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Busy, "{e}");
    assert!(e.message.contains("helper"), "the message says who holds it: {e}");
    assert!(stopped(&lp), "a refused hand resume leaves the block's stream stopped");
    lp.suspend()
        .expect("a hand suspend inside a block is accepted (the user's own hold)");
    assert_eq!(lp.suspend().unwrap_err().kind, ErrorKind::AlreadySuspended);
    s.helper_leave(1).unwrap();
    assert!(
        lp.is_suspended() && stopped(&lp),
        "the user's suspension outlives the block"
    );
    lp.resume().expect("the user resumes their own suspension");
    assert!(!lp.is_suspended() && running(&lp));
    lp.synchronize().unwrap();
    assert!(lp.check().unwrap().ok());
    s.close().unwrap();
}

/// A stream the user suspended by hand before a block is still suspended after it, and the block
/// neither fails on it nor resumes it; a hand resume inside the block hands it to the helper
/// (the block's stream stays stopped until the block leaves).
#[test]
fn a_hand_suspension_made_before_a_block_is_the_users() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    lp.submit_delay(200 * MS).unwrap();
    s.helper_register(&lp, 0).unwrap();
    lp.suspend().unwrap();
    s.helper_enter(1)
        .expect("a block over a stream suspended by hand begins");
    s.helper_leave(1).unwrap();
    assert!(
        lp.is_suspended() && stopped(&lp),
        "the helper resumed a suspension it did not make"
    );
    s.helper_enter(1).unwrap();
    lp.resume().expect("the user's own hold is theirs to release");
    assert!(lp.is_suspended() && stopped(&lp), "the block still holds it");
    s.helper_leave(1).unwrap();
    assert!(!lp.is_suspended() && running(&lp), "the last holder gone, it runs");
    lp.synchronize().unwrap();
    assert!(lp.check().unwrap().ok());
    s.close().unwrap();
}

/// A set suspends as the user does: a member the helper holds becomes the user's too, and the
/// set's resume releases only the user's holds.
#[test]
fn sets_hold_as_the_user_does() {
    let s = host();
    let a = s.create_lp_stream(Level::Lv3).unwrap();
    let b = s.create_lp_stream(Level::Lv3).unwrap();
    s.helper_register(&a, 0).unwrap();
    s.helper_enter(1).unwrap();
    s.suspend_set(&[a.clone(), b.clone()]).unwrap();
    s.resume_set(&[a.clone(), b.clone()]).unwrap();
    assert!(a.is_suspended() && stopped(&a), "the block still holds a");
    assert!(!b.is_suspended() && running(&b));
    s.helper_leave(1).unwrap();
    assert!(!a.is_suspended() && running(&a));
    s.close().unwrap();
}

#[test]
fn delays_past_the_maximum_are_refused_up_front() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    let hp = s.hp_stream().unwrap();
    for ns in [MAX_DELAY_NS + 1, u64::MAX] {
        let e = lp.submit_delay(ns).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "LP {ns}: {e}");
        assert!(e.message.contains(&MAX_DELAY_NS.to_string()), "names the maximum: {e}");
        let e = hp.submit_delay(ns).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "HP {ns}: {e}");
    }
    assert_eq!(lp.check().unwrap().submitted, 0, "nothing refused was submitted");
    assert!(within(CLOSE_WAIT * 10, move || s.close()).is_some_and(|r| r.is_ok()));
}

/// Close with a command of the maximum delay running on the LP and the HP stream: it waits
/// [`CLOSE_WAIT`], then abandons (the host device kills those workers) and says so; it returns
/// long before the commands would have ended.
#[test]
fn close_is_bounded_and_says_what_it_abandoned() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    let hp = s.hp_stream().unwrap();
    lp.submit_delay(MAX_DELAY_NS).unwrap();
    lp.submit_delay(MAX_DELAY_NS).unwrap();
    hp.submit_delay(MAX_DELAY_NS).unwrap();
    let pids = lp.host_pids();
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let closing = s.clone();
    let r = within(Duration::from_nanos(MAX_DELAY_NS) * 3, move || closing.close())
        .expect("close returned (bounded by the test at three times the command)");
    let took = t0.elapsed();
    let e = r.expect_err("close abandoned work: it says so");
    assert_eq!(e.kind, ErrorKind::Abandoned, "{e}");
    assert!(
        e.message.contains("low-priority") && e.message.contains("high-priority"),
        "names both streams: {e}"
    );
    assert!(took >= CLOSE_WAIT, "close waited its grace first ({took:?})");
    assert!(
        took < Duration::from_nanos(MAX_DELAY_NS) / 2,
        "close returned long before the command would have ended ({took:?})"
    );
    for p in pids {
        // Killed (SIGKILL is delivered asynchronously): gone, or a zombie until the stream's
        // last handle is dropped (which reaps it).
        let dead = || proc_state(p).is_err() || proc_state(p).is_ok_and(|c| c == 'Z');
        let t = Instant::now();
        while !dead() && t.elapsed() < CLOSE_WAIT {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            dead(),
            "worker {p} of the abandoned stream is killed: {:?}",
            proc_state(p)
        );
    }
    assert_eq!(lp.submit_delay(MS).unwrap_err().kind, ErrorKind::Closed);
    assert_eq!(hp.submit_delay(MS).unwrap_err().kind, ErrorKind::Closed);
    assert!(s.close().is_ok(), "closing again is a no-op");
}

/// What finishes within the grace is waited for (the old "in flight complete" holds for
/// ordinary work): close returns OK, having waited for the command.
#[test]
fn close_waits_for_short_work_in_flight() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    let t = CLOSE_WAIT / 100; // CPU time: far inside the wait even on a loaded machine
    lp.submit_delay(u64::try_from(t.as_nanos()).unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    let closing = s.clone();
    let r = within(CLOSE_WAIT * 10, move || closing.close()).expect("close returned");
    assert!(r.is_ok(), "{r:?}");
    assert!(t0.elapsed() < CLOSE_WAIT, "waited only for the command");
    assert_eq!(lp.check().unwrap().completed, 1, "the command in flight completed");
}

/// One stream closed alone is bounded the same way.
#[test]
fn a_stream_close_is_bounded_too() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv1).unwrap();
    lp.submit_delay(MAX_DELAY_NS).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let (closing, id) = (s.clone(), lp.id());
    let r = within(Duration::from_nanos(MAX_DELAY_NS) * 3, move || closing.close_stream(id)).expect("returned");
    assert_eq!(r.unwrap_err().kind, ErrorKind::Abandoned);
    let other = s.create_lp_stream(Level::Lv3).unwrap();
    other.submit_delay(MS).unwrap();
    other.synchronize().unwrap();
    assert!(other.check().unwrap().ok(), "the session goes on");
    s.close().unwrap();
}

/// Hostile orderings around close: a leave after close is CLOSED (close ended every block),
/// submits racing with close from another thread each either land or say CLOSED, never hang.
#[test]
fn calls_racing_with_close_fail_cleanly() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    s.helper_register(&lp, 0).unwrap();
    s.helper_enter(1).unwrap();
    let submitter = {
        let lp = lp.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + CLOSE_WAIT * 10;
            let mut refused = 0;
            while refused < 100 && Instant::now() < deadline {
                match lp.submit_delay(1_000) {
                    Ok(_) if refused > 0 => panic!("a submit landed after one was refused as closed"),
                    Ok(_) => {}
                    Err(e) if e.kind == ErrorKind::Closed => refused += 1,
                    Err(e) => panic!("a submit racing with close: {e}"),
                }
            }
            refused
        })
    };
    std::thread::sleep(Duration::from_millis(2));
    let closing = s.clone();
    let r = within(CLOSE_WAIT * 10, move || closing.close()).expect("close returned");
    assert!(
        r.is_ok() || r.as_ref().is_err_and(|e| e.kind == ErrorKind::Abandoned),
        "{r:?}"
    );
    let refused = within(CLOSE_WAIT * 10, move || submitter.join().unwrap()).expect("the submitter finished");
    assert!(refused > 0, "submits after close are refused");
    assert_eq!(s.helper_leave(1).unwrap_err().kind, ErrorKind::Closed);
    assert_eq!(lp.resume().unwrap_err().kind, ErrorKind::Closed);
    assert_eq!(lp.suspend().unwrap_err().kind, ErrorKind::Closed);
}

/// Streams created while close runs (a worker spawn takes milliseconds) are either refused or
/// closed by it: none is left open on a closed session, accepting work nobody will close.
#[test]
fn no_stream_outlives_a_close_that_raced_with_its_creation() {
    for _ in 0..3 {
        let s = host();
        let creator = {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut made = Vec::new();
                let deadline = Instant::now() + CLOSE_WAIT * 10;
                while Instant::now() < deadline {
                    match s.create_lp_stream(Level::Lv3) {
                        Ok(lp) => made.push(lp),
                        Err(e) if e.kind == ErrorKind::Closed => break,
                        Err(e) => panic!("create racing with close: {e}"),
                    }
                    if let Err(e) = s.hp_stream() {
                        assert_eq!(e.kind, ErrorKind::Closed, "{e}");
                        break;
                    }
                }
                made
            })
        };
        std::thread::sleep(Duration::from_millis(30));
        let closing = s.clone();
        assert!(within(CLOSE_WAIT * 10, move || closing.close()).is_some_and(|r| r.is_ok()));
        let made = within(CLOSE_WAIT * 10, move || creator.join().unwrap()).expect("the creator finished");
        for lp in &made {
            assert_eq!(
                lp.submit_delay(MS).unwrap_err().kind,
                ErrorKind::Closed,
                "a stream left open"
            );
        }
        assert!(s.hp_stream().is_err_and(|e| e.kind == ErrorKind::Closed));
    }
}

/// A session dropped without close (Rust drop, Python garbage collection) closes the same
/// bounded way, and says what it abandoned through the events it cannot return.
#[test]
fn a_dropped_session_reports_what_it_abandoned() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    lp.submit_delay(MAX_DELAY_NS).unwrap();
    drop(lp);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        within(Duration::from_nanos(MAX_DELAY_NS) / 2, move || drop(s)).is_some(),
        "the drop returned long before the command would have ended"
    );
    let events = preempt_api::take_events();
    assert!(
        events
            .iter()
            .any(|e| e.contains("closing on drop") && e.contains("abandoned")),
        "{events:?}"
    );
}
