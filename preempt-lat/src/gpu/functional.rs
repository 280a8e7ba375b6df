//! `validate`'s hardware check on a GPU: Lv3 cycles with the correctness check, one line out.
use super::usable::{unusable_reason, usable};
use crate::measure::Params;
use preempt_api::{GracePeriod, MechanismChoice};

/// `validate`'s hardware check (one line per outcome): `cycles` Lv3 preempt/resume
/// cycles with `mechanism` on `hip:device` at T, correctness included. Ok: one summary line.
/// Err((true, why)): cannot run here (skip). Err((false, why)): ran and failed.
pub fn functional(device: u32, mechanism: MechanismChoice, t_ms: f64, cycles: u32) -> Result<String, (bool, String)> {
    usable(device).map_err(|why| (true, why.to_string()))?;
    if let MechanismChoice::Only(kind) = mechanism
        && let Some(why) = unusable_reason(kind)
    {
        return Err((true, why));
    }
    let p = Params {
        level: crate::options::Level::Lv3,
        t_ms,
        lp_state: Some(crate::options::LpState::Light),
        samples: cycles.max(1),
        warmup: 2,
        threshold: 8,
        batch: 4,
        seed: 1,
        workers: 1,
        gap_t: Params::GAP_T,
        grace: GracePeriod::SHORTEST,
    };
    let r = crate::measure_on::gpu(&p, device, mechanism, true).map_err(|e| (false, e.to_string()))?;
    let c = &r.correctness;
    // Stopped by Ctrl-C/SIGTERM: not a pass of the cycles asked for; a skip unless what it
    // checked failed (a check it could not make, its commands abandoned, is not a failure).
    if (r.interrupted || c.ok.is_none()) && !c.failed() {
        let check = match c.ok {
            None => format!("correctness not checked: {} LP commands abandoned", c.abandoned),
            _ => format!("correctness OK for the {} LP commands launched", c.submitted),
        };
        return Err((
            true,
            format!(
                "skipped: interrupted (Ctrl-C/SIGTERM) after {} of {cycles} cycles; {check}",
                r.samples.len()
            ),
        ));
    }
    if c.failed() {
        return Err((
            false,
            format!(
                "correctness FAILED ({}): missing {:?}, duplicated {:?}, failed {:?}, wrong {:?}",
                r.env.mechanism, c.missing, c.duplicated, c.failed, c.wrong_result
            ),
        ));
    }
    let p99 = |s: &Option<crate::stats::Summary>| {
        s.as_ref()
            .map_or("-".to_string(), |s| format!("{:.1}", s.p99 as f64 / 1e3))
    };
    Ok(format!(
        "{} on {}: {} cycles ok, {} LP commands exactly once; p99 us: suspend {}, HP start {}, resume {}",
        r.env.mechanism,
        r.env.device,
        r.samples.len(),
        c.completed_once,
        p99(&r.latency_ns.suspend),
        p99(&r.latency_ns.hp_start),
        p99(&r.latency_ns.resume)
    ))
}
