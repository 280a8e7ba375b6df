//! The options of the commands that look at results or at the machine: `report`, `doctor`,
//! `validate`.
use super::values::parse_t_ms;
use super::values::{self, Format};
use clap::Args;
use std::path::PathBuf;

/// `report`: JSON results merged into one table and one plot.
#[derive(Debug, Clone, Args)]
pub struct ReportOptions {
    /// JSON result files, acceptance archives (.tar.gz), or directories of them (their archives
    /// and *.json files). A file named must be a regular file of at most 1 GiB (a FIFO or a device
    /// is refused); in a directory, entries that are not are listed as skipped.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format on stdout (the files in --out-dir are written either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Directory for report.csv, report.json and report.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
}

/// `doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorOptions {
    /// Output format: text for people; json (the whole report) or csv (one row per device,
    /// level and mechanism) for machines.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Read sysfs/procfs/dev under this root instead of `/` (for testing doctor on fixtures).
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
}

/// `validate`.
#[derive(Debug, Clone, Args)]
pub struct ValidateOptions {
    /// Output: text for people, json or csv (one row per check) for CI systems (the exit status
    /// gates either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Run the hardware checks on every HIP device, not only hip:0.
    #[arg(long)]
    pub all_gpus: bool,
    /// T of the functional workload, in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    /// Preempt/resume cycles per GPU and mechanism, at most 1000000.
    #[arg(long, default_value_t = 50, value_parser = values::parse_cycles)]
    pub cycles: u32,
}
