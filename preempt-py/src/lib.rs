//! `preempt_kfd._native`: the pyo3 layer of the Python package `preempt_kfd`. Thin: every call
//! goes to `preempt-api` (the same code as the C ABI), with the GIL released while it may block,
//! and every error becomes the matching exception class of `preempt_kfd._errors` (a
//! `PreemptError` carrying `kind`, `code`, `errno` and `meaning`). The Pythonic surface (context
//! managers, the helper's `with` block, defaults) is in `python/preempt_kfd/__init__.py`.
#![deny(unsafe_code)]

use preempt_api::{
    Check, DeviceSpec, Error, ErrorKind, HpStream, Level, LpStream, Lv1Config, MechanismInfo, Options, QueueDesc,
    Session, SuspendInfo, WorkerExe, grace_from_units, parse_mechanism,
};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::Arc;

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
    }
}

/// The API error as the Python exception of its kind.
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
            Err(import_failed) => PyRuntimeError::new_err(format!("{} (and {import_failed})", e.message)),
        }
    })
}

/// Runs `f` with the GIL released; its error becomes the exception of its kind.
fn blocking<T: Send>(py: Python<'_>, f: impl FnOnce() -> preempt_api::Result<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(py_err)
}

fn info_dict<'py>(py: Python<'py>, m: &MechanismInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", m.name.clone())?;
    d.set_item("asked", m.asked.clone())?;
    d.set_item("why", m.why.clone())?;
    d.set_item("verdicts", m.verdicts.clone())?;
    Ok(d)
}

fn suspend_dict<'py>(py: Python<'py>, s: &SuspendInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("level", s.level.to_string())?;
    d.set_item("mechanism", s.mechanism.clone())?;
    d.set_item("latency_ns", s.latency_ns)?;
    Ok(d)
}

fn check_dict<'py>(py: Python<'py>, c: &Check) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("submitted", c.submitted)?;
    d.set_item("completed", c.completed)?;
    d.set_item("exactly_once", c.exactly_once)?;
    d.set_item("finished", c.finished)?;
    d.set_item("problems", c.problems.clone())?;
    d.set_item("ok", c.ok())?;
    Ok(d)
}

/// A session on one device (see `preempt_kfd.Session`).
#[pyclass(frozen, module = "preempt_kfd._native")]
struct NativeSession {
    s: Session,
}

/// A low-priority stream (see `preempt_kfd.LowPriorityStream`).
#[pyclass(frozen, module = "preempt_kfd._native")]
struct NativeLpStream {
    session: Session,
    s: Arc<LpStream>,
}

/// The session's high-priority stream.
#[pyclass(frozen, module = "preempt_kfd._native")]
struct NativeHpStream {
    s: Arc<HpStream>,
}

#[pymethods]
impl NativeSession {
    #[new]
    #[pyo3(signature = (device, mechanism, grace, force, host_workers, worker, lv1_threshold, lv1_batch, gpu_slots))]
    #[allow(clippy::too_many_arguments)] // one per keyword of preempt_kfd.Session
    fn new(
        py: Python<'_>,
        device: &str,
        mechanism: &str,
        grace: u32,
        force: bool,
        host_workers: usize,
        worker: Option<Vec<String>>,
        lv1_threshold: usize,
        lv1_batch: usize,
        gpu_slots: usize,
    ) -> PyResult<Self> {
        let spec: DeviceSpec = device.parse().map_err(py_err)?;
        let mut o = Options {
            mechanism: parse_mechanism(mechanism).map_err(py_err)?,
            grace: grace_from_units(grace).map_err(py_err)?,
            force,
            host_workers,
            gpu_slots,
            ..Options::default()
        };
        o.lv1 = Lv1Config::new(lv1_threshold, lv1_batch)
            .map_err(|e| py_err(Error::new(ErrorKind::InvalidArgument, format!("lv1 settings: {e}"))))?;
        if let Some((program, args)) = worker.as_deref().and_then(|w| w.split_first()) {
            o.worker = Some(args.iter().fold(WorkerExe::new(program), |w, a| w.arg(a)));
        }
        let s = blocking(py, || Session::open(spec, o))?;
        Ok(NativeSession { s })
    }

    #[getter]
    fn device(&self) -> String {
        self.s.device().to_string()
    }

    fn mechanism<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, self.s.mechanism())
    }

    #[getter]
    fn has_lv3(&self) -> bool {
        self.s.has_lv3()
    }

    fn create_lp_stream(&self, py: Python<'_>, level: &str) -> PyResult<NativeLpStream> {
        let level: Level = level.parse().map_err(py_err)?;
        let s = blocking(py, || self.s.create_lp_stream(level))?;
        Ok(NativeLpStream {
            session: self.s.clone(),
            s,
        })
    }

    #[pyo3(signature = (queue_id, gpu_id, ring_base_address, ring_size, priority))]
    fn bind_queue(
        &self,
        py: Python<'_>,
        queue_id: u32,
        gpu_id: u32,
        ring_base_address: u64,
        ring_size: u32,
        priority: Option<u32>,
    ) -> PyResult<NativeLpStream> {
        let desc = QueueDesc {
            queue_id,
            gpu_id,
            ring_base_address,
            ring_size,
            priority,
        };
        let s = blocking(py, || self.s.bind_queue(desc))?;
        Ok(NativeLpStream {
            session: self.s.clone(),
            s,
        })
    }

    fn hp_stream(&self, py: Python<'_>) -> PyResult<NativeHpStream> {
        Ok(NativeHpStream {
            s: blocking(py, || self.s.hp_stream())?,
        })
    }

    fn suspend_set(&self, py: Python<'_>, streams: Vec<PyRef<'_, NativeLpStream>>) -> PyResult<()> {
        let v: Vec<Arc<LpStream>> = streams.iter().map(|s| Arc::clone(&s.s)).collect();
        blocking(py, || self.s.suspend_set(&v))
    }

    fn resume_set(&self, py: Python<'_>, streams: Vec<PyRef<'_, NativeLpStream>>) -> PyResult<()> {
        let v: Vec<Arc<LpStream>> = streams.iter().map(|s| Arc::clone(&s.s)).collect();
        blocking(py, || self.s.resume_set(&v))
    }

    fn helper_register(&self, py: Python<'_>, stream: PyRef<'_, NativeLpStream>, priority: i32) -> PyResult<()> {
        let s = Arc::clone(&stream.s);
        blocking(py, || self.s.helper_register(&s, priority))
    }

    fn helper_unregister(&self, py: Python<'_>, stream: PyRef<'_, NativeLpStream>) -> PyResult<()> {
        let s = Arc::clone(&stream.s);
        blocking(py, || self.s.helper_unregister(&s))
    }

    fn helper_enter(&self, py: Python<'_>, priority: i32) -> PyResult<()> {
        blocking(py, || self.s.helper_enter(priority))
    }

    fn helper_leave(&self, py: Python<'_>, priority: i32) -> PyResult<()> {
        blocking(py, || self.s.helper_leave(priority))
    }

    #[getter]
    fn helper_active(&self) -> usize {
        self.s.helper_active()
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        blocking(py, || self.s.close())
    }
}

#[pymethods]
impl NativeLpStream {
    #[getter]
    fn id(&self) -> u64 {
        self.s.id()
    }

    #[getter]
    fn level(&self) -> String {
        self.s.level().to_string()
    }

    #[getter]
    fn handle(&self) -> Option<usize> {
        self.s.handle()
    }

    #[getter]
    fn queue(&self) -> Option<(u32, u32)> {
        self.s.queue().map(|t| (t.queue_id, t.gpu_id))
    }

    #[getter]
    fn host_pids(&self) -> Vec<i32> {
        self.s.host_pids()
    }

    #[getter]
    fn is_suspended(&self) -> bool {
        self.s.is_suspended()
    }

    fn describe(&self) -> String {
        self.s.describe()
    }

    fn suspend<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = blocking(py, || self.s.suspend())?;
        suspend_dict(py, &info)
    }

    fn resume(&self, py: Python<'_>) -> PyResult<()> {
        blocking(py, || self.s.resume())
    }

    fn submit_delay(&self, py: Python<'_>, ns: u64) -> PyResult<u64> {
        blocking(py, || self.s.submit_delay(ns))
    }

    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        blocking(py, || self.s.synchronize())
    }

    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = blocking(py, || self.s.check())?;
        check_dict(py, &c)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        blocking(py, || self.session.close_stream(self.s.id()))
    }
}

#[pymethods]
impl NativeHpStream {
    #[getter]
    fn handle(&self) -> Option<usize> {
        self.s.handle()
    }

    fn submit_delay(&self, py: Python<'_>, ns: u64) -> PyResult<u64> {
        blocking(py, || self.s.submit_delay(ns))
    }

    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        blocking(py, || self.s.synchronize())
    }
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

/// Every error kind: (class name, kind name, code), for `preempt_kfd._errors`' self-check.
#[pyfunction]
fn error_kinds() -> Vec<(&'static str, &'static str, i32)> {
    ErrorKind::ALL
        .iter()
        .map(|&k| (class_name(k), k.name(), k.code()))
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeSession>()?;
    m.add_class::<NativeLpStream>()?;
    m.add_class::<NativeHpStream>()?;
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    m.add_function(wrap_pyfunction!(resume_all, m)?)?;
    m.add_function(wrap_pyfunction!(take_events, m)?)?;
    m.add_function(wrap_pyfunction!(host_worker_main, m)?)?;
    m.add_function(wrap_pyfunction!(error_kinds, m)?)?;
    m.add("MECHANISMS", PyTuple::new(m.py(), preempt_api::mechanism_names())?)?;
    Ok(())
}
