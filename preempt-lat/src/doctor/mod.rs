//! `preempt-lat doctor`: what this machine can do, and why not.
pub mod facts;
pub mod render;
pub mod verdict;

#[cfg(test)]
mod tests;

use crate::options::DoctorOptions;
use crate::output::Export;
use facts::{Fact, Facts};
use kfd::sysfs::SysRoot;
use serde::Serialize;

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

/// Runs `doctor`: a report, so it succeeds whether or not a GPU is present. CSV is one row per
/// (device, level, mechanism) with its availability and reason.
pub fn run(o: &DoctorOptions, hip: Fact<facts::HipInfo>, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    crate::output::export(o.format, &report(&SysRoot::new(&o.root), hip), w)
}

/// JSON: the report whole; CSV: one row per (device, level, mechanism).
impl Export for Report {
    type Whole = Self;
    type Row<'a> = &'a verdict::Availability;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<&verdict::Availability> {
        self.levels.iter().collect()
    }
    fn text(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        render::text(self, w)
    }
}
