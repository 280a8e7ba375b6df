//! Pure sizing rules of a GPU run: the LP grid, the command budget, T's calibration points and
//! the co-run test.
use crate::Error;
use crate::calib::{self, Grid};
use crate::state::{HEAVY_THREADS, LpState};

/// The light LP launch shape: `blocks_per_cu` blocks of 1024 threads per CU.
pub fn lp_grid(cu_count: u32, wave_size: u32, blocks_per_cu: u32) -> Result<Grid, Error> {
    let wave = wave_size.max(1);
    calib::grid_for(cu_count, blocks_per_cu, (1024 / wave).max(1), wave)
}

/// The LP launch shape of `state`'s kernel. Light: [`lp_grid`] with `blocks_per_cu`. Heavy: one
/// block of [`HEAVY_THREADS`] (4 waves of 64, one per SIMD) per CU, whatever `blocks_per_cu`
/// says: each heavy block takes all of a CU's LDS (64 KiB) and, at 512 VGPRs per lane, all of its
/// register file, so a second block per CU could only start when the first ended and a command
/// would last 2T. Heavy needs wave64.
pub fn lp_grid_for(state: LpState, cu_count: u32, wave_size: u32, blocks_per_cu: u32) -> Result<Grid, Error> {
    match state {
        LpState::Light => lp_grid(cu_count, wave_size, blocks_per_cu),
        LpState::Heavy if wave_size == 64 => calib::grid_for(cu_count, 1, HEAVY_THREADS / 64, 64),
        LpState::Heavy => Err(Error::Invalid(format!(
            "--lp-state heavy needs wave64 (the device reports wave{wave_size})"
        ))),
    }
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
        assert_eq!(lp_grid_for(LpState::Light, 80, 64, 2).unwrap(), g);
    }

    #[test]
    fn heavy_grid_is_one_four_wave_block_per_cu() {
        for blocks_per_cu in [1, 2, 8] {
            let g = lp_grid_for(LpState::Heavy, 80, 64, blocks_per_cu).unwrap();
            assert_eq!(
                (g.blocks, g.threads),
                (80, HEAVY_THREADS),
                "PREEMPT_LP_BLOCKS_PER_CU={blocks_per_cu}"
            );
        }
        assert_eq!(HEAVY_THREADS / 64, 4, "one wave per SIMD of a 4-SIMD CU");
        assert!(
            lp_grid_for(LpState::Heavy, 80, 32, 2)
                .unwrap_err()
                .to_string()
                .contains("needs wave64")
        );
        assert!(lp_grid_for(LpState::Heavy, 0, 64, 1).is_err());
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
