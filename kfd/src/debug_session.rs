//! A self-debug session: the debugger API (DBG_TRAP, KFD >= 1.13) enabled on this process
//! itself, owned by a value that closes it on drop.
//!
//! Two users need it: the `dbg-trap` preemption mechanism (SUSPEND_QUEUES / RESUME_QUEUES) and
//! queue discovery (GET_QUEUE_SNAPSHOT is the only stock source of a queue's ring address, and it
//! needs debugging on). [`DebugSession::open`] does the setup in the only order that does not
//! hang (docs/kfd-facts.md#dbg_trap-suspend-and-resume):
//! 0. GET_QUEUE_SNAPSHOT with an empty clear mask: it succeeds only if debugging is already on
//!    (rocgdb, ROCr's core dump), and then we stop before a RUNTIME_ENABLE that could block. On
//!    the usual path it fails with EINVAL and the kernel logs one harmless
//!    "PID n not debug enabled for op 13" line.
//! 1. RUNTIME_ENABLE. After DBG_TRAP ENABLE it would block until a debugger acknowledges it. In a
//!    HIP process ROCr did it at load: EBUSY = already enabled, which is fine (and then it is not
//!    ours to disable).
//! 2. DBG_TRAP ENABLE on our own pid, exception mask 0 (no exception is routed to us, so ROCr
//!    keeps handling traps and memory faults), with a pipe as the event fd. EALREADY = someone
//!    debugs this process: a clear error, and nothing of theirs is touched.
//!
//! Closing reverses only what opening did: DISABLE (which also resumes every queue the process
//! suspended through the debugger API) if we enabled debugging, then the runtime disable if we
//! enabled the runtime (in that order: a runtime disable while debugging is on blocks).
use crate::error::{DbgOp, KfdError, Op};
use crate::events::{self, Severity};
use crate::handle::KfdOps;
use crate::types::KfdVersion;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};

/// Why a debug session could not be opened or closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// This KFD has no debugger API (it arrived in 1.13, Linux 6.5).
    NoDebuggerApi(KfdVersion),
    /// Debugging is on already (rocgdb, ROCr's core dump): ENABLE answers EALREADY. Nothing of
    /// the other session was touched.
    DebuggerPresent(KfdError),
    /// A KFD call failed. `undo`: the runtime enable of this attempt could not be undone either.
    Kfd { source: KfdError, undo: Option<KfdError> },
    /// The event pipe could not be created.
    Pipe(Errno),
}

impl SessionError {
    /// The errno of the failed call, where there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            SessionError::DebuggerPresent(e) | SessionError::Kfd { source: e, .. } => Some(e.errno),
            SessionError::Pipe(e) => Some(*e),
            SessionError::NoDebuggerApi(_) => None,
        }
    }
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::NoDebuggerApi(v) => write!(f, "KFD {v} predates the debugger API (1.13)"),
            SessionError::DebuggerPresent(e) => write!(f, "another debugger owns this process ({e})"),
            SessionError::Kfd { source, undo: None } => write!(f, "{source}"),
            SessionError::Kfd { source, undo: Some(u) } => {
                write!(f, "{source}; and the runtime enable could not be undone: {u}")
            }
            SessionError::Pipe(e) => write!(f, "pipe2 for the debug event fd: {e}"),
        }
    }
}

impl std::error::Error for SessionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SessionError::DebuggerPresent(e) | SessionError::Kfd { source: e, .. } => Some(e),
            SessionError::Pipe(e) => Some(e),
            SessionError::NoDebuggerApi(_) => None,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    enabled_runtime: bool,
    closed: bool,
    /// The event pipe, both ends kept open while debugging is on: the kernel writes a byte per
    /// subscribed event, and a pipe without a reader would raise SIGPIPE in this process.
    /// Non-blocking, so a full pipe can never stall the kernel's writer.
    pipe: Option<(OwnedFd, OwnedFd)>,
}

/// Debugging enabled on this process by us; closed by [`DebugSession::close`] or on drop.
#[derive(Debug)]
pub struct DebugSession<K: KfdOps> {
    kfd: K,
    state: Mutex<State>,
}

impl<K: KfdOps> DebugSession<K> {
    /// Opens a session on this process (see the module docs for the order and why).
    pub fn open(kfd: K) -> Result<Self, SessionError> {
        let kfd_err = |source| SessionError::Kfd { source, undo: None };
        let v = kfd.version().map_err(kfd_err)?;
        if !v.has_debugger_api() {
            return Err(SessionError::NoDebuggerApi(v));
        }
        if kfd.queue_snapshot(0).is_ok() {
            return Err(SessionError::DebuggerPresent(KfdError::new(
                Op::DbgTrap(DbgOp::Enable),
                None,
                Errno::EALREADY,
            )));
        }
        let mut st = State::default();
        match kfd.runtime_enable(0) {
            Ok(_) => st.enabled_runtime = true,
            Err(e) if e.errno == Errno::EBUSY => {} // ROCr (or someone) enabled it: not ours.
            Err(e) => return Err(kfd_err(e)),
        }
        let undo = |kfd: &K, st: &State| {
            if st.enabled_runtime {
                kfd.runtime_disable().err()
            } else {
                None
            }
        };
        let pipe = match nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK) {
            Ok(p) => p,
            Err(e) => {
                if let Some(u) = undo(&kfd, &st) {
                    events::emit(
                        Severity::Warning,
                        "debug session",
                        format!("the runtime enable could not be undone: {u}"),
                    );
                }
                return Err(SessionError::Pipe(e));
            }
        };
        if let Err(e) = kfd.dbg_enable(0, pipe.1.as_fd()) {
            let u = undo(&kfd, &st);
            return Err(if e.errno == Errno::EALREADY && u.is_none() {
                SessionError::DebuggerPresent(e)
            } else {
                SessionError::Kfd { source: e, undo: u }
            });
        }
        st.pipe = Some(pipe);
        Ok(DebugSession {
            kfd,
            state: Mutex::new(st),
        })
    }

    /// The KFD handle the session runs on.
    pub fn kfd(&self) -> &K {
        &self.kfd
    }

    /// Whether opening enabled the runtime (false when ROCr had done it already).
    pub fn enabled_runtime(&self) -> bool {
        self.lock().enabled_runtime
    }

    /// Whether debugging is still on through this session.
    pub fn is_open(&self) -> bool {
        !self.lock().closed
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// DISABLE, then the runtime disable if opening enabled it. Idempotent. If DISABLE fails,
    /// the runtime is left on (its disable would block while debugging is on).
    pub fn close(&self) -> Result<(), KfdError> {
        let mut st = self.lock();
        if st.closed {
            return Ok(());
        }
        st.closed = true;
        self.kfd.dbg_disable()?;
        st.pipe = None;
        if st.enabled_runtime {
            self.kfd.runtime_disable()?;
        }
        Ok(())
    }
}

impl<K: KfdOps> Drop for DebugSession<K> {
    /// Closes the session; a failure is reported as an event (see [`crate::events`]).
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            events::emit(
                Severity::Warning,
                "debug session",
                format!("closing failed, debug mode may stay on: {e}"),
            );
        }
    }
}
