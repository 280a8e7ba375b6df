//! What a GPU run checks and measures around the samples: the LP grid, the command budget,
//! T's calibration points, the wall-clock <-> host-time pairs, the HP floor on an idle GPU, and
//! the co-run check that the LP kernel really fills the GPU.
use std::time::{Duration, Instant};

use super::device::{HipLpQueue, HpProbe};
use super::verify;
use super::run::{FLOOR_PROBES, LP_BLOCKS_PER_CU, PROBE_TIMEOUT, h};
use crate::hip::{self, Calibration, ClockMap, ClockPair, DelayKernel, Grid, HipError, calib, kernel};
use crate::measure::Params;

/// The LP launch shape: `blocks_per_cu` blocks of 1024 threads per CU.
pub fn lp_grid(cu_count: u32, wave_size: u32, blocks_per_cu: u32) -> Result<Grid, HipError> {
    let wave = wave_size.max(1);
    calib::grid_for(cu_count, blocks_per_cu, (1024 / wave).max(1), wave)
}

pub(super) fn lp_blocks_per_cu() -> u32 {
    std::env::var("PREEMPT_LAT_LP_BLOCKS_PER_CU")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| (1..=8).contains(n))
        .unwrap_or(LP_BLOCKS_PER_CU)
}

/// Slots to allocate for LP commands: per sample, the gap (in T), a drained threshold, and 2 ms
/// of host overhead in units of T; twice that, plus the keep-ahead, capped at 4 Mi commands.
pub fn command_budget(p: &Params, keep_ahead: u64) -> u64 {
    let total = u64::from(p.warmup + p.samples);
    let per_sample = p.gap_t.1.ceil().max(1.0) as u64 + u64::from(p.threshold) + 2 + (2.0 / p.t_ms.max(1e-4)).ceil() as u64;
    (2 * total * per_sample + 4 * keep_ahead + 1024).min(1 << 22)
}

/// Calibration durations around T (ms): T/2, T, 2T, with T taken as at least 40 us (shorter
/// runs are dominated by launch overhead; the fit is linear, so it extrapolates down).
pub fn calibration_points(t_ms: f64) -> [f64; 3] {
    let t = t_ms.max(0.04);
    [0.5 * t, t, 2.0 * t]
}

/// Did the HP probe start while an LP command was still running, with nothing suspended? Then the
/// LP kernel does not fill the GPU and HP start latencies are not preemption latencies.
/// `slack_ticks`: how much earlier than the LP end counts (the probe was launched well inside).
pub fn probe_co_ran(probe_tick: u64, lp_end_tick: u64, slack_ticks: u64) -> bool {
    probe_tick.saturating_add(slack_ticks) < lp_end_tick
}

/// `n` GPU-wall-clock/host-time pairs: host time before the probe's launch, its start stamp,
/// host time when the stamp became visible in pinned memory (polled, not synchronized).
pub(super) fn clock_pairs(probe: &HpProbe, first_idx: u32, n: usize) -> Result<Vec<ClockPair>, String> {
    let mut v = Vec::with_capacity(n);
    for i in first_idx..first_idx + n as u32 {
        let before = calib::host_ns(Instant::now());
        probe.launch_unrecorded(i).map_err(h("clock pair probe"))?;
        let tick = probe.poll_stamp(i, PROBE_TIMEOUT);
        let after = calib::host_ns(Instant::now());
        let tick = tick.ok_or_else(|| format!("the clock-pair probe did not run within {PROBE_TIMEOUT:?} on an idle GPU"))?;
        v.push(ClockPair { gpu_ticks: tick, host_before_ns: before, host_after_ns: after });
    }
    probe.stream().synchronize().map_err(h("clock pair probes"))?;
    Ok(v)
}

/// Median HP start on an idle GPU (launch + dispatch + clock-map error): the floor under every
/// HP start figure.
pub(super) fn hp_floor(probe: &HpProbe, map: &ClockMap, first_idx: u32) -> Result<u64, String> {
    let mut v = Vec::new();
    for i in first_idx..first_idx + FLOOR_PROBES {
        let t = calib::host_ns(Instant::now());
        probe.launch(i).map_err(h("HP probe"))?;
        if !probe.wait(PROBE_TIMEOUT).map_err(h("HP probe"))? {
            return Err(format!("the HP probe did not finish within {PROBE_TIMEOUT:?} on an idle GPU"));
        }
        if let Some(tick) = probe.stamp(i) {
            v.push(verify::hp_start_ns(map, tick, t).unwrap_or(0));
        }
    }
    v.sort_unstable();
    Ok(v.get(v.len() / 2).copied().unwrap_or(0))
}

/// One 20 ms LP command straight on the LP stream, the HP probe 2 ms into it: if the probe
/// starts before the LP command ends, the two ran side by side.
pub(super) fn co_run_check(
    lpq: &HipLpQueue,
    k: &DelayKernel,
    slots: &hip::DeviceBuffer,
    probe: &HpProbe,
    cal: &Calibration,
    idx: u32,
    wall_khz: u32,
) -> Result<Option<String>, String> {
    k.launch(lpq.stream(), hip::Mem::Device(slots), 0, cal.cycles_for(20.0)).map_err(h("co-run check"))?;
    std::thread::sleep(Duration::from_millis(2));
    probe.launch(idx).map_err(h("co-run check"))?;
    let ok = probe.wait(Duration::from_secs(30)).map_err(h("co-run check"))?;
    lpq.stream().synchronize().map_err(h("co-run check"))?;
    let slot = kernel::read_slots(slots, 1).map_err(h("co-run check"))?[0];
    let tick = probe.stamp(idx).filter(|_| ok).ok_or("co-run check: the HP probe did not run")?;
    let slack = u64::from(wall_khz); // 1 ms
    Ok(probe_co_ran(tick, slot.end, slack).then(|| {
        format!(
            "the HP probe started {:.2} ms before a running LP command ended: the LP kernel does not fill the GPU, \
             so HP start latencies are not preemption latencies (raise PREEMPT_LAT_LP_BLOCKS_PER_CU)",
            calib::ticks_to_ms(slot.end - tick, wall_khz)
        )
    }))
}

