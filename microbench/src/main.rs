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
        Cmd::Doctor(a) => doctor::run(a, doctor::facts::Fact::Err { error: "HIP not probed in this build".into() }),
    };
    if let Err(e) = r {
        eprintln!("preempt-lat: {e}");
        std::process::exit(1);
    }
}
