//! LP work launched straight onto a GPU (no launcher, no session): the threshold sweep's direct
//! phase against the launcher ([`lv1_overhead`]), and `overhead`'s native run ([`native`]).
use std::sync::Arc;
use std::time::Instant;

use lv1::cost::Usage;
use lv1::{Config, XQueue};

use crate::measure::backend::Abandoned;

use gpu_device::{DelayCmd, HipLpQueue, LpState, SlotStatus, kernel};
use preempt_api::gpu::{self, GpuDevice, LpRequest, Prepare};

use super::setup::h;

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
) -> Result<(Usage, Option<String>), String> {
    let n32 = n.max(1);
    let slots = kernel::slot_buffer(gpu.device(), lpq.stream(), n32 as usize).map_err(h("slot buffer"))?;
    let usage = || Usage::now().map_err(|e| format!("getrusage: {e}"));
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
pub fn native(gpu: &GpuDevice, t_ms: f64, commands: u32) -> Result<(Usage, bool), String> {
    let k = gpu
        .kernel()
        .map_err(|e| format!("hip: preparing the delay kernel: {e}"))?;
    let ticks = gpu
        .ticks_for(crate::num::round_u64(t_ms * 1e6))
        .map_err(|e| format!("hip: calibrating T: {e}"))?;
    let lpq = gpu.lp_queue(None, 1).map_err(|e| e.to_string())?.queue;
    let (used, problem) = direct_run(gpu, &k, &lpq, commands, ticks)?;
    Ok((used, problem.is_none()))
}

/// The GPU version of `measure::host::lv1_overhead`: `commands` LP commands of T (of the `state`
/// LP kernel) launched directly on a dedicated stream ([`direct_run`]), then the same through an
/// XQueue with `threshold`/`batch`. Returns (direct s, launcher s, overhead %). Both phases must
/// complete every command.
#[allow(clippy::cast_precision_loss)] // ns of one run: far below 2^53
pub fn lv1_overhead(
    device_index: u32,
    t_ms: f64,
    state: LpState,
    threshold: u32,
    batch: u32,
    commands: u32,
) -> Result<(f64, f64, f64), String> {
    let prepared = gpu::prepare(&Prepare {
        device: device_index,
        kernel: super::run::kernel_choice(state),
        t_ms: Some(t_ms),
        hp_stream: false,
    })
    .map_err(|e| e.to_string())?;
    let (gpu, k) = (&prepared.gpu, &prepared.kernel);
    let cal = prepared.t.ok_or("the GPU was prepared without T")?.calibration;
    let n32 = commands.max(1);
    let n = n32 as usize;
    // The LP queue of the API's set-up (Lv1: no KFD queue to find), its slots for the launcher.
    let lpq = prepared
        .lp(LpRequest { lv3: None, slots: n })
        .map_err(|e| e.to_string())?
        .queue
        .queue;
    let ticks = cal.ticks_for(t_ms);
    let (used, problem) = direct_run(gpu, k, &lpq, n32, ticks)?;
    if let Some(p) = problem {
        return Err(format!("lv1 overhead ({p})"));
    }
    let direct = used.wall_ns as f64 / 1e9;
    let cfg = Config::new(threshold as usize, batch.min(threshold) as usize).map_err(|e| e.to_string())?;
    let xq = XQueue::new(Arc::clone(&lpq), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let t1 = Instant::now();
    for _ in 0..n {
        xq.submit(DelayCmd { ticks });
    }
    // A stop closes the launcher within the bounded close; a running kernel is left to finish.
    let xq = crate::measure::settle::wait_idle_or_stop(xq, &|| Abandoned::Left)?;
    let launcher = t1.elapsed().as_secs_f64();
    drop(xq);
    let slots = lpq.read_slots(n as u64).map_err(h("reading slots"))?;
    if let Some(p) = incomplete("launcher", &slots, lpq.nblocks()) {
        return Err(format!("lv1 overhead ({p})"));
    }
    Ok((direct, launcher, (launcher / direct - 1.0) * 100.0))
}
