//! Pure logic of the GPU device, testable without a GPU: gfx target names, grid sizing, delay
//! calibration from measured pairs, and mapping the GPU wall clock to host time.

use std::sync::OnceLock;
use std::time::Instant;

use crate::Error;

/// A gfx target as HIP reports it (gcnArchName), e.g. `gfx942:sramecc+:xnack-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GfxTarget {
    /// The processor, e.g. `gfx942`.
    pub processor: String,
    /// Target features with their setting, in HIP's order, e.g. `[("sramecc", true), ("xnack", false)]`.
    pub features: Vec<(String, bool)>,
}

impl GfxTarget {
    /// Parses `gfxNNN[:feature(+|-)]*`; anything else is an error naming the input.
    pub fn parse(s: &str) -> Result<GfxTarget, Error> {
        let bad = || Error::Invalid(format!("not a gfx target: {s:?}"));
        let mut parts = s.trim().split(':');
        let processor = parts.next().ok_or_else(bad)?;
        let digits = processor.strip_prefix("gfx").ok_or_else(bad)?;
        if !(3..=5).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bad());
        }
        let mut features = Vec::new();
        for f in parts {
            let (name, on) = match f.as_bytes().last() {
                Some(b'+') => (&f[..f.len() - 1], true),
                Some(b'-') => (&f[..f.len() - 1], false),
                _ => return Err(bad()),
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(bad());
            }
            features.push((name.to_string(), on));
        }
        Ok(GfxTarget {
            processor: processor.to_string(),
            features,
        })
    }

    /// The full target id for `--offload-arch=` (processor plus features, so the code object
    /// matches the device's sramecc/xnack mode).
    pub fn offload_arch(&self) -> String {
        let mut s = self.processor.clone();
        for (name, on) in &self.features {
            s.push_str(&format!(":{name}{}", if *on { '+' } else { '-' }));
        }
        s
    }

    /// MI300 family (gfx940/941/942), where `s_memtime` is the shader clock and CWSR is per XCC.
    pub fn is_gfx94x(&self) -> bool {
        self.processor.starts_with("gfx94")
    }
}

/// The oldest HIP (major, minor) whose hiprtc knows `processor`, for targets newer than HIP 5.0.
/// Asking an older hiprtc for a target it does not know crashes the process inside comgr
/// (HIP 5.2: SIGSEGV for gfx942, abort for gfx999, seen here), so the caller refuses first.
/// Conservative: gfx94x is taken as needing ROCm 6.0, the first release that supports MI300.
pub fn min_hip_for_target(processor: &str) -> Option<(i32, i32)> {
    let p = processor.strip_prefix("gfx").filter(|p| p.is_ascii())?;
    Some(match (p.len(), p.get(..2).unwrap_or("")) {
        (3, "94") => (6, 0),
        (3, "95") => (7, 0),
        (3, "90") => return None,
        (3, x) if matches!(x.as_bytes()[0], b'6'..=b'8') => return None,
        (4, "10") => return None,
        (4, "11") => (5, 4),
        (4, "12") => (6, 2),
        _ => (99, 0), // unknown to this table: refuse rather than risk the crash
    })
}

/// The launch shape of a delay kernel: `blocks` workgroups of `threads` work-items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub blocks: u32,
    pub threads: u32,
}

/// Occupies every CU: `blocks_per_cu` workgroups per CU, each of `waves_per_block` waves of
/// `wave_size` lanes (default use: 1 block of 4 waves per CU = one wave on each of a CU's 4 SIMDs).
pub fn grid_for(cu_count: u32, blocks_per_cu: u32, waves_per_block: u32, wave_size: u32) -> Result<Grid, Error> {
    let threads = waves_per_block
        .checked_mul(wave_size)
        .filter(|&t| (1..=1024).contains(&t));
    let blocks = cu_count.checked_mul(blocks_per_cu).filter(|&b| b > 0);
    match (blocks, threads) {
        (Some(blocks), Some(threads)) => Ok(Grid { blocks, threads }),
        _ => Err(Error::Invalid(format!(
            "no grid for {cu_count} CUs x {blocks_per_cu} blocks of {waves_per_block} waves x {wave_size} lanes (need > 0 blocks, 1..=1024 threads)"
        ))),
    }
}

/// A straight line y = intercept + slope * x fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub slope: f64,
    pub intercept: f64,
}

/// Least squares over (x, y); needs two distinct x values.
pub fn fit_line(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx <= f64::EPSILON * mx.abs().max(1.0) {
        return None;
    }
    let slope = sxy / sxx;
    Some(Line {
        slope,
        intercept: my - slope * mx,
    })
}

/// One calibration run of the delay kernel: requested wall-clock ticks, and its duration
/// measured by events around the launch and by the kernel's own wall-clock stamps (end - start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalSample {
    pub ticks: u64,
    pub event_ms: f64,
    pub wall_ms: f64,
}

/// Relative tolerance beyond which a duration is flagged (5%).
pub const TOLERANCE: f64 = 0.05;

/// The delay kernel's spin against its duration, fitted from [`CalSample`]s. The kernels spin on
/// the wall clock (s_memrealtime) and stamp with it, so the wall-clock fit's slope is the rate
/// the stamps are read at (by construction) and what it really measures is the fixed cost of a
/// command (the intercept: dispatch skew between the first and last block, and the heavy
/// kernel's register and LDS set-up). The events, timed by another clock, check the rate itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Wall-clock ticks per ms of a command's own stamps (the rate used; = the reported rate).
    pub ticks_per_ms: f64,
    /// Fixed cost of a command on the wall clock (ms), taken off every requested T.
    pub wall_overhead_ms: f64,
    /// Ticks per ms as events see them: includes launch/completion overhead in `event_overhead_ms`.
    pub event_ticks_per_ms: f64,
    pub event_overhead_ms: f64,
    /// The two rates disagree by more than [`TOLERANCE`]: the wall clock does not run at the rate
    /// HIP reported (or, when HIP did not report one, at the per-target fallback).
    pub rates_disagree: bool,
}

impl Calibration {
    /// Fits both lines (duration against ticks); needs runs at two or more tick counts.
    pub fn fit(samples: &[CalSample]) -> Result<Calibration, Error> {
        let pts = |f: fn(&CalSample) -> f64| samples.iter().map(|s| (s.ticks as f64, f(s))).collect::<Vec<_>>();
        let bad = |what: &str| Error::Invalid(format!("calibration failed: {what} ({} samples)", samples.len()));
        let wall = fit_line(&pts(|s| s.wall_ms)).ok_or_else(|| bad("need runs at two or more tick counts"))?;
        let event = fit_line(&pts(|s| s.event_ms)).ok_or_else(|| bad("need runs at two or more tick counts"))?;
        if !(wall.slope > 0.0 && event.slope > 0.0) {
            return Err(bad("duration does not grow with the tick count"));
        }
        let (ticks_per_ms, event_ticks_per_ms) = (1.0 / wall.slope, 1.0 / event.slope);
        Ok(Calibration {
            ticks_per_ms,
            wall_overhead_ms: wall.intercept,
            event_ticks_per_ms,
            event_overhead_ms: event.intercept,
            rates_disagree: relative_error(event_ticks_per_ms, ticks_per_ms) > TOLERANCE,
        })
    }

    /// The tick count for a command of `t_ms` (wall-clock time inside the kernel).
    pub fn ticks_for(&self, t_ms: f64) -> u64 {
        crate::num::round_u64((t_ms - self.wall_overhead_ms).max(0.0) * self.ticks_per_ms)
    }
}

fn relative_error(measured: f64, reference: f64) -> f64 {
    ((measured - reference) / reference).abs()
}

/// Achieved T against requested T.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Achieved {
    pub requested_ms: f64,
    pub achieved_ms: f64,
    /// (achieved - requested) / requested.
    pub error: f64,
    /// |error| > 5%: report it next to every number measured with this T.
    pub off: bool,
}

pub fn achieved(requested_ms: f64, achieved_ms: f64) -> Achieved {
    let error = (achieved_ms - requested_ms) / requested_ms;
    Achieved {
        requested_ms,
        achieved_ms,
        error,
        off: error.is_nan() || error.abs() > TOLERANCE,
    }
}

/// Wall-clock ticks to milliseconds at `rate_khz` (hipDeviceAttributeWallClockRate: 100000 on
/// gfx942, 25000 on gfx90a).
pub fn ticks_to_ms(ticks: u64, rate_khz: u32) -> f64 {
    ticks as f64 / rate_khz as f64
}

/// One GPU wall-clock reading bracketed by host times (ns on the same host clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockPair {
    pub gpu_ticks: u64,
    pub host_before_ns: u64,
    pub host_after_ns: u64,
}

impl ClockPair {
    /// When the host saw the stamp: the anchor of the pair. The stamp's true host time lies in
    /// [before, after], but not in the middle: `before` precedes the launch call, and the launch
    /// plus the dispatch (microseconds) dwarf the stamp's way back (a GPU write to host memory plus
    /// the host's poll, around a microsecond). Anchoring at `after` makes mapped times late by that
    /// short way back; the midpoint would make them early by half the launch, so HP start latencies
    /// would come out low every time.
    fn seen(&self) -> f64 {
        self.host_after_ns as f64
    }
    fn window(&self) -> u64 {
        self.host_after_ns.saturating_sub(self.host_before_ns)
    }
}

/// GPU wall clock -> host ns: host = anchor_host_ns + (ticks - anchor_ticks) * ns_per_tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockMap {
    pub anchor_ticks: u64,
    pub anchor_host_ns: f64,
    pub ns_per_tick: f64,
    /// A bias, one-sided: mapped host times are late by at most this many ns (the anchor pair's
    /// host window; they are never early). The expected bias is the stamp's way back to the host
    /// (see `ClockPair::seen`), far less; HP start latencies are overestimated by it, never
    /// underestimated.
    pub late_bias_max_ns: f64,
}

impl ClockMap {
    /// Fits the rate from the pairs (least squares over the moments each stamp was seen) when
    /// they span time, else uses `nominal_khz`; the offset comes from the moment the pair with the
    /// narrowest host window was seen (the narrowest bounds the bias best).
    pub fn fit(pairs: &[ClockPair], nominal_khz: u32) -> Result<ClockMap, Error> {
        let anchor = *pairs
            .iter()
            .min_by_key(|p| p.window())
            .ok_or_else(|| Error::Invalid("no clock pairs".into()))?;
        if pairs.iter().any(|p| p.host_after_ns < p.host_before_ns) || nominal_khz == 0 {
            return Err(Error::Invalid("clock pairs with after < before, or a zero rate".into()));
        }
        let nominal = 1e6 / nominal_khz as f64;
        let rel: Vec<(f64, f64)> = pairs
            .iter()
            .map(|p| {
                (
                    (p.gpu_ticks as i128 - anchor.gpu_ticks as i128) as f64,
                    p.seen() - anchor.seen(),
                )
            })
            .collect();
        // Trust a fitted rate only within 1% of nominal (a short span gives noise, not drift).
        let ns_per_tick = fit_line(&rel)
            .map(|l| l.slope)
            .filter(|s| relative_error(*s, nominal) < 0.01)
            .unwrap_or(nominal);
        Ok(ClockMap {
            anchor_ticks: anchor.gpu_ticks,
            anchor_host_ns: anchor.seen(),
            ns_per_tick,
            late_bias_max_ns: anchor.window() as f64,
        })
    }

    pub fn to_host_ns(self, gpu_ticks: u64) -> f64 {
        self.anchor_host_ns + (gpu_ticks as i128 - self.anchor_ticks as i128) as f64 * self.ns_per_tick
    }
}

/// Host time in ns since a process-wide epoch (the first call): the host side of [`ClockPair`]s.
pub fn host_ns(t: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    // 2^64 ns is 584 years of uptime.
    u64::try_from(t.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
