//! The `with` blocks of the package: `Helper.high_priority()` (the helper's enter and leave),
//! `Helper.busy()` (a stream ready for the helper's policy, then idle) and
//! `LowPriorityStream.preempted()` (suspend and resume), written here rather than as Python
//! generators so that no signal can land between the enter and the protection.
//!
//! Why native: a `contextlib.contextmanager` generator runs Python bytecode between its enter call
//! and its `try:`, where CPython runs pending signal handlers; a KeyboardInterrupt there skipped
//! the leave, and the helper's streams stayed stopped until the session closed. How CPython
//! delivers a pending signal (its handler runs, and may raise, only at points of the eval loop,
//! never inside a C or Rust call that does not ask for it):
//!
//! - `with` calls `__enter__` and sets up the handler that calls `__exit__` in one instruction
//!   (`SETUP_WITH` up to 3.10, `BEFORE_WITH` from 3.11). With a native `__enter__`, no bytecode
//!   runs between the enter and that set-up: a signal that arrives meanwhile (the GIL is
//!   released while the helper suspends) is handled at a later instruction, inside the
//!   protected range, so `__exit__` runs.
//! - 3.10 and later check for pending signals only after calls and on backward jumps
//!   (bpo-29988): not between the body's end and the call of `__exit__`, nor in the exception
//!   handler before `__exit__`. `__exit__` is always called once `__enter__` returned.
//! - 3.9 checks before almost every instruction: a signal landing in the few instructions
//!   between the end of the body (the handler popped) and the call of `__exit__` still skips
//!   it. For that, and for any `__enter__` called by hand without its `__exit__`, a block that is
//!   dropped while entered leaves (resumes) then: CPython drops the block object as soon as the
//!   interrupted `with` statement unwinds.
//!
//! Inside `__exit__`, `sync` may run Python code and raise (Ctrl-C in a synchronize): the block
//! is left all the same, then its error is raised. A block whose session (or stream) was closed
//! inside it ends quietly: closing resumed everything and ended every block.
use crate::py_err;
use preempt_api::{ErrorKind, LpStream, Session};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Set once `close()` ran: a `with` block whose session (or stream) was closed inside it has
/// nothing left to leave or resume (close did it).
#[derive(Clone, Default)]
pub(crate) struct ClosedFlag(Arc<AtomicBool>);

impl ClosedFlag {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Takes one entry off `depth` if there is one (a `__exit__` without its `__enter__` has
/// nothing to end).
fn take_one(depth: &AtomicUsize) -> bool {
    depth
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| d.checked_sub(1))
        .is_ok()
}

/// Reports what a drop could not raise, as Python does for errors in `__del__`.
fn unraisable(py: Python<'_>, e: preempt_api::Error, what: &str) {
    py_err(e.context(what)).write_unraisable(py, None);
}

/// `with hpf.high_priority(sync=..., priority=...)`: the helper's block (see the module
/// documentation). Reusable and re-entrant, from any thread: each `__enter__` is one block.
#[pyclass(frozen, module = "preempt_kfd._native")]
pub(crate) struct HelperBlock {
    session: Session,
    closed: ClosedFlag,
    priority: i32,
    sync: Option<Py<PyAny>>,
    target: Py<PyAny>,
    /// Blocks entered through this object and not yet left.
    depth: AtomicUsize,
}

impl HelperBlock {
    pub(crate) fn new(
        session: Session,
        closed: ClosedFlag,
        priority: i32,
        sync: Option<Py<PyAny>>,
        target: Py<PyAny>,
    ) -> Self {
        HelperBlock {
            session,
            closed,
            priority,
            sync,
            target,
            depth: AtomicUsize::new(0),
        }
    }

    /// `sync`, or `sync.synchronize` where it has one (a stream).
    fn run_sync(&self, py: Python<'_>) -> PyResult<()> {
        let Some(sync) = &self.sync else {
            return Ok(());
        };
        let sync = sync.bind(py);
        if sync.hasattr("synchronize")? {
            sync.call_method0("synchronize")?;
        } else {
            sync.call0()?;
        }
        Ok(())
    }

    fn leave(&self, py: Python<'_>) -> preempt_api::Result<()> {
        if self.closed.is_set() {
            return Ok(());
        }
        py.detach(|| self.session.helper_leave(self.priority))
    }
}

#[pymethods]
impl HelperBlock {
    fn __enter__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        py.detach(|| self.session.helper_enter(self.priority)).map_err(py_err)?;
        self.depth.fetch_add(1, Ordering::AcqRel);
        Ok(self.target.clone_ref(py))
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if !take_one(&self.depth) {
            return Ok(false);
        }
        let synced = self.run_sync(py);
        match (synced, self.leave(py)) {
            (synced, Ok(())) => synced.map(|()| false),
            (Ok(()), Err(e)) => Err(py_err(e)),
            (Err(sync_err), Err(e)) => {
                let e = py_err(e);
                e.set_cause(py, Some(sync_err));
                Err(e)
            }
        }
    }
}

impl Drop for HelperBlock {
    fn drop(&mut self) {
        let left = *self.depth.get_mut();
        if left == 0 {
            return;
        }
        Python::attach(|py| {
            for _ in 0..left {
                if let Err(e) = self.leave(py) {
                    unraisable(py, e, "a high_priority block dropped while entered could not be left");
                }
            }
        });
    }
}

/// `with lp.preempted()`: the stream suspended inside the block, resumed after it.
#[pyclass(frozen, module = "preempt_kfd._native")]
pub(crate) struct Preempted {
    stream: Arc<LpStream>,
    /// The session's and the stream's: either set, close has resumed the stream.
    closed: [ClosedFlag; 2],
    target: Py<PyAny>,
    depth: AtomicUsize,
}

impl Preempted {
    pub(crate) fn new(stream: Arc<LpStream>, closed: [ClosedFlag; 2], target: Py<PyAny>) -> Self {
        Preempted {
            stream,
            closed,
            target,
            depth: AtomicUsize::new(0),
        }
    }

    fn resume(&self, py: Python<'_>) -> preempt_api::Result<()> {
        match py.detach(|| self.stream.resume()) {
            // Close resumed it: the stream answers NotSuspended, or Closed once the session's
            // close refuses every later call (docs/c-api.md#contracts).
            Err(e)
                if matches!(e.kind, ErrorKind::NotSuspended | ErrorKind::Closed)
                    && self.closed.iter().any(ClosedFlag::is_set) =>
            {
                Ok(())
            }
            r => r,
        }
    }
}

#[pymethods]
impl Preempted {
    fn __enter__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        py.detach(|| self.stream.suspend()).map_err(py_err)?;
        self.depth.fetch_add(1, Ordering::AcqRel);
        Ok(self.target.clone_ref(py))
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if !take_one(&self.depth) {
            return Ok(false);
        }
        self.resume(py).map_err(py_err)?;
        Ok(false)
    }
}

impl Drop for Preempted {
    fn drop(&mut self) {
        if *self.depth.get_mut() == 0 {
            return;
        }
        Python::attach(|py| {
            if let Err(e) = self.resume(py) {
                unraisable(
                    py,
                    e,
                    "a preempted block dropped while entered could not resume its stream",
                );
            }
        });
    }
}

/// The `busy()` blocks entered on one stream and not yet left, from every `Busy` object and
/// thread: the stream goes idle when the last one leaves, not when the first does (the policy
/// knows "ready" and "idle", not how many blocks hold the stream ready). The lock is held across
/// the policy call so that a leave's idle and an enter's ready cannot cross.
#[derive(Clone, Default)]
pub(crate) struct BusyCount(Arc<Mutex<usize>>);

impl BusyCount {
    /// `ready` (the call that marks the stream ready), then one more block.
    fn enter(&self, ready: impl FnOnce() -> preempt_api::Result<()>) -> preempt_api::Result<()> {
        let mut n = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        ready()?;
        *n += 1;
        Ok(())
    }

    /// One block fewer; `idle` once none is left.
    fn leave(&self, idle: impl FnOnce() -> preempt_api::Result<()>) -> preempt_api::Result<()> {
        let mut n = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *n = n.saturating_sub(1);
        if *n == 0 { idle() } else { Ok(()) }
    }
}

/// `with helper.busy(lp)`: the stream is ready for the helper's policy inside the block (work
/// launched on its handle, which the library does not see) and idle after it
/// (docs/c-api.md#the-helpers-policy). Reusable and re-entrant, as the other blocks.
#[pyclass(frozen, module = "preempt_kfd._native")]
pub(crate) struct Busy {
    session: Session,
    stream: Arc<LpStream>,
    count: BusyCount,
    /// The session's and the stream's: either set, close has unscheduled the stream.
    closed: [ClosedFlag; 2],
    target: Py<PyAny>,
    depth: AtomicUsize,
}

impl Busy {
    pub(crate) fn new(
        session: Session,
        stream: Arc<LpStream>,
        count: BusyCount,
        closed: [ClosedFlag; 2],
        target: Py<PyAny>,
    ) -> Self {
        Busy {
            session,
            stream,
            count,
            closed,
            target,
            depth: AtomicUsize::new(0),
        }
    }

    fn idle(&self, py: Python<'_>) -> preempt_api::Result<()> {
        match py.detach(|| self.count.leave(|| self.session.helper_idle(&self.stream))) {
            // Closed inside the block: the session answers Closed, a closed stream is no longer
            // its own (InvalidArgument); either way close took it off the policy.
            Err(e)
                if matches!(e.kind, ErrorKind::Closed | ErrorKind::InvalidArgument)
                    && self.closed.iter().any(ClosedFlag::is_set) =>
            {
                Ok(())
            }
            r => r,
        }
    }
}

#[pymethods]
impl Busy {
    fn __enter__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        py.detach(|| self.count.enter(|| self.session.helper_ready(&self.stream)))
            .map_err(py_err)?;
        self.depth.fetch_add(1, Ordering::AcqRel);
        Ok(self.target.clone_ref(py))
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if !take_one(&self.depth) {
            return Ok(false);
        }
        self.idle(py).map_err(py_err)?;
        Ok(false)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let left = *self.depth.get_mut();
        if left == 0 {
            return;
        }
        Python::attach(|py| {
            for _ in 0..left {
                if let Err(e) = self.idle(py) {
                    unraisable(
                        py,
                        e,
                        "a busy block dropped while entered could not say its stream idle",
                    );
                }
            }
        });
    }
}
