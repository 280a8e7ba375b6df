//! One latency measurement on a device: the device set up by preempt-api's latency layer (the
//! host device's workers, or `hip:N` through the API's GPU preparation), the one loop
//! ([`crate::measure::samples`]) run over it.
use crate::error::Error;
use crate::measure::{Params, RunResult, Stderr, samples};
use preempt_api::MechanismChoice;
use preempt_api::gpu::{GpuLatency, GpuLatencyRequest};
use preempt_api::latency::host::HostLatency;
use std::sync::Arc;

/// One measurement on the host device, with `p.workers` LP workers.
pub fn host(p: &Params, quiet: bool) -> Result<RunResult, Error> {
    // T <= 10 s (checked at parse time): the rounded ns fit a u64.
    let t_ns = crate::num::round_u64(p.t_ms * 1e6);
    let dev = HostLatency::open(&crate::host_direct::worker_exe()?, p.workers as usize, t_ns, p.level)?;
    samples::run(p, dev, "host", quiet)
}

/// One measurement on `hip:device`; `mechanism` applies to Lv3 (Lv1 is the launcher's).
pub fn gpu(p: &Params, device: u32, mechanism: MechanismChoice, quiet: bool) -> Result<RunResult, Error> {
    let request = GpuLatencyRequest {
        device,
        level: p.level,
        t_ms: p.t_ms,
        lp_state: p.lp_state.unwrap_or_default(),
        mechanism,
        grace: p.grace,
        probes: p.warmup + p.samples,
        budget: p.gpu_budget(),
    };
    let dev = GpuLatency::open(&request, Arc::new(Stderr { quiet }))?;
    samples::run(p, dev, &format!("hip:{device}"), quiet)
}
