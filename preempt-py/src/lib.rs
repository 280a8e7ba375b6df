//! `preempt_kfd._native`: the pyo3 layer of the Python package `preempt_kfd`. Thin: every call
//! goes to `preempt-api` (the same code as the C ABI), with the GIL released while it may block,
//! and every error becomes the matching exception class of `preempt_kfd._errors` (a
//! `PreemptError` carrying `kind`, `code`, `errno` and `meaning`). The classes are in
//! `objects.rs`, the `with` blocks that no signal can split in `blocks.rs`, the waits that Ctrl-C
//! interrupts in `wait.rs`, the helper's policy's values in `policy.rs`. The Pythonic surface
//! (argument checks, defaults) is in `python/preempt_kfd/`.
#![deny(unsafe_code)]

mod blocks;
mod objects;
mod policy;
mod wait;

use preempt_api::{DeviceSpec, Error, ErrorKind, Level};
use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The exception class of `preempt_kfd._errors` for a kind.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidArgument => "InvalidArgument",
        ErrorKind::BadHandle => "BadHandle",
        ErrorKind::NoDevice => "NoDevice",
        ErrorKind::NoKfd => "NoKfd",
        ErrorKind::Unavailable => "Unavailable",
        ErrorKind::QueueRefused => "QueueRefused",
        ErrorKind::Kfd => "KfdError",
        ErrorKind::Device => "DeviceError",
        ErrorKind::AlreadySuspended => "AlreadySuspended",
        ErrorKind::NotSuspended => "NotSuspended",
        ErrorKind::ResumeFailed => "ResumeFailed",
        ErrorKind::ShuttingDown => "ShuttingDown",
        ErrorKind::Closed => "Closed",
        ErrorKind::Unsupported => "Unsupported",
        ErrorKind::Panic => "InternalError",
        ErrorKind::Forked => "Forked",
        ErrorKind::Busy => "Busy",
        ErrorKind::Abandoned => "Abandoned",
        ErrorKind::Scheduler => "SchedulerError",
    }
}

/// The API error as the Python exception of its kind. Making it runs Python code (the class's
/// `__init__`), where a signal handler may raise: a KeyboardInterrupt (or SystemExit) raised
/// there is returned as it is, never folded into another error.
fn py_err(e: Error) -> PyErr {
    Python::attach(|py| {
        let made = py.import("preempt_kfd._errors").and_then(|m| {
            m.getattr(class_name(e.kind))?.call1((
                e.message.clone(),
                e.kind.name(),
                e.kind.code(),
                e.errno,
                e.meaning.clone(),
            ))
        });
        match made {
            Ok(obj) => PyErr::from_value(obj),
            Err(interrupt) if !interrupt.is_instance_of::<PyException>(py) => interrupt,
            Err(import_failed) => PyRuntimeError::new_err(format!("{} (and {import_failed})", e.message)),
        }
    })
}

/// Runs `f` with the GIL released; its error becomes the exception of its kind.
fn blocking<T: Send>(py: Python<'_>, f: impl FnOnce() -> preempt_api::Result<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(py_err)
}

/// `/dev/kfd` and each Lv3 mechanism's verdict on this machine, one line each.
#[pyfunction]
fn probe(py: Python<'_>) -> Vec<String> {
    py.detach(preempt_api::probe)
}

/// Resumes every queue suspended through the library, in every session, and refuses later
/// suspends: for an application's own SIGINT/SIGTERM handling before it exits.
#[pyfunction]
fn resume_all(py: Python<'_>) -> Vec<(String, Option<String>)> {
    py.detach(preempt_api::resume_all_and_close)
        .into_iter()
        .map(|(label, r)| (label, r.err()))
        .collect()
}

/// What the library reported but could not return (failures inside drops), oldest first.
#[pyfunction]
fn take_events() -> Vec<String> {
    preempt_api::take_events()
}

/// Runs this process as a host-device worker (`python -m preempt_kfd._worker`).
#[pyfunction]
fn host_worker_main(py: Python<'_>) -> PyResult<()> {
    py.detach(preempt_api::worker_main)
        .map_err(|e| py_err(Error::new(ErrorKind::Device, format!("host worker: {e}"))))
}

/// Every error kind: (class name, kind name, code), for `preempt_kfd._errors`' self-check and
/// the argument checks' exceptions.
#[pyfunction]
fn error_kinds() -> Vec<(&'static str, &'static str, i32)> {
    ErrorKind::ALL
        .iter()
        .map(|&k| (class_name(k), k.name(), k.code()))
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    objects::add_classes(m)?;
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    m.add_function(wrap_pyfunction!(resume_all, m)?)?;
    m.add_function(wrap_pyfunction!(take_events, m)?)?;
    m.add_function(wrap_pyfunction!(host_worker_main, m)?)?;
    m.add_function(wrap_pyfunction!(error_kinds, m)?)?;
    m.add("MECHANISMS", PyTuple::new(m.py(), preempt_api::mechanism_names())?)?;
    // The grammars' words, for the argument checks' messages (the same words as C and preempt-lat).
    m.add("DEVICES", DeviceSpec::expected())?;
    let levels: Vec<(String, u8)> = Level::ALL.iter().map(|l| (l.to_string(), l.number())).collect();
    m.add("LEVELS", PyTuple::new(m.py(), levels)?)?;
    m.add("SCHEDULERS", preempt_api::sched::SCHEDULER_WORDS)?;
    m.add("POLICIES", PyTuple::new(m.py(), policy::words())?)?;
    m.add("MAX_POLICY_ROUND_NS", preempt_api::MAX_POLICY_ROUND.as_nanos())?;
    m.add("MAX_POLICY_K", preempt_api::MAX_POLICY_K)?;
    Ok(())
}
