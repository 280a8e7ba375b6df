//! THE preparation of a GPU for a run of delay commands (a latency run, the threshold sweep,
//! the bystander check, `acceptance`'s GPU stages): every such caller prepares its GPU with
//! these two calls, in this order, so the first hardware run exercises one path.
//!
//! 1. [`prepare`]: open `hip:N` with the kernel asked for, compile and load it, create the
//!    caller's streams (a warm-up stream, and the HP stream if asked), and calibrate T there.
//! 2. [`Prepared::lp`]: build the Lv3 mechanism (dbg-trap turns debugging on now, before the
//!    LP queue exists), then THE low-priority queue ([`GpuDevice::lp_queue`]) with its KFD queue.
//!
//! The order is discovery's (docs/kfd-facts.md#stream-to-kfd-queue-id): every other queue of the
//! process exists before the LP stream is created, so between the two calls a caller may use
//! its streams (a latency run takes its clock pairs and HP floor there) but creates none.
//! Sessions share a device that [`GpuDevice::open`] opened instead: they calibrate at 1 ms once
//! and create one LP queue per stream.
use super::{GpuDevice, LpQueue};
use crate::error::Result;
use crate::mech::{Lv3Request, Lv3Setup};
use crate::options::KernelChoice;
use gpu_device::kernel::{self, DelayKernel};
use gpu_device::{Achieved, Calibration, setup};
use hip_rt::{Stream, StreamPriority};
use std::sync::Arc;

/// Commands of T a calibration checks T with (median of them against the request).
const CHECK_REPS: usize = 5;
/// Repetitions per calibration point.
const CALIBRATION_REPS: usize = 3;

/// What [`prepare`] sets up, by name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prepare {
    /// `hip:N`.
    pub device: u32,
    /// The delay kernel (LP state, blocks per CU).
    pub kernel: KernelChoice,
    /// Calibrate the kernel at this T (ms) and check it with a few commands of T; `None`:
    /// commands of nominal length only (no calibration).
    pub t_ms: Option<f64>,
    /// Create a high-priority stream too: it must exist before the LP queue does.
    pub hp_stream: bool,
}

/// T as the device runs it: the calibration at the requested T and what a few commands of T
/// then took.
#[derive(Debug, Clone, Copy)]
pub struct CalibratedT {
    pub calibration: Calibration,
    pub achieved: Achieved,
}

/// A GPU prepared for a run, before its LP queue ([`Prepared::lp`]).
pub struct Prepared {
    pub gpu: Arc<GpuDevice>,
    pub kernel: Arc<DelayKernel>,
    /// A normal-priority stream for the caller's own commands (the calibration ran on it; it is
    /// synchronized).
    pub warm: Stream,
    /// The high-priority stream, when asked for.
    pub hp: Option<Stream>,
    /// T calibrated and checked, when asked for.
    pub t: Option<CalibratedT>,
}

/// The LP side of a run, by name: what [`Prepared::lp`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LpRequest {
    /// The Lv3 mechanism to build first (its KFD queue is then found for the LP stream);
    /// `None`: Lv1 only, no KFD queue is looked for.
    pub lv3: Option<Lv3Request>,
    /// LP command slots (0: [`super::DEFAULT_SLOTS`]).
    pub slots: usize,
}

/// The LP queue of a prepared GPU, and the mechanism that suspends it.
pub struct PreparedLp {
    /// The mechanism and why it was chosen (Lv3 requests; `preemptor` is `Some` whenever the
    /// request was `required`).
    pub lv3: Option<Lv3Setup>,
    pub queue: LpQueue,
}

/// Step 1 of the module's order: the device, its kernel, the caller's streams and T.
pub fn prepare(p: &Prepare) -> Result<Prepared> {
    let gpu = Arc::new(GpuDevice::open(p.device, p.kernel)?);
    let kernel = gpu.kernel().map_err(|e| e.context("preparing the delay kernel"))?;
    let warm = gpu
        .stream(StreamPriority::Normal)
        .map_err(|e| e.context("the warm-up stream"))?;
    let hp = if p.hp_stream {
        Some(
            gpu.stream(StreamPriority::High)
                .map_err(|e| e.context("the HP stream"))?,
        )
    } else {
        None
    };
    let t = p
        .t_ms
        .map(|t_ms| calibrate_at(&gpu, &kernel, &warm, t_ms))
        .transpose()?;
    warm.synchronize()
        .map_err(|e| crate::Error::from(e).context("the warm-up stream"))?;
    Ok(Prepared {
        gpu,
        kernel,
        warm,
        hp,
        t,
    })
}

/// The kernel calibrated at `t_ms` (a few points around it) and T checked.
fn calibrate_at(gpu: &GpuDevice, k: &DelayKernel, s: &Stream, t_ms: f64) -> Result<CalibratedT> {
    let dev = gpu.device();
    let calibration = kernel::calibrate(k, dev, s, &setup::calibration_points(t_ms), CALIBRATION_REPS)
        .map_err(|e| crate::Error::from(e).context("calibrating T"))?
        .calibration;
    let achieved = kernel::check_t(k, dev, s, &calibration, t_ms, CHECK_REPS)
        .map_err(|e| crate::Error::from(e).context("checking T"))?;
    Ok(CalibratedT { calibration, achieved })
}

impl Prepared {
    /// Step 2 of the module's order: the mechanism, then the LP queue (with its KFD queue where
    /// the request has Lv3). A required mechanism that cannot be built is an error.
    pub fn lp(&self, req: LpRequest) -> Result<PreparedLp> {
        let lv3 = req.lv3.map(Lv3Setup::build).transpose()?;
        let pre = lv3.as_ref().and_then(|s| s.preemptor.as_deref());
        let queue = self.gpu.lp_queue(pre, req.slots)?;
        if pre.is_some() && queue.binding.is_none() {
            return Err(crate::Error::new(
                crate::ErrorKind::Device,
                "the LP queue was set up without its KFD queue at Lv3",
            ));
        }
        Ok(PreparedLp { lv3, queue })
    }
}
