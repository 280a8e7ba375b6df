//! The low-priority stream ([`LpStream`]): what gets suspended (the high-priority one, which
//! runs the work that must not wait, is `hp.rs`'s). Written once over the device's bodies
//! ([`crate::device`]).
//!
//! A low-priority stream's suspension has up to four holders, the user (by hand: `suspend`,
//! sets), the in-process helper's blocks, the helper's time-driven policy and the scheduler
//! daemon's client (`crate::sched`); it runs again only when none holds it, so each resumes only
//! what it suspended and a hand suspension outlives a block
//! (docs/c-api.md#who-holds-a-suspension).
//!
//! Long because a stream's levels, its submissions and who holds its suspension are one type whose
//! rule (each holder resumes only what it suspended) spans every method.
use crate::check::{Check, LpCompletion, Verified};
use crate::device::{Abandon, Launcher, LpBody};
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{CLOSE_WAIT, check_delay};
use crate::options::Level;
use crate::owner::{Bound, Owner};
use lv1::{SuspendMode, WaitIdleError};
use lv3::mechanism::{Preemptor, QueueTarget};

mod hold;
pub(crate) use hold::Holder;
use hold::{Held, Hold};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

/// Told before a delay command is submitted to a stream the helper's time-driven policy
/// schedules: the stream has work (`crate::helper::timed`; a trait here so that the stream does
/// not depend on the helper).
pub(crate) trait SubmitHook: Send + Sync {
    fn submitted(&self, stream: u64);
    /// The command announced by the last [`SubmitHook::submitted`] was not submitted after all
    /// (its submit failed).
    fn withdrawn(&self, stream: u64);
}

/// What one suspend did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspendInfo {
    /// Lv1, Lv2 or Lv3.
    pub level: Level,
    /// `sigstop`, `preempt-queues`, `dbg-trap`, `update-queue`, `lv2-hold` (the host device's
    /// Lv2), `lv1-drain` or `lv1-stop`.
    pub mechanism: String,
    /// Wall time of the suspend call, ns (the helper held it already: the call's own, ~0).
    pub latency_ns: u64,
}

/// The stream on its device: the owner's alone ([`Bound`]).
struct Device {
    body: Box<dyn LpBody>,
    preemptor: Option<Arc<Preemptor>>,
    hold: Mutex<Hold>,
}

/// How messages name a stream whose binding gave it no name ([`LpStream::set_label`]).
const UNNAMED: &str = "the stream";

/// How often `synchronize` looks whether an Lv1 suspension held by the helper, its policy or the
/// daemon has ended (its launcher cannot wait through a suspension itself).
const HELD_POLL: Duration = Duration::from_millis(1);

/// A low-priority stream of a session: the object suspended and resumed. Thread-safe; every
/// method takes `&self`. After its session closes, every call fails with `Closed`; in a fork
/// child, with `Forked` (getters without a `Result` answer as for a stream with nothing).
pub struct LpStream {
    id: u64,
    level: Level,
    /// Lv1 suspend waits for the commands in flight ([`crate::Options::lv1_no_wait`]).
    lv1_wait: bool,
    owner: Owner,
    label: OnceLock<String>,
    closed: AtomicBool,
    /// Submits hold it shared, close exclusively: no submit lands after close dropped the
    /// commands not yet launched.
    gate: RwLock<()>,
    /// The helper's policy, told of every submit while it schedules the stream.
    hook: Mutex<Option<Weak<dyn SubmitHook>>>,
    dev: Bound<Device>,
}

impl std::fmt::Debug for LpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LpStream")
            .field("id", &self.id)
            .field("level", &self.level)
            .field("suspended", &self.is_suspended())
            .finish_non_exhaustive()
    }
}

fn ns(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl LpStream {
    pub(crate) fn new(
        id: u64,
        level: Level,
        body: Box<dyn LpBody>,
        preemptor: Option<Arc<Preemptor>>,
        lv1_wait: bool,
        owner: Owner,
    ) -> Self {
        LpStream {
            id,
            level,
            lv1_wait,
            owner,
            label: OnceLock::new(),
            closed: AtomicBool::new(false),
            gate: RwLock::new(()),
            hook: Mutex::new(None),
            dev: Bound::new(
                owner,
                Device {
                    body,
                    preemptor,
                    hold: Mutex::new(Hold::default()),
                },
            ),
        }
    }

    fn hold(&self) -> MutexGuard<'_, Hold> {
        self.dev.hold.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `Forked` in a fork child (checked before any lock), `Closed` after close.
    fn live(&self) -> Result<()> {
        self.owner.check()?;
        self.not_closed()
    }

    /// `Closed` after close (for calls that checked the process first, before a lock).
    fn not_closed(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::closed())
        } else {
            Ok(())
        }
    }

    /// The launcher, or the error for a bound KFD queue, which has none.
    fn launcher(&self, what: &str) -> Result<&dyn Launcher> {
        self.dev
            .body
            .launcher()
            .ok_or_else(|| Error::unsupported(format!("{}: a bound KFD queue has no launcher to {what}", self.label())))
    }

    /// The stream's id within its session (unique, never reused; ids start at 1 in every
    /// session, so messages name the stream by its label instead).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How messages name the stream: what a binding set ([`LpStream::set_label`]; the C ABI:
    /// `stream handle N`), else `the stream`.
    pub fn label(&self) -> &str {
        self.label.get().map_or(UNNAMED, String::as_str)
    }

    /// Names the stream in messages as its user knows it (once; later calls change nothing).
    pub fn set_label(&self, label: impl Into<String>) {
        let _ = self.label.set(label.into());
    }

    /// `Forked` unless the calling process is the one that opened the stream's session.
    pub fn check_process(&self) -> Result<()> {
        self.owner.check()
    }

    /// The level it is suspended at (Lv1, Lv2 or Lv3; `auto` was resolved at creation).
    pub fn level(&self) -> Level {
        self.level
    }

    /// The raw `hipStream_t` as a number (GPU streams); `None` on the host device, for a bound
    /// KFD queue and in a fork child.
    pub fn handle(&self) -> Option<usize> {
        self.owner.is_here().then(|| self.dev.body.handle()).flatten()
    }

    /// The KFD queue behind the stream (Lv3 GPU streams and bound queues).
    pub fn queue(&self) -> Option<QueueTarget> {
        self.owner.is_here().then(|| self.dev.body.queue()).flatten()
    }

    /// Host LP streams: the worker processes' pids (for inspection and tests).
    pub fn host_pids(&self) -> Vec<i32> {
        if self.owner.is_here() {
            self.dev.body.host_pids()
        } else {
            Vec::new()
        }
    }

    /// One line: what the stream is and how it is suspended.
    pub fn describe(&self) -> String {
        if !self.owner.is_here() {
            return format!(
                "{}: a stream of the parent process (this is a fork child)",
                self.label()
            );
        }
        self.dev
            .body
            .describe(self.id, &format!("{} via {}", self.level, self.mechanism_name()))
    }

    fn mechanism_name(&self) -> String {
        match self.level {
            Level::Lv1 if self.lv1_wait => crate::Lv1Suspend::Drain.name().into(),
            Level::Lv1 => crate::Lv1Suspend::Stop.name().into(),
            Level::Lv2 => self.dev.body.lv2_name(),
            _ => self.dev.body.lv3_name(self.dev.preemptor.as_deref()),
        }
    }

    /// Whether the user or the helper holds a suspension of the stream (false in a fork child:
    /// the stream is not the child's).
    pub fn is_suspended(&self) -> bool {
        self.owner.is_here() && self.hold().held.is_some()
    }

    /// Suspends the stream at its level: Lv3 stops the running work where it is (the
    /// session's mechanism; SIGSTOP on the host); Lv2 (host device) lets the commands running
    /// finish and starts no new one until resume; Lv1 stops the library's launcher and waits
    /// until what was launched (and anything else on the stream) completed (only stops it, with
    /// [`crate::Options::lv1_no_wait`]). The suspension is the user's: it lasts until
    /// [`LpStream::resume`], whatever the helper does meanwhile (if the helper holds the stream
    /// already, the stream just stays suspended). `AlreadySuspended` if the user holds it.
    pub fn suspend(&self) -> Result<SuspendInfo> {
        self.hold_by(Holder::Hand)
    }

    /// Releases the user's suspension; the stream runs again unless the helper holds it too.
    /// `Busy` if only the helper holds it (a block of higher priority is active: it resumes
    /// when the block leaves), `NotSuspended` if nobody does.
    pub fn resume(&self) -> Result<()> {
        self.release_by(Holder::Hand)
    }

    /// The helper's suspend ([`crate::helper`]).
    pub(crate) fn helper_suspend(&self) -> Result<()> {
        self.hold_by(Holder::Helper).map(drop)
    }

    /// The helper's resume: releases only the helper's hold.
    pub(crate) fn helper_resume(&self) -> Result<()> {
        self.release_by(Holder::Helper)
    }

    /// The helper's time-driven policy's suspend (`crate::helper::timed`).
    pub(crate) fn policy_suspend(&self) -> Result<()> {
        self.hold_by(Holder::Policy).map(drop)
    }

    /// The helper's policy's resume: releases only its hold.
    pub(crate) fn policy_resume(&self) -> Result<()> {
        self.release_by(Holder::Policy)
    }

    /// Sets (or with `None` clears) what is told of every submit.
    pub(crate) fn set_submit_hook(&self, hook: Option<Weak<dyn SubmitHook>>) {
        *self.dev_hook() = hook;
    }

    fn dev_hook(&self) -> MutexGuard<'_, Option<Weak<dyn SubmitHook>>> {
        self.hook.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether everything submitted through the library completed (none pending, none in
    /// flight); `false` for a bound KFD queue, which has no launcher to tell.
    /// Whether the launcher ran out of work, and had been given the first `announced` commands
    /// (a command announced to a policy is pushed to the launcher just after: until it is, the
    /// launcher being empty says nothing).
    pub(crate) fn drained(&self, announced: u64) -> bool {
        self.stats()
            .is_some_and(|s| s.submitted >= announced && s.pending == 0 && s.in_flight == 0)
    }

    /// Commands submitted through the launcher so far.
    pub(crate) fn submitted_count(&self) -> u64 {
        self.stats().map_or(0, |s| s.submitted)
    }

    /// The scheduler daemon's suspend (an order carried out by [`crate::sched::SchedClient`]).
    pub(crate) fn sched_suspend(&self) -> Result<()> {
        self.hold_by(Holder::Scheduler).map(drop)
    }

    /// The scheduler daemon's resume: releases only its hold.
    pub(crate) fn sched_resume(&self) -> Result<()> {
        self.release_by(Holder::Scheduler)
    }

    fn hold_by(&self, who: Holder) -> Result<SuspendInfo> {
        self.owner.check()?;
        let mut hold = self.hold();
        self.not_closed()?;
        if *hold.by(who) {
            let by = match who {
                Holder::Hand => String::new(),
                other => format!(" by {}", other.name()),
            };
            return Err(Error::new(
                ErrorKind::AlreadySuspended,
                format!("{} is already suspended{by}", self.label()),
            ));
        }
        let t0 = Instant::now();
        if hold.held.is_none() {
            hold.held = Some(self.suspend_device().map_err(|e| e.context(self.label()))?);
        }
        *hold.by(who) = true;
        Ok(SuspendInfo {
            level: self.level,
            mechanism: self.mechanism_name(),
            latency_ns: ns(t0),
        })
    }

    fn suspend_device(&self) -> Result<Held> {
        match self.level {
            Level::Lv1 => {
                let mode = if self.lv1_wait {
                    SuspendMode::Drain
                } else {
                    SuspendMode::Stop
                };
                let x = self.launcher("suspend at Lv1")?;
                if let Err(e) = x.suspend(mode) {
                    x.resume();
                    return Err(e.context("Lv1 drain"));
                }
                Ok(Held::Lv1)
            }
            Level::Lv2 => Ok(Held::Lv2(self.dev.body.suspend_lv2(self.label())?)),
            _ => Ok(Held::Lv3(
                self.dev.body.suspend_lv3(self.label(), self.dev.preemptor.as_deref())?,
            )),
        }
    }

    fn release_by(&self, who: Holder) -> Result<()> {
        self.owner.check()?;
        let mut hold = self.hold();
        // Releasing is never refused as closed for the helpers (close releases everything).
        if who == Holder::Hand {
            self.not_closed()?;
        }
        if !*hold.by(who) {
            return Err(hold.refusal(who, self.label()));
        }
        *hold.by(who) = false;
        if hold.any() {
            return Ok(());
        }
        match hold.held.take() {
            Some(h) => self.release(h).map_err(|e| e.context(self.label())),
            None => Ok(()),
        }
    }

    fn release(&self, h: Held) -> Result<()> {
        match h {
            Held::Lv1 => {
                if let Some(x) = self.dev.body.launcher() {
                    x.resume();
                }
                Ok(())
            }
            Held::Lv2(g) | Held::Lv3(g) => g.resume(),
        }
    }

    /// Submits a delay command of `ns` nanoseconds of work through the library's launcher
    /// (host: CPU work on every worker; GPU: the delay kernel on every CU). Returns its id.
    /// `InvalidArgument` past [`crate::MAX_DELAY_NS`].
    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        self.owner.check()?;
        check_delay(ns).map_err(|e| e.context(self.label()))?;
        let _open = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        self.not_closed()?;
        // The policy hears of the work before it is submitted, so that a stream it suspends
        // does not start it (policies::TimedPolicy::ready).
        let hook = self.dev_hook().as_ref().and_then(Weak::upgrade);
        if let Some(h) = &hook {
            h.submitted(self.id);
        }
        let r = self.dev.body.submit_delay(ns).map_err(|e| e.context(self.label()));
        if let (Err(_), Some(h)) = (&r, hook) {
            h.withdrawn(self.id);
        }
        r
    }

    /// Waits until every command submitted through the library completed (GPU: and everything
    /// else on the stream). Blocks through an Lv3 or Lv2 suspension until another thread resumes,
    /// and through an Lv1 suspension the helper, its policy or the daemon holds (it ends by
    /// itself: the block leaves, the policy's turn comes); fails at once under an Lv1 suspension
    /// of yours with commands pending (they would never launch), and with `Closed` if the session
    /// closed meanwhile.
    pub fn synchronize(&self) -> Result<()> {
        self.live()?;
        let x = self.launcher("wait for")?;
        loop {
            match x.wait_idle() {
                Ok(()) => break,
                Err(e @ WaitIdleError::Suspended { .. }) if self.hold().hand => {
                    return Err(self.wait_error(e));
                }
                // Held by the helper, its policy or the daemon (or resumed since): wait.
                Err(WaitIdleError::Suspended { .. }) => {
                    std::thread::sleep(HELD_POLL);
                    self.not_closed()?;
                }
                Err(e) => return Err(self.wait_error(e)),
            }
        }
        self.not_closed()?;
        self.dev.body.synchronize_device()
    }

    fn wait_error(&self, e: WaitIdleError) -> Error {
        match e {
            WaitIdleError::Suspended { .. } => Error::new(
                ErrorKind::Unsupported,
                format!("{}: {e}: resume it before waiting", self.label()),
            ),
            WaitIdleError::TimedOut { .. } => Error::new(ErrorKind::Device, e.to_string()),
        }
    }

    /// Waits until every command submitted through the library completed, at most `limit`.
    /// Unlike [`LpStream::synchronize`], fails at once under a suspension with work pending.
    pub fn wait_idle_for(&self, limit: Duration) -> Result<()> {
        self.live()?;
        self.launcher("wait for")?
            .wait_idle_for(limit)
            .map_err(|e| Error::new(ErrorKind::Device, format!("{}: {e} (waited {limit:?})", self.label())))
    }

    /// The exactly-once check of the delay commands submitted so far (call after
    /// [`LpStream::synchronize`] for a complete answer).
    pub fn check(&self) -> Result<Check> {
        self.verify().map(|v| v.check)
    }

    /// [`LpStream::check`] with the device records it rests on: on the host the worker records
    /// taken since the last call (with each worker's own timing), on a GPU every command's slot
    /// (at Lv3 also checked against the stream's suspension windows, which needs the stream idle
    /// and running: while it is suspended that part is left out).
    pub fn verify(&self) -> Result<Verified> {
        self.owner.check()?;
        self.dev.body.verify(!self.is_suspended())
    }

    /// The launcher's counters (submitted, launched, completed, pending, in flight, ...);
    /// `None` for a bound KFD queue and in a fork child.
    pub fn stats(&self) -> Option<lv1::Stats> {
        self.owner
            .is_here()
            .then(|| self.dev.body.launcher().map(Launcher::stats))
            .flatten()
    }

    /// How many delay commands the stream can take in all (GPU: its slots); `None`: no limit.
    pub fn capacity(&self) -> Option<u64> {
        self.dev.body.capacity()
    }

    /// The launcher's completions since the last call, in completion order (kept only for
    /// sessions opened with [`crate::Options::keep_records`]; empty otherwise).
    pub fn take_completions(&self) -> Vec<LpCompletion> {
        if self.owner.is_here() {
            self.dev.body.take_completions()
        } else {
            Vec::new()
        }
    }

    /// Releases every hold, refuses every later call, drops the commands not yet launched and
    /// waits until `deadline` for those in flight; past it abandons them (host: the workers are
    /// killed; GPU: the queue runs them out and the stream is never dropped) and says so with
    /// `Abandoned`. Idempotent. In a fork child: nothing (the stream is the parent's).
    pub(crate) fn close(&self, deadline: Instant) -> Result<()> {
        if !self.owner.is_here() {
            return Ok(());
        }
        {
            let _shut = self.gate.write().unwrap_or_else(PoisonError::into_inner);
            if self.closed.swap(true, Ordering::AcqRel) {
                return Ok(());
            }
        }
        let released = {
            let mut hold = self.hold();
            (hold.hand, hold.helper, hold.policy, hold.scheduler) = (false, false, false, false);
            hold.held.take().map_or(Ok(()), |h| self.release(h))
        };
        let released = released.map_err(|e| e.context(self.label()));
        let Some(x) = self.dev.body.launcher() else {
            return released;
        };
        x.resume_dropping_pending();
        let left = deadline.saturating_duration_since(Instant::now());
        if x.wait_idle_for(left).is_ok() {
            return released;
        }
        let in_flight = x.stats().in_flight;
        let how = self.dev.body.abandon();
        if how == Abandon::Left {
            self.dev.leak();
        }
        released.and(Err(Error::new(
            ErrorKind::Abandoned,
            format!(
                "{} (low-priority): {in_flight} command(s) still running when close's wait ({:?}) ended were \
                 abandoned ({})",
                self.label(),
                CLOSE_WAIT,
                how.how()
            ),
        )))
    }
}
