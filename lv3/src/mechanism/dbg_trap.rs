//! `dbg-trap`: the debugger API on this process itself (DBG_TRAP SUSPEND_QUEUES / RESUME_QUEUES).
//!
//! Preferred over update-queue because SUSPEND sets the queue's `is_suspended`, which nothing
//! else (ROCr's scratch reclaim toggling UPDATE_QUEUE) can undo. The price is a process-wide
//! self-debug session ([`kfd::DebugSession`]: runtime enable, then DBG_TRAP ENABLE, in the only
//! order that does not hang; see docs/kfd-facts.md#dbg_trap-suspend-and-resume), opened by
//! [`DbgTrap::setup`] and closed by teardown or drop (DISABLE resumes every suspended queue).
use super::{MechError, MechanismKind, Preempt, QueueTarget, SuspendReport};
use kfd::events::{self, Severity};
use kfd::{DbgOp, DebugSession, EC_QUEUE_NEW_MASK, GracePeriod, KfdOps, QueueState};
use std::time::Instant;

const KIND: MechanismKind = MechanismKind::DbgTrap;

/// The dbg-trap mechanism over any [`KfdOps`].
#[derive(Debug)]
pub struct DbgTrap<K: KfdOps> {
    session: DebugSession<K>,
    grace: GracePeriod,
}

impl<K: KfdOps> DbgTrap<K> {
    /// Opens the self-debug session. `grace` is how long the CP lets waves run before saving
    /// them (~1K GPU clocks per unit).
    pub fn setup(kfd: K, grace: GracePeriod) -> Result<Self, MechError> {
        let session = DebugSession::open(kfd).map_err(MechError::Session)?;
        Ok(DbgTrap { session, grace })
    }

    /// The KFD handle (e.g. for a GET_QUEUE_SNAPSHOT during discovery).
    pub fn kfd(&self) -> &K {
        self.session.kfd()
    }

    /// The self-debug session the mechanism runs on.
    pub fn session(&self) -> &DebugSession<K> {
        &self.session
    }

    pub fn grace(&self) -> GracePeriod {
        self.grace
    }

    /// Whether setup enabled the runtime (false when ROCr had done it already).
    pub fn enabled_runtime(&self) -> bool {
        self.session.enabled_runtime()
    }

    /// Whether debugging is on through this mechanism (true after setup until teardown).
    pub fn enabled_debug(&self) -> bool {
        self.session.is_open()
    }

    fn check_live(&self) -> Result<(), MechError> {
        if !self.session.is_open() {
            return Err(MechError::Unavailable {
                mechanism: KIND,
                why: "torn down (debug mode is off)".into(),
            });
        }
        Ok(())
    }
}

impl<K: KfdOps + Send + Sync> Preempt for DbgTrap<K> {
    fn kind(&self) -> MechanismKind {
        KIND
    }

    /// GET_QUEUE_SNAPSHOT clearing EC_QUEUE_NEW (a queue created while debugging is on cannot be
    /// suspended until that bit is cleared, and SUSPEND's own clear mask is only applied when some
    /// queue was suspended), then SUSPEND_QUEUES with EC_QUEUE_NEW in its clear mask too.
    fn suspend(&self, q: &QueueTarget) -> Result<SuspendReport, MechError> {
        self.check_live()?;
        let kfd = self.session.kfd();
        let t0 = Instant::now();
        let snap = kfd.queue_snapshot(EC_QUEUE_NEW_MASK).map_err(MechError::kfd(KIND))?;
        let cleared_queue_new = snap
            .iter()
            .any(|s| s.queue_id == q.queue_id && s.gpu_id == q.gpu_id && s.exception_status & EC_QUEUE_NEW_MASK != 0);
        let t1 = Instant::now();
        let st = kfd
            .suspend_queues(&[q.queue_id], self.grace, EC_QUEUE_NEW_MASK)
            .map_err(MechError::kfd(KIND))?;
        let preempt_call = t1.elapsed();
        match st.first().map(|s| s.state) {
            Some(QueueState::Ok) => Ok(SuspendReport {
                mechanism: KIND,
                queue_id: q.queue_id,
                total: t0.elapsed(),
                preempt_call,
                cleared_queue_new,
                kernel: None,
            }),
            state => {
                let state = state.unwrap_or(QueueState::Invalid);
                if state == QueueState::Error {
                    // The kernel marks the queue suspended before the failed unmap: undo that.
                    if let Err(e) = kfd.resume_queues(&[q.queue_id]) {
                        events::emit(
                            Severity::Warning,
                            "dbg-trap",
                            format!("queue {} may stay suspended after a failed suspend: {e}", q.queue_id),
                        );
                    }
                }
                Err(MechError::QueueRefused {
                    op: DbgOp::SuspendQueues,
                    queue: q.queue_id,
                    state,
                })
            }
        }
    }

    /// RESUME_QUEUES for this queue (a queue that is not suspended comes back Ok: no-op).
    fn resume(&self, q: &QueueTarget) -> Result<(), MechError> {
        self.check_live()?;
        let st = self
            .session
            .kfd()
            .resume_queues(&[q.queue_id])
            .map_err(MechError::kfd(KIND))?;
        match st.first().map(|s| s.state) {
            Some(QueueState::Ok) => Ok(()),
            state => Err(MechError::QueueRefused {
                op: DbgOp::ResumeQueues,
                queue: q.queue_id,
                state: state.unwrap_or(QueueState::Invalid),
            }),
        }
    }

    /// Closes the session: DISABLE (it resumes every suspended queue of the process), then the
    /// runtime disable if setup enabled the runtime. Idempotent; later suspends are refused.
    fn teardown(&self) -> Result<(), MechError> {
        self.session.close().map_err(MechError::kfd(KIND))
    }
}
