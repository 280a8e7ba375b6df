//! Pure sizing rules of a GPU run: the LP grid, the command budget, T's calibration points and
//! the co-run test.
use crate::Error;
use crate::calib::{self, Grid};

/// The LP launch shape: `blocks_per_cu` blocks of 1024 threads per CU.
pub fn lp_grid(cu_count: u32, wave_size: u32, blocks_per_cu: u32) -> Result<Grid, Error> {
    let wave = wave_size.max(1);
    calib::grid_for(cu_count, blocks_per_cu, (1024 / wave).max(1), wave)
}

/// Slots to allocate for LP commands over `samples` samples (warm-up included): per sample, the
/// gap (`gap_t_max`, in T), a drained `threshold`, and 2 ms of host overhead in units of T
/// (`t_ms`); twice that, plus the keep-ahead, capped at 4 Mi commands.
pub fn command_budget(samples: u32, gap_t_max: f64, threshold: u32, t_ms: f64, keep_ahead: u64) -> u64 {
    let total = u64::from(samples);
    let per_sample = crate::num::round_u64(gap_t_max.ceil().max(1.0))
        + u64::from(threshold)
        + 2
        + crate::num::round_u64((2.0 / t_ms.max(1e-4)).ceil());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lp_grid_fills_every_wave_slot_of_a_gfx942_cu() {
        let g = lp_grid(80, 64, 2).unwrap();
        assert_eq!((g.blocks, g.threads), (160, 1024));
        assert_eq!(g.threads / 64 * (g.blocks / 80), 32, "32 waves per CU = 8 per SIMD");
        assert!(lp_grid(0, 64, 2).is_err());
    }

    #[test]
    fn budget_covers_samples_and_is_capped() {
        let b = command_budget(1010, 3.0, 8, 0.5, 18);
        // 1010 samples x (3 + 8 + 2 + 4) x 2 + 72 + 1024
        assert_eq!(b, 2 * 1010 * 17 + 72 + 1024);
        assert_eq!(command_budget(100_010, 3.0, 8, 0.001, 18), 1 << 22);
    }

    #[test]
    fn calibration_points_bracket_t() {
        assert_eq!(calibration_points(0.5), [0.25, 0.5, 1.0]);
        assert_eq!(calibration_points(0.01), [0.02, 0.04, 0.08]);
    }

    #[test]
    fn co_run_detection() {
        assert!(probe_co_ran(1_000, 500_000, 100_000));
        assert!(!probe_co_ran(450_000, 500_000, 100_000));
        assert!(!probe_co_ran(600_000, 500_000, 100_000));
    }
}
