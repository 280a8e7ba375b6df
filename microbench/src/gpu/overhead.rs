//! The threshold sweep's point on a GPU: LP throughput launched directly vs. through the launcher.
use std::sync::Arc;
use std::time::Instant;

use lv1::{Config, XQueue};

use gpu_device::{DelayCmd, DelayKernel, HipLpQueue, LpState, SlotStatus, kernel};
use hip_rt::{Hip, StreamPriority};

use super::setup::{calibration_points, h, lp_blocks_per_cu, lp_grid_for};

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
    let hip = Hip::load().map_err(|e| e.to_string())?;
    let dev = Arc::new(gpu_device::open(&hip, device_index).map_err(|e| e.to_string())?);
    let arch = gpu_device::gfx_target(&dev.info).map_err(|e| e.to_string())?;
    let code = kernel::compile(&hip, &arch).map_err(h("compiling delay.hip with hiprtc"))?;
    let grid =
        lp_grid_for(state, dev.info.cu_count, dev.info.wave_size, lp_blocks_per_cu()).map_err(|e| e.to_string())?;
    let k = Arc::new(DelayKernel::load(&dev, &code, state, grid).map_err(h("loading the delay kernel"))?);
    let warm = dev.stream(StreamPriority::Normal).map_err(h("warm-up stream"))?;
    let cal = kernel::calibrate(&k, &dev, &warm, &calibration_points(t_ms), 3)
        .map_err(h("calibrating T"))?
        .calibration;
    let n32 = commands.max(1);
    let n = n32 as usize;
    let direct_slots = kernel::slot_buffer(&dev, &warm, n).map_err(h("slot buffer"))?;
    let xq_slots = kernel::slot_buffer(&dev, &warm, n).map_err(h("slot buffer"))?;
    let stream = dev.stream_own_queue().map_err(h("LP stream"))?;
    let lpq = Arc::new(HipLpQueue::new(Arc::clone(&dev), Arc::clone(&k), stream, xq_slots));
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
