//! [`XQueue`]: Lv1 progressive launching (XSched's `XQueue` at level 1).

mod state;

use crate::{CommandId, Config, HwQueue};
use state::Shared;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Per-command timestamps, nanoseconds on `CLOCK_MONOTONIC` ([`crate::clock::now_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamps {
    /// When [`XQueue::submit`] accepted the command.
    pub submitted_ns: u64,
    /// Taken just before the launcher called [`HwQueue::launch`] for it.
    pub launched_ns: u64,
    /// Taken just after [`HwQueue::wait`] returned for the first sync point recorded after
    /// the command's launch (the "covering" sync point). It is therefore an *upper bound*
    /// of the true completion: it lags it by up to the rest of the command's batch plus
    /// the wake-up of the thread that waited on it (the launcher or the completion thread),
    /// and several commands share one value. Commands whose launch failed get the time the
    /// failure was seen.
    pub completed_ns: u64,
}

/// A finished command, delivered on the channel of [`XQueue::take_completions`] exactly
/// once per launched command, in launch order (except launch failures, sent at once).
#[derive(Debug)]
pub struct Completion<E> {
    /// The id [`XQueue::submit`] returned.
    pub id: CommandId,
    /// When it was submitted, launched and observed complete.
    pub stamps: Stamps,
    /// `Err` if its launch, or the wait on its sync point, failed (shared by a batch).
    pub outcome: Result<(), Arc<E>>,
}

/// A pending command handed back by [`XQueue::resume_dropping_pending`]; it was never launched.
#[derive(Debug)]
pub struct Dropped<C> {
    /// The id [`XQueue::submit`] returned.
    pub id: CommandId,
    /// The command itself, returned to the caller.
    pub cmd: C,
    /// When it was submitted.
    pub submitted_ns: u64,
}

/// What [`XQueue::suspend`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuspendMode {
    /// Only stop launching; commands already in flight keep running.
    Stop,
    /// Stop launching, then wait until every launched command has completed on the
    /// hardware queue and been observed: this is Lv1's preemption, after which the queue
    /// holds no running work (its latency grows with `threshold x T`).
    Drain,
}

/// Counters since creation. `submitted == pending + in_flight + completed + dropped`
/// whenever no launch is under way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Commands accepted by [`XQueue::submit`].
    pub submitted: u64,
    /// Commands successfully launched.
    pub launched: u64,
    /// Completions delivered (including failed ones).
    pub completed: u64,
    /// Completions whose outcome was an error.
    pub errors: u64,
    /// Commands returned by [`XQueue::resume_dropping_pending`].
    pub dropped: u64,
    /// Submitted, not launched yet.
    pub pending: usize,
    /// Launched, not yet observed complete.
    pub in_flight: usize,
    /// High-water mark of `in_flight`.
    pub max_in_flight: usize,
    /// Sync points recorded.
    pub sync_points: u64,
}

/// Why [`XQueue::wait_idle`] could not wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitIdleError {
    /// The queue is suspended with this many commands pending; it would never become idle.
    Suspended {
        /// Commands held by the suspension.
        pending: usize,
    },
    /// [`XQueue::wait_idle_for`] ran out of time.
    TimedOut {
        /// Commands not launched yet.
        pending: usize,
        /// Commands launched and not observed complete.
        in_flight: usize,
    },
}

impl std::fmt::Display for WaitIdleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Suspended { pending } => {
                write!(f, "queue is suspended with {pending} pending commands")
            }
            Self::TimedOut { pending, in_flight } => {
                write!(f, "queue not idle in time: {pending} pending, {in_flight} in flight")
            }
        }
    }
}

impl std::error::Error for WaitIdleError {}

/// Lv1 progressive launcher over a hardware queue `Q`.
///
/// Commands are accepted by [`submit`](Self::submit) from any number of threads, get ids
/// in acceptance order, and are launched in id order by a launcher thread, which keeps at
/// most `threshold` of them in flight and records a sync point after every `batch`
/// launches. It also records one whenever it is about to wait with commands not yet
/// covered by a sync point (idle, suspended, at the threshold or closing), so every
/// launched command is eventually observed: a *sync point per batch* is the steady
/// state under load, and trailing commands never wait for future submissions.
///
/// At the threshold the launcher waits on the oldest outstanding sync point itself and
/// delivers those [`Completion`]s (as XSched's launch worker does): a busy queue hands
/// nothing between threads per batch. A second, completion thread observes the sync points
/// only while the launcher sleeps (idle or suspended) or after it has ended (closing), so that
/// completions keep arriving when no more work is submitted. The two never wait on sync
/// points at the same time. Consequently the [`HwQueue`] sees `launch`/`record` from the
/// launcher thread, `wait` from the launcher or the completion thread (one at a time) and,
/// for [`SuspendMode::Drain`], `synchronize` from the suspending thread, possibly at the same
/// time as a `wait`.
///
/// Every submitted command ends exactly once: either as a completion or returned by
/// [`resume_dropping_pending`](Self::resume_dropping_pending).
///
/// Dropping the queue resumes it, launches everything still pending, waits for all of it
/// to complete and joins both threads (it blocks as long as the hardware takes).
pub struct XQueue<Q: HwQueue> {
    shared: Arc<Shared<Q>>,
    rx: Mutex<Option<Receiver<Completion<Q::Error>>>>,
    threads: Vec<JoinHandle<()>>,
}

impl<Q: HwQueue> XQueue<Q> {
    /// Start a launcher over `hwq`. Fails only if a thread cannot be spawned.
    pub fn new(hwq: Arc<Q>, cfg: Config) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::new(hwq, cfg, tx));
        let mut q = Self {
            shared,
            rx: Mutex::new(Some(rx)),
            threads: Vec::new(),
        };
        for (name, completer) in [("lv1-launcher", false), ("lv1-completer", true)] {
            let s = Arc::clone(&q.shared);
            let body = move || {
                if completer { s.completer() } else { s.launcher() }
            };
            // On failure `q` is dropped here, which stops the thread already started.
            q.threads.push(thread::Builder::new().name(name.into()).spawn(body)?);
        }
        Ok(q)
    }

    /// The hardware queue this launcher drives.
    pub fn hw_queue(&self) -> &Arc<Q> {
        &self.shared.hwq
    }

    /// The receiver of all completions; `Some` once, `None` afterwards. Until it is taken,
    /// completions accumulate in the channel; after it is dropped they are only counted.
    pub fn take_completions(&self) -> Option<Receiver<Completion<Q::Error>>> {
        self.rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Accept a command. Never blocks on the device; while suspended it is held.
    pub fn submit(&self, cmd: Q::Command) -> CommandId {
        self.shared.submit(cmd)
    }

    /// Stop launching. When this returns, no launch is under way and none starts until a
    /// resume. With [`SuspendMode::Drain`] it then calls [`HwQueue::synchronize`] and waits
    /// until every launched command's completion has been delivered (or until another
    /// thread resumes the queue). Suspending a suspended queue is allowed.
    pub fn suspend(&self, mode: SuspendMode) -> Result<(), Q::Error> {
        let mut st = self.shared.lock();
        st.suspended = true;
        self.shared.set_halt(true);
        // `wait_idle` callers fail on a suspension with commands pending.
        self.shared.wake_outside(&st);
        while st.launcher_busy || (mode == SuspendMode::Drain && !st.launches_settled()) {
            st = self.shared.wait_ext(st, None);
        }
        if mode == SuspendMode::Stop {
            return Ok(());
        }
        drop(st);
        self.shared.hwq.synchronize()?;
        let mut st = self.shared.lock();
        while st.suspended && st.in_flight > 0 {
            st = self.shared.wait_ext(st, None);
        }
        Ok(())
    }

    /// Resume launching.
    pub fn resume(&self) {
        let mut st = self.shared.lock();
        st.suspended = false;
        self.shared.set_halt(false);
        self.shared.wake_all(&mut st);
    }

    /// Resume, first removing every pending (never launched) command and returning them in
    /// id order. Commands in flight are not affected and complete normally.
    pub fn resume_dropping_pending(&self) -> Vec<Dropped<Q::Command>> {
        let mut st = self.shared.lock();
        let dropped: Vec<_> = self
            .shared
            .take_pending(&mut st)
            .into_iter()
            .map(|p| Dropped {
                id: p.id,
                cmd: p.cmd,
                submitted_ns: p.submitted_ns,
            })
            .collect();
        st.stats.dropped += dropped.len() as u64;
        st.suspended = false;
        self.shared.set_halt(false);
        self.shared.wake_all(&mut st);
        dropped
    }

    /// Whether the queue is suspended.
    pub fn is_suspended(&self) -> bool {
        self.shared.lock().suspended
    }

    /// Change threshold and batch while running. Nothing is lost or reordered: commands in
    /// flight stay in flight; if it now exceeds the new threshold, the launcher waits until
    /// it drops below it; the open batch is closed at the new batch size.
    pub fn set_config(&self, cfg: Config) {
        let mut st = self.shared.lock();
        st.cfg = cfg;
        self.shared.wake_all(&mut st);
    }

    /// The current configuration.
    pub fn config(&self) -> Config {
        self.shared.lock().cfg
    }

    /// Current counters.
    pub fn stats(&self) -> Stats {
        let st = self.shared.lock();
        let (submitted, pending) = self.shared.counts(&st);
        Stats {
            submitted,
            pending,
            in_flight: st.in_flight,
            ..st.stats
        }
    }

    /// Block until nothing is pending or in flight, i.e. every submitted command has been
    /// completed (and its completion delivered) or dropped. Fails instead of blocking
    /// forever when the queue is, or becomes, suspended with commands pending.
    pub fn wait_idle(&self) -> Result<(), WaitIdleError> {
        self.wait_idle_until(None)
    }

    /// [`wait_idle`](Self::wait_idle) with a time limit, for callers that must not hang on
    /// a stuck device; fails with [`WaitIdleError::TimedOut`].
    pub fn wait_idle_for(&self, timeout: Duration) -> Result<(), WaitIdleError> {
        self.wait_idle_until(Some(Instant::now() + timeout))
    }

    fn wait_idle_until(&self, deadline: Option<Instant>) -> Result<(), WaitIdleError> {
        let mut st = self.shared.lock();
        loop {
            let (_, pending) = self.shared.counts(&st);
            if pending == 0 && st.in_flight == 0 && !st.launcher_busy {
                return Ok(());
            }
            if st.suspended && pending > 0 {
                return Err(WaitIdleError::Suspended { pending });
            }
            let limit = match deadline {
                None => None,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(WaitIdleError::TimedOut {
                            pending,
                            in_flight: st.in_flight,
                        });
                    }
                    Some(left)
                }
            };
            st = self.shared.wait_ext(st, limit);
        }
    }
}

impl<Q: HwQueue> Drop for XQueue<Q> {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.closing = true;
        st.suspended = false;
        self.shared.set_halt(false);
        self.shared.wake_all(&mut st);
        drop(st);
        for t in self.threads.drain(..) {
            // A panicking hardware queue already reported itself; don't panic in drop.
            let _ = t.join();
        }
    }
}
