//! `preempt-lat doctor`: what this machine can do, and why not.
pub mod facts;
pub mod render;
pub mod verdict;

#[cfg(test)]
mod tests;

use clap::Args;
use facts::{Fact, Facts};
use kfd::sysfs::SysRoot;
use serde::Serialize;

/// Arguments of `preempt-lat doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Output format: `text` for people, `json` for machines.
    #[arg(long, value_enum, default_value_t = DoctorFormat::Text)]
    pub format: DoctorFormat,
    /// Read sysfs/procfs/dev under this root instead of `/` (for testing doctor on fixtures).
    #[arg(long, hide = true, default_value = "/")]
    pub root: std::path::PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DoctorFormat {
    Text,
    Json,
}

/// The whole report (the JSON schema of `doctor --format json`).
#[derive(Debug, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub version: &'static str,
    pub facts: Facts,
    pub levels: Vec<verdict::Availability>,
    pub gpu_usable: bool,
    pub summary: String,
}

/// Builds the report for the machine under `root`.
pub fn report(root: &SysRoot, hip: Fact<facts::HipInfo>) -> Report {
    let facts = facts::gather(root, hip);
    Report {
        tool: "preempt-lat",
        version: env!("CARGO_PKG_VERSION"),
        levels: verdict::availability(&facts),
        gpu_usable: verdict::gpu_path(&facts).is_ok(),
        summary: verdict::summary(&facts),
        facts,
    }
}

/// Runs `doctor`; the exit status is 0 whether or not a GPU is present (it is a report).
pub fn run(args: &DoctorArgs, hip: Fact<facts::HipInfo>) -> std::io::Result<()> {
    let r = report(&SysRoot::new(&args.root), hip);
    let mut out = std::io::stdout().lock();
    match args.format {
        DoctorFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &r)?;
            use std::io::Write;
            writeln!(out)
        }
        DoctorFormat::Text => render::text(&r, &mut out),
    }
}
