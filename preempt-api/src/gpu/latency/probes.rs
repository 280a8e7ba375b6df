//! What a latency run does with the HP probe around its samples: the GPU-wall-clock <-> host-time
//! pairs its clock map is fitted from, the HP floor on an idle GPU, and the co-run check that the
//! LP kernel really fills the GPU.
use super::h;
use crate::error::{Error, ErrorKind, Result};
use gpu_device::verify;
use gpu_device::{Calibration, ClockMap, ClockPair, DelayKernel, HipLpQueue, HpProbe, calib, kernel};
use std::time::{Duration, Instant};

/// How long the HP probe may take while the LP queue is suspended before the run gives up
/// (the guard then resumes the queue).
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock pairs taken before and after the run.
pub(super) const CLOCK_PAIRS: u32 = 32;
/// HP probes on an idle GPU: the floor of the HP start latency (launch + dispatch).
pub(super) const FLOOR_PROBES: u32 = 16;

/// A failure of the run's own checks (no call failed).
pub(super) fn failed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Device, message)
}

/// `n` GPU-wall-clock/host-time pairs: host time before the probe's launch, its start stamp,
/// host time when the stamp became visible in pinned memory (polled, not synchronized).
pub(super) fn clock_pairs(probe: &HpProbe, first_idx: u32, n: u32) -> Result<Vec<ClockPair>> {
    let mut v = Vec::with_capacity(n as usize);
    for i in first_idx..first_idx + n {
        let before = calib::host_ns(Instant::now());
        probe.launch_unrecorded(i).map_err(h("clock pair probe"))?;
        let tick = probe.poll_stamp(i, PROBE_TIMEOUT);
        let after = calib::host_ns(Instant::now());
        let tick = tick.ok_or_else(|| {
            failed(format!(
                "the clock-pair probe did not run within {PROBE_TIMEOUT:?} on an idle GPU"
            ))
        })?;
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
pub(super) fn hp_floor(probe: &HpProbe, map: &ClockMap, first_idx: u32) -> Result<u64> {
    let mut v = Vec::new();
    for i in first_idx..first_idx + FLOOR_PROBES {
        let t = calib::host_ns(Instant::now());
        probe.launch(i).map_err(h("HP probe"))?;
        if !probe.wait(PROBE_TIMEOUT).map_err(h("HP probe"))? {
            return Err(failed(format!(
                "the HP probe did not finish within {PROBE_TIMEOUT:?} on an idle GPU"
            )));
        }
        if let Some(tick) = probe.stamp(i) {
            v.push(verify::hp_start_ns(map, tick, t).unwrap_or(0));
        }
    }
    v.sort_unstable();
    // The upper median, as every median of the run's figures.
    Ok(v.get(v.len() / 2).copied().unwrap_or(0))
}

/// One 20 ms LP command straight on the LP stream, the HP probe 2 ms into it: if the probe
/// starts before the LP command ends, the two ran side by side. The warning if they did.
pub(super) fn co_run_check(
    lpq: &HipLpQueue,
    k: &DelayKernel,
    slots: &hip_rt::DeviceBuffer,
    probe: &HpProbe,
    cal: &Calibration,
    idx: u32,
    wall_khz: u32,
) -> Result<Option<String>> {
    k.launch(lpq.stream(), hip_rt::Mem::Device(slots), 0, cal.ticks_for(20.0))
        .map_err(h("co-run check"))?;
    std::thread::sleep(Duration::from_millis(2));
    probe.launch(idx).map_err(h("co-run check"))?;
    let ok = probe.wait(Duration::from_secs(30)).map_err(h("co-run check"))?;
    lpq.stream().synchronize().map_err(h("co-run check"))?;
    let slot = kernel::read_slots(slots, 1).map_err(h("co-run check"))?[0];
    let tick = probe
        .stamp(idx)
        .filter(|_| ok)
        .ok_or_else(|| failed("co-run check: the HP probe did not run"))?;
    let slack = u64::from(wall_khz); // 1 ms
    Ok(gpu_device::setup::probe_co_ran(tick, slot.end, slack).then(|| {
        format!(
            "the HP probe started {:.2} ms before a running LP command ended: the LP kernel does not fill the GPU, \
             so HP start latencies are not preemption latencies (raise PREEMPT_LP_BLOCKS_PER_CU)",
            calib::ticks_to_ms(slot.end - tick, wall_khz)
        )
    }))
}
