//! preempt-lat: preemption latency of GPU compute queues on AMD GPUs, and of the host device.
//!
//! No `unsafe` here: the HIP binding (with its FFI) is the `hip-rt` crate, the GPU device `gpu-device`.
#![deny(unsafe_code)]

mod cli;
mod doctor;
mod env;
mod gpu;
mod measure;
mod output;
mod plot;
mod stats;
mod sweep;
mod validate;

use clap::{CommandFactory, Parser, error::ErrorKind};
use cli::{Cli, Cmd, CommonArgs, DeviceSpec, SweepCmd};
use doctor::facts::{Fact, HipInfo};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.cmd, Some(Cmd::HostWorker)) {
        return match lv1::host::worker_main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("preempt-lat host worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Before any thread exists: Ctrl-C/SIGTERM only raise a flag (see measure::control).
    measure::control::install_stop_on_signals();
    let r = match &cli.cmd {
        Some(Cmd::Doctor(a)) => doctor::run(a, hip_facts()).map(|()| true).map_err(|e| e.to_string()),
        Some(Cmd::Sweep(SweepCmd::T(a))) => select_device(&a.common).and_then(|w| sweep::t(a, w)),
        Some(Cmd::Sweep(SweepCmd::Threshold(a))) => select_device(&a.common).and_then(|w| sweep::threshold(a, w)),
        Some(Cmd::Validate(a)) => validate::run(a, hip_facts()),
        Some(Cmd::LauncherCost(a)) => select_device(&a.common).and_then(|w| launcher_cost(a, w)),
        Some(Cmd::HostWorker) => unreachable!("handled above"),
        None => run(&cli.run),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        // A correctness failure (measurements) or a failed check (validate).
        Ok(false) => ExitCode::from(3),
        Err(e) => {
            eprintln!("preempt-lat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Exit 2 with clap's formatting for input clap could not check by itself.
fn usage_error(msg: String) -> ! {
    Cli::command().error(ErrorKind::ValueValidation, msg).exit()
}

/// The device a measurement runs on, once chosen.
#[derive(Debug, Clone, Copy)]
pub enum Device {
    /// The host device with this many LP worker processes.
    Host(u32),
    /// HIP device N.
    Hip(u32),
}

/// Checks the shared options and picks the device. `auto` takes hip:0 when doctor's GPU path
/// and the HIP device are usable, else the host device with a note on stderr; an explicit
/// `hip:N` that cannot run is an error with doctor's reason.
fn select_device(c: &CommonArgs) -> Result<Device, String> {
    if let Err(msg) = cli::check_common(c) {
        usage_error(msg);
    }
    let host = Device::Host(c.workers.unwrap_or_else(measure::host::default_workers));
    let index = match c.device {
        DeviceSpec::Host => return Ok(host),
        DeviceSpec::Auto => 0,
        DeviceSpec::Hip(n) => n,
    };
    let facts = doctor::facts::gather(&lv3::sysfs::SysRoot::default(), hip_facts());
    let why = doctor::verdict::gpu_path(&facts).and_then(|()| gpu::usable(index));
    match (why, c.device) {
        (Ok(()), _) => Ok(Device::Hip(index)),
        (Err(why), DeviceSpec::Auto) => {
            if c.mechanism != cli::Mechanism::Auto {
                usage_error(format!("--mechanism {} needs a usable AMD GPU, and there is none: {why}", c.mechanism.name()));
            }
            eprintln!("preempt-lat: --device auto: using the host device ({why}); its figures are host figures, not GPU figures");
            Ok(host)
        }
        (Err(why), _) => Err(format!("--device {}: cannot run: {why} (see `preempt-lat doctor`)", c.device)),
    }
}

/// One measurement on the chosen device.
pub fn measure(p: &measure::Params, dev: Device, mechanism: cli::Mechanism, quiet: bool) -> Result<measure::RunResult, String> {
    match dev {
        Device::Host(_) => measure::host::run(p, quiet),
        Device::Hip(i) => gpu::run(p, i, mechanism.name(), quiet),
    }
}

fn run(a: &cli::RunArgs) -> Result<bool, String> {
    let dev = select_device(&a.common)?;
    let workers = match dev {
        Device::Host(w) => w,
        Device::Hip(_) => 0,
    };
    let mut out: Box<dyn std::io::Write> = match &a.out {
        Some(p) => Box::new(cli::open_out(p).unwrap_or_else(|m| usage_error(m))),
        None => Box::new(std::io::stdout().lock()),
    };
    let p = measure::Params::new(a.level, a.t_ms, a.samples, a.warmup, &a.common, workers);
    let r = measure(&p, dev, a.common.mechanism, a.common.quiet)?;
    output::write(&r, a.format, &mut out).map_err(|e| format!("writing the result: {e}"))?;
    if !r.correctness.ok {
        eprintln!("preempt-lat: correctness check FAILED: some LP command did not complete exactly once");
    }
    Ok(r.correctness.ok)
}

fn launcher_cost(a: &cli::LauncherCostArgs, dev: Device) -> Result<bool, String> {
    let Device::Host(workers) = dev else {
        return Err("launcher-cost measures the host device only: use --device host".into());
    };
    let null_dev = measure::host::launcher_cost_null_device(a.commands, a.common.threshold, a.common.batch)?;
    let (direct, launcher) = measure::host::launcher_cost(a.commands, a.common.threshold, a.common.batch, workers)?;
    let v = serde_json::json!({
        "device": "host",
        "note": "host CPU ns per LP command of this process (launcher, completion and reader threads), T -> 0; null_device: the launcher alone over a queue that completes at launch; host figures, not GPU figures",
        "commands": a.commands, "threshold": a.common.threshold, "batch": a.common.batch, "workers": workers,
        "direct_cpu_ns_per_cmd": direct, "launcher_cpu_ns_per_cmd": launcher,
        "launcher_extra_cpu_ns_per_cmd": launcher - direct,
        "launcher_cpu_ns_per_cmd_null_device": null_dev,
        "git_revision": option_env!("PREEMPT_LAT_GIT_REV").unwrap_or("unknown"),
    });
    println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
    Ok(true)
}

/// Asks the HIP runtime (loaded at run time) what doctor reports about it.
fn hip_facts() -> Fact<HipInfo> {
    let info = hip_rt::Hip::load().and_then(|h| {
        Ok(HipInfo {
            library: h.library_path().to_string(),
            runtime_version: h.runtime_version()?,
            devices: Fact::from_result(h.device_count().map(|n| n as i32)),
        })
    });
    Fact::from_result(info)
}
