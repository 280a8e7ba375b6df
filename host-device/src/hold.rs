//! Host Lv2: a queue's workers finish the command they run and take no new one.
//!
//! XSched's Lv2 ("deactivate") stops a queue from dispatching new work while the work already
//! running finishes, so its suspend costs about the rest of the running command (at most T), and
//! nothing is saved. On the host device that is a `hold` line to every worker: each one reads it
//! when its running command ends (it reads what has arrived before every command: see the
//! `inbox` module), answers `held` and starts nothing more until `release`. The commands it had
//! been sent and not started stay in order and run after the release, each once. An AMD GPU has
//! no such route for one queue (docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws).
//!
//! Held workers are not stopped: they sleep reading their socket, so unlike host Lv3 nothing is
//! signalled, and a held worker dies with its process like any other (`PR_SET_PDEATHSIG`).
use super::proto::ToWorker;
use super::queue::lock;
use super::{HostError, HostQueue};
use lv1::clock::now_ns;
use std::sync::Arc;
use std::time::Duration;

/// "Forever" for the wait on the running commands: they end by themselves (~136 years).
const NO_LIMIT: Duration = Duration::from_secs(1 << 32);

impl HostQueue {
    /// Host Lv2 suspend: every worker finishes the command it runs (if any) and starts no new
    /// one; returns when each has said so. From then on the queue runs nothing; the commands
    /// launched and not started run after resume, in order, each once. The cost is the rest of
    /// the longest running command (at most T) plus a message each way per worker.
    ///
    /// The returned guard resumes the queue when dropped (also while unwinding from a panic);
    /// [`HostHold::resume`] resumes and reports errors. A second suspend (Lv2 or Lv3) while a
    /// guard is alive fails with [`HostError::AlreadySuspended`]. If a worker dies meanwhile, the
    /// others are released before the error is returned.
    pub fn hold(&self) -> Result<HostHold<'_>, HostError> {
        let held_ns = self.hold_workers()?;
        Ok(HostHold {
            queue: self,
            held_ns,
            active: true,
        })
    }

    /// [`HostQueue::hold`] for a queue held in an `Arc`: the guard owns a reference, so it can
    /// be kept in a long-lived object (a session of an application API). Same semantics.
    pub fn hold_shared(self: &Arc<Self>) -> Result<SharedHostHold, HostError> {
        let held_ns = self.hold_workers()?;
        Ok(SharedHostHold {
            queue: Arc::clone(self),
            held_ns,
            active: true,
        })
    }

    /// `hold` to every worker, then wait for each one's `held`; marks the queue suspended.
    /// Returns when.
    fn hold_workers(&self) -> Result<u64, HostError> {
        let mut suspended = lock(&self.suspended);
        if *suspended {
            return Err(HostError::AlreadySuspended);
        }
        let line = ToWorker::Hold.encode();
        let sent = {
            let mut l = lock(&self.launch);
            let mut sent = Ok(());
            for worker in 0..l.inputs_len() {
                match self.send_line(l, worker, &line) {
                    Ok(back) => l = back,
                    Err(e) => {
                        sent = Err(e);
                        l = lock(&self.launch);
                        break;
                    }
                }
                l.holds[worker] += 1;
            }
            sent.map(|()| l.holds.clone())
        };
        // Each worker answers every hold it was sent, in order: the count says this one's came.
        let answered = sent
            .and_then(|want| self.wait_progress("hold", NO_LIMIT, |p| p.held.iter().zip(&want).all(|(h, w)| h >= w)));
        if let Err(e) = answered {
            let _ = self.release_workers();
            return Err(e);
        }
        *suspended = true;
        Ok(now_ns())
    }

    /// `release` to every worker (each one tried even when another fails); the first failure.
    fn release_workers(&self) -> Result<(), HostError> {
        let line = ToWorker::Release.encode();
        let mut l = lock(&self.launch);
        let mut first = Ok(());
        for worker in 0..l.inputs_len() {
            match self.send_line(l, worker, &line) {
                Ok(back) => l = back,
                Err(e) => {
                    first = first.and(Err(e));
                    l = lock(&self.launch);
                }
            }
        }
        first
    }

    /// Resume after a hold: release every worker, then mark the queue running.
    fn unhold(&self) -> Result<(), HostError> {
        let r = self.release_workers();
        *lock(&self.suspended) = false;
        r
    }
}

/// A held host queue (host Lv2). Resumes it on drop: a queue is never left held.
#[must_use = "dropping the guard resumes the queue at once"]
pub struct HostHold<'a> {
    queue: &'a HostQueue,
    held_ns: u64,
    active: bool,
}

impl HostHold<'_> {
    /// When every worker had said it runs nothing (`CLOCK_MONOTONIC` ns).
    pub fn held_ns(&self) -> u64 {
        self.held_ns
    }

    /// Resume the queue, reporting errors (dropping the guard resumes and ignores them).
    pub fn resume(mut self) -> Result<(), HostError> {
        self.active = false;
        self.queue.unhold()
    }
}

impl Drop for HostHold<'_> {
    fn drop(&mut self) {
        if self.active {
            let _ = self.queue.unhold();
        }
    }
}

/// A held host queue kept through an `Arc` ([`HostQueue::hold_shared`]). Resumes it on drop,
/// like [`HostHold`].
#[must_use = "dropping the guard resumes the queue at once"]
pub struct SharedHostHold {
    queue: Arc<HostQueue>,
    held_ns: u64,
    active: bool,
}

impl SharedHostHold {
    /// When every worker had said it runs nothing (`CLOCK_MONOTONIC` ns).
    pub fn held_ns(&self) -> u64 {
        self.held_ns
    }

    /// The held queue.
    pub fn queue(&self) -> &Arc<HostQueue> {
        &self.queue
    }

    /// Resume the queue, reporting errors (dropping the guard resumes and ignores them).
    pub fn resume(mut self) -> Result<(), HostError> {
        self.active = false;
        self.queue.unhold()
    }
}

impl Drop for SharedHostHold {
    fn drop(&mut self) {
        if self.active {
            let _ = self.queue.unhold();
        }
    }
}
