//! What a preemption-latency measurement needs of a device, implemented once per device here,
//! beside the sessions' device code ([`host::HostLatency`] on the host device's workers,
//! [`crate::gpu::GpuLatency`] on `hip:N` through [`crate::gpu::prepare`]).
//!
//! A measurement (preempt-lat's loop) keeps the device's LP hardware queue busy with commands of
//! T through lv1's launcher, and per sample takes an HP request, suspends the LP queue (Lv1: the
//! launcher's drain, the loop's own; Lv3, and Lv2 on the host device: [`LatencyDevice::suspend`]),
//! runs the HP probe and resumes. What differs between devices is here: the clock the stamps are
//! on and how it maps to `CLOCK_MONOTONIC`, the T-long command, when the HP probe started (the
//! host knows at once, a GPU only after the run, through a clock map fitted over the whole run),
//! what a stop can do with the commands still running, and the device's own records for the
//! exactly-once check. Nothing here prints: what a device has to say goes to the caller's
//! [`Reporter`].
pub mod host;

use crate::Mechanism;
use crate::error::Result;
use lv1::HwQueue;
use serde::Serialize;
use std::sync::Arc;

pub use crate::device::Abandon;

/// Where a device's notes and warnings during a measurement go (the caller prints them, or not).
pub trait Reporter: Send + Sync {
    /// Progress and facts of the set-up (a quiet run hides them).
    fn note(&self, msg: &str);
    /// Something that makes a figure suspect, or a failed check (always shown).
    fn warn(&self, msg: &str);
}

/// A [`Reporter`] that drops everything (tests, callers that report nothing).
pub struct Silent;

impl Reporter for Silent {
    fn note(&self, _: &str) {}
    fn warn(&self, _: &str) {}
}

/// The LP queue suspended at Lv3 (or, on the host device, Lv2): resumes on
/// [`Suspended::resume`], and on drop.
pub trait Suspended {
    fn resume(self: Box<Self>) -> Result<()>;
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
    /// On the device's clock ([`LatencyDevice::now_ns`]).
    At(u64),
    /// Known only after the run (the GPU maps its stamps to host time with a clock fit over the
    /// whole run): [`LatencyDevice::finish`] fills it in.
    Later,
}

/// One preemption as the loop measured it, before the device's own post-processing.
#[derive(Debug, Clone, Copy)]
pub struct RawSample {
    /// The HP probe's index (= the sample's index, warm-up included).
    pub index: u32,
    /// The HP request, on the device's clock.
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

/// Something the device itself timed (a worker running a command), for a timeline.
#[derive(Debug, Clone)]
pub struct DeviceSpan {
    /// The timeline track: what ran it (e.g. `LP worker 0`, `HP worker`).
    pub track: String,
    pub name: String,
    /// On `CLOCK_MONOTONIC` (as [`crate::now_ns`]).
    pub start_ns: u64,
    pub end_ns: u64,
}

/// How the run's LP commands ended, for [`LatencyDevice::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Commands launched, ids `0..ran`: every one submitted, or after a stop the ones launched
    /// (those not launched yet were dropped then, never run).
    pub ran: u64,
    /// Launched commands a stop abandoned while they ran; 0 when each one completed, so that
    /// the exactly-once check of the `ran` commands is complete.
    pub abandoned: u64,
}

/// The LP kernel a GPU run used and the wave state it keeps resident (from its code object).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LpKernel {
    /// `delay_kernel` or `delay_kernel_heavy`.
    pub name: String,
    pub grid_blocks: u32,
    pub block_threads: u32,
    pub waves_per_cu: u32,
    /// VGPRs (with AGPRs) allocated per lane.
    pub vgprs_per_lane: u64,
    pub agprs_per_lane: u64,
    pub lds_bytes_per_block: u64,
    /// VGPR + LDS bytes resident per CU: what a CWSR save moves per CU (SGPRs left out).
    pub state_bytes_per_cu: u64,
}

/// T as the run's own LP commands achieved it (GPU: the slots' wall-clock stamps).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct AchievedT {
    /// Median end - start of the commands counted.
    pub ms: f64,
    /// (ms - requested) / requested.
    pub error: f64,
    /// Commands counted: complete and not touched by a suspension window.
    pub commands: usize,
    /// Complete commands left out because they were suspended part-way.
    pub excluded: usize,
}

/// What the device says about itself for a run's record.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFacts {
    /// The mechanism that suspended the LP queue (the launcher at Lv1).
    pub mechanism: Mechanism,
    /// The grace period that applied, in words ([`Mechanism::grace_applied`]).
    pub grace_applied: String,
    /// A GPU: what it is (name, CUs, HIP, grid, T, clock map, HP floor) and its `gfx` target;
    /// `None` on the host device, whose record the caller writes (it is the caller's CPU).
    pub gpu: Option<GpuFacts>,
}

/// A GPU's part of [`RunFacts`].
#[derive(Debug, Clone, PartialEq)]
pub struct GpuFacts {
    /// `hip:N`.
    pub device: String,
    pub detail: String,
    pub gfx_target: String,
}

/// What the device knows once the LP queue has drained.
pub struct Finished {
    /// What the device timed itself (empty where it reports nothing).
    pub device_spans: Vec<DeviceSpan>,
    /// HP start latency of each raw sample (same order), in ns.
    pub hp_start_ns: Vec<u64>,
    /// The device's own record of each LP command run: (command id, ran correctly); several per
    /// command where it runs on several workers.
    pub records: Vec<(u64, bool)>,
    /// Records each command leaves when it runs once (the host device's LP workers; 1 on a GPU).
    pub copies: usize,
    /// The GPU's LP kernel (`None` on the host device).
    pub lp_kernel: Option<LpKernel>,
    /// T as the run's commands achieved it (`None` where the device cannot say).
    pub achieved_t: Option<AchievedT>,
    pub facts: RunFacts,
}

/// A device set up for one latency run: an LP hardware queue to be fed by the caller's Lv1
/// launcher, an HP probe, and (for Lv3, and Lv2 on the host device) a way to suspend the LP
/// queue itself.
pub trait LatencyDevice {
    type Queue: HwQueue;

    /// The device's clock for request/suspend/resume stamps, in ns.
    fn now_ns(&self) -> u64;
    /// What to add to a [`LatencyDevice::now_ns`] stamp to put it on `CLOCK_MONOTONIC`
    /// ([`crate::now_ns`], the launcher's clock): 0 where `now_ns` is that clock.
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
    fn wait_first_start(&self, launched: &dyn Fn() -> u64) -> Result<()>;
    /// Lv3 (Lv2 on the host device): suspends the LP queue at the run's level. The returned
    /// guard resumes it on drop.
    fn suspend(&self) -> Result<Box<dyn Suspended + '_>>;
    /// Starts HP probe `index` (a device may run it to completion here).
    fn hp_launch(&self, index: u32) -> Result<()>;
    /// Waits for HP probe `index` to finish; when it started, if known now.
    fn hp_wait(&self, index: u32) -> Result<HpStart>;
    /// Appended to the error when the LP queue does not drain: where to look on this device.
    fn drain_hint(&self) -> String {
        String::new()
    }
    /// After a stop, when the commands in flight did not complete within the bounded close:
    /// stops them if the device can. The default, a device that cannot, leaves them running.
    fn abandon(&self) -> Abandon {
        Abandon::Left
    }
    /// How to stop the LP commands from another thread, for a caller whose thread may be
    /// blocked in a wait on them when a stop's close time passes (`None`: the device cannot).
    fn abandoner(&self) -> Option<Box<dyn Fn() + Send>> {
        None
    }
    /// After the LP queue drained (or a stop closed it): HP start latencies, the device's
    /// records of the `settled.ran` commands, what it is.
    fn finish(&mut self, raw: &[RawSample], settled: Settled) -> Result<Finished>;
}
