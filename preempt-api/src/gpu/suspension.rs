//! [`GpuSuspension`]: the one Lv3 guard on a GPU queue.
use crate::error::{Error, ErrorKind, Result};
use lv3::binding::QueueBinding;
use lv3::mechanism::{Preemptor, SuspendReport, SuspendedQueue};

/// An Lv3 suspension of a stream with a queue of its own (a blocking stream): the mechanism's
/// guard, and hip-rt's null-stream fence for as long as the queue is stopped, so that a
/// null-stream call (hipMemcpy, hipDeviceSynchronize, ...) made meanwhile is refused instead of
/// waiting for a queue that only the caller can resume. Field order drops the guard (resume)
/// before the fence; dropping the suspension resumes.
pub struct GpuSuspension(SuspendedQueue, hip_rt::NullStreamBlocked);

impl GpuSuspension {
    /// Checks that the stream's queue is still the one it was bound to ([`QueueBinding::check`]:
    /// one `stat` of the queue's sysfs directory), raises the fence, then suspends the queue
    /// through `pre` (the fence goes again if the suspend fails). A stale binding (the queue was
    /// destroyed, or its id now names another queue) is refused as
    /// [`ErrorKind::QueueRefused`] before anything is stopped: a suspend by id would stop
    /// whichever queue has the id now (docs/kfd-facts.md#queue-identity-in-sysfs).
    pub fn suspend(pre: &Preemptor, binding: &QueueBinding) -> Result<Self> {
        binding
            .check()
            .map_err(|stale| Error::new(ErrorKind::QueueRefused, stale.to_string()))?;
        let fence = hip_rt::NullStreamBlocked::new();
        let guard = pre.suspend(binding.target())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use kfd::testing::FakeProcQueues;
    use lv3::mechanism::{MechError, MechanismKind, Preempt, QueueTarget};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::Duration;

    const PID: u32 = 4242;
    const GPU: u32 = 0xbeef;

    /// The calls a mechanism was asked to make: ("suspend" or "resume", queue id).
    type Log = Arc<Mutex<Vec<(&'static str, u32)>>>;

    /// A mechanism that records which queue ids it was asked to suspend and resume.
    #[derive(Default)]
    struct Recording(Log);

    impl Preempt for Recording {
        fn kind(&self) -> MechanismKind {
            MechanismKind::DbgTrap
        }
        fn suspend(&self, q: &QueueTarget) -> std::result::Result<SuspendReport, MechError> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(("suspend", q.queue_id));
            Ok(SuspendReport {
                mechanism: self.kind(),
                queue_id: q.queue_id,
                total: Duration::ZERO,
                preempt_call: Duration::ZERO,
                cleared_queue_new: false,
                kernel: None,
            })
        }
        fn resume(&self, q: &QueueTarget) -> std::result::Result<(), MechError> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(("resume", q.queue_id));
            Ok(())
        }
    }

    fn setup() -> (FakeProcQueues, QueueBinding, Preemptor, Log) {
        let q = FakeProcQueues::new(PID);
        q.create(4, GPU);
        let target = QueueTarget {
            queue_id: 4,
            gpu_id: GPU,
            ..QueueTarget::NONEXISTENT
        };
        let binding = QueueBinding::bind(target, PID, q.root()).unwrap();
        let rec = Recording::default();
        let log = Arc::clone(&rec.0);
        (q, binding, Preemptor::new(rec), log)
    }

    fn calls(log: &Mutex<Vec<(&'static str, u32)>>) -> Vec<(&'static str, u32)> {
        log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    #[test]
    fn the_bound_queue_is_suspended_and_resumed() {
        let (_q, binding, pre, log) = setup();
        let held = GpuSuspension::suspend(&pre, &binding).unwrap();
        held.resume().unwrap();
        assert_eq!(calls(&log), [("suspend", 4), ("resume", 4)]);
    }

    /// Each way the queue can change: nothing reaches the mechanism, the error is QueueRefused
    /// and says the binding is stale, and no guard is left held.
    #[test]
    fn a_stale_binding_is_refused_before_anything_is_stopped() {
        type Change = fn(&FakeProcQueues);
        let cases: [(&str, Change); 3] = [
            ("disappears", |q| q.destroy(4)),
            ("replaced under the same id", |q| q.replace(4)),
            ("replaced under another id", |q| {
                q.destroy(4);
                q.create(5, GPU);
            }),
        ];
        for (what, change) in cases {
            let (q, binding, pre, log) = setup();
            change(&q);
            let e = GpuSuspension::suspend(&pre, &binding)
                .err()
                .unwrap_or_else(|| panic!("{what}: suspended"));
            assert_eq!(e.kind, ErrorKind::QueueRefused, "{what}: {e:?}");
            assert!(e.message.contains("binding is stale"), "{what}: {e}");
            assert!(
                calls(&log).is_empty(),
                "{what}: the mechanism was called: {:?}",
                calls(&log)
            );
            assert!(!pre.is_suspended(binding.target()), "{what}: a guard is held");
            // Every later suspend is refused too: a stale binding is never quietly renewed.
            assert!(GpuSuspension::suspend(&pre, &binding).is_err(), "{what}");
        }
    }
}
