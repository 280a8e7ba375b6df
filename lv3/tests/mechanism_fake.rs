//! The Lv3 mechanisms against a recording fake of amdkfd that models the kernel's answers as
//! read from Linux 6.12 (docs/kfd-facts.md#preemption-routes; kfd_chardev.c, kfd_debug.c, kfd_device_queue_manager.c).
//! What the fake cannot show (the CWSR save, the runlist, timing) needs hardware.
//!
//! One test binary, long on purpose: each binary links the crate and its device stack again, which
//! costs a 2-core CI machine minutes.
use kfd::*;
use lv3::mechanism::*;
use nix::errno::Errno;
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Update(QueueId, QueueUpdate),
    RuntimeEnable,
    RuntimeDisable,
    DbgEnable(u64),
    DbgDisable,
    Suspend(Vec<QueueId>, u64),
    Resume(Vec<QueueId>),
    Snapshot(u64),
}

#[derive(Debug, Clone, Copy)]
struct FakeQueue {
    ring: u64,
    size: u32,
    active: bool,
    suspended: bool,
    new: bool,
}

#[derive(Debug, Default)]
struct State {
    log: Vec<Call>,
    runtime: bool,
    debug: bool,
    queues: BTreeMap<QueueId, FakeQueue>,
    /// The next N resumes (UPDATE_QUEUE with a percentage, or RESUME_QUEUES) fail with EIO.
    fail_resumes: u32,
    /// The next N UPDATE_QUEUE disables (percentage 0) fail with EIO after the properties
    /// changed (the queue is left inactive), as a failing scheduler update would.
    fail_disables: u32,
    /// Another debugger enables between our probe and our ENABLE (ENABLE answers EALREADY).
    enable_race: bool,
    /// A call that would block in the real kernel was made (must never happen).
    blocked: Option<&'static str>,
}

/// A cheap-clone handle: the mechanism owns one, the test keeps another to inspect.
#[derive(Debug, Clone, Default)]
struct Fake(Arc<Mutex<State>>);

const GPU: u32 = 0x1234;

impl Fake {
    fn st(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Creates a queue as the runtime would; it carries EC_QUEUE_NEW if debugging is on.
    fn create_queue(&self, id: QueueId, ring: u64, size: u32) -> QueueTarget {
        let mut s = self.st();
        let new = s.debug;
        s.queues.insert(
            id,
            FakeQueue {
                ring,
                size,
                active: true,
                suspended: false,
                new,
            },
        );
        QueueTarget {
            queue_id: id,
            gpu_id: GPU,
            ring_base_address: ring,
            ring_size: size,
            priority: 7,
            percentage: 100,
        }
    }
    fn log(&self) -> Vec<Call> {
        self.st().log.clone()
    }
    fn q(&self, id: QueueId) -> FakeQueue {
        self.st().queues[&id]
    }
    fn running(&self, id: QueueId) -> bool {
        let q = self.q(id);
        q.active && !q.suspended
    }
}

fn err(op: Op, q: Option<QueueId>, e: Errno) -> KfdError {
    KfdError::new(op, q, e)
}

impl KfdOps for Fake {
    fn version(&self) -> kfd::Result<KfdVersion> {
        Ok(KfdVersion { major: 1, minor: 17 })
    }

    /// kfd_ioctl_update_queue: argument checks (EINVAL) first, then the queue lookup and ring
    /// validation (EFAULT).
    fn update_queue(&self, id: QueueId, u: &QueueUpdate) -> kfd::Result<()> {
        let mut s = self.st();
        s.log.push(Call::Update(id, *u));
        let e = |n| Err(err(Op::UpdateQueue, Some(id), n));
        if u.percentage > 100 || u.priority > 15 || (u.ring_size != 0 && !u.ring_size.is_power_of_two()) {
            return e(Errno::EINVAL);
        }
        let Some(q) = s.queues.get(&id).copied() else {
            return e(Errno::EFAULT);
        };
        if u.ring_base_address != 0 {
            if (u.ring_base_address, u.ring_size) != (q.ring, q.size) {
                return e(Errno::EFAULT);
            }
            if u.percentage > 0 && s.fail_resumes > 0 {
                s.fail_resumes -= 1;
                return e(Errno::EIO);
            }
        }
        if u.percentage == 0 && s.fail_disables > 0 {
            s.fail_disables -= 1;
            s.queues.get_mut(&id).unwrap().active = false;
            return e(Errno::EIO);
        }
        s.queues.get_mut(&id).unwrap().active = u.ring_base_address != 0 && u.percentage > 0;
        Ok(())
    }

    fn runtime_enable(&self, _r_debug: u64) -> kfd::Result<u32> {
        let mut s = self.st();
        s.log.push(Call::RuntimeEnable);
        if s.debug {
            s.blocked = Some("RUNTIME_ENABLE while debugging is on");
            return Err(err(Op::RuntimeEnable, None, Errno::EINTR));
        }
        if s.runtime {
            return Err(err(Op::RuntimeEnable, None, Errno::EBUSY));
        }
        s.runtime = true;
        Ok(0)
    }

    fn runtime_disable(&self) -> kfd::Result<()> {
        let mut s = self.st();
        s.log.push(Call::RuntimeDisable);
        if s.debug {
            s.blocked = Some("RUNTIME disable while debugging is on");
            return Err(err(Op::RuntimeEnable, None, Errno::EINTR));
        }
        s.runtime = false;
        Ok(())
    }

    fn dbg_enable(&self, mask: u64, _fd: BorrowedFd<'_>) -> kfd::Result<RuntimeInfo> {
        let mut s = self.st();
        s.log.push(Call::DbgEnable(mask));
        if s.debug || s.enable_race {
            return Err(err(Op::DbgTrap(DbgOp::Enable), None, Errno::EALREADY));
        }
        s.debug = true;
        Ok(RuntimeInfo {
            r_debug: 0,
            runtime_state: u32::from(s.runtime),
            ttmp_setup: false,
        })
    }

    /// DISABLE resumes every suspended queue of the process.
    fn dbg_disable(&self) -> kfd::Result<()> {
        let mut s = self.st();
        s.log.push(Call::DbgDisable);
        if !s.debug {
            return Err(err(Op::DbgTrap(DbgOp::Disable), None, Errno::EINVAL));
        }
        s.debug = false;
        s.queues.values_mut().for_each(|q| q.suspended = false);
        Ok(())
    }

    /// suspend_queues: EINVAL before ENABLE, EPERM without the runtime; a new queue is skipped
    /// (stays INVALID); already suspended counts as success; the clear mask is applied only
    /// when some queue was suspended.
    fn suspend_queues(&self, ids: &[QueueId], _g: GracePeriod, clear: u64) -> kfd::Result<Vec<QueueStatus>> {
        let mut s = self.st();
        s.log.push(Call::Suspend(ids.to_vec(), clear));
        let op = Op::DbgTrap(DbgOp::SuspendQueues);
        if !s.debug {
            return Err(err(op, None, Errno::EINVAL));
        }
        if !s.runtime {
            return Err(err(op, None, Errno::EPERM));
        }
        let mut out = Vec::new();
        for &id in ids {
            let state = match s.queues.get_mut(&id) {
                Some(q) if !q.new => {
                    q.suspended = true;
                    QueueState::Ok
                }
                _ => QueueState::Invalid,
            };
            out.push(QueueStatus { id, state });
        }
        if clear & EC_QUEUE_NEW_MASK != 0 && out.iter().any(|o| o.state == QueueState::Ok) {
            ids.iter()
                .for_each(|id| _ = s.queues.get_mut(id).map(|q| q.new = false));
        }
        Ok(out)
    }

    fn resume_queues(&self, ids: &[QueueId]) -> kfd::Result<Vec<QueueStatus>> {
        let mut s = self.st();
        s.log.push(Call::Resume(ids.to_vec()));
        let op = Op::DbgTrap(DbgOp::ResumeQueues);
        if !s.debug {
            return Err(err(op, None, Errno::EINVAL));
        }
        if !s.runtime {
            return Err(err(op, None, Errno::EPERM));
        }
        if s.fail_resumes > 0 {
            s.fail_resumes -= 1;
            return Err(err(op, ids.first().copied(), Errno::EIO));
        }
        let out = ids
            .iter()
            .map(|&id| match s.queues.get_mut(&id) {
                Some(q) => {
                    q.suspended = false; // not suspended: a no-op that still counts as Ok
                    QueueStatus {
                        id,
                        state: QueueState::Ok,
                    }
                }
                None => QueueStatus {
                    id,
                    state: QueueState::Invalid,
                },
            })
            .collect();
        Ok(out)
    }

    /// Reports each queue's status as it was, then clears the mask (set_queue_snapshot_entry).
    fn queue_snapshot(&self, clear: u64) -> kfd::Result<Vec<QueueSnapshot>> {
        let mut s = self.st();
        s.log.push(Call::Snapshot(clear));
        if !s.debug {
            return Err(err(Op::DbgTrap(DbgOp::GetQueueSnapshot), None, Errno::EINVAL));
        }
        let mut out = Vec::new();
        for (&id, q) in s.queues.iter_mut() {
            out.push(QueueSnapshot {
                exception_status: if q.new { EC_QUEUE_NEW_MASK } else { 0 },
                ring_base_address: q.ring,
                write_pointer_address: 0,
                read_pointer_address: 0,
                ctx_save_restore_address: 0,
                queue_id: id,
                gpu_id: GPU,
                ring_size: q.size,
                queue_type: QueueType::ComputeAql,
                ctx_save_restore_area_size: 0,
            });
            if clear & EC_QUEUE_NEW_MASK != 0 {
                q.new = false;
            }
        }
        Ok(out)
    }

    fn query_debug_event(&self, _mask: u64) -> kfd::Result<DebugEvent> {
        Err(err(Op::DbgTrap(DbgOp::QueryDebugEvent), None, Errno::EAGAIN))
    }

    fn send_runtime_event(&self, _mask: u64, _gpu_id: u32, _q: QueueId) -> kfd::Result<()> {
        Ok(())
    }
}

const RING: u64 = 0x7f00_0010_0000;
const MIB: u32 = 1 << 20;
fn quick() -> RetryPolicy {
    RetryPolicy {
        tries: 3,
        first_backoff: Duration::from_micros(10),
    }
}

fn restore(q: &QueueTarget) -> QueueUpdate {
    QueueUpdate {
        ring_base_address: q.ring_base_address,
        ring_size: q.ring_size,
        percentage: 100,
        pm4_target_xcc: 0,
        priority: q.priority,
    }
}

fn count(f: &Fake, pred: impl Fn(&Call) -> bool) -> usize {
    f.log().iter().filter(|c| pred(c)).count()
}

// Queue ids are unique per test: the signal registry is process-wide and tests run in parallel.

#[test]
fn update_queue_restores_the_original_ring_size_percentage_and_priority() {
    let f = Fake::default();
    let q = f.create_queue(1, RING, MIB);
    let p = Preemptor::new(UpdateQueue::new(f.clone())).with_retry(quick());
    let g = p.suspend(&q).unwrap();
    assert!(!f.running(1));
    assert_eq!(
        (g.report().mechanism, g.report().queue_id),
        (MechanismKind::UpdateQueue, 1)
    );
    g.resume().unwrap();
    assert!(f.running(1));
    assert_eq!(
        f.log(),
        vec![Call::Update(1, restore(&q).pause()), Call::Update(1, restore(&q))]
    );
    assert_eq!(
        restore(&q).pause().ring_base_address,
        RING,
        "the ring is kept, as ROCr and kfdtest do"
    );
    assert_eq!(restore(&q).pause().percentage, 0);
}

/// A disable that fails after the kernel changed the queue is followed by one restore, so the queue
/// is not left inactive behind an error.
#[test]
fn update_queue_restores_once_after_a_failed_disable() {
    let f = Fake::default();
    let q = f.create_queue(13, RING, MIB);
    let p = Preemptor::new(UpdateQueue::new(f.clone())).with_retry(quick());
    f.st().fail_disables = 1;
    let e = p.suspend(&q).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EIO), "{e}");
    assert!(f.running(13), "the restore after the failed disable made it run again");
    assert_eq!(
        f.log(),
        vec![Call::Update(13, restore(&q).pause()), Call::Update(13, restore(&q))]
    );
    assert!(!p.is_suspended(&q));
    // A refusal before anything changed (EFAULT: no such queue) is not followed by a restore.
    let ghost = QueueTarget { queue_id: 14, ..q };
    let before = f.log().len();
    let e = p.suspend(&ghost).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EFAULT), "{e}");
    assert_eq!(f.log().len(), before + 1, "one UPDATE_QUEUE, no restore: {:?}", f.log());
}

#[test]
fn update_queue_reports_the_kernels_errnos() {
    let f = Fake::default();
    let q = f.create_queue(2, RING, MIB);
    let p = Preemptor::new(UpdateQueue::new(f.clone()));
    let ghost = QueueTarget { queue_id: 0xdead, ..q };
    let e = p.suspend(&ghost).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EFAULT));
    assert!(
        e.to_string().contains("queue 57005") && e.to_string().contains("unknown queue id"),
        "{e}"
    );
    assert!(!p.is_suspended(&ghost), "a failed suspend leaves no guard behind");

    let m = UpdateQueue::new(f.clone());
    for wrong in [
        QueueTarget {
            ring_base_address: RING + 4096,
            ..q
        },
        QueueTarget {
            ring_size: MIB / 2,
            ..q
        },
    ] {
        assert_eq!(
            m.resume(&wrong).unwrap_err().errno(),
            Some(Errno::EFAULT),
            "restore with another ring: {wrong:?}"
        );
    }
    // Targets that could not be restored are refused before the kernel sees anything.
    let n = f.log().len();
    for bad in [
        QueueTarget { percentage: 101, ..q },
        QueueTarget { percentage: 0, ..q },
        QueueTarget { ring_size: 3000, ..q },
    ] {
        assert!(
            matches!(p.suspend(&bad), Err(MechError::BadTarget { queue: 2, .. })),
            "{bad:?}"
        );
    }
    assert_eq!(f.log().len(), n);
    // The fake itself answers EINVAL as the kernel does.
    assert_eq!(
        f.update_queue(
            2,
            &QueueUpdate {
                percentage: 101,
                ..restore(&q)
            }
        )
        .unwrap_err()
        .errno,
        Errno::EINVAL
    );
}

#[test]
fn dbg_trap_enables_the_runtime_first_and_teardown_restores_what_it_found() {
    let f = Fake::default();
    let m = DbgTrap::setup(f.clone(), GracePeriod::Clocks1k(2)).unwrap();
    assert!(m.enabled_runtime() && m.enabled_debug());
    assert_eq!(
        f.log(),
        vec![Call::Snapshot(0), Call::RuntimeEnable, Call::DbgEnable(0)]
    );
    drop(m);
    assert_eq!(f.log()[3..], [Call::DbgDisable, Call::RuntimeDisable]);
    let s = f.st();
    assert!(!s.runtime && !s.debug);
    assert_eq!(s.blocked, None, "no call that blocks in the kernel was made");
}

#[test]
fn dbg_trap_in_a_hip_process_leaves_rocrs_runtime_enable_alone() {
    let f = Fake::default();
    f.st().runtime = true; // ROCr did RUNTIME_ENABLE at load.
    let m = DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap();
    assert!(!m.enabled_runtime() && m.enabled_debug());
    m.teardown().unwrap();
    m.teardown().unwrap(); // idempotent
    drop(m);
    assert_eq!(count(&f, |c| *c == Call::RuntimeDisable), 0);
    assert_eq!(count(&f, |c| *c == Call::DbgDisable), 1);
    assert!(f.st().runtime && !f.st().debug);
}

#[test]
fn dbg_trap_refuses_a_process_someone_else_debugs_and_touches_nothing() {
    for runtime_on in [true, false] {
        let f = Fake::default();
        f.st().runtime = runtime_on;
        f.st().debug = true; // rocgdb or ROCr's core dump
        let e = DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap_err();
        assert!(matches!(e, MechError::Session(SessionError::DebuggerPresent(_))), "{e}");
        assert!(e.to_string().contains("another debugger"), "{e}");
        assert_eq!(
            f.log(),
            vec![Call::Snapshot(0)],
            "no RUNTIME_ENABLE (it would block), no DISABLE"
        );
        let s = f.st();
        assert!(s.debug && s.runtime == runtime_on && s.blocked.is_none());
    }
    // The race the probe cannot see: another debugger enables between our probe and ENABLE.
    // ENABLE says EALREADY; our own RUNTIME_ENABLE is undone, their session is not touched.
    let f = Fake::default();
    f.st().enable_race = true;
    let e = DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap_err();
    assert!(matches!(e, MechError::Session(SessionError::DebuggerPresent(_))), "{e}");
    assert_eq!(
        f.log(),
        vec![
            Call::Snapshot(0),
            Call::RuntimeEnable,
            Call::DbgEnable(0),
            Call::RuntimeDisable
        ]
    );
    assert!(!f.st().runtime);
}

#[test]
fn dbg_trap_clears_queue_new_before_suspending() {
    let f = Fake::default();
    let p = Preemptor::new(DbgTrap::setup(f.clone(), GracePeriod::Clocks1k(1)).unwrap()).with_retry(quick());
    let q = f.create_queue(5, RING, MIB); // created while debugging is on: EC_QUEUE_NEW
    assert!(f.q(5).new);
    let n = f.log().len();
    let g = p.suspend(&q).unwrap();
    assert!(g.report().cleared_queue_new);
    assert_eq!(
        f.log()[n..],
        [
            Call::Snapshot(EC_QUEUE_NEW_MASK),
            Call::Suspend(vec![5], EC_QUEUE_NEW_MASK)
        ]
    );
    assert!(f.q(5).suspended && !f.q(5).new);
    g.resume().unwrap();
    assert_eq!(f.log().last(), Some(&Call::Resume(vec![5])));
    assert!(f.running(5));

    // The model: without the snapshot a new queue stays INVALID, and SUSPEND's own clear mask
    // does not clear it when nothing was suspended.
    f.create_queue(6, RING, MIB);
    for _ in 0..2 {
        let st = f.suspend_queues(&[6], GracePeriod::Default, EC_QUEUE_NEW_MASK).unwrap();
        assert_eq!(st[0].state, QueueState::Invalid);
    }
}

#[test]
fn dbg_trap_names_the_queue_the_kernel_refused() {
    let f = Fake::default();
    let p = Preemptor::new(DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap());
    let ghost = QueueTarget {
        queue_id: 99,
        gpu_id: GPU,
        ring_base_address: RING,
        ring_size: MIB,
        priority: 0,
        percentage: 100,
    };
    let e = p.suspend(&ghost).unwrap_err();
    assert_eq!(
        e,
        MechError::QueueRefused {
            op: DbgOp::SuspendQueues,
            queue: 99,
            state: QueueState::Invalid
        }
    );
    assert!(e.to_string().contains("refused queue 99: INVALID"), "{e}");
    assert!(!p.is_suspended(&ghost));
}

#[test]
fn a_failed_resume_is_retried_then_reported_never_swallowed() {
    let f = Fake::default();
    let q = f.create_queue(7, RING, MIB);
    let p = Preemptor::new(UpdateQueue::new(f.clone())).with_retry(quick());
    let restores = |f: &Fake| count(f, |c| *c == Call::Update(7, restore(&q)));

    f.st().fail_resumes = 2;
    p.suspend(&q).unwrap().resume().unwrap();
    assert_eq!(restores(&f), 3, "two failures, then success on the third try");
    assert!(f.running(7));

    f.st().fail_resumes = 10;
    let e = p.suspend(&q).unwrap().resume().unwrap_err();
    assert!(matches!(&e, MechError::ResumeFailed { queue: 7, tries: 3, .. }), "{e}");
    assert_eq!(e.errno(), Some(Errno::EIO));
    assert!(e.to_string().contains("NOT resumed after 3 tries"), "{e}");
    assert_eq!(restores(&f), 6);
    assert!(!f.running(7));
    let label = q.label(MechanismKind::UpdateQueue);
    assert!(
        lv3::signals::registered().contains(&label),
        "left for the signal handler's last try"
    );
    assert!(
        !p.is_suspended(&q),
        "the guard is gone; a raw resume or a new guard may retry"
    );

    // The drop path tries as hard (and reports the failure as a kfd::events warning).
    f.st().fail_resumes = 10;
    drop(p.suspend(&q).unwrap());
    assert_eq!(restores(&f), 9);
    f.st().fail_resumes = 0;
    p.suspend(&q).unwrap().resume().unwrap();
    assert!(f.running(7));
}

/// A failed resume leaves its registry entry for the signal handler, but that entry must not keep
/// dbg-trap's mechanism alive: once the Preemptor is dropped (the end of a run, or any error path),
/// debug mode goes off (DISABLE resumes every queue). An entry that held the mechanism would keep
/// debug mode on until exit, where HIP's teardown blocks.
#[test]
fn a_failed_dbg_trap_resume_does_not_keep_debug_mode_on() {
    let f = Fake::default();
    let q = f.create_queue(12, RING, MIB);
    let p = Preemptor::new(DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap()).with_retry(quick());
    f.st().fail_resumes = 10;
    let e = p.suspend(&q).unwrap().resume().unwrap_err();
    assert!(matches!(&e, MechError::ResumeFailed { queue: 12, .. }), "{e}");
    assert!(f.q(12).suspended, "the kernel kept it suspended");
    assert!(lv3::signals::registered().contains(&q.label(MechanismKind::DbgTrap)));
    assert!(f.st().debug);
    drop(p);
    assert!(
        !f.st().debug,
        "dropping the Preemptor must turn debug mode off despite the registry entry"
    );
    assert!(f.running(12), "DISABLE resumed the queue the guard could not");
    assert_eq!(count(&f, |c| *c == Call::DbgDisable), 1);
    assert_eq!(
        count(&f, |c| *c == Call::RuntimeDisable),
        1,
        "and the runtime enable it made is undone"
    );
}

#[test]
fn guards_resume_on_drop_and_while_a_panic_unwinds() {
    let f = Fake::default();
    let q = f.create_queue(8, RING, MIB);
    let p = Preemptor::new(DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap());
    {
        let _g = p.suspend(&q).unwrap();
        assert!(f.q(8).suspended && p.is_suspended(&q));
        assert!(lv3::signals::registered().contains(&q.label(MechanismKind::DbgTrap)));
    }
    assert!(f.running(8) && !p.is_suspended(&q));
    assert!(
        !lv3::signals::registered().contains(&q.label(MechanismKind::DbgTrap)),
        "deregistered by the resume"
    );

    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = p.suspend(&q).unwrap();
        assert!(f.q(8).suspended);
        panic!("measurement failed");
    }));
    assert!(r.is_err());
    assert!(f.running(8) && !p.is_suspended(&q));
    assert_eq!(count(&f, |c| matches!(c, Call::Resume(_))), 2);
}

#[test]
fn double_suspend_is_refused_without_a_kernel_call() {
    let f = Fake::default();
    let q = f.create_queue(9, RING, MIB);
    let p = Preemptor::new(UpdateQueue::new(f.clone()));
    let g = p.suspend(&q).unwrap();
    let n = f.log().len();
    assert_eq!(
        p.suspend(&q).unwrap_err(),
        MechError::AlreadySuspended { queue: 9, gpu_id: GPU }
    );
    assert_eq!(f.log().len(), n);
    g.resume().unwrap();
    p.suspend(&q).unwrap().resume().unwrap();
}

/// With the guard API a resume without a suspend cannot be written (`resume` consumes the
/// guard `suspend` returned). The raw trait path is passed to the kernel, which treats it as a
/// no-op: the queue keeps running.
#[test]
fn raw_resume_without_suspend_is_a_kernel_no_op() {
    let f = Fake::default();
    let dbg = DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap();
    let q = f.create_queue(10, RING, MIB);
    dbg.resume(&q).unwrap();
    assert!(f.running(10));
    let uq = UpdateQueue::new(f.clone());
    uq.resume(&q).unwrap();
    assert!(f.running(10));
    assert_eq!(f.log().last(), Some(&Call::Update(10, restore(&q))));
}

#[test]
fn disable_resumes_every_queue_and_teardown_waits_for_guards() {
    let f = Fake::default();
    let (a, b) = (f.create_queue(11, RING, MIB), f.create_queue(12, RING + (1 << 24), MIB));
    let dbg = DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap();
    dbg.suspend(&a).unwrap();
    dbg.suspend(&b).unwrap();
    dbg.teardown().unwrap();
    assert!(f.running(11) && f.running(12));
    assert!(
        matches!(dbg.suspend(&a), Err(MechError::Unavailable { .. })),
        "no suspends after teardown"
    );

    let p = Preemptor::new(DbgTrap::setup(f.clone(), GracePeriod::Default).unwrap());
    let g = p.suspend(&a).unwrap();
    assert!(matches!(p.teardown(), Err(MechError::Unavailable { .. })));
    assert!(f.q(11).suspended, "refused teardown resumed nothing");
    g.resume().unwrap();
    p.teardown().unwrap();
    assert!(!f.st().debug && !f.st().runtime);
}

#[test]
fn auto_falls_back_when_dbg_trap_setup_fails_at_run_time() {
    let facts = ProbeFacts {
        kfd: Some(Ok(KfdVersion { major: 1, minor: 17 })),
        sched_policy: Some(0),
        cwsr_enable: Some(1),
        gpu_nodes: 1,
        trap_debug_support: true,
        trap_debug_firmware: true,
        patched_ioctl: None,
    };
    assert_eq!(choose(&facts), Ok(MechanismKind::DbgTrap));
    let f = Fake::default();
    f.st().debug = true; // rocgdb attached after the facts were gathered
    let (m, skipped) = build_auto(&facts, || Ok(f.clone()), GracePeriod::Default).unwrap();
    assert_eq!(m.kind(), MechanismKind::UpdateQueue);
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].starts_with("preempt-queues: not usable"), "{skipped:?}");
    assert!(
        skipped[1].starts_with("dbg-trap: setup failed") && skipped[1].contains("another debugger"),
        "{skipped:?}"
    );
}

/// A mechanism whose resume writes a marker to stdout: what the signal child registers.
struct MarkerMech;

impl Preempt for MarkerMech {
    fn kind(&self) -> MechanismKind {
        MechanismKind::UpdateQueue
    }
    fn suspend(&self, q: &QueueTarget) -> std::result::Result<SuspendReport, MechError> {
        Ok(SuspendReport {
            mechanism: MechanismKind::UpdateQueue,
            queue_id: q.queue_id,
            total: Duration::ZERO,
            preempt_call: Duration::ZERO,
            cleared_queue_new: false,
            kernel: None,
        })
    }
    fn resume(&self, q: &QueueTarget) -> std::result::Result<(), MechError> {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "MARKER resumed queue {}", q.queue_id);
        let _ = out.flush();
        Ok(())
    }
}

const CHILD_ENV: &str = "PREEMPT_TEST_SIGNALS_CHILD";

/// The child half of the signal test (a no-op unless the parent set `PREEMPT_TEST_SIGNALS_CHILD`).
#[test]
fn signal_child_mode() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // What an application's callback does: report each resume, then exit as the shell expects.
    let installed = lv3::signals::install_resume_on_signals(|r| {
        eprintln!("{} received: resuming {} suspended queue(s)", r.signal, r.results.len());
        for (label, res) in &r.results {
            eprintln!("  {label}: {res:?}");
        }
        lv3::signals::exit_now(lv3::signals::exit_code(r.signal));
    })
    .unwrap();
    let q = QueueTarget {
        queue_id: 77,
        gpu_id: GPU,
        ring_base_address: RING,
        ring_size: MIB,
        priority: 7,
        percentage: 100,
    };
    let _guard = Preemptor::new(MarkerMech).suspend(&q).unwrap();
    println!("READY unblocked={:?}", installed.unblocked_threads);
    std::thread::sleep(Duration::from_secs(20));
    eprintln!("signal_child_mode: no signal within 20 s");
    std::process::exit(1);
}

#[test]
fn sigterm_resumes_registered_queues_and_exits_143() {
    use nix::sys::signal::{SigSet, Signal, kill};
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    // libtest runs the child's test on a second thread; its main thread must block the signals
    // too or it takes SIGTERM with the default action. A blocked mask survives exec, so block
    // in this thread while spawning (as a CLI's `main` would block before any thread starts).
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block().unwrap();
    let spawned = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "signal_child_mode", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    set.thread_unblock().unwrap();
    let mut child = spawned.unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!(
                "child ended before READY: {:?}\nstdout: {seen}\nstderr: {err}",
                child.wait()
            );
        }
        seen.push_str(&line);
        // libtest prints "test signal_child_mode ... " without a newline before our line.
        if let Some(i) = line.find("READY") {
            assert_eq!(
                line[i..].trim(),
                "READY unblocked=[]",
                "every thread of the child must block SIGINT/SIGTERM"
            );
            break;
        }
    }
    kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    out.read_to_string(&mut seen).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    assert!(
        seen.contains("MARKER resumed queue 77"),
        "stdout: {seen}\nstderr: {err}"
    );
    assert_eq!(status.code(), Some(143), "stdout: {seen}\nstderr: {err}");
    assert!(
        err.contains("SIGTERM received: resuming 1 suspended queue(s)")
            && err.contains("update-queue gpu 0x1234 queue 77: Ok(())"),
        "{err}"
    );
}
