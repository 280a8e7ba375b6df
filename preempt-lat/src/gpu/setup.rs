//! What a GPU run does around the samples with this crate's parameters: the command budget for
//! a [`Params`], the LP blocks per CU, the wall-clock <-> host-time pairs, the HP floor on an idle
//! GPU, and the co-run check that the LP kernel really fills the GPU. The pure sizing rules are
//! `gpu_device::setup`'s (re-exported here).
use std::time::{Duration, Instant};

pub use gpu_device::setup::probe_co_ran;
use gpu_device::verify;
use gpu_device::{Calibration, ClockMap, ClockPair, DelayKernel, HipLpQueue, HpProbe, calib, kernel};

use crate::error::{Cause, Error, failed};
use crate::measure::Params;

/// How long the HP probe may take while the LP queue is suspended before the run gives up
/// (the guard then resumes the queue).
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock pairs taken before and after the run.
pub(super) const CLOCK_PAIRS: u32 = 32;
/// HP probes on an idle GPU: the floor of the HP start latency (launch + dispatch).
pub(super) const FLOOR_PROBES: u32 = 16;
/// Light LP blocks per CU (of 1024 threads = 16 waves each): 2 fill the 32 wave slots of a gfx90a/
/// gfx942 CU (8 per SIMD), so the HP probe cannot slip in beside a running LP command.
/// `PREEMPT_LP_BLOCKS_PER_CU` overrides it (1..=8). The heavy kernel always runs one block per
/// CU (`gpu_device::setup::lp_grid_for`): it fills the CU's registers and LDS by itself.
pub(super) const LP_BLOCKS_PER_CU: u32 = 2;

/// Context for a HIP (or GPU device) error: `hip: <what>: <error>`.
pub(crate) fn h<E: Cause>(what: &'static str) -> impl Fn(E) -> Error {
    move |e| e.under(format!("hip: {what}"))
}

pub(super) fn lp_blocks_per_cu() -> u32 {
    std::env::var("PREEMPT_LP_BLOCKS_PER_CU")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| (1..=8).contains(n))
        .unwrap_or(LP_BLOCKS_PER_CU)
}

/// Slots to allocate for LP commands: per sample, the gap (in T), a drained threshold, and 2 ms
/// of host overhead in units of T; twice that, plus the keep-ahead, capped at 4 Mi commands.
pub fn command_budget(p: &Params, keep_ahead: u64) -> u64 {
    gpu_device::setup::command_budget(p.warmup + p.samples, p.gap_t.1, p.threshold, p.t_ms, keep_ahead)
}

/// `n` GPU-wall-clock/host-time pairs: host time before the probe's launch, its start stamp,
/// host time when the stamp became visible in pinned memory (polled, not synchronized).
pub(super) fn clock_pairs(probe: &HpProbe, first_idx: u32, n: u32) -> Result<Vec<ClockPair>, Error> {
    let mut v = Vec::with_capacity(n as usize);
    for i in first_idx..first_idx + n {
        let before = calib::host_ns(Instant::now());
        probe.launch_unrecorded(i).map_err(h("clock pair probe"))?;
        let tick = probe.poll_stamp(i, PROBE_TIMEOUT);
        let after = calib::host_ns(Instant::now());
        let tick =
            tick.ok_or_else(|| failed!("the clock-pair probe did not run within {PROBE_TIMEOUT:?} on an idle GPU"))?;
        v.push(ClockPair {
            gpu_ticks: tick,
            host_before_ns: before,
            host_after_ns: after,
        });
    }
    probe.stream().synchronize().map_err(h("clock pair probes"))?;
    Ok(v)
}

/// Median HP start on an idle GPU (launch + dispatch + clock-map error): the floor under every
/// HP start figure.
pub(super) fn hp_floor(probe: &HpProbe, map: &ClockMap, first_idx: u32) -> Result<u64, Error> {
    let mut v = Vec::new();
    for i in first_idx..first_idx + FLOOR_PROBES {
        let t = calib::host_ns(Instant::now());
        probe.launch(i).map_err(h("HP probe"))?;
        if !probe.wait(PROBE_TIMEOUT).map_err(h("HP probe"))? {
            return Err(failed!(
                "the HP probe did not finish within {PROBE_TIMEOUT:?} on an idle GPU"
            ));
        }
        if let Some(tick) = probe.stamp(i) {
            v.push(verify::hp_start_ns(map, tick, t).unwrap_or(0));
        }
    }
    v.sort_unstable();
    Ok(crate::stats::median(&v).unwrap_or(0))
}

/// One 20 ms LP command straight on the LP stream, the HP probe 2 ms into it: if the probe
/// starts before the LP command ends, the two ran side by side.
pub(super) fn co_run_check(
    lpq: &HipLpQueue,
    k: &DelayKernel,
    slots: &gpu_device::hip_rt::DeviceBuffer,
    probe: &HpProbe,
    cal: &Calibration,
    idx: u32,
    wall_khz: u32,
) -> Result<Option<String>, Error> {
    k.launch(
        lpq.stream(),
        gpu_device::hip_rt::Mem::Device(slots),
        0,
        cal.ticks_for(20.0),
    )
    .map_err(h("co-run check"))?;
    std::thread::sleep(Duration::from_millis(2));
    probe.launch(idx).map_err(h("co-run check"))?;
    let ok = probe.wait(Duration::from_secs(30)).map_err(h("co-run check"))?;
    lpq.stream().synchronize().map_err(h("co-run check"))?;
    let slot = kernel::read_slots(slots, 1).map_err(h("co-run check"))?[0];
    let tick = probe
        .stamp(idx)
        .filter(|_| ok)
        .ok_or_else(|| failed!("co-run check: the HP probe did not run"))?;
    let slack = u64::from(wall_khz); // 1 ms
    Ok(probe_co_ran(tick, slot.end, slack).then(|| {
        format!(
            "the HP probe started {:.2} ms before a running LP command ended: the LP kernel does not fill the GPU, \
             so HP start latencies are not preemption latencies (raise PREEMPT_LP_BLOCKS_PER_CU)",
            calib::ticks_to_ms(slot.end - tick, wall_khz)
        )
    }))
}
