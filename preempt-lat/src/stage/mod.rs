//! The child side of `acceptance`: `preempt-lat __acceptance-stage <stage>` runs one stage that
//! no subcommand runs alone and writes its result (preempt-acceptance's `stage_result`) for the
//! parent to read. These stages are device experiments, so they live here with the device code
//! and not in preempt-acceptance, which opens no device. A stage runs under `main`'s signal
//! handling like every subcommand (a SIGTERM stops it between steps, and whatever it suspended is
//! resumed by the API's guards), in a process of its own that the parent bounds in time
//! (`acceptance::runner`).
pub mod dynamic_queues;
pub mod environment;
pub mod example5;
pub mod gpu;
pub mod interposer;
pub mod library_kernels;
pub mod suspend_resume;

use crate::acceptance::stage_result::{StageResult, write};
use crate::acceptance::summary::Status;
use crate::doctor::facts::{Fact, HipInfo};
use crate::error::{Error, usage};
use crate::exit::{Outcome, Verdict};
use crate::measure::control::stop_requested;
use crate::options::{AcceptanceStageOptions, InternalStage};
use preempt_api::DeviceSpec;
use preempt_api::MechanismChoice;

/// `__acceptance-stage`: runs the stage and writes its result; the exit status is 0 whenever the
/// result was written (the result says how the stage went), 1 when it could not be.
pub fn run(o: &AcceptanceStageOptions, hip: impl FnOnce() -> Fact<HipInfo>) -> Outcome {
    std::fs::create_dir_all(&o.out_dir).map_err(|e| usage!("--out-dir {}: cannot create: {e}", o.out_dir.display()))?;
    let on_gpu = |f: fn(u32) -> StageResult| match o.device {
        DeviceSpec::Hip(n) => f(n),
        d => not_for(d, o.stage),
    };
    let r = match o.stage {
        InternalStage::Environment => environment::run(o.device, &o.out_dir, hip()),
        InternalStage::HipSmoke => on_gpu(gpu::smoke),
        InternalStage::Discovery => on_gpu(gpu::discovery),
        InternalStage::DynamicQueues => on_gpu(dynamic_queues::run),
        InternalStage::Calibration => match o.device {
            DeviceSpec::Hip(n) => gpu::calibration(n, o.t_ms),
            d => not_for(d, o.stage),
        },
        InternalStage::SuspendResume => suspend_resume::run(o.device, o.mechanism, o.t_ms),
        InternalStage::Bystander => match (o.device, o.mechanism) {
            (DeviceSpec::Hip(n), MechanismChoice::Only(k)) => gpu::bystander(n, k),
            (d, _) => not_for(d, o.stage),
        },
        InternalStage::Interposer => interposer::run(o.device, o.quick, &o.out_dir),
        InternalStage::Example5 => example5::run(o.device, o.quick, &o.out_dir),
        InternalStage::LibraryKernels => library_kernels::run(o.device, o.quick, &o.out_dir),
    };
    write(&o.out_dir, &r)?;
    eprintln!("preempt-lat: stage {:?}: {} {}", o.stage, r.status.word(), r.reason);
    Ok(Verdict::Pass)
}

/// A GPU stage asked of a device that is not a GPU (or a bystander without its mechanism): the
/// parent's plan never asks it, so this is a bug, said plainly.
/// A stage's result from its steps' outcome: PASS with the steps' reason; on an error, SKIP when
/// the run is being stopped (Ctrl-C/SIGTERM), FAIL otherwise.
fn outcome(r: Result<String, impl std::fmt::Display>, facts: serde_json::Value) -> StageResult {
    let (status, reason) = match r {
        Ok(reason) => (Status::Pass, reason),
        Err(why) if stop_requested() => (Status::Skip, format!("interrupted (Ctrl-C/SIGTERM): {why}")),
        Err(why) => (Status::Fail, why.to_string()),
    };
    StageResult { status, reason, facts }
}

/// Between a stage's steps: an error once the run is being stopped.
fn interrupted() -> Result<(), Error> {
    if stop_requested() {
        Err(Error::msg("stopped before the next step"))
    } else {
        Ok(())
    }
}

fn not_for(device: DeviceSpec, stage: InternalStage) -> StageResult {
    StageResult {
        status: Status::Fail,
        reason: format!(
            "internal: stage {stage:?} needs hip:N (and a named mechanism for the bystander), not {device}"
        ),
        facts: serde_json::Value::Null,
    }
}
