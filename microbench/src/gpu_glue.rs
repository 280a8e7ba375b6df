//! The CLI's bridge to the GPU path (`gpu`): used by `validate` and the measurement commands.

/// Whether `functional` and the GPU measurement really run (false until the HIP device lands).
pub const WIRED: bool = false;

/// Runs `cycles` Lv3 preempt/resume cycles with `mechanism` on HIP device `device` at T, with
/// the correctness check. Ok: a one-line latency summary. Err((true, why)): cannot run here
/// (skip); Err((false, why)): ran and failed.
pub fn functional(device: u32, mechanism: &str, t_ms: f64, cycles: u32) -> Result<String, (bool, String)> {
    let _ = (device, mechanism, t_ms, cycles);
    Err((true, "skipped: the HIP device is not wired into this build yet".into()))
}
