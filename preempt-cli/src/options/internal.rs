//! The options of the processes preempt-lat starts itself (hidden from `--help`): validate's
//! bystander worker and the LP processes of `priority --processes`.
use super::values::parse_positive_f64;
use super::values::{self, DeviceSpec};
use clap::Args;
use preempt_api::MechanismChoice;
use std::path::PathBuf;

/// `__bystander-worker`: delay kernels one after another until stdin closes.
#[derive(Debug, Clone, Copy, Args)]
pub struct BystanderWorkerOptions {
    /// host (a CPU spin in place of the kernel) or hip:N.
    #[arg(long, value_parser = values::device())]
    pub device: DeviceSpec,
    /// One kernel, in us.
    #[arg(long, default_value = "200", value_parser = |s: &str| parse_positive_f64(s, "--kernel-us", 1e6))]
    pub kernel_us: f64,
    /// Stop after this long even if stdin stays open, in ms.
    #[arg(long, default_value_t = 60_000)]
    pub max_duration_ms: u64,
}

/// `__sched-lp`: an LP process of `priority --processes`.
#[derive(Debug, Clone, Args)]
pub struct SchedLpOptions {
    /// The daemon's socket.
    #[arg(long)]
    pub socket: PathBuf,
    /// host or hip:N.
    #[arg(long, value_parser = values::device())]
    pub device: DeviceSpec,
    /// The Lv3 mechanism (GPU).
    #[arg(long, default_value = "auto", value_parser = values::mechanism())]
    pub mechanism: MechanismChoice,
    /// Host device: worker processes of the stream.
    #[arg(long, default_value_t = 1)]
    pub workers: u32,
}
