//! Waits that Ctrl-C interrupts. Python runs signal handlers in the main thread only, between
//! instructions of its eval loop: a main thread blocked in a Rust wait (a `synchronize` of a stream
//! suspended until another thread resumes it) never ran them, so SIGINT and, after
//! `install_signal_handlers`, SIGTERM were held until the wait ended, and nothing was resumed. Here
//! the wait runs on a thread of its own, and the caller waits for its answer with the GIL released,
//! waking every `SLICE` to run pending signal handlers (`Python::check_signals`; a no-op outside
//! the main thread). A handler that raises (KeyboardInterrupt) ends the call with that exception;
//! the thread is left to finish the wait on its own (a wait changes nothing: it ends when the work
//! completes, or when the session's cleanup resumes and closes the stream). A thread per wait costs
//! tens of microseconds, so callers first wait one `SLICE` in their own thread where they can.
use crate::py_err;
use preempt_api::{Error, ErrorKind};
use pyo3::prelude::*;
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::time::Duration;

/// How long a Ctrl-C may wait at most before its handler runs.
pub(crate) const SLICE: Duration = Duration::from_millis(20);

/// Runs the wait `f` (it must change nothing a caller could see half done) on a thread of its
/// own, so that the calling thread still runs Python's signal handlers meanwhile.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    f: impl FnOnce() -> preempt_api::Result<T> + Send + 'static,
) -> PyResult<T> {
    let (tx, mut rx) = sync_channel(1);
    std::thread::Builder::new()
        .name("preempt-py-wait".into())
        .spawn(move || drop(tx.send(f())))
        .map_err(|e| py_err(Error::new(ErrorKind::Device, format!("no thread to wait on: {e}"))))?;
    loop {
        // The receiver goes into the GIL-free closure and comes back (it is Send, not Sync).
        let (answer, back) = py.detach(move || (rx.recv_timeout(SLICE), rx));
        rx = back;
        match answer {
            Ok(r) => return r.map_err(py_err),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(py_err(Error::new(
                    ErrorKind::Panic,
                    "the thread waiting for the device panicked",
                )));
            }
        }
    }
}
