//! preempt-lat: preemption latency of GPU compute queues on AMD GPUs, and of the host device.
//!
//! No `unsafe` here: the HIP binding (with its FFI) is the `hip-rt` crate, the GPU device `gpu-device`.
#![deny(unsafe_code)]

mod bystander;
mod cli;
mod device;
mod doctor;
mod env;
mod exit;
mod gpu;
mod measure;
mod num;
mod options;
mod output;
mod plot;
mod priority;
mod report;
mod stats;
mod sweep;
mod trace;
mod validate;

use clap::{CommandFactory, Parser, error::ErrorKind};
use device::Device;
use doctor::facts::{Fact, HipInfo};
use exit::{Failure, Outcome, Verdict};
use options::Command;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match cli::Cli::parse().into_command() {
        Ok(c) => c,
        Err(msg) => usage_error(&msg),
    };
    if let Command::BystanderWorker(o) = &command {
        return match bystander::worker::main(o) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("preempt-lat bystander worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Before any thread exists: Ctrl-C/SIGTERM only raise a flag (see measure::control).
    measure::control::install_stop_on_signals();
    // What the libraries report from drops and retries (they never print themselves).
    kfd::events::set_handler(|e| eprintln!("preempt-lat: {e}"));
    match dispatch(command) {
        Ok(v) => exit::code(v),
        Err(Failure::Usage(msg)) => usage_error(&msg),
        Err(Failure::Error(e)) => {
            eprintln!("preempt-lat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Exit 2 with clap's formatting, for input clap could not check by itself.
fn usage_error(msg: &str) -> ! {
    cli::Cli::command().error(ErrorKind::ValueValidation, msg).exit()
}

fn dispatch(command: Command) -> Outcome {
    let stdout = || std::io::stdout().lock();
    match command {
        Command::Run(o) => run(&o),
        Command::Doctor(o) => {
            doctor::run(&o, hip_facts(), &mut stdout()).map_err(|e| format!("writing the report: {e}"))?;
            Ok(Verdict::Pass)
        }
        Command::Validate(o) => validate::run(&o, hip_facts(), &mut stdout()),
        Command::SweepT(o) => sweep::t(&o, device::select(&o.common, hip_facts)?),
        Command::SweepState(o) => sweep::state(&o, device::select(&o.common, hip_facts)?),
        Command::SweepThreshold(o) => sweep::threshold(&o, device::select(&o.common, hip_facts)?),
        Command::LauncherCost(o) => launcher_cost(&o, device::select(&o.common, hip_facts)?),
        Command::Priority(o) => priority::run(&o, device::select(&o.common, hip_facts)?),
        Command::Report(o) => report::run(&o),
        Command::BystanderWorker(_) => {
            unreachable!("handled in main before any thread starts")
        }
    }
}

fn run(o: &options::RunOptions) -> Outcome {
    let dev = device::select(&o.common, hip_facts)?;
    let lp_state = dev.lp_state(o.lp_state)?;
    // --out is opened now, so an unwritable path fails before a long run.
    let mut out: Box<dyn Write> = match &o.out {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .map_err(|e| Failure::Usage(format!("--out {}: cannot write: {e}", p.display())))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    if let Some(t) = &o.trace {
        std::fs::File::create(t).map_err(|e| Failure::Usage(format!("--trace {}: cannot write: {e}", t.display())))?;
    }
    let p = measure::Params::new(o.level, o.t_ms, lp_state, o.samples, o.warmup, &o.common, dev.workers());
    let r = dev.measure(&p, o.common.mechanism, o.common.quiet)?;
    output::run(&r, o.format, &mut out).map_err(|e| format!("writing the result: {e}"))?;
    if let Some(t) = &o.trace {
        let note = if r.env.device == "host" {
            "preempt-lat on the host device: host figures, not GPU figures"
        } else {
            "preempt-lat on a GPU: host-side stamps (the GPU's own stamps are not on this timeline)"
        };
        trace::write_file(&r.timeline.trace(p.level, &r.env.device), note, t)?;
    }
    if !r.correctness.ok {
        eprintln!("preempt-lat: correctness check FAILED: some LP command did not complete exactly once");
    }
    Ok(Verdict::from_ok(r.correctness.ok))
}

fn launcher_cost(o: &options::LauncherCostOptions, dev: Device) -> Outcome {
    let Device::Host(workers) = dev else {
        return Err(Failure::Usage(
            "launcher-cost measures the host device only: use --device host".into(),
        ));
    };
    let (threshold, batch) = (o.common.threshold, o.common.batch);
    let null_dev = measure::host::launcher_cost_null_device(o.commands, threshold, batch)?;
    let (direct, launcher) = measure::host::launcher_cost(o.commands, threshold, batch, workers)?;
    let v = serde_json::json!({
        "device": "host",
        "note": "host CPU ns per LP command of this process (launcher, completion and reader threads), T -> 0; null_device: the launcher alone over a queue that completes at launch; host figures, not GPU figures",
        "commands": o.commands, "threshold": threshold, "batch": batch, "workers": workers,
        "direct_cpu_ns_per_cmd": direct, "launcher_cpu_ns_per_cmd": launcher,
        "launcher_extra_cpu_ns_per_cmd": launcher - direct,
        "launcher_cpu_ns_per_cmd_null_device": null_dev,
        "git_revision": env::git_revision(),
    });
    output::json(&v, &mut std::io::stdout().lock()).map_err(|e| format!("writing the result: {e}"))?;
    Ok(Verdict::Pass)
}

/// Asks the HIP runtime (loaded at run time) what doctor reports about it.
fn hip_facts() -> Fact<HipInfo> {
    let info = hip_rt::Hip::load().and_then(|h| {
        Ok(HipInfo {
            library: h.library_path().to_string(),
            runtime_version: h.runtime_version()?,
            devices: Fact::from_result(h.device_count()),
        })
    });
    Fact::from_result(info)
}
