//! Streams: a low-priority stream ([`LpStream`]) is what gets suspended; the high-priority
//! stream ([`HpStream`]) runs the work that must not wait.
use crate::check::{Check, DeviceRecord, LpCompletion, Verified};
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{GpuHeld, GpuHp, GpuLp};
use crate::host::{HostHeld, HostHp, HostLp};
use crate::options::Level;
use lv1::{SuspendMode, WaitIdleError};
use lv3::mechanism::{Preemptor, QueueTarget, SuspendedQueue};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// What backs a low-priority stream.
pub(crate) enum Body {
    Host(HostLp),
    Gpu(GpuLp),
    /// An explicit KFD queue id: Lv3 only, nothing to submit.
    Bound(QueueTarget),
}

/// A suspension a stream holds; dropping it resumes (the guards' rule).
enum Held {
    Lv1,
    /// A bound KFD queue (no HIP stream, so no null-stream fence).
    Kfd(SuspendedQueue),
    /// A GPU stream: [`crate::gpu::GpuSuspension`] and its window.
    Gpu(GpuHeld),
    Host(HostHeld),
}

/// What one suspend did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspendInfo {
    /// Lv1 or Lv3.
    pub level: Level,
    /// `sigstop`, `preempt-queues`, `dbg-trap`, `update-queue`, or `lv1-drain`.
    pub mechanism: String,
    /// Wall time of the suspend call, ns.
    pub latency_ns: u64,
}

/// A low-priority stream of a session: the object suspended and resumed. Thread-safe; every
/// method takes `&self`. After its session closes, every call fails with `Closed`.
pub struct LpStream {
    id: u64,
    level: Level,
    body: Body,
    preemptor: Option<Arc<Preemptor>>,
    /// Lv1 suspend waits for the commands in flight ([`crate::Options::lv1_no_wait`]).
    lv1_wait: bool,
    held: Mutex<Option<Held>>,
    closed: AtomicBool,
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
    pub(crate) fn new(id: u64, level: Level, body: Body, preemptor: Option<Arc<Preemptor>>, lv1_wait: bool) -> Self {
        LpStream {
            id,
            level,
            body,
            preemptor,
            lv1_wait,
            held: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    fn held(&self) -> MutexGuard<'_, Option<Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::closed())
        } else {
            Ok(())
        }
    }

    /// The stream's id within its session (unique, never reused).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The level it is suspended at (Lv1 or Lv3; `auto` was resolved at creation).
    pub fn level(&self) -> Level {
        self.level
    }

    /// The raw `hipStream_t` as a number (GPU streams); `None` on the host device and for a
    /// bound KFD queue.
    pub fn handle(&self) -> Option<usize> {
        match &self.body {
            Body::Gpu(g) => Some(g.handle()),
            _ => None,
        }
    }

    /// The KFD queue behind the stream (Lv3 GPU streams and bound queues).
    pub fn queue(&self) -> Option<QueueTarget> {
        match &self.body {
            Body::Gpu(g) => g.target,
            Body::Bound(t) => Some(*t),
            Body::Host(_) => None,
        }
    }

    /// Host LP streams: the worker processes' pids (for inspection and tests).
    pub fn host_pids(&self) -> Vec<i32> {
        match &self.body {
            Body::Host(h) => h.queue.pids(),
            _ => Vec::new(),
        }
    }

    /// One line: what the stream is and how it is suspended.
    pub fn describe(&self) -> String {
        let mech = self.mechanism_name();
        match &self.body {
            Body::Host(h) => format!(
                "host LP stream {} ({} worker process(es)), {} via {mech}",
                self.id,
                h.queue.pids().len(),
                self.level
            ),
            Body::Gpu(g) => {
                let q = g.target.map_or(String::new(), |t| {
                    format!(", KFD queue {} on gpu 0x{:x}", t.queue_id, t.gpu_id)
                });
                let notes = if g.notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", g.notes.join("; "))
                };
                format!(
                    "GPU LP stream {} (hipStream_t 0x{:x}{q}), {} via {mech}{notes}",
                    self.id,
                    g.handle(),
                    self.level
                )
            }
            Body::Bound(t) => format!("bound KFD queue {} on gpu 0x{:x}, lv3 via {mech}", t.queue_id, t.gpu_id),
        }
    }

    fn mechanism_name(&self) -> String {
        match (self.level, &self.body) {
            (Level::Lv1, _) if self.lv1_wait => "lv1-drain".into(),
            (Level::Lv1, _) => "lv1-stop".into(),
            (_, Body::Host(_)) => "sigstop".into(),
            _ => self
                .preemptor
                .as_ref()
                .map_or_else(|| "none".into(), |p| p.kind().name().to_string()),
        }
    }

    /// Whether this stream holds a suspension.
    pub fn is_suspended(&self) -> bool {
        self.held().is_some()
    }

    /// Suspends the stream at its level: Lv3 stops the running work where it is (the
    /// session's mechanism; SIGSTOP on the host); Lv1 stops the library's launcher and waits
    /// until what was launched (and anything else on the stream) completed. `AlreadySuspended`
    /// if it is suspended already.
    pub fn suspend(&self) -> Result<SuspendInfo> {
        let mut held = self.held();
        self.live()?;
        if held.is_some() {
            return Err(Error::new(
                ErrorKind::AlreadySuspended,
                format!("stream {} is already suspended", self.id),
            ));
        }
        let t0 = Instant::now();
        let mode = if self.lv1_wait {
            SuspendMode::Drain
        } else {
            SuspendMode::Stop
        };
        let no_mechanism = || {
            Error::new(
                ErrorKind::Unavailable,
                format!("stream {}: no Lv3 mechanism or no known KFD queue", self.id),
            )
        };
        let h = match (self.level, &self.body) {
            (Level::Lv1, Body::Host(h)) => {
                if let Err(e) = h.xq.suspend(mode) {
                    h.xq.resume();
                    return Err(Error::from(e).context("Lv1 drain"));
                }
                Held::Lv1
            }
            (Level::Lv1, Body::Gpu(g)) => {
                if let Err(e) = g.xq.suspend(mode) {
                    g.xq.resume();
                    return Err(Error::from(e).context("Lv1 drain"));
                }
                Held::Lv1
            }
            (_, Body::Host(h)) => Held::Host(h.suspend_lv3(format!("host LP stream {} (SIGSTOP)", self.id))?),
            (_, Body::Gpu(g)) => Held::Gpu(g.suspend_lv3(self.preemptor.as_deref().ok_or_else(no_mechanism)?)?),
            (_, Body::Bound(t)) => Held::Kfd(self.preemptor.as_ref().ok_or_else(no_mechanism)?.suspend(t)?),
        };
        *held = Some(h);
        Ok(SuspendInfo {
            level: self.level,
            mechanism: self.mechanism_name(),
            latency_ns: ns(t0),
        })
    }

    /// Resumes what [`LpStream::suspend`] suspended; `NotSuspended` if nothing is held.
    pub fn resume(&self) -> Result<()> {
        let mut held = self.held();
        match held.take() {
            None => Err(Error::new(
                ErrorKind::NotSuspended,
                format!("stream {} is not suspended", self.id),
            )),
            Some(h) => self.release(h),
        }
    }

    fn release(&self, h: Held) -> Result<()> {
        match h {
            Held::Lv1 => {
                match &self.body {
                    Body::Host(x) => x.xq.resume(),
                    Body::Gpu(g) => g.xq.resume(),
                    Body::Bound(_) => {}
                }
                Ok(())
            }
            Held::Kfd(g) => Ok(g.resume()?),
            Held::Gpu(g) => match &self.body {
                Body::Gpu(b) => b.resume_lv3(g),
                _ => unreachable!("a GPU suspension is only made of a GPU stream"),
            },
            Held::Host(g) => g.resume(),
        }
    }

    /// Submits a delay command of `ns` nanoseconds of work through the library's launcher
    /// (host: CPU work on every worker; GPU: the delay kernel on every CU). Returns its id.
    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        self.live()?;
        match &self.body {
            Body::Host(h) => Ok(h.submit_delay(ns)),
            Body::Gpu(g) => g.submit_delay(ns),
            Body::Bound(_) => Err(Error::unsupported(
                "a bound KFD queue has no launcher: submit on its own stream",
            )),
        }
    }

    /// Waits until every command submitted through the library completed (GPU: and everything
    /// else on the stream). Blocks through an Lv3 suspension until another thread resumes; fails
    /// at once under an Lv1 suspension with commands pending (they would never launch).
    pub fn synchronize(&self) -> Result<()> {
        self.live()?;
        let r = match &self.body {
            Body::Host(h) => h.xq.wait_idle(),
            Body::Gpu(g) => g.xq.wait_idle(),
            Body::Bound(_) => return Err(Error::unsupported("a bound KFD queue has no launcher to wait for")),
        };
        if let (Body::Gpu(g), Ok(())) = (&self.body, &r) {
            g.lpq.stream().synchronize()?;
        }
        r.map_err(|e| match e {
            WaitIdleError::Suspended { .. } => Error::new(
                ErrorKind::Unsupported,
                format!("stream {}: {e}: resume it before waiting", self.id),
            ),
            WaitIdleError::TimedOut { .. } => Error::new(ErrorKind::Device, e.to_string()),
        })
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
        match &self.body {
            Body::Host(h) => Ok(h.verify()),
            Body::Gpu(g) => Ok(g.verify(!self.is_suspended())),
            Body::Bound(_) => Err(Error::unsupported("a bound KFD queue has no delay commands to check")),
        }
    }

    /// The launcher's counters (submitted, launched, completed, pending, in flight, ...);
    /// `None` for a bound KFD queue.
    pub fn stats(&self) -> Option<lv1::Stats> {
        match &self.body {
            Body::Host(h) => Some(h.xq.stats()),
            Body::Gpu(g) => Some(g.xq.stats()),
            Body::Bound(_) => None,
        }
    }

    /// How many delay commands the stream can take in all (GPU: its slots); `None`: no limit.
    pub fn capacity(&self) -> Option<u64> {
        match &self.body {
            Body::Gpu(g) => Some(g.capacity()),
            _ => None,
        }
    }

    /// The launcher's completions since the last call, in completion order (kept only for
    /// sessions opened with [`crate::Options::keep_records`]; empty otherwise).
    pub fn take_completions(&self) -> Vec<LpCompletion> {
        match &self.body {
            Body::Host(h) => h.take_completions(),
            Body::Gpu(g) => g.take_completions(),
            Body::Bound(_) => Vec::new(),
        }
    }

    /// Waits until every command submitted through the library completed, at most `limit`.
    /// Unlike [`LpStream::synchronize`], fails at once under a suspension with work pending.
    pub fn wait_idle_for(&self, limit: Duration) -> Result<()> {
        self.live()?;
        let r = match &self.body {
            Body::Host(h) => h.xq.wait_idle_for(limit),
            Body::Gpu(g) => g.xq.wait_idle_for(limit),
            Body::Bound(_) => return Err(Error::unsupported("a bound KFD queue has no launcher to wait for")),
        };
        r.map_err(|e| Error::new(ErrorKind::Device, format!("stream {}: {e} (waited {limit:?})", self.id)))
    }

    /// Resumes whatever is held, refuses every later call, and drops the commands not yet
    /// launched (those in flight complete). Idempotent.
    pub(crate) fn close(&self) -> Result<()> {
        let mut held = self.held();
        self.closed.store(true, Ordering::Release);
        let r = held.take().map_or(Ok(()), |h| self.release(h));
        drop(held);
        match &self.body {
            Body::Host(h) => drop(h.xq.resume_dropping_pending()),
            Body::Gpu(g) => drop(g.xq.resume_dropping_pending()),
            Body::Bound(_) => {}
        }
        r
    }
}

/// The high-priority stream of a session: delay commands that nothing suspends.
pub struct HpStream(pub(crate) HpBody);

pub(crate) enum HpBody {
    Host(HostHp),
    Gpu(GpuHp),
}

impl HpStream {
    /// Submits a delay command of `ns` of work; returns its id.
    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        match &self.0 {
            HpBody::Host(h) => h.submit_delay(ns),
            HpBody::Gpu(g) => g.submit_delay(ns),
        }
    }

    /// Waits for everything submitted so far.
    pub fn synchronize(&self) -> Result<()> {
        self.wait(None).map(drop)
    }

    /// Waits for everything submitted so far, on a GPU at most `limit` (a stuck GPU is an error,
    /// not a hang; the host device's worker always finishes). Returns the device's records of
    /// what completed since the last call: the host worker's own timing; nothing on a GPU.
    pub fn wait(&self, limit: Option<Duration>) -> Result<Vec<DeviceRecord>> {
        match &self.0 {
            HpBody::Host(h) => h.synchronize(),
            HpBody::Gpu(g) => g.synchronize(limit).map(|()| Vec::new()),
        }
    }

    /// Every command submitted so far completed exactly once (call after waiting).
    pub fn check(&self) -> Check {
        match &self.0 {
            HpBody::Host(h) => h.check(),
            HpBody::Gpu(g) => g.check(),
        }
    }

    /// The raw `hipStream_t` (GPU), `None` on the host device.
    pub fn handle(&self) -> Option<usize> {
        match &self.0 {
            HpBody::Host(_) => None,
            HpBody::Gpu(g) => Some(g.handle()),
        }
    }
}
