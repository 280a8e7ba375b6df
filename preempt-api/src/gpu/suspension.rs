//! [`GpuSuspension`]: the one Lv3 guard on a GPU queue.
use crate::error::Result;
use lv3::mechanism::{Preemptor, QueueTarget, SuspendReport, SuspendedQueue};

/// An Lv3 suspension of a stream with a queue of its own (a blocking stream): the mechanism's
/// guard, and hip-rt's null-stream fence for as long as the queue is stopped, so that a
/// null-stream call (hipMemcpy, hipDeviceSynchronize, ...) made meanwhile is refused instead of
/// waiting for a queue that only the caller can resume. Field order drops the guard (resume)
/// before the fence; dropping the suspension resumes.
pub struct GpuSuspension(SuspendedQueue, hip_rt::NullStreamBlocked);

impl GpuSuspension {
    /// Raises the fence, then suspends `target` through `pre` (the fence goes again if the
    /// suspend fails).
    pub fn suspend(pre: &Preemptor, target: &QueueTarget) -> Result<Self> {
        let fence = hip_rt::NullStreamBlocked::new();
        let guard = pre.suspend(target)?;
        Ok(GpuSuspension(guard, fence))
    }

    /// What the suspend did (its preempting call's time, ...).
    pub fn report(&self) -> &SuspendReport {
        self.0.report()
    }

    /// Resumes; the fence goes only if the resume worked. After a failed one the queue may still
    /// be stopped: null-stream calls keep being refused (an error later beats a hang; the
    /// mechanism's teardown resumes everything at the end).
    pub fn resume(self) -> Result<()> {
        let GpuSuspension(guard, fence) = self;
        let r = guard.resume();
        if r.is_ok() {
            drop(fence);
        } else {
            std::mem::forget(fence);
        }
        Ok(r?)
    }
}
