//! The Lv3 mechanisms against a real amdkfd: the project's QEMU guest (Linux 6.12, no GPU), where
//! the harness sets `PREEMPT_REQUIRE_KFD=1` so that a missing /dev/kfd fails instead of skipping.
//!
//! Without a GPU no queue exists, so each mechanism must fail on a made-up queue with the
//! kernel's own answer, and leave the process's debug and runtime state as it found it. KFD state
//! is per process and the harness runs this binary with --test-threads=1; every test starts from
//! "nothing enabled" and restores it, even when an assertion fails (see [`Restore`]).
use kfd::{DbgOp, GracePeriod, Kfd, KfdOps, Op, QueueState, SessionError};
use lv3::mechanism::{DbgTrap, MechError, MechanismKind, Preempt, Preemptor, QueueTarget, UpdateQueue};
use nix::errno::Errno;
use std::os::fd::{AsFd, OwnedFd};

use kfd::testing::kfd_or_skip;

const GHOST: QueueTarget = QueueTarget::NONEXISTENT;

/// The test's own handle on the process's KFD state. Dropping it puts the process back to
/// "nothing enabled", in the only order that cannot block: debug off, then runtime off.
struct Restore(Kfd);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = self.0.dbg_disable();
        let _ = self.0.runtime_disable();
    }
}

/// A DBG_TRAP ENABLE by the test itself; the pipe must outlive the session.
fn test_enable(k: &Kfd) -> Result<OwnedFd, kfd::KfdError> {
    let (rd, wr) = nix::unistd::pipe().unwrap();
    k.dbg_enable(0, wr.as_fd())?;
    drop(wr); // KFD holds its own reference to the write end; the read end stays open.
    Ok(rd)
}

/// After a mechanism is gone: debugging must be off (a fresh ENABLE succeeds), and the runtime
/// must be as `runtime_was_on` says (RUNTIME_ENABLE answers EBUSY only if it is still on).
fn assert_state_restored(k: &Kfd, runtime_was_on: bool) {
    let rd = test_enable(k).expect("debugging must be off after the mechanism's teardown");
    k.dbg_disable().unwrap();
    drop(rd);
    match k.runtime_enable(0) {
        Ok(_) => {
            assert!(!runtime_was_on, "the mechanism disabled a runtime it did not enable");
            k.runtime_disable().unwrap();
        }
        Err(e) => {
            assert_eq!(e.errno, Errno::EBUSY, "{e}");
            assert!(runtime_was_on, "the mechanism left its own runtime enable on");
        }
    }
    eprintln!(
        "observed: debug off, runtime {} after teardown",
        if runtime_was_on { "still on" } else { "off" }
    );
}

#[test]
fn update_queue_refuses_an_unknown_queue_with_efault() {
    let Some(kfd) = kfd_or_skip("update_queue_refuses_an_unknown_queue_with_efault") else {
        return;
    };
    let p = Preemptor::new(UpdateQueue::new(kfd));
    let e = p.suspend(&GHOST).unwrap_err();
    let MechError::Kfd {
        mechanism: MechanismKind::UpdateQueue,
        source,
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(
        (source.op, source.queue, source.errno),
        (Op::UpdateQueue, Some(0xdead), Errno::EFAULT)
    );
    assert!(e.to_string().contains("unknown queue id"), "{e}");
    assert!(!p.is_suspended(&GHOST));
    assert!(!lv3::signals::registered().contains(&GHOST.label(MechanismKind::UpdateQueue)));
    eprintln!("observed: update-queue suspend of queue 0xdead -> {e}");

    let e = p.mechanism().resume(&GHOST).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EFAULT));
    eprintln!("observed: update-queue raw resume of queue 0xdead -> {e}");
}

#[test]
fn dbg_trap_in_a_fresh_process_enables_both_and_disables_both() {
    let Some(kfd) = kfd_or_skip("dbg_trap_in_a_fresh_process_enables_both_and_disables_both") else {
        return;
    };
    let probe = Restore(Kfd::open().unwrap());
    let mech = DbgTrap::setup(kfd, GracePeriod::Clocks1k(1)).unwrap();
    assert!(
        mech.enabled_runtime() && mech.enabled_debug(),
        "nothing was enabled before"
    );
    let p = Preemptor::new(mech);
    let e = p.suspend(&GHOST).unwrap_err();
    assert_eq!(
        e,
        MechError::QueueRefused {
            op: DbgOp::SuspendQueues,
            queue: 0xdead,
            state: QueueState::Invalid
        }
    );
    assert!(e.to_string().contains("queue 57005"), "{e}");
    assert!(!p.is_suspended(&GHOST));
    eprintln!("observed: dbg-trap suspend of queue 0xdead -> {e}");
    let e = p.mechanism().resume(&GHOST).unwrap_err();
    assert!(
        matches!(
            e,
            MechError::QueueRefused {
                op: DbgOp::ResumeQueues,
                state: QueueState::Invalid,
                ..
            }
        ),
        "{e}"
    );
    drop(p); // teardown: DISABLE, then runtime disable
    assert_state_restored(&probe.0, false);
}

#[test]
fn dbg_trap_in_a_runtime_enabled_process_leaves_the_runtime_on() {
    let Some(kfd) = kfd_or_skip("dbg_trap_in_a_runtime_enabled_process_leaves_the_runtime_on") else {
        return;
    };
    let probe = Restore(Kfd::open().unwrap());
    probe.0.runtime_enable(0).unwrap(); // what ROCr does at load
    let mech = DbgTrap::setup(kfd, GracePeriod::Default).unwrap();
    assert!(!mech.enabled_runtime() && mech.enabled_debug());
    let e = mech.suspend(&GHOST).unwrap_err();
    assert!(
        matches!(
            e,
            MechError::QueueRefused {
                state: QueueState::Invalid,
                ..
            }
        ),
        "{e}"
    );
    mech.teardown().unwrap();
    drop(mech);
    assert_state_restored(&probe.0, true);
    probe.0.runtime_disable().unwrap();
}

#[test]
fn dbg_trap_refuses_a_process_that_is_already_debugged() {
    let Some(kfd) = kfd_or_skip("dbg_trap_refuses_a_process_that_is_already_debugged") else {
        return;
    };
    let probe = Restore(Kfd::open().unwrap());
    // Someone else's session, with and without the runtime on. Without it, a RUNTIME_ENABLE by
    // the mechanism would block this test forever: setup must detect the session first.
    for runtime_on in [true, false] {
        if runtime_on {
            probe.0.runtime_enable(0).unwrap();
        }
        let rd = test_enable(&probe.0).unwrap();
        let e = DbgTrap::setup(Kfd::open().unwrap(), GracePeriod::Default).unwrap_err();
        assert!(matches!(e, MechError::Session(SessionError::DebuggerPresent(_))), "{e}");
        eprintln!("observed: dbg-trap setup while debugged (runtime {runtime_on}) -> {e}");
        probe.0.queue_snapshot(0).expect("the other session must still be on");
        probe.0.dbg_disable().unwrap();
        drop(rd);
        match probe.0.runtime_enable(0) {
            Ok(_) => assert!(!runtime_on, "the mechanism disabled a runtime it did not enable"),
            Err(e) => assert!(runtime_on && e.errno == Errno::EBUSY, "{e}"),
        }
        probe.0.runtime_disable().unwrap();
    }
    drop(kfd);
}
