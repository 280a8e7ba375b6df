//! The options of the latency measurements (a run, `sweep t`, `sweep state`) and of the Lv1
//! launcher's costs (`sweep threshold`, `launcher-cost`).
use super::values::{self, DeviceSpec, Format, Level, LpState, check_level};
use super::values::{parse_positive, parse_t_ms, parse_threshold, parse_workers};
use super::{Common, LpOptions, Lv1Options};
use crate::error::UsageError;
use clap::Args;
use std::path::PathBuf;

/// One measurement (the default command).
#[derive(Debug, Clone, Args)]
pub struct RunOptions {
    /// Preemption level: 1 (progressive launching), 2 (deactivate: the running commands finish,
    /// no new one starts; host device only) or 3 (interrupt/restore; CWSR on a GPU).
    ///
    /// Also written lv1, lv2, lv3. auto (the C and Python API's: Lv3 where there is an Lv3
    /// mechanism, else Lv1) is refused: a measurement names the level it measures. 2 on a GPU is
    /// refused: there is no per-queue Lv2 on gfx942 under HWS
    /// (docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws).
    #[arg(long, default_value = "3", value_parser = values::level())]
    pub level: Level,
    /// T, the execution time of one LP command, in milliseconds (0 < T <= 10000).
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms, allow_negative_numbers = true)]
    pub t_ms: f64,
    /// Preemptions measured (after warm-up), at most 1000000.
    #[arg(long, default_value_t = 300, value_parser = values::parse_samples)]
    pub samples: u32,
    /// Warm-up preemptions, measured and dropped.
    #[arg(long, default_value_t = 10, value_parser = values::parse_warmup)]
    pub warmup: u32,
    /// Output format: text for people; json and csv carry every parameter and the environment.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the result here instead of stdout (checked to be writable before the run starts;
    /// written under a temporary name beside it and renamed when complete, so a failed run, or
    /// one ended by a second Ctrl-C, leaves a previous result in place; a device or FIFO, e.g.
    /// /dev/stdout, is written in place).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write a timeline of the run as Chrome trace-event JSON (open in Perfetto or
    /// chrome://tracing): LP commands, suspend and resume calls, suspended windows, HP requests
    /// and probes, on the host clock. The earliest 200000 events at most: it says how many it
    /// left out.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub lp: LpOptions,
    #[command(flatten)]
    pub common: Common,
}

/// The levels a latency sweep (`t`, `state`) runs.
#[derive(Debug, Clone, Args)]
pub struct Levels {
    /// Levels to sweep. Default: every level the device has, 1,2,3 on the host device and 1,3 on
    /// a GPU (no per-queue Lv2 on gfx942 under HWS).
    ///
    /// 1, 2 and 3, also written lv1, lv2, lv3; auto is refused, as for --level, and so is 2 on a
    /// GPU.
    #[arg(long = "levels", value_name = "LEVELS", value_delimiter = ',', value_parser = values::level())]
    pub list: Vec<Level>,
}

impl Levels {
    /// The levels every device has, swept when `--levels` is not given (the host device adds 2).
    pub const EVERYWHERE: [Level; 2] = [Level::Lv1, Level::Lv3];

    /// `--levels` with 2 on a device known to be a GPU is refused (see [`check_level`]).
    pub fn check(&self, device: DeviceSpec) -> Result<(), UsageError> {
        self.list.iter().try_for_each(|&l| check_level("--levels", device, l))
    }

    /// The levels to sweep on `device` (`auto` resolved): the ones asked for, in the order given,
    /// or by default every level the device has, in ascending order.
    pub fn on(&self, device: DeviceSpec) -> Vec<Level> {
        if !self.list.is_empty() {
            return self.list.clone();
        }
        let mut all = Self::EVERYWHERE.to_vec();
        if device.has_lv2() {
            all.push(Level::Lv2);
        }
        all.sort_unstable();
        all
    }
}

/// What each point of a latency sweep measures.
#[derive(Debug, Clone, Copy, Args)]
pub struct PerPoint {
    /// Preemptions per point, at most 1000000.
    #[arg(long, default_value_t = 100, value_parser = values::parse_samples)]
    pub samples: u32,
    /// Warm-up preemptions per point.
    #[arg(long, default_value_t = 5, value_parser = values::parse_warmup)]
    pub warmup: u32,
}

/// `sweep t`: levels x T.
#[derive(Debug, Clone, Args)]
pub struct SweepTOptions {
    #[command(flatten)]
    pub levels: Levels,
    /// T values in ms.
    #[arg(long = "t-ms", value_delimiter = ',', default_value = "0.01,0.1,0.5,1,2", value_parser = parse_t_ms)]
    pub t_ms: Vec<f64>,
    #[command(flatten)]
    pub per_point: PerPoint,
    /// Directory for sweep-t.csv, sweep-t.json and sweep-t.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub lp: LpOptions,
    #[command(flatten)]
    pub common: Common,
}

/// `sweep state`: levels x LP states at one T (GPU only).
#[derive(Debug, Clone, Args)]
pub struct SweepStateOptions {
    #[command(flatten)]
    pub levels: Levels,
    /// LP states to run (light, heavy).
    #[arg(long, value_delimiter = ',', default_value = "light,heavy", value_parser = values::lp_state())]
    pub states: Vec<LpState>,
    /// T in ms, the same for every point.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    #[command(flatten)]
    pub per_point: PerPoint,
    /// Directory for sweep-state.csv, sweep-state.json and sweep-state.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

/// `sweep threshold`: Lv1 overhead against the threshold for several T.
#[derive(Debug, Clone, Args)]
pub struct SweepThresholdOptions {
    /// Thresholds to sweep (batch = min(--batch, threshold) at each point).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6,7,8,9,10", value_parser = parse_threshold)]
    pub thresholds: Vec<u32>,
    /// T values in ms.
    #[arg(long = "t-ms", value_delimiter = ',', default_value = "0.01,0.1,1", value_parser = parse_t_ms)]
    pub t_ms: Vec<f64>,
    /// LP commands per throughput measurement (raised so that each lasts at least ~50 ms), at most
    /// 1000000 and with T at most 3600 s of LP work (a Ctrl-C leaves the measurement under way
    /// out; on a GPU it waits for its direct launches: a running kernel cannot be stopped).
    #[arg(long, default_value_t = 200, value_parser = values::parse_commands)]
    pub commands: u32,
    /// Directory for sweep-threshold.{csv,json,svg} (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub lp: LpOptions,
    #[command(flatten)]
    pub common: Common,
}

/// `launcher-cost`: what the host device's launcher costs; no HP requests (so no seed), no Lv3.
#[derive(Debug, Clone, Args)]
pub struct LauncherCostOptions {
    /// Commands per measurement, at most 1000000.
    #[arg(long, default_value_t = 20000, value_parser = values::parse_commands)]
    pub commands: u32,
    #[command(flatten)]
    pub lv1: Lv1Options,
    /// Device: host (auto is the host device where no AMD GPU is usable; a GPU is refused).
    #[arg(long, default_value = "auto", value_parser = values::device())]
    pub device: DeviceSpec,
    /// LP worker processes ("compute units"). Default: cores - 1, at least 1.
    #[arg(long, value_parser = parse_workers)]
    pub workers: Option<u32>,
    /// Runs of every measurement; each figure is reported as min / median / max over them.
    #[arg(long, default_value_t = 5, value_parser = parse_positive)]
    pub runs: u32,
    /// Output format: text for people; json (one object, every figure with its spread) and csv
    /// (one row per figure) carry every parameter.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}
