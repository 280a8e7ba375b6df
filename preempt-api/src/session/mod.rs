//! [`Session`]: one device, its Lv3 mechanism, its streams and its helper (the helper calls,
//! in-process or through the scheduler daemon, in `helper_calls.rs`).
use crate::bound::{BoundQueue, KfdBackend, QueueDesc};
use crate::device::DeviceBackend;
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{GpuBackend, GpuDevice};
use crate::helper::Helper;
use crate::helper::timed::Driver;
use crate::host::HostBackend;
use crate::hp::HpStream;
use crate::limits::CLOSE_WAIT;
use crate::mech::{self, Lv3Request, Lv3Setup, MechanismInfo};
use crate::options::{DeviceSpec, Level, Options};
use crate::owner::{Bound, Owner};
use crate::sched::SchedClient;
use crate::stream::LpStream;
use lv3::mechanism::Preemptor;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

mod helper_calls;

/// The session's device: the opening process's alone ([`Bound`]: a fork child never drops it).
struct Dev {
    backend: Box<dyn DeviceBackend>,
    /// The GPU, on `hip:N` sessions.
    gpu: Option<Arc<GpuDevice>>,
    preemptor: Option<Arc<Preemptor>>,
}

struct Inner {
    /// The process that opened the session (docs/c-api.md#fork).
    owner: Owner,
    device: DeviceSpec,
    /// The device's identity for the scheduler daemon ([`Session::sched_device`]).
    sched_device: Option<crate::sched::proto::Device>,
    dev: Bound<Dev>,
    info: MechanismInfo,
    opts: Options,
    streams: Mutex<BTreeMap<u64, Arc<LpStream>>>,
    hp: Mutex<Option<Arc<HpStream>>>,
    helper: Helper,
    /// The helper's time-driven policy ([`Options::policy`]); its thread is the owner's alone.
    timed: Option<Bound<Driver>>,
    /// The scheduler daemon's client ([`Options::scheduler`]), set once at open: the helper
    /// calls go to it instead of `helper`. The owner's alone ([`Bound`]: its link thread is not
    /// a fork child's to join).
    sched: OnceLock<Bound<SchedClient>>,
    next: AtomicU64,
    closed: AtomicBool,
}

/// A session that does not keep it open: what its scheduler client holds (a strong handle would
/// be a cycle, the session holding its client).
#[derive(Clone)]
pub(crate) struct WeakSession(Weak<Inner>);

impl WeakSession {
    /// Whether `s` is one of the session's open streams (false once the session is gone).
    pub fn owns(&self, s: &LpStream) -> bool {
        self.0.upgrade().is_some_and(|inner| inner.owns(s).is_ok())
    }
}

/// A session on one device. Cheap to clone (a shared handle); thread-safe. Closing (or dropping
/// the last handle) resumes everything it suspended, waits at most [`CLOSE_WAIT`] for the work in
/// flight, then tears the mechanism down. A session belongs to the process that opened it: in a
/// fork child every call fails with `Forked`, and close (or a drop) releases only the child's
/// copy, touching nothing of the parent's.
///
/// ```no_run
/// use preempt_api::{DeviceSpec, Level, Options, Session};
/// let s = Session::open(DeviceSpec::HOST, Options::default())?;
/// let lp = s.create_lp_stream(Level::Auto)?; // host: Lv3 = SIGSTOP of its workers
/// for _ in 0..10 {
///     lp.submit_delay(1_000_000)?; // 1 ms of work per command
/// }
/// let info = lp.suspend()?; // the running command stops where it is
/// // ... the high-priority work runs here ...
/// lp.resume()?;
/// lp.synchronize()?;
/// assert!(lp.check()?.ok(), "every command ran exactly once");
/// println!("suspended via {} in {} ns", info.mechanism, info.latency_ns);
/// s.close()?;
/// # Ok::<(), preempt_api::Error>(())
/// ```
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("device", &self.inner.device)
            .field("mechanism", &self.inner.info.name)
            .finish_non_exhaustive()
    }
}

use crate::lock;

impl Session {
    /// Opens a session. `auto` picks `hip:0` where it can run, else the host device. On a GPU
    /// the Lv3 mechanism is built now (`auto`: the first usable one; none: the session opens and
    /// its streams default to Lv1); a `kfd` session fails without one. The host device accepts
    /// only the `auto` mechanism (its Lv3 is SIGSTOP/SIGCONT).
    pub fn open(device: DeviceSpec, opts: Options) -> Result<Session> {
        // The policy's settings are checked before any device is touched.
        let timed = opts.policy.map(Driver::new).transpose()?;
        let device = match device {
            DeviceSpec::Auto if gpu_device::usable(0).is_ok() => DeviceSpec::Hip(0),
            DeviceSpec::Auto => DeviceSpec::HOST,
            d => d,
        };
        // A device is one arm here (docs/conventions.md: how to add a device).
        let (backend, lv3): (Box<dyn DeviceBackend>, Lv3Setup) = match device {
            DeviceSpec::Host(_) => {
                let (b, lv3) = HostBackend::open(&opts)?;
                let lv3 = if opts.no_lv3 {
                    Lv3Setup::none(opts.mechanism)
                } else {
                    lv3
                };
                (Box::new(b), lv3)
            }
            DeviceSpec::Hip(n) => {
                drop(timed);
                return Session::on_gpu(Arc::new(GpuDevice::open(n, opts.gpu_kernel)?), opts);
            }
            DeviceSpec::Kfd => (
                Box::new(KfdBackend),
                mech::build(Lv3Request {
                    force: opts.force,
                    ..Lv3Request::required(opts.mechanism, opts.grace)
                })?,
            ),
            DeviceSpec::Auto => unreachable!("resolved above"),
        };
        Session::assemble(device, backend, None, lv3, opts, timed).scheduled()
    }

    /// A session on a GPU opened already (its kernel and calibration are shared): how a program
    /// that opens several sessions in turn (one per experiment) keeps one device. The Lv3
    /// mechanism is built now, unless [`Options::no_lv3`].
    pub fn on_gpu(gpu: Arc<GpuDevice>, opts: Options) -> Result<Session> {
        let timed = opts.policy.map(Driver::new).transpose()?;
        let device = DeviceSpec::Hip(gpu.device().info.index);
        let lv3 = if opts.no_lv3 {
            Lv3Setup::none(opts.mechanism)
        } else {
            mech::build(Lv3Request {
                force: opts.force,
                ..Lv3Request::optional(opts.mechanism, opts.grace)
            })?
        };
        let backend = Box::new(GpuBackend(Arc::clone(&gpu)));
        Session::assemble(device, backend, Some(gpu), lv3, opts, timed).scheduled()
    }

    fn assemble(
        device: DeviceSpec,
        backend: Box<dyn DeviceBackend>,
        gpu: Option<Arc<GpuDevice>>,
        lv3: Lv3Setup,
        opts: Options,
        timed: Option<Driver>,
    ) -> Session {
        let owner = Owner::here();
        let sched_device = match device {
            DeviceSpec::Host(n) => Some(crate::sched::proto::Device::host(n)),
            DeviceSpec::Hip(_) => gpu
                .as_ref()
                .and_then(|g| g.kfd_gpu_id())
                .map(crate::sched::proto::Device::kfd),
            DeviceSpec::Kfd | DeviceSpec::Auto => None,
        };
        Session {
            inner: Arc::new(Inner {
                owner,
                device,
                sched_device,
                dev: Bound::new(
                    owner,
                    Dev {
                        backend,
                        gpu,
                        preemptor: lv3.preemptor,
                    },
                ),
                info: lv3.info,
                opts,
                streams: Mutex::new(BTreeMap::new()),
                hp: Mutex::new(None),
                helper: Helper::default(),
                timed: timed.map(|d| Bound::new(owner, d)),
                sched: OnceLock::new(),
                next: AtomicU64::new(1),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The GPU the session runs on (`None` on the host device and `kfd`).
    pub fn gpu(&self) -> Option<&Arc<GpuDevice>> {
        self.inner.dev.gpu.as_ref()
    }

    /// `Forked` unless the calling process opened the session (a fork child must open its own).
    pub fn check_process(&self) -> Result<()> {
        self.inner.owner.check()
    }

    /// `Forked` in a fork child (checked before any lock: a parent thread may have held it at the
    /// fork), `Closed` after close.
    fn live(&self) -> Result<()> {
        self.inner.owner.check()?;
        if self.inner.closed.load(Ordering::Acquire) {
            Err(Error::closed())
        } else {
            Ok(())
        }
    }

    /// The device the session runs on (`auto` resolved).
    pub fn device(&self) -> DeviceSpec {
        self.inner.device
    }

    /// The Lv3 mechanism and why (see [`MechanismInfo`]).
    pub fn mechanism(&self) -> &MechanismInfo {
        &self.inner.info
    }

    /// Whether Lv3 is available (a mechanism on a GPU/kfd session; on the host device unless
    /// [`Options::no_lv3`]).
    pub fn has_lv3(&self) -> bool {
        if self.inner.dev.backend.own_lv3() {
            !self.inner.opts.no_lv3
        } else {
            self.inner.dev.preemptor.is_some()
        }
    }

    /// `auto` -> Lv3 where available, else Lv1; Lv3 where unavailable is an error, and so is Lv2
    /// anywhere but the host device (an AMD GPU has no per-queue Lv2: see
    /// [`crate::options::lv2_unavailable`]).
    pub fn resolve_level(&self, level: Level) -> Result<Level> {
        match level {
            Level::Lv2 if self.inner.device.has_lv2() => Ok(Level::Lv2),
            Level::Lv2 => Err(crate::options::lv2_unavailable(self.inner.device)),
            Level::Auto if self.has_lv3() => Ok(Level::Lv3),
            Level::Auto | Level::Lv1 => Ok(Level::Lv1),
            Level::Lv3 if self.has_lv3() => Ok(Level::Lv3),
            Level::Lv3 => Err(Error::new(
                ErrorKind::Unavailable,
                format!("Lv3 is unavailable on this session: {}", self.inner.info.why),
            )),
        }
    }

    /// Adds a new stream, unless close began meanwhile (checked under the lock close takes the
    /// streams with, so every stream is either refused here or closed by close).
    fn add(&self, level: Level, body: Box<dyn crate::device::LpBody>) -> Result<Arc<LpStream>> {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let lv1_wait = !self.inner.opts.lv1_no_wait;
        let pre = self.inner.dev.preemptor.clone();
        let s = Arc::new(LpStream::new(id, level, body, pre, lv1_wait, self.inner.owner));
        let mut streams = lock(&self.inner.streams);
        if let Err(e) = self.live() {
            drop(streams);
            let _ = s.close(Instant::now());
            return Err(e);
        }
        streams.insert(id, Arc::clone(&s));
        Ok(s)
    }

    /// A low-priority stream suspended at `level`. Host: a queue of worker processes running
    /// delay commands. GPU: a HIP stream with a queue of its own (at Lv3 its KFD queue is
    /// discovered now; launch on [`LpStream::handle`] with any library).
    pub fn create_lp_stream(&self, level: Level) -> Result<Arc<LpStream>> {
        self.live()?;
        let level = self.resolve_level(level)?;
        let lv3 = self.inner.dev.preemptor.as_ref().filter(|_| level == Level::Lv3);
        let body = self.inner.dev.backend.lp_stream(level, lv3, &self.inner.opts)?;
        self.add(level, body)
    }

    /// Binds an explicit KFD queue of this process (Lv3 only). Nothing is checked with the
    /// kernel here: a suspend of a queue that does not exist is refused by the kernel (INVALID
    /// for preempt-queues and dbg-trap, EFAULT for update-queue).
    pub fn bind_queue(&self, desc: QueueDesc) -> Result<Arc<LpStream>> {
        self.live()?;
        if let Some(e) = self.inner.dev.backend.bind_refused() {
            return Err(e);
        }
        let Some(p) = &self.inner.dev.preemptor else {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("no Lv3 mechanism: {}", self.inner.info.why),
            ));
        };
        let target = crate::bound::target(desc, p)?;
        self.add(Level::Lv3, Box::new(BoundQueue(target)))
    }

    /// A stream by id.
    pub fn stream(&self, id: u64) -> Result<Arc<LpStream>> {
        self.inner.owner.check()?;
        lock(&self.inner.streams)
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::new(ErrorKind::BadHandle, format!("no stream {id} in this session")))
    }

    fn owns(&self, s: &LpStream) -> Result<()> {
        self.inner.owns(s)
    }

    /// Every stream of `set` is this session's; an empty set is refused (as the C ABI does).
    fn owns_all(&self, set: &[Arc<LpStream>]) -> Result<()> {
        if set.is_empty() {
            return Err(Error::invalid("an empty set"));
        }
        set.iter().try_for_each(|s| self.owns(s))
    }

    /// Every open stream, by id (none in a fork child).
    pub fn streams(&self) -> Vec<Arc<LpStream>> {
        if !self.inner.owner.is_here() {
            return Vec::new();
        }
        lock(&self.inner.streams).values().cloned().collect()
    }

    /// Closes one stream: resumes it if suspended, leaves the helper, drops its commands not
    /// yet launched and waits at most [`CLOSE_WAIT`] for those in flight (past it: `Abandoned`,
    /// as [`Session::close`]). Its handle stays valid until its owner drops it; every call then
    /// fails. In a fork child: nothing (the stream is the parent's), `Ok`.
    pub fn close_stream(&self, id: u64) -> Result<()> {
        if !self.inner.owner.is_here() {
            return Ok(());
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        let s = lock(&self.inner.streams).remove(&id);
        let Some(s) = s else {
            return Err(Error::new(
                ErrorKind::BadHandle,
                "that stream is not open in this session (closed already)",
            ));
        };
        let r = match self.scheduler() {
            Some(c) if c.is_registered(id) => c.unregister_id(id, s.label()).map_err(Error::from),
            _ => self.inner.helper.unregister(id),
        };
        let unscheduled = self.inner.timed.as_ref().map_or(Ok(()), |d| d.unschedule(id));
        r.and(unscheduled).and(s.close(deadline))
    }

    /// The session's high-priority stream (created on first use).
    pub fn hp_stream(&self) -> Result<Arc<HpStream>> {
        self.live()?;
        let mut hp = lock(&self.inner.hp);
        // Again under the lock close takes the HP stream with: none is made after close.
        self.live()?;
        if let Some(h) = &*hp {
            return Ok(Arc::clone(h));
        }
        let made = Arc::new(HpStream::new(
            self.inner.owner,
            self.inner.dev.backend.hp_stream(&self.inner.opts)?,
        ));
        *hp = Some(Arc::clone(&made));
        Ok(made)
    }

    /// Suspends every stream of `set`, or none: on a failure the ones already suspended are
    /// resumed and the failure is returned.
    pub fn suspend_set(&self, set: &[Arc<LpStream>]) -> Result<()> {
        self.live()?;
        self.owns_all(set)?;
        for (i, s) in set.iter().enumerate() {
            if let Err(e) = s.suspend() {
                for done in set[..i].iter().rev() {
                    let _ = done.resume();
                }
                return Err(e.context(&format!("set member {i}")));
            }
        }
        Ok(())
    }

    /// Resumes every stream of `set`; returns the first failure after trying all.
    pub fn resume_set(&self, set: &[Arc<LpStream>]) -> Result<()> {
        self.live()?;
        self.owns_all(set)?;
        let mut first = None;
        for (i, s) in set.iter().enumerate() {
            if let Err(e) = s.resume() {
                first.get_or_insert(e.context(&format!("set member {i}")));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Resumes everything, closes every stream (the commands not yet launched are dropped),
    /// waits at most [`CLOSE_WAIT`] for the commands in flight, then tears the mechanism down
    /// (dbg-trap: debugging off). Idempotent; every later call on the session or its streams
    /// fails with `Closed`. Returns the first failure (a queue that could not be resumed) after
    /// trying everything; else `Abandoned` if commands were still running when the wait ended
    /// (the host device kills those workers; a GPU cannot stop a running kernel, so its queue
    /// runs it out and is freed when the process exits). In a fork child it releases only the
    /// child's copy of the session and returns `Ok`.
    pub fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

impl Inner {
    /// `s` is one of this session's open streams: the very object, not only its id (ids start
    /// at 1 in every session, so another session's stream 1 is not ours).
    fn owns(&self, s: &LpStream) -> Result<()> {
        match lock(&self.streams).get(&s.id()) {
            Some(mine) if std::ptr::eq(Arc::as_ptr(mine), s) => Ok(()),
            _ => Err(Error::invalid(format!(
                "{} is not an open stream of this session: a session's sets and helper take only its own streams",
                s.label()
            ))),
        }
    }

    fn close(&self) -> Result<()> {
        if !self.owner.is_here() {
            // A fork child: nothing here is its own but this copy's flag (Drop: `Bound`).
            self.closed.store(true, Ordering::Release);
            return Ok(());
        }
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        // The daemon's client first: it resumes what it holds and disconnects, so no order
        // reaches a stream being closed (the daemon drops this client's blocks and streams).
        let failsafe = self.sched.get().map(|c| c.close()).unwrap_or_default();
        // The policy thread stops before anything is closed under it.
        let mut results = vec![self.timed.as_ref().map_or(Ok(()), |d| d.clear()), self.helper.clear()];
        results.extend(failsafe.into_iter().map(|m| {
            Err(Error::new(
                ErrorKind::ResumeFailed,
                format!("scheduler: resuming what the daemon held: {m}"),
            ))
        }));
        let streams = std::mem::take(&mut *lock(&self.streams));
        results.extend(streams.values().map(|s| s.close(deadline)));
        drop(streams);
        let hp = lock(&self.hp).take();
        results.extend(hp.map(|h| h.close(deadline)));
        if let Some(p) = &self.dev.preemptor {
            results.push(p.teardown().map_err(Error::from));
        }
        first_failure(results)
    }
}

/// The first failure that is not an abandonment; else every abandonment in one `Abandoned`.
fn first_failure(results: Vec<Result<()>>) -> Result<()> {
    let (abandoned, failed): (Vec<Error>, Vec<Error>) = results
        .into_iter()
        .filter_map(std::result::Result::err)
        .partition(|e| e.kind == ErrorKind::Abandoned);
    if let Some(e) = failed.into_iter().next() {
        return Err(e);
    }
    if abandoned.is_empty() {
        return Ok(());
    }
    let what: Vec<String> = abandoned.into_iter().map(|e| e.message).collect();
    Err(Error::new(ErrorKind::Abandoned, format!("close: {}", what.join("; "))))
}

impl Drop for Inner {
    /// What a drop cannot return is reported through `kfd::events` (`take_events`).
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            kfd::events::emit(
                kfd::events::Severity::Warning,
                "preempt session",
                format!("closing on drop: {e}"),
            );
        }
    }
}
