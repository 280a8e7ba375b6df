//! The device interface the one measurement loop ([`super::samples`]) runs over. The host
//! device and the GPU device each implement it (in `host.rs` and `gpu::run`); what is common
//! (gaps, warm-up, keep-ahead, the suspend/probe/resume sequence per level, interrupt handling,
//! draining) lives in the loop, written once.
use super::Correctness;
use crate::env::Environment;
use crate::error::{Cause, Error};
use lv1::HwQueue;
use std::sync::Arc;

/// The LP queue suspended at Lv3 (or, on the host device, Lv2): resumes on
/// [`Suspended::resume`], and on drop.
pub trait Suspended {
    fn resume(self: Box<Self>) -> Result<(), Error>;
    /// The preempting call alone (SUSPEND_QUEUES, UPDATE_QUEUE, PREEMPT_QUEUES), in ns, where
    /// the suspend makes other calls too (dbg-trap's snapshot); `None` where there is no such
    /// split (the host device's SIGSTOP).
    fn preempt_call_ns(&self) -> Option<u64> {
        None
    }
}

/// When an HP probe started, as far as the loop can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HpStart {
    /// On the backend's clock ([`Backend::now_ns`]).
    At(u64),
    /// Known only after the run (the GPU maps its stamps to host time with a clock fit over the
    /// whole run): [`Backend::finish`] fills it in.
    Later,
}

/// One preemption as the loop measured it, before the backend's own post-processing.
#[derive(Debug, Clone, Copy)]
pub struct RawSample {
    /// The HP probe's index (= the sample's index, warm-up included).
    pub index: u32,
    /// The HP request, on the backend's clock.
    pub t_req: u64,
    /// Suspend call until the LP queue runs nothing.
    pub suspend_ns: u64,
    /// Lv3 on a GPU: the preempting ioctl alone, within `suspend_ns`.
    pub preempt_call_ns: Option<u64>,
    /// Resume call until it returned.
    pub resume_ns: u64,
    /// The window in which the LP queue was suspended: (suspend returned, resume called).
    pub window: (u64, u64),
    pub hp: HpStart,
}

/// Something the device itself timed (a worker running a command), for the timeline.
#[derive(Debug, Clone)]
pub struct DeviceSpan {
    /// The timeline track: what ran it (e.g. `LP worker 0`, `HP worker`).
    pub track: String,
    pub name: String,
    /// On `CLOCK_MONOTONIC` (as [`preempt_api::now_ns`]).
    pub start_ns: u64,
    pub end_ns: u64,
}

/// What a stop did with the LP commands still running after its bounded close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandoned {
    /// Stopped: the host device killed the LP queue's workers (the waits on them end at once).
    Stopped,
    /// Left running: a GPU cannot stop a running kernel; its queue runs the commands out and is
    /// freed with the process (docs/c-api.md#close).
    Left,
}

/// How the run's LP commands ended, for [`Backend::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Commands launched, ids `0..ran`: every one submitted, or after a stop the ones launched
    /// (those not launched yet were dropped then, never run).
    pub ran: u64,
    /// Launched commands a stop abandoned while they ran; 0 when each one completed, so that
    /// the exactly-once check of the `ran` commands is complete.
    pub abandoned: u64,
}

/// What the backend knows once the LP queue has drained.
pub struct Finished {
    /// For the timeline (`--trace`): what the device timed itself (empty where it reports nothing).
    pub device_spans: Vec<DeviceSpan>,
    /// HP start latency of each raw sample (same order), in ns.
    pub hp_start_ns: Vec<u64>,
    pub correctness: Correctness,
    pub env: Environment,
    /// The GPU's LP kernel (`None` on the host device).
    pub lp_kernel: Option<super::LpKernel>,
    /// T as the run's commands achieved it (`None` where the device cannot say).
    pub achieved_t: Option<super::AchievedT>,
}

/// A device set up for one run: an LP hardware queue fed by the Lv1 launcher, an HP probe, and
/// (for Lv3, and Lv2 on the host device) a way to suspend the LP queue itself.
pub trait Backend {
    /// Its errors are causes of ours: the Lv1 suspend (drain) fails with one.
    type Queue: HwQueue<Error: Cause>;

    /// The device's clock for request/suspend/resume stamps, in ns.
    fn now_ns(&self) -> u64;
    /// What to add to a [`Backend::now_ns`] stamp to put it on `CLOCK_MONOTONIC`
    /// ([`preempt_api::now_ns`], the launcher's clock): 0 where `now_ns` is that clock.
    fn monotonic_offset_ns(&self) -> i64 {
        0
    }
    /// The LP hardware queue (the launcher runs over it).
    fn lp_queue(&self) -> Arc<Self::Queue>;
    /// One LP command of T.
    fn command(&self) -> <Self::Queue as HwQueue>::Command;
    /// T as the device achieves it, in ns (the random gaps are multiples of it).
    fn t_ns(&self) -> f64;
    /// How many LP commands this run may submit in all (`None`: no limit).
    fn budget(&self) -> Option<u64>;
    /// Waits until the first LP command runs, so that the first preemption finds work.
    fn wait_first_start(&self, launched: &dyn Fn() -> u64) -> Result<(), Error>;
    /// Lv3 (Lv2 on the host device): suspends the LP queue at the run's level. The returned
    /// guard resumes it on drop.
    fn suspend(&self) -> Result<Box<dyn Suspended + '_>, Error>;
    /// Starts HP probe `index` (a device may run it to completion here).
    fn hp_launch(&self, index: u32) -> Result<(), Error>;
    /// Waits for HP probe `index` to finish; when it started, if known now.
    fn hp_wait(&self, index: u32) -> Result<HpStart, Error>;
    /// Appended to the error when the LP queue does not drain: where to look on this device.
    fn drain_hint(&self) -> String {
        String::new()
    }
    /// After a stop, when the commands in flight did not complete within the bounded close:
    /// stops them if the device can. The default, a device that cannot, leaves them running.
    fn abandon(&self) -> Abandoned {
        Abandoned::Left
    }
    /// After the LP queue drained (or a stop closed it): HP start latencies, the correctness
    /// check of the `settled.ran` commands launched (not made when some were abandoned), the
    /// environment. `completions`: (command id, completed without error) from the launcher.
    fn finish(&mut self, raw: &[RawSample], settled: Settled, completions: &[(u64, bool)]) -> Result<Finished, Error>;
}
