//! Streams: a low-priority stream ([`LpStream`]) is what gets suspended; the high-priority
//! stream ([`HpStream`]) runs the work that must not wait. Both are written once over the
//! device's bodies ([`crate::device`]).
use crate::check::{Check, DeviceRecord, LpCompletion, Verified};
use crate::device::{HpBody, Launcher, LpBody, Lv3Held};
use crate::error::{Error, ErrorKind, Result};
use crate::options::Level;
use lv1::{SuspendMode, WaitIdleError};
use lv3::mechanism::{Preemptor, QueueTarget};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// A suspension a stream holds; dropping it resumes (the guards' rule).
enum Held {
    Lv1,
    Lv3(Box<dyn Lv3Held>),
}

/// What one suspend did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspendInfo {
    /// Lv1 or Lv3.
    pub level: Level,
    /// `sigstop`, `preempt-queues`, `dbg-trap`, `update-queue`, `lv1-drain` or `lv1-stop`.
    pub mechanism: String,
    /// Wall time of the suspend call, ns.
    pub latency_ns: u64,
}

/// A low-priority stream of a session: the object suspended and resumed. Thread-safe; every
/// method takes `&self`. After its session closes, every call fails with `Closed`.
pub struct LpStream {
    id: u64,
    level: Level,
    body: Box<dyn LpBody>,
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
    pub(crate) fn new(
        id: u64,
        level: Level,
        body: Box<dyn LpBody>,
        preemptor: Option<Arc<Preemptor>>,
        lv1_wait: bool,
    ) -> Self {
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

    /// The launcher, or the error for a bound KFD queue, which has none.
    fn launcher(&self, what: &str) -> Result<&dyn Launcher> {
        self.body
            .launcher()
            .ok_or_else(|| Error::unsupported(format!("a bound KFD queue has no launcher to {what}")))
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
        self.body.handle()
    }

    /// The KFD queue behind the stream (Lv3 GPU streams and bound queues).
    pub fn queue(&self) -> Option<QueueTarget> {
        self.body.queue()
    }

    /// Host LP streams: the worker processes' pids (for inspection and tests).
    pub fn host_pids(&self) -> Vec<i32> {
        self.body.host_pids()
    }

    /// One line: what the stream is and how it is suspended.
    pub fn describe(&self) -> String {
        self.body
            .describe(self.id, &format!("{} via {}", self.level, self.mechanism_name()))
    }

    fn mechanism_name(&self) -> String {
        match self.level {
            Level::Lv1 if self.lv1_wait => "lv1-drain".into(),
            Level::Lv1 => "lv1-stop".into(),
            _ => self.body.lv3_name(self.preemptor.as_deref()),
        }
    }

    /// Whether this stream holds a suspension.
    pub fn is_suspended(&self) -> bool {
        self.held().is_some()
    }

    /// Suspends the stream at its level: Lv3 stops the running work where it is (the
    /// session's mechanism; SIGSTOP on the host); Lv1 stops the library's launcher and waits
    /// until what was launched (and anything else on the stream) completed (only stops it, with
    /// [`crate::Options::lv1_no_wait`]). `AlreadySuspended` if it is suspended already.
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
        let h = match self.level {
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
                Held::Lv1
            }
            _ => Held::Lv3(self.body.suspend_lv3(self.id, self.preemptor.as_deref())?),
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
                if let Some(x) = self.body.launcher() {
                    x.resume();
                }
                Ok(())
            }
            Held::Lv3(g) => g.resume(),
        }
    }

    /// Submits a delay command of `ns` nanoseconds of work through the library's launcher
    /// (host: CPU work on every worker; GPU: the delay kernel on every CU). Returns its id.
    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        self.live()?;
        self.body.submit_delay(ns)
    }

    /// Waits until every command submitted through the library completed (GPU: and everything
    /// else on the stream). Blocks through an Lv3 suspension until another thread resumes; fails
    /// at once under an Lv1 suspension with commands pending (they would never launch).
    pub fn synchronize(&self) -> Result<()> {
        self.live()?;
        self.launcher("wait for")?.wait_idle().map_err(|e| self.wait_error(e))?;
        self.body.synchronize_device()
    }

    fn wait_error(&self, e: WaitIdleError) -> Error {
        match e {
            WaitIdleError::Suspended { .. } => Error::new(
                ErrorKind::Unsupported,
                format!("stream {}: {e}: resume it before waiting", self.id),
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
            .map_err(|e| Error::new(ErrorKind::Device, format!("stream {}: {e} (waited {limit:?})", self.id)))
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
        self.body.verify(!self.is_suspended())
    }

    /// The launcher's counters (submitted, launched, completed, pending, in flight, ...);
    /// `None` for a bound KFD queue.
    pub fn stats(&self) -> Option<lv1::Stats> {
        self.body.launcher().map(Launcher::stats)
    }

    /// How many delay commands the stream can take in all (GPU: its slots); `None`: no limit.
    pub fn capacity(&self) -> Option<u64> {
        self.body.capacity()
    }

    /// The launcher's completions since the last call, in completion order (kept only for
    /// sessions opened with [`crate::Options::keep_records`]; empty otherwise).
    pub fn take_completions(&self) -> Vec<LpCompletion> {
        self.body.take_completions()
    }

    /// Resumes whatever is held, refuses every later call, and drops the commands not yet
    /// launched (those in flight complete). Idempotent.
    pub(crate) fn close(&self) -> Result<()> {
        let mut held = self.held();
        self.closed.store(true, Ordering::Release);
        let r = held.take().map_or(Ok(()), |h| self.release(h));
        drop(held);
        if let Some(x) = self.body.launcher() {
            x.resume_dropping_pending();
        }
        r
    }
}

/// The high-priority stream of a session: delay commands that nothing suspends.
pub struct HpStream(pub(crate) Box<dyn HpBody>);

impl HpStream {
    /// Submits a delay command of `ns` of work; returns its id.
    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        self.0.submit_delay(ns)
    }

    /// Waits for everything submitted so far.
    pub fn synchronize(&self) -> Result<()> {
        self.wait(None).map(drop)
    }

    /// Waits for everything submitted so far, on a GPU at most `limit` (a stuck GPU is an error,
    /// not a hang; the host device's worker always finishes). Returns the device's records of
    /// what completed since the last call: the host worker's own timing; nothing on a GPU.
    pub fn wait(&self, limit: Option<Duration>) -> Result<Vec<DeviceRecord>> {
        self.0.wait(limit)
    }

    /// Every command submitted so far completed exactly once (call after waiting).
    pub fn check(&self) -> Check {
        self.0.check()
    }

    /// The raw `hipStream_t` (GPU), `None` on the host device.
    pub fn handle(&self) -> Option<usize> {
        self.0.handle()
    }
}
