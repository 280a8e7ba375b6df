//! The native classes behind `preempt_kfd.Session`, `LowPriorityStream` and
//! `HighPriorityStream`. Arguments arrive checked by `python/preempt_kfd/_args.py` (a bad one
//! is `InvalidArgument` there, naming it); what is left to refuse here is the library's own.
use crate::blocks::{Busy, BusyCount, ClosedFlag, HelperBlock, Preempted};
use crate::policy;
use crate::wait::{self, interruptible};
use crate::{blocking, py_err};
use preempt_api::{
    Check, DeviceSpec, Error, ErrorKind, HpStream, Level, LpStream, Lv1Config, MechanismInfo, Options, PolicyParams,
    QueueDesc, Session, SuspendInfo, WorkerExe, grace_from_units, parse_mechanism,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Weak};

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
    closed: ClosedFlag,
}

/// A low-priority stream (see `preempt_kfd.LowPriorityStream`).
#[pyclass(frozen, module = "preempt_kfd._native")]
struct NativeLpStream {
    session: Session,
    session_closed: ClosedFlag,
    closed: ClosedFlag,
    s: Arc<LpStream>,
    /// Its `busy()` blocks now (`blocks::BusyCount`), shared by every block object of it.
    busy: BusyCount,
}

/// The session's high-priority stream. The session owns it (its close drops it and its worker);
/// this holds the session, so that the stream lives as long as the session is open, and a weak
/// reference, so that after the close every call fails with Closed, as the LP streams' do.
#[pyclass(frozen, module = "preempt_kfd._native")]
struct NativeHpStream {
    _session: Session,
    s: Weak<HpStream>,
}

impl NativeHpStream {
    fn stream(&self) -> PyResult<Arc<HpStream>> {
        self.s
            .upgrade()
            .ok_or_else(|| py_err(Error::new(ErrorKind::Closed, "the session is closed")))
    }
}

impl NativeSession {
    fn stream(&self, s: Arc<LpStream>) -> NativeLpStream {
        NativeLpStream {
            session: self.s.clone(),
            session_closed: self.closed.clone(),
            closed: ClosedFlag::default(),
            s,
            busy: BusyCount::default(),
        }
    }

    fn schedule(&self, py: Python<'_>, stream: &NativeLpStream, params: PolicyParams) -> PyResult<()> {
        let s = Arc::clone(&stream.s);
        blocking(py, || self.s.helper_schedule(&s, params))
    }
}

fn lp_streams(streams: &[PyRef<'_, NativeLpStream>]) -> Vec<Arc<LpStream>> {
    streams.iter().map(|s| Arc::clone(&s.s)).collect()
}

#[pymethods]
impl NativeSession {
    #[new]
    #[pyo3(signature = (device, mechanism, grace, force, host_workers, worker, lv1_threshold, lv1_batch, gpu_slots, scheduler, policy, round_ns, k))]
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
        scheduler: Option<&str>,
        policy: &str,
        round_ns: u64,
        k: usize,
    ) -> PyResult<Self> {
        let spec: DeviceSpec = device.parse().map_err(py_err)?;
        let mut o = Options {
            scheduler: preempt_api::sched::scheduler_setting(scheduler).map_err(py_err)?,
            mechanism: parse_mechanism(mechanism).map_err(py_err)?,
            grace: grace_from_units(grace).map_err(py_err)?,
            force,
            host_workers,
            gpu_slots,
            policy: policy::choice(policy, round_ns, k)?,
            ..Options::default()
        };
        o.lv1 = Lv1Config::new(lv1_threshold, lv1_batch).map_err(|e| {
            py_err(Error::new(
                ErrorKind::InvalidArgument,
                format!("Session: lv1_threshold and lv1_batch: {e}"),
            ))
        })?;
        if let Some((program, args)) = worker.as_deref().and_then(|w| w.split_first()) {
            o.worker = Some(args.iter().fold(WorkerExe::new(program), |w, a| w.arg(a)));
        }
        let s = blocking(py, || Session::open(spec, o))?;
        Ok(NativeSession {
            s,
            closed: ClosedFlag::default(),
        })
    }

    #[getter]
    fn device(&self) -> String {
        self.s.device().to_string()
    }

    /// `None` for a session not scheduled by a daemon, else `{"socket", "connected",
    /// "daemon_pid", "held"}` (the ids of the streams suspended for the daemon now).
    fn scheduler<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(c) = self.s.scheduler() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("socket", c.socket().to_string_lossy().into_owned())?;
        d.set_item("connected", c.connected())?;
        d.set_item("daemon_pid", c.daemon_pid())?;
        d.set_item("held", c.held())?;
        Ok(Some(d))
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
        Ok(self.stream(s))
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
        Ok(self.stream(s))
    }

    fn hp_stream(&self, py: Python<'_>) -> PyResult<NativeHpStream> {
        let hp = blocking(py, || self.s.hp_stream())?;
        Ok(NativeHpStream {
            _session: self.s.clone(),
            s: Arc::downgrade(&hp),
        })
    }

    fn suspend_set(&self, py: Python<'_>, streams: Vec<PyRef<'_, NativeLpStream>>) -> PyResult<()> {
        let v = lp_streams(&streams);
        blocking(py, || self.s.suspend_set(&v))
    }

    fn resume_set(&self, py: Python<'_>, streams: Vec<PyRef<'_, NativeLpStream>>) -> PyResult<()> {
        let v = lp_streams(&streams);
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

    /// A `with` block of the helper at `priority`; `sync` (a callable, or None) runs before
    /// it is left; `__enter__` returns `target`.
    fn high_priority(&self, priority: i32, sync: Option<Py<PyAny>>, target: Py<PyAny>) -> HelperBlock {
        HelperBlock::new(self.s.clone(), self.closed.clone(), priority, sync, target)
    }

    #[getter]
    fn helper_active(&self) -> usize {
        self.s.helper_active()
    }

    /// The helper's policy's name (`utilization-partition`, `k-edf`, `laxity`), `None`: blocks
    /// only.
    #[getter]
    fn helper_policy(&self) -> Option<&'static str> {
        self.s.helper_policy().map(|c| c.name())
    }

    fn helper_policy_status<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.s
            .helper_policy_status()
            .map(|st| policy::status_dict(py, &st))
            .transpose()
    }

    fn helper_schedule_share(&self, py: Python<'_>, stream: PyRef<'_, NativeLpStream>, share: u32) -> PyResult<()> {
        self.schedule(py, &stream, policy::share(share)?)
    }

    fn helper_schedule_deadline(&self, py: Python<'_>, stream: PyRef<'_, NativeLpStream>, ns: u64) -> PyResult<()> {
        self.schedule(py, &stream, policy::deadline(ns))
    }

    fn helper_schedule_laxity(
        &self,
        py: Python<'_>,
        stream: PyRef<'_, NativeLpStream>,
        laxity_ns: u64,
        priority: i32,
        critical: i32,
    ) -> PyResult<()> {
        self.schedule(py, &stream, policy::laxity(laxity_ns, priority, critical))
    }

    fn helper_ready(&self, py: Python<'_>, stream: PyRef<'_, NativeLpStream>) -> PyResult<()> {
        let s = Arc::clone(&stream.s);
        blocking(py, || self.s.helper_ready(&s))
    }

    fn helper_idle(&self, py: Python<'_>, stream: PyRef<'_, NativeLpStream>) -> PyResult<()> {
        let s = Arc::clone(&stream.s);
        blocking(py, || self.s.helper_idle(&s))
    }

    /// A `with` block in which `stream` is ready for the policy; `__enter__` returns `target`.
    fn busy(&self, stream: PyRef<'_, NativeLpStream>, target: Py<PyAny>) -> Busy {
        Busy::new(
            self.s.clone(),
            Arc::clone(&stream.s),
            stream.busy.clone(),
            [self.closed.clone(), stream.closed.clone()],
            target,
        )
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.set();
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

    /// A `with` block that suspends the stream; `__enter__` returns `target`.
    fn preempted(&self, target: Py<PyAny>) -> Preempted {
        Preempted::new(
            Arc::clone(&self.s),
            [self.session_closed.clone(), self.closed.clone()],
            target,
        )
    }

    fn submit_delay(&self, py: Python<'_>, ns: u64) -> PyResult<u64> {
        blocking(py, || self.s.submit_delay(ns))
    }

    /// Waits so that a main thread blocked here (a stream suspended until another thread
    /// resumes it) still runs its signal handlers: first up to `wait::SLICE` in this thread
    /// (the common case, a stream idle or soon idle, costs nothing more), then on a waiter
    /// thread (`wait.rs`). The first part is only taken where `synchronize` has no device part
    /// to wait for after the launcher (host streams and bound queues: no `hipStream_t`).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        if self.s.handle().is_none() && py.detach(|| self.s.wait_idle_for(wait::SLICE)).is_ok() {
            return blocking(py, || self.s.synchronize());
        }
        let s = Arc::clone(&self.s);
        interruptible(py, move || s.synchronize())
    }

    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = blocking(py, || self.s.check())?;
        check_dict(py, &c)
    }

    /// Idempotent, as `Session.close` (and Python's `close()` methods): `close_stream`'s
    /// BadHandle means the session no longer holds this very stream (ids are never reused), so
    /// it was closed before, by this call or by its session's close.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.set();
        match py.detach(|| self.session.close_stream(self.s.id())) {
            Err(e) if e.kind == ErrorKind::BadHandle => Ok(()),
            r => r.map_err(py_err),
        }
    }
}

#[pymethods]
impl NativeHpStream {
    #[getter]
    fn handle(&self) -> PyResult<Option<usize>> {
        Ok(self.stream()?.handle())
    }

    fn submit_delay(&self, py: Python<'_>, ns: u64) -> PyResult<u64> {
        let s = self.stream()?;
        blocking(py, || s.submit_delay(ns))
    }

    /// Waits in the calling thread (GIL released), unlike the LP stream's `synchronize`: the HP
    /// stream is never suspended, so the wait is bounded by the HP work the caller submitted,
    /// and it is on the HP latency path, where a hand-off to a waiter thread (`wait.rs`) would
    /// add two thread wake-ups to every request.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.stream()?;
        blocking(py, || s.synchronize())
    }
}

pub(crate) fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeSession>()?;
    m.add_class::<NativeLpStream>()?;
    m.add_class::<NativeHpStream>()?;
    m.add_class::<HelperBlock>()?;
    m.add_class::<Preempted>()?;
    m.add_class::<Busy>()?;
    Ok(())
}
