//! The seam between a session and its device: what a device gives a [`crate::Session`]
//! ([`DeviceBackend`]), its streams ([`LpBody`], [`HpBody`]) and its Lv3 suspension ([`Lv3Held`]).
//! `session/` and `stream/` are written once against these traits; a device is one module that
//! implements them (`host.rs`, `gpu/`, `bound.rs` for `kfd`) plus its name in [`crate::DeviceSpec`]
//! and its arm in [`crate::Session::open`] (docs/conventions.md).
use crate::check::{Check, DeviceRecord, LpCompletion, Verified};
use crate::error::{Error, Result};
use crate::options::{Level, Options};
use lv1::{HwQueue, Stats, SuspendMode, WaitIdleError, XQueue};
use lv3::mechanism::{Preemptor, QueueTarget};
use std::sync::Arc;
use std::time::Duration;

/// A device behind a session.
pub(crate) trait DeviceBackend: Send + Sync {
    /// A low-priority stream suspended at `level` (resolved: Lv1 or Lv3); `lv3` is the session's
    /// mechanism at Lv3 (`None` at Lv1, or where the device's own Lv3 needs none).
    fn lp_stream(&self, level: Level, lv3: Option<&Arc<Preemptor>>, opts: &Options) -> Result<Box<dyn LpBody>>;
    /// The session's high-priority stream.
    fn hp_stream(&self, opts: &Options) -> Result<Box<dyn HpBody>>;
    /// Lv3 without a KFD mechanism (the host device's SIGSTOP).
    fn own_lv3(&self) -> bool {
        false
    }
    /// Why explicit KFD queue ids cannot be bound here, if so.
    fn bind_refused(&self) -> Option<Error> {
        None
    }
}

/// What a low-priority stream is on its device. Defaults: no launcher, no handle, no queue.
pub(crate) trait LpBody: Send + Sync {
    /// lv1's launcher over the stream (`None`: a bound KFD queue, launched on elsewhere).
    fn launcher(&self) -> Option<&dyn Launcher>;
    /// Submits a delay command of `ns` through the launcher; its id.
    fn submit_delay(&self, ns: u64) -> Result<u64>;
    /// Suspends the stream at Lv3 (`pre`: the session's mechanism, where the device uses one);
    /// `label` names it as its user knows it (for the signal registry's list).
    fn suspend_lv3(&self, label: &str, pre: Option<&Preemptor>) -> Result<Box<dyn Lv3Held>>;
    /// Suspends the stream at Lv2: what runs finishes, nothing new starts (the host device's
    /// workers). A device without Lv2 never gets here (the session refuses the level); the
    /// default says so all the same.
    fn suspend_lv2(&self, label: &str) -> Result<Box<dyn Lv3Held>> {
        Err(Error::unsupported(format!("{label}: this device has no Lv2")))
    }
    /// The name of its Lv2 mechanism.
    fn lv2_name(&self) -> String {
        "none".into()
    }
    /// The exactly-once check with its records; `idle`: nothing is suspended.
    fn verify(&self, idle: bool) -> Result<Verified>;
    /// One line: what stream `id` is, with `how` (its level and mechanism) in its place.
    fn describe(&self, id: u64, how: &str) -> String;
    /// The name of its Lv3 mechanism, given the session's.
    fn lv3_name(&self, pre: Option<&Preemptor>) -> String {
        pre.map_or_else(|| "none".into(), |p| p.kind().name().to_string())
    }
    /// After the launcher went idle: wait for whatever else the device runs on the stream.
    fn synchronize_device(&self) -> Result<()> {
        Ok(())
    }
    fn handle(&self) -> Option<usize> {
        None
    }
    fn queue(&self) -> Option<QueueTarget> {
        None
    }
    fn host_pids(&self) -> Vec<i32> {
        Vec::new()
    }
    fn capacity(&self) -> Option<u64> {
        None
    }
    fn take_completions(&self) -> Vec<LpCompletion> {
        Vec::new()
    }
    /// Close's grace passed with commands still running: stop them if the device can
    /// (docs/c-api.md#close). The default, a device that cannot, leaves them running.
    fn abandon(&self) -> Abandon {
        Abandon::Left
    }
}

/// What close (or a stopped latency run) did with the work still running after its grace
/// ([`crate::CLOSE_WAIT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandon {
    /// Stopped (the host device killed the stream's workers): the stream drops at once.
    Stopped,
    /// A GPU cannot stop a running kernel: its queue runs the work out, and the stream is never
    /// dropped (a drop would wait for it); the process's exit frees both.
    Left,
}

impl Abandon {
    /// What happened, for close's message.
    pub fn how(self) -> &'static str {
        match self {
            Abandon::Stopped => "stopped: the host device killed its workers",
            Abandon::Left => {
                "left running: a GPU cannot stop a running kernel, so its queue runs it out and is freed when the \
                 process exits"
            }
        }
    }
}

/// A session's high-priority stream on its device.
pub(crate) trait HpBody: Send + Sync {
    fn submit_delay(&self, ns: u64) -> Result<u64>;
    /// Waits for everything submitted (a GPU at most `limit`); the records since the last call.
    fn wait(&self, limit: Option<Duration>) -> Result<Vec<DeviceRecord>>;
    fn check(&self) -> Check;
    fn handle(&self) -> Option<usize> {
        None
    }
    /// Close: whether everything submitted completes within `limit`.
    fn idle_within(&self, limit: Duration) -> bool;
    /// Close's grace passed with commands still running: see [`LpBody::abandon`].
    fn abandon(&self) -> Abandon {
        Abandon::Left
    }
}

/// An Lv3 suspension a stream holds (or, on the host device, its Lv2 hold); dropping it resumes
/// (the guards' rule).
pub(crate) trait Lv3Held: Send {
    fn resume(self: Box<Self>) -> Result<()>;
}

/// lv1's launcher, whatever its hardware queue.
pub(crate) trait Launcher: Send + Sync {
    fn stats(&self) -> Stats;
    fn suspend(&self, mode: SuspendMode) -> Result<()>;
    fn resume(&self);
    /// Resumes and drops the commands not yet launched (close).
    fn resume_dropping_pending(&self);
    fn wait_idle(&self) -> std::result::Result<(), WaitIdleError>;
    fn wait_idle_for(&self, limit: Duration) -> std::result::Result<(), WaitIdleError>;
}

impl<Q: HwQueue> Launcher for XQueue<Q>
where
    Error: From<Q::Error>,
{
    fn stats(&self) -> Stats {
        XQueue::stats(self)
    }
    fn suspend(&self, mode: SuspendMode) -> Result<()> {
        Ok(XQueue::suspend(self, mode)?)
    }
    fn resume(&self) {
        XQueue::resume(self);
    }
    fn resume_dropping_pending(&self) {
        drop(XQueue::resume_dropping_pending(self));
    }
    fn wait_idle(&self) -> std::result::Result<(), WaitIdleError> {
        XQueue::wait_idle(self)
    }
    fn wait_idle_for(&self, limit: Duration) -> std::result::Result<(), WaitIdleError> {
        XQueue::wait_idle_for(self, limit)
    }
}
