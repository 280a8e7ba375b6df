//! The threshold sweep's point on a GPU: LP throughput launched directly vs. through the launcher.
use std::sync::Arc;
use std::time::Instant;

use lv1::{Config, XQueue};

use gpu_device::{DelayCmd, LpState, SlotStatus, kernel};
use hip_rt::StreamPriority;

use super::setup::{calibration_points, h};

/// The GPU version of `measure::host::lv1_overhead`: `commands` LP commands of T (of the `state`
/// LP kernel) launched directly on a dedicated stream, then the same through an XQueue with
/// `threshold`/`batch`. Returns (direct s, launcher s, overhead %). Both phases must complete
/// every command.
pub fn lv1_overhead(
    device_index: u32,
    t_ms: f64,
    state: LpState,
    threshold: u32,
    batch: u32,
    commands: u32,
) -> Result<(f64, f64, f64), String> {
    let gpu = super::run::open_device(device_index, state)?;
    let k = gpu
        .kernel()
        .map_err(|e| format!("hip: preparing the delay kernel: {e}"))?;
    let dev = gpu.device();
    let warm = gpu.stream(StreamPriority::Normal).map_err(h("warm-up stream"))?;
    let cal = kernel::calibrate(&k, dev, &warm, &calibration_points(t_ms), 3)
        .map_err(h("calibrating T"))?
        .calibration;
    let n32 = commands.max(1);
    let n = n32 as usize;
    let direct_slots = kernel::slot_buffer(dev, &warm, n).map_err(h("slot buffer"))?;
    // The LP queue of the API's set-up (Lv1: no KFD queue to find), its slots for the launcher.
    let lpq = gpu.lp_queue(None, n).map_err(|e| e.to_string())?.queue;
    let ticks = cal.ticks_for(t_ms);
    let t0 = Instant::now();
    for id in 0..n32 {
        k.launch(lpq.stream(), hip_rt::Mem::Device(&direct_slots), id, ticks)
            .map_err(h("direct launch"))?;
    }
    lpq.stream().synchronize().map_err(h("direct synchronize"))?;
    let direct = t0.elapsed().as_secs_f64();
    let cfg = Config::new(threshold as usize, batch.min(threshold) as usize).map_err(|e| e.to_string())?;
    let xq = XQueue::new(Arc::clone(&lpq), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let t1 = Instant::now();
    for _ in 0..n {
        xq.submit(DelayCmd { ticks });
    }
    xq.wait_idle().map_err(|e| e.to_string())?;
    let launcher = t1.elapsed().as_secs_f64();
    drop(xq);
    for (what, slots) in [
        ("direct", kernel::read_slots(&direct_slots, n)),
        ("launcher", lpq.read_slots(n as u64)),
    ] {
        let slots = slots.map_err(h("reading slots"))?;
        if let Some((i, st)) = (0u32..)
            .zip(&slots)
            .map(|(i, s)| (i, s.status(i, lpq.nblocks())))
            .find(|(_, st)| *st != SlotStatus::Complete)
        {
            return Err(format!("lv1 overhead ({what}): LP command {i}: {st:?}"));
        }
    }
    Ok((direct, launcher, (launcher / direct - 1.0) * 100.0))
}
