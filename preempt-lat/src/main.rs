//! preempt-lat: preemption latency of GPU compute queues on AMD GPUs, and of the host device.
//!
//! No `unsafe` here: the HIP binding (with its FFI) is the `hip-rt` crate, the GPU device `gpu-device`.
#![deny(unsafe_code)]

mod bystander;
mod device;
mod doctor;
mod env;
mod exit;
mod gpu;
mod launcher_cost;
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
use doctor::facts::{Fact, HipInfo};
use exit::{Failure, Outcome, Verdict};
use options::{Cli, Command, Common, Sweep};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match Cli::parse().checked() {
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
    Cli::command().error(ErrorKind::ValueValidation, msg).exit()
}

fn dispatch(command: Command) -> Outcome {
    let stdout = || std::io::stdout().lock();
    let select = |c: &Common| device::select(c.device, c.workers, c.mechanism, hip_facts);
    match command {
        Command::Run(o) => run(&o, select(&o.common)?),
        Command::Doctor(o) => {
            doctor::run(&o, hip_facts(), &mut stdout()).map_err(|e| format!("writing the report: {e}"))?;
            Ok(Verdict::Pass)
        }
        Command::Validate(o) => validate::run(&o, hip_facts(), &mut stdout()),
        Command::Sweep(Sweep::T(o)) => sweep::t(&o, select(&o.common)?),
        Command::Sweep(Sweep::State(o)) => sweep::state(&o, select(&o.common)?),
        Command::Sweep(Sweep::Threshold(o)) => sweep::threshold(&o, select(&o.common)?),
        Command::LauncherCost(o) => {
            let dev = device::select(o.device, o.workers, lv3::MechanismChoice::Auto, hip_facts)?;
            launcher_cost::run(&o, dev)
        }
        Command::Priority(o) => priority::run(&o, select(&o.common)?),
        Command::Report(o) => report::run(&o),
        Command::BystanderWorker(_) => {
            unreachable!("handled in main before any thread starts")
        }
    }
}

fn run(o: &options::RunOptions, dev: device::Device) -> Outcome {
    let lp_state = dev.lp_state(o.lp.lp_state)?;
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
    output::export(o.format, &r, &mut out).map_err(|e| format!("writing the result: {e}"))?;
    if let Some(t) = &o.trace {
        let note = if r.env.host_figures {
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
