//! LP work launched straight onto a GPU (no launcher, no session): `overhead`'s native run
//! ([`native`]), which is also the threshold sweep's direct phase.

use lv1::cost::Usage;

use gpu_device::{HipLpQueue, SlotStatus, kernel};
use preempt_api::gpu::GpuDevice;

use super::h;
use crate::error::{Context, Error};

/// The first of `n` slots that did not complete (`what` names the phase), as an error line.
fn incomplete(what: &str, slots: &[gpu_device::DelaySlot], nblocks: u32) -> Option<String> {
    (0u32..)
        .zip(slots)
        .map(|(i, s)| (i, s.status(i, nblocks)))
        .find(|(_, st)| *st != SlotStatus::Complete)
        .map(|(i, st)| format!("{what}: LP command {i}: {st:?}"))
}

/// `n` delay commands of `ticks` launched straight onto `lpq`'s stream (no launcher, no session)
/// with slots of their own, and waited for. Returns what this process used meanwhile (wall and
/// CPU time of every thread, `getrusage`) and the first command whose slot says it did not
/// complete, if any.
pub fn direct_run(
    gpu: &GpuDevice,
    k: &gpu_device::kernel::DelayKernel,
    lpq: &HipLpQueue,
    n: u32,
    ticks: u64,
) -> Result<(Usage, Option<String>), Error> {
    let n32 = n.max(1);
    let slots = kernel::slot_buffer(gpu.device(), lpq.stream(), n32 as usize).map_err(h("slot buffer"))?;
    let usage = || Usage::now().context("getrusage");
    let before = usage()?;
    for id in 0..n32 {
        k.launch(lpq.stream(), gpu_device::hip_rt::Mem::Device(&slots), id, ticks)
            .map_err(h("direct launch"))?;
    }
    lpq.stream().synchronize().map_err(h("direct synchronize"))?;
    let used = usage()?.since(&before);
    let read = kernel::read_slots(&slots, n32 as usize).map_err(h("reading slots"))?;
    Ok((used, incomplete("direct", &read, lpq.nblocks())))
}

/// `overhead`'s native run on a GPU opened already (the device its sessions run on):
/// `commands` delay commands of T on a stream with a queue of its own, with the device's
/// calibration (`GpuDevice::ticks_for`, as a session's `submit_delay`). Returns what this process
/// used and whether every command completed.
pub fn native(gpu: &GpuDevice, t_ms: f64, commands: u32) -> Result<(Usage, bool), Error> {
    let k = gpu.kernel().context("hip: preparing the delay kernel")?;
    let ticks = gpu
        .ticks_for(crate::num::round_u64(t_ms * 1e6))
        .context("hip: calibrating T")?;
    let lpq = gpu.lp_queue(None, 1)?.queue;
    let (used, problem) = direct_run(gpu, &k, &lpq, commands, ticks)?;
    Ok((used, problem.is_none()))
}
