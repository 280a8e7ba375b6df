//! The guard layer: a suspended queue is a value that owns the obligation to resume it.
//!
//! - [`Preemptor::suspend`] returns a [`SuspendedQueue`]; `resume(self)` returns the outcome,
//!   and dropping the guard (including during a panic's unwinding) resumes too, reporting any
//!   failure as a [`kfd::events`] warning. `panic = "abort"` would skip the drop: the workspace keeps `unwind`.
//! - A resume is tried [`RetryPolicy::tries`] times with doubling backoff: the kernel can refuse a
//!   map transiently (a runlist update racing a GPU reset or another process's unmap), and a queue
//!   left suspended starves its stream forever. Every failed try is reported, none swallowed.
//! - While a guard for a queue exists, a second suspend of that queue fails with
//!   [`MechError::AlreadySuspended`] without a kernel call: two guards for one queue would resume
//!   it when the first one drops, behind the second owner's back.
//! - Every guard is registered with [`crate::signals`] (before the kernel call, under the
//!   registry lock, so a SIGINT/SIGTERM cannot slip between the suspend and the registration) and
//!   deregistered by a successful resume. A queue whose resume failed stays registered: the
//!   signal handler tries it once more before the process exits, as long as the mechanism is
//!   still alive. The registry holds the mechanism weakly: once the [`Preemptor`] and its guards
//!   are gone the mechanism drops, and dbg-trap's drop turns debug mode off (DISABLE resumes
//!   every queue of the process). A strong reference there would keep debug mode on until exit,
//!   where HIP's teardown then blocks in the kernel's runtime disable
//!   (docs/kfd-facts.md#dbg_trap-suspend-and-resume).
use super::{MechError, MechanismKind, Preempt, QueueTarget, SuspendReport};
use crate::signals::{self, Refused, Registration};
use kfd::events::{self, Severity};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How a resume is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total tries, at least 1.
    pub tries: u32,
    /// Sleep before the second try; doubled before each later one.
    pub first_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 3 tries, 1 ms then 2 ms apart: long enough for a runlist update to settle, short enough
    /// that an interactive Ctrl-C still exits promptly.
    fn default() -> Self {
        RetryPolicy {
            tries: 3,
            first_backoff: Duration::from_millis(1),
        }
    }
}

/// Resumes `q`, retrying per `policy`. Failures before a success are reported as an event.
pub(crate) fn resume_with_retry(mech: &dyn Preempt, q: &QueueTarget, policy: RetryPolicy) -> Result<(), MechError> {
    let tries = policy.tries.max(1);
    let mut backoff = policy.first_backoff;
    let mut last = None;
    for attempt in 1..=tries {
        match mech.resume(q) {
            Ok(()) => {
                if let Some(e) = last {
                    events::emit(
                        Severity::Note,
                        "lv3 guard",
                        format!(
                            "{}: queue {} resumed on try {attempt}/{tries}; earlier try failed: {e}",
                            mech.kind(),
                            q.queue_id
                        ),
                    );
                }
                return Ok(());
            }
            Err(e) => {
                last = Some(e);
                if attempt < tries {
                    std::thread::sleep(backoff);
                    backoff = backoff.saturating_mul(2);
                }
            }
        }
    }
    Err(MechError::ResumeFailed {
        queue: q.queue_id,
        tries,
        last: Box::new(last.expect("tries >= 1")),
    })
}

type Held = Arc<Mutex<HashSet<(u32, u32)>>>;

fn lock(h: &Held) -> MutexGuard<'_, HashSet<(u32, u32)>> {
    h.lock().unwrap_or_else(|p| p.into_inner())
}

/// Suspends queues through one mechanism and hands out guards. Use one per process and
/// mechanism: the already-suspended check covers the guards of this `Preemptor`.
pub struct Preemptor {
    mech: Arc<dyn Preempt>,
    held: Held,
    retry: RetryPolicy,
}

impl Preemptor {
    pub fn new(mech: impl Preempt + 'static) -> Self {
        Self::from_arc(Arc::new(mech))
    }

    /// From a mechanism chosen at run time (see [`super::build`]).
    pub fn from_arc(mech: Arc<dyn Preempt>) -> Self {
        Preemptor {
            mech,
            held: Arc::default(),
            retry: RetryPolicy::default(),
        }
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn kind(&self) -> MechanismKind {
        self.mech.kind()
    }

    /// The raw mechanism (recovery paths; a raw resume bypasses the guards' bookkeeping).
    pub fn mechanism(&self) -> &dyn Preempt {
        &*self.mech
    }

    /// Whether a guard for this queue exists.
    pub fn is_suspended(&self, q: &QueueTarget) -> bool {
        lock(&self.held).contains(&(q.gpu_id, q.queue_id))
    }

    /// Suspends `q` and returns the guard that will resume it.
    pub fn suspend(&self, q: &QueueTarget) -> Result<SuspendedQueue, MechError> {
        q.validate()?;
        let key = (q.gpu_id, q.queue_id);
        if !lock(&self.held).insert(key) {
            return Err(MechError::AlreadySuspended {
                queue: q.queue_id,
                gpu_id: q.gpu_id,
            });
        }
        let resume_fn = {
            let (mech, target, retry) = (Arc::downgrade(&self.mech), *q, self.retry);
            Box::new(move || match mech.upgrade() {
                Some(m) => resume_with_retry(&*m, &target, retry).map_err(|e| e.to_string()),
                None => Err("its mechanism was already released (dbg-trap: DISABLE resumed it)".to_string()),
            })
        };
        match signals::register_around(q.label(self.mech.kind()), resume_fn, || self.mech.suspend(q)) {
            Ok((report, reg)) => Ok(SuspendedQueue {
                mech: Arc::clone(&self.mech),
                held: Arc::clone(&self.held),
                target: *q,
                report,
                retry: self.retry,
                reg: Some(reg),
                done: false,
            }),
            Err(refused) => {
                lock(&self.held).remove(&key);
                Err(match refused {
                    Refused::ShuttingDown => MechError::ShuttingDown { queue: q.queue_id },
                    Refused::Failed(e) => e,
                })
            }
        }
    }

    /// Tears the mechanism down (dbg-trap: DISABLE, runtime disable if ours). Refused while
    /// guards exist: DISABLE would resume their queues behind their backs.
    pub fn teardown(&self) -> Result<(), MechError> {
        let n = lock(&self.held).len();
        if n > 0 {
            return Err(MechError::Unavailable {
                mechanism: self.kind(),
                why: format!("{n} queue(s) still suspended by guards"),
            });
        }
        self.mech.teardown()
    }
}

/// A queue suspended by a [`Preemptor`]; resumes it when consumed or dropped.
#[must_use = "dropping the guard resumes the queue at once"]
pub struct SuspendedQueue {
    mech: Arc<dyn Preempt>,
    held: Held,
    target: QueueTarget,
    report: SuspendReport,
    retry: RetryPolicy,
    reg: Option<Registration>,
    done: bool,
}

impl std::fmt::Debug for SuspendedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuspendedQueue")
            .field("mechanism", &self.mech.kind())
            .field("target", &self.target)
            .field("report", &self.report)
            .finish()
    }
}

impl SuspendedQueue {
    pub fn target(&self) -> &QueueTarget {
        &self.target
    }

    pub fn report(&self) -> &SuspendReport {
        &self.report
    }

    pub fn mechanism(&self) -> MechanismKind {
        self.mech.kind()
    }

    /// Resumes the queue (with retries) and returns the outcome. On failure the queue may still
    /// be suspended; it stays registered for the signal handler's last try.
    pub fn resume(mut self) -> Result<(), MechError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), MechError> {
        self.done = true;
        let r = resume_with_retry(&*self.mech, &self.target, self.retry);
        lock(&self.held).remove(&(self.target.gpu_id, self.target.queue_id));
        if let Some(reg) = self.reg.take().filter(|_| r.is_ok()) {
            reg.deregister();
        }
        r
    }
}

impl Drop for SuspendedQueue {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let during = if std::thread::panicking() {
            " during a panic"
        } else {
            ""
        };
        if let Err(e) = self.finish() {
            events::emit(
                Severity::Warning,
                "lv3 guard",
                format!("{}: resume on drop{during} failed: {e}", self.mech.kind()),
            );
        }
    }
}
