//! The options of `preempt-lat acceptance` (the first run on a new machine: every stage, judged
//! and bundled into one archive) and of its hidden per-stage child `__acceptance-stage`.
use super::values::{self, DeviceSpec, Format, parse_t_ms};
use crate::error::{UsageError, usage};
use clap::{Args, ValueEnum};
use preempt_api::MechanismChoice;
use std::path::PathBuf;

/// `acceptance`.
#[derive(Debug, Clone, Args)]
pub struct AcceptanceOptions {
    /// Device to accept: hip:N, host, or auto (hip:0 where it can run, else the host device).
    /// hip:N that cannot run fails at the first stage with doctor's reason (the archive is written
    /// all the same).
    #[arg(long, default_value = "auto", value_parser = values::device(), conflicts_with = "all_gpus")]
    pub device: DeviceSpec,
    /// Run the stages on every GPU HIP sees, one GPU after another (hip:0, hip:1, ...).
    #[arg(long)]
    pub all_gpus: bool,
    /// Fewer samples, fewer sweep points, shorter priority modes and partition run, fewer
    /// overhead runs (the host device's stages take well under two minutes); the time bounds
    /// shrink with them.
    #[arg(long)]
    pub quick: bool,
    /// Also the long run (the seeds' stability item): `soak` for an hour (`--long`) or MINUTES
    /// (`--long=10` for a trial, at least 0.1), priority (7.2.1, lv3) and the class experiment
    /// (8.3.1) in turn, before the kernel log; its stage reports the P99 drift and this
    /// process's RSS, descriptors and threads over time (soak.json), and `report` judges it
    /// (soak-stable). With --quick the other stages stay quick.
    #[arg(long, value_name = "MINUTES", num_args = 0..=1, require_equals = true, default_missing_value = LONG_MINUTES, value_parser = parse_long)]
    pub long: Option<std::time::Duration>,
    /// Directory for the archive (created if missing); the stages write into a directory of the
    /// same name beside it, removed once the archive is complete.
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    /// The node's name in the summary and the archive's file name (default: the host name).
    #[arg(long, value_parser = parse_node)]
    pub node: Option<String>,
    /// Only these stages (ids as the summary names them, e.g. environment,latency-lv1); the
    /// others are reported as SKIP (not selected), and what a selected stage needs is not checked.
    #[arg(long, value_delimiter = ',', value_name = "STAGES")]
    pub only: Vec<String>,
    /// The summary on stdout: text for people (its last line is the archive's path), json or csv
    /// (one row per stage and target). The archive holds all three either way.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// A stage's time bound in seconds, ID=SECONDS (repeatable): for slow machines and tests.
    #[arg(long = "stage-bound", value_name = "ID=SECONDS", value_parser = parse_bound)]
    pub stage_bounds: Vec<(String, f64)>,
    /// On a GPU a target that FAILs makes the exit status 3, as a failed stage does (host
    /// figures never gate: they are information). With --no-gate a GPU's targets are
    /// information too: the exit status then says only whether a stage failed.
    #[arg(long)]
    pub no_gate: bool,
}

/// `--long`'s minutes when none are given: the seeds' stability item asks for an hour.
pub const LONG_MINUTES: &str = "60";

/// `--long`'s minutes: 0.1 (six 1-s windows, the fewest a drift is read from) to a week.
fn parse_long(s: &str) -> Result<std::time::Duration, UsageError> {
    let m = values::parse_positive_f64(s, "--long", 7.0 * 24.0 * 60.0)?;
    if m < 0.1 {
        return Err(usage!(
            "--long={s}: at least 0.1 minutes (six 1-s windows, the fewest a drift is read from)"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(m * 60.0))
}

/// A node name goes into a file name: letters, digits, `.`, `_` and `-`, at most 64.
fn parse_node(s: &str) -> Result<String, UsageError> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(s.to_string())
    } else {
        Err(usage!(
            "{s:?}: a node name is 1-64 letters, digits, '.', '_' or '-' (it becomes part of the archive's file name)"
        ))
    }
}

/// `ID=SECONDS`, SECONDS > 0 and at most a day.
fn parse_bound(s: &str) -> Result<(String, f64), UsageError> {
    let (id, secs) = s
        .split_once('=')
        .ok_or_else(|| usage!("{s:?}: expected ID=SECONDS, e.g. sweep-t=1200"))?;
    let secs = values::parse_positive_f64(secs, "a stage bound", 86_400.0)?;
    if id.is_empty() {
        return Err(usage!("{s:?}: the stage id is empty"));
    }
    Ok((id.to_string(), secs))
}

/// The stages that run inside a `__acceptance-stage` child (the others run the existing
/// subcommands as children).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InternalStage {
    /// Kernel, amdgpu and KFD, ROCm and HIP, GPUs and their visibility, doctor; can the device run.
    Environment,
    /// HIP loads, the delay kernels compile for the target, one runs; the clock rates.
    HipSmoke,
    /// T calibrated at the stage's T and checked.
    Calibration,
    /// The LP stream's KFD queue found (the `auto` mechanism).
    Discovery,
    /// Ordinary streams idled past `GPU_MAX_HW_QUEUES`: the LP stream's queue binding holds and
    /// suspends, a dropped stream's binding is refused (GPU only).
    DynamicQueues,
    /// One mechanism: suspend/resume of an idle queue, then of a running LP command, exactly once.
    SuspendResume,
    /// One mechanism: what our preemptions cost another process's kernels (GPU only).
    Bystander,
    /// The HIP interposer: an unmodified HIP program (examples/hip/two_priorities.c) alone,
    /// without the interposer and under it (on the host device: the stand-in runtime).
    Interposer,
    /// XSched's Example 5 through the Python package (examples/example5_inference.py): three
    /// inference replicas at three priorities, Phase 2 at every level.
    Example5,
    /// Library kernels (a GEMM, a conv2d) suspended and resumed mid-run, every result against an
    /// unpreempted reference (examples/library_kernels.py; on the host device the stand-in).
    LibraryKernels,
}

impl InternalStage {
    /// Whether the stage's runs have sizes, which `acceptance --quick` makes smaller (`--quick`
    /// is passed to it and to no other: their command lines stay what they were).
    pub fn sized(self) -> bool {
        matches!(
            self,
            InternalStage::Interposer | InternalStage::Example5 | InternalStage::LibraryKernels
        )
    }
}

/// `__acceptance-stage`: one stage, its result as `stage.json` in `--out-dir`.
#[derive(Debug, Clone, Args)]
pub struct AcceptanceStageOptions {
    #[arg(value_enum)]
    pub stage: InternalStage,
    /// host or hip:N.
    #[arg(long, value_parser = values::device())]
    pub device: DeviceSpec,
    /// The mechanism of a per-mechanism stage (auto on the host device).
    #[arg(long, default_value = "auto", value_parser = values::mechanism())]
    pub mechanism: MechanismChoice,
    /// T of the stage's LP commands, in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    /// Where the stage writes `stage.json` and its other files.
    #[arg(long)]
    pub out_dir: PathBuf,
    /// The smaller runs of `acceptance --quick` (stages whose runs have sizes).
    #[arg(long)]
    pub quick: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_and_bounds_are_checked() {
        assert_eq!(parse_node("gpu-node_07.cluster").unwrap(), "gpu-node_07.cluster");
        for bad in ["", "a/b", "a b", "../x", &"n".repeat(65)] {
            assert!(parse_node(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_bound("sweep-t=1.5").unwrap(), ("sweep-t".into(), 1.5));
        for bad in ["sweep-t", "=3", "sweep-t=0", "sweep-t=-1", "sweep-t=x", "sweep-t=1e9"] {
            assert!(parse_bound(bad).is_err(), "{bad:?}");
        }
    }
}
