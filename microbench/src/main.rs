// `unsafe` is allowed in the HIP loader's FFI (`hip::ffi`) alone.
#![deny(unsafe_code)]
//! preempt-lat: preemption latency measurement (being written).
mod doctor;
mod hip;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "preempt-lat", version, about = "GPU compute preemption latency on AMD GPUs (and the host device)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Report what this machine can do: kernel, /dev/kfd, KFD version, GPUs, module parameters,
    /// and for each preemption level and mechanism whether it can run here and why not.
    Doctor(doctor::DoctorArgs),
}

fn main() {
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Cmd::Doctor(a) => doctor::run(a, hip_facts()),
    };
    if let Err(e) = r {
        eprintln!("preempt-lat: {e}");
        std::process::exit(1);
    }
}

/// Asks the HIP runtime (loaded at run time) what doctor reports about it.
fn hip_facts() -> doctor::facts::Fact<doctor::facts::HipInfo> {
    use doctor::facts::{Fact, HipInfo};
    let info = hip::Hip::load().and_then(|h| {
        Ok(HipInfo {
            library: h.library_path().to_string(),
            runtime_version: h.runtime_version()?,
            devices: Fact::from_result(h.device_count().map(|n| n as i32)),
        })
    });
    Fact::from_result(info)
}
