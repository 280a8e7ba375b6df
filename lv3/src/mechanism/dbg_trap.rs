//! `dbg-trap`: the debugger API on this process itself (DBG_TRAP SUSPEND_QUEUES / RESUME_QUEUES).
//!
//! Preferred over update-queue because SUSPEND sets the queue's `is_suspended`, which nothing
//! else (ROCr's scratch reclaim toggling UPDATE_QUEUE) can undo. The price is a process-wide
//! setup, done by [`DbgTrap::setup`] in the only order that does not hang:
//! 0. GET_QUEUE_SNAPSHOT with an empty clear mask: it succeeds only if debugging is already on
//!    (someone else's session), in which case we stop before a RUNTIME_ENABLE that could block.
//!    On the usual path it fails with EINVAL and the kernel logs one harmless
//!    "PID n not debug enabled for op 13" line (seen in the QEMU guest).
//! 1. RUNTIME_ENABLE first. After DBG_TRAP ENABLE it would block until a debugger acknowledges
//!    it with SEND_RUNTIME_EVENT. In a HIP process ROCr did it at load: EBUSY = already enabled,
//!    which is fine (and then it is not ours to disable).
//! 2. DBG_TRAP ENABLE on our own pid, exception mask 0 (no exception is routed to us, so ROCr
//!    keeps handling traps and memory faults), with a pipe as the event fd. EALREADY = rocgdb or
//!    ROCr's core dump debugs this process: a clear error, and nothing of theirs is touched.
//!
//! Teardown reverses only what setup did: DISABLE (which resumes every suspended queue) if we
//! enabled debugging, then RUNTIME disable if we enabled the runtime (in that order: a runtime
//! disable while debugging is on blocks, like the enable). Drop tears down.
use super::{MechError, Preempt, QueueTarget, SuspendReport};
use crate::kfd::{DbgOp, GracePeriod, KfdError, KfdOps, Op, QueueState, EC_QUEUE_NEW_MASK};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::time::Instant;

const NAME: &str = "dbg-trap";

#[derive(Debug, Default)]
struct Session {
    enabled_runtime: bool,
    enabled_debug: bool,
    torn_down: bool,
    /// The event pipe, both ends kept open while debugging is on: the kernel writes a byte per
    /// subscribed event, and a pipe without a reader would raise SIGPIPE in our process.
    /// Non-blocking, so a full pipe can never stall the kernel's writer.
    pipe: Option<(OwnedFd, OwnedFd)>,
}

/// The dbg-trap mechanism over any [`KfdOps`].
#[derive(Debug)]
pub struct DbgTrap<K: KfdOps> {
    kfd: K,
    grace: GracePeriod,
    session: Mutex<Session>,
}

impl<K: KfdOps> DbgTrap<K> {
    /// Enables the runtime (unless already enabled) and the debug trap on this process.
    /// `grace` is how long the CP lets waves run before saving them (~1K GPU clocks per unit).
    pub fn setup(kfd: K, grace: GracePeriod) -> Result<Self, MechError> {
        let v = kfd.version().map_err(MechError::kfd(NAME))?;
        if !v.has_debugger_api() {
            return Err(MechError::Unavailable { mechanism: NAME, why: format!("KFD {v} predates the debugger API (1.13)") });
        }
        // Any debug op succeeds only while debugging is on, and then RUNTIME_ENABLE would block
        // (if the runtime is still off): ask first with a side-effect-free snapshot (clear mask 0).
        if kfd.queue_snapshot(0).is_ok() {
            return Err(MechError::DebuggerPresent(KfdError::new(Op::DbgTrap(DbgOp::Enable), None, Errno::EALREADY)));
        }
        let mut s = Session::default();
        match kfd.runtime_enable(0) {
            Ok(_) => s.enabled_runtime = true,
            Err(e) if e.errno == Errno::EBUSY => {} // ROCr (or someone) enabled it: not ours.
            Err(e) => return Err(MechError::Kfd { mechanism: NAME, source: e }),
        }
        let undo_runtime = |kfd: &K, s: &Session| {
            if !s.enabled_runtime {
                return;
            }
            if let Err(e) = kfd.runtime_disable() {
                eprintln!("lv3: dbg-trap setup failed and the runtime enable could not be undone: {e}");
            }
        };
        let pipe = match nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK) {
            Ok(p) => p,
            Err(e) => {
                undo_runtime(&kfd, &s);
                return Err(MechError::Unavailable { mechanism: NAME, why: format!("pipe2 for the debug event fd: {e}") });
            }
        };
        match kfd.dbg_enable(0, pipe.1.as_fd()) {
            Ok(_) => s.enabled_debug = true,
            Err(e) => {
                undo_runtime(&kfd, &s);
                return Err(if e.errno == Errno::EALREADY { MechError::DebuggerPresent(e) } else { MechError::Kfd { mechanism: NAME, source: e } });
            }
        }
        s.pipe = Some(pipe);
        Ok(DbgTrap { kfd, grace, session: Mutex::new(s) })
    }

    /// The KFD handle (e.g. for a GET_QUEUE_SNAPSHOT during discovery).
    pub fn kfd(&self) -> &K {
        &self.kfd
    }

    pub fn grace(&self) -> GracePeriod {
        self.grace
    }

    /// Whether setup enabled the runtime (false when ROCr had done it already).
    pub fn enabled_runtime(&self) -> bool {
        self.lock().enabled_runtime
    }

    /// Whether setup enabled the debug trap (true after a successful setup until teardown).
    pub fn enabled_debug(&self) -> bool {
        let s = self.lock();
        s.enabled_debug && !s.torn_down
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_live(&self) -> Result<(), MechError> {
        if self.lock().torn_down {
            return Err(MechError::Unavailable { mechanism: NAME, why: "torn down (debug mode is off)".into() });
        }
        Ok(())
    }

    fn teardown_inner(&self) -> Result<(), MechError> {
        let mut s = self.lock();
        if s.torn_down {
            return Ok(());
        }
        s.torn_down = true;
        if s.enabled_debug {
            // If DISABLE fails, a runtime disable would block (debugging still on): stop here.
            self.kfd.dbg_disable().map_err(MechError::kfd(NAME))?;
        }
        s.pipe = None;
        if s.enabled_runtime {
            self.kfd.runtime_disable().map_err(MechError::kfd(NAME))?;
        }
        Ok(())
    }
}

impl<K: KfdOps + Send + Sync> Preempt for DbgTrap<K> {
    fn name(&self) -> &'static str {
        NAME
    }

    /// GET_QUEUE_SNAPSHOT clearing EC_QUEUE_NEW (a queue created while debugging is on cannot be
    /// suspended until that bit is cleared, and SUSPEND's own clear mask is only applied when some
    /// queue was suspended), then SUSPEND_QUEUES with EC_QUEUE_NEW in its clear mask too.
    fn suspend(&self, q: &QueueTarget) -> Result<SuspendReport, MechError> {
        self.check_live()?;
        let t0 = Instant::now();
        let snap = self.kfd.queue_snapshot(EC_QUEUE_NEW_MASK).map_err(MechError::kfd(NAME))?;
        let cleared_queue_new =
            snap.iter().any(|s| s.queue_id == q.queue_id && s.gpu_id == q.gpu_id && s.exception_status & EC_QUEUE_NEW_MASK != 0);
        let t1 = Instant::now();
        let st = self.kfd.suspend_queues(&[q.queue_id], self.grace, EC_QUEUE_NEW_MASK).map_err(MechError::kfd(NAME))?;
        let preempt_call = t1.elapsed();
        match st.first().map(|s| s.state) {
            Some(QueueState::Ok) => Ok(SuspendReport { mechanism: NAME, queue_id: q.queue_id, total: t0.elapsed(), preempt_call, cleared_queue_new, kernel: None }),
            state => {
                let state = state.unwrap_or(QueueState::Invalid);
                if state == QueueState::Error {
                    // The kernel marks the queue suspended before the failed unmap: undo that.
                    if let Err(e) = self.kfd.resume_queues(&[q.queue_id]) {
                        eprintln!("lv3: dbg-trap: queue {} may stay suspended after a failed suspend: {e}", q.queue_id);
                    }
                }
                Err(MechError::QueueRefused { op: DbgOp::SuspendQueues, queue: q.queue_id, state })
            }
        }
    }

    /// RESUME_QUEUES for this queue (a queue that is not suspended comes back Ok: no-op).
    fn resume(&self, q: &QueueTarget) -> Result<(), MechError> {
        self.check_live()?;
        let st = self.kfd.resume_queues(&[q.queue_id]).map_err(MechError::kfd(NAME))?;
        match st.first().map(|s| s.state) {
            Some(QueueState::Ok) => Ok(()),
            state => Err(MechError::QueueRefused { op: DbgOp::ResumeQueues, queue: q.queue_id, state: state.unwrap_or(QueueState::Invalid) }),
        }
    }

    /// DISABLE if setup enabled debugging (it resumes every suspended queue of the process), then
    /// RUNTIME disable if setup enabled the runtime. Idempotent; later suspends are refused.
    fn teardown(&self) -> Result<(), MechError> {
        self.teardown_inner()
    }
}

impl<K: KfdOps> Drop for DbgTrap<K> {
    /// Restores the debug state found at setup; a failure is printed, never dropped silently.
    fn drop(&mut self) {
        if let Err(e) = self.teardown_inner() {
            eprintln!("lv3: dbg-trap teardown failed, debug state NOT restored: {e}");
        }
    }
}
