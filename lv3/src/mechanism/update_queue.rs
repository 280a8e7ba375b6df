//! `update-queue`: AMDKFD_IOC_UPDATE_QUEUE to a NULL ring (inactive), then back.
//!
//! Needs no debug mode and works on any KFD version, which is why it is the last resort of
//! `auto` rather than absent: kfdtest's `KFDCWSRTest.BasicTest` drives CWSR exactly this way.
//! Its weaknesses (docs/kfd-facts.md#update_queue-disable-and-restore):
//! - UPDATE_QUEUE overwrites address, size, percentage and priority, so the restore must carry
//!   the ORIGINAL ring address and EXACT size (6.12 validates the GPU-VA mapping: anything else is
//!   EFAULT) plus the queue's percentage and priority;
//! - ROCr's async scratch reclaim on gfx94x toggles UPDATE_QUEUE 0 -> 100 on its own queues and can
//!   silently undo a suspend (`HSA_ENABLE_SCRATCH_ASYNC_RECLAIM=0` turns that off).
use super::{MechError, MechanismKind, Preempt, QueueTarget, SuspendReport};
use kfd::events::{self, Severity};
use kfd::{KfdOps, QueueUpdate};
use nix::errno::Errno;
use std::time::Instant;

const KIND: MechanismKind = MechanismKind::UpdateQueue;

/// The update-queue mechanism over any [`KfdOps`].
#[derive(Debug)]
pub struct UpdateQueue<K: KfdOps> {
    kfd: K,
}

impl<K: KfdOps> UpdateQueue<K> {
    /// No setup: UPDATE_QUEUE needs nothing but the fd.
    pub fn new(kfd: K) -> Self {
        UpdateQueue { kfd }
    }

    /// The KFD handle (e.g. for a GET_QUEUE_SNAPSHOT during discovery).
    pub fn kfd(&self) -> &K {
        &self.kfd
    }

    /// The UPDATE_QUEUE arguments that restore `q` (PM4 target XCC 0, as ROCr creates queues).
    pub fn restore_args(q: &QueueTarget) -> QueueUpdate {
        QueueUpdate {
            ring_base_address: q.ring_base_address,
            ring_size: q.ring_size,
            percentage: q.percentage,
            pm4_target_xcc: 0,
            priority: q.priority,
        }
    }
}

impl<K: KfdOps + Send + Sync> Preempt for UpdateQueue<K> {
    fn kind(&self) -> MechanismKind {
        KIND
    }

    /// Validates the target first (a target that cannot be restored is refused before the queue
    /// is touched), then UPDATE_QUEUE with the queue's own ring, size and priority and percentage
    /// 0, as ROCr and kfdtest do (a NULL ring would also zero the ring in the kernel's copy of
    /// the queue). If that call fails in the scheduler's update (not EINVAL or EFAULT, which
    /// refuse before anything changed), the kernel has already changed the queue's properties
    /// (pqm_update_queue_properties writes them first), so one restore is tried before the error
    /// is returned; a failed restore is reported as an event.
    fn suspend(&self, q: &QueueTarget) -> Result<SuspendReport, MechError> {
        q.validate()?;
        let t0 = Instant::now();
        if let Err(e) = self.kfd.update_queue(q.queue_id, &Self::restore_args(q).pause()) {
            // EINVAL (arguments) and EFAULT (no such queue, ring not mapped) are refusals before
            // anything changed; anything else came from the scheduler's update, after the change.
            let changed = !matches!(e.errno, Errno::EINVAL | Errno::EFAULT);
            if changed && let Err(undo) = self.kfd.update_queue(q.queue_id, &Self::restore_args(q)) {
                events::emit(
                    Severity::Warning,
                    "update-queue",
                    format!(
                        "queue {} may stay inactive after a failed disable: the restore failed too: {undo}",
                        q.queue_id
                    ),
                );
            }
            return Err(MechError::Kfd {
                mechanism: KIND,
                source: e,
            });
        }
        let preempt_call = t0.elapsed();
        Ok(SuspendReport {
            mechanism: KIND,
            queue_id: q.queue_id,
            total: preempt_call,
            preempt_call,
            cleared_queue_new: false,
            kernel: None,
        })
    }

    /// UPDATE_QUEUE with the original ring, size, percentage and priority.
    fn resume(&self, q: &QueueTarget) -> Result<(), MechError> {
        q.validate()?;
        self.kfd
            .update_queue(q.queue_id, &Self::restore_args(q))
            .map_err(MechError::kfd(KIND))
    }
}
