//! Command-line arguments of `preempt-lat` and their validation. Bad input gets one clear line
//! and exit status 2 (clap's convention), before anything is started.
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "preempt-lat",
    version,
    about = "Preemption latency of GPU compute queues on AMD GPUs (Lv1 progressive launching, Lv3 CWSR), or of the host device",
    long_about = "Preemption latency of GPU compute queues on AMD GPUs, XSched-style.\n\n\
A low-priority (LP) queue runs delay commands of T each; at random moments a high-priority (HP) \
request arrives, the LP queue is suspended (Lv1: stop launching and wait for the in-flight \
commands; Lv3: save the running waves), a tiny HP probe runs, and the LP queue is resumed. \
Reported per sample, in nanoseconds: suspend latency (suspend call until the LP queue runs \
nothing), HP start latency (HP request until the probe starts) and resume latency; and a \
correctness check that every LP command completed exactly once.\n\n\
Without a usable AMD GPU, --device auto runs on the host device (CPU worker processes; Lv3 = \
SIGSTOP/SIGCONT) and says so: those are host figures, not GPU figures. Run `preempt-lat doctor` \
to see what this machine can do.",
    after_help = "Examples:\n  preempt-lat --level 3 --t-ms 0.5\n  preempt-lat --level 1 --t-ms 0.5 --threshold 8 --batch 4 --format json --out lv1.json\n  preempt-lat sweep t --out-dir results/\n  preempt-lat doctor --format json",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Report what this machine can do: kernel, /dev/kfd, KFD version, GPUs, module parameters,
    /// and for each preemption level and mechanism whether it can run here and why not.
    Doctor(crate::doctor::DoctorArgs),
    /// Validate the preemption paths of this machine's kernel and GPUs: capability probe,
    /// error-path checks (anywhere /dev/kfd opens), functional cycles with the correctness check
    /// (GPU only). Exit status 0 when nothing failed: a CI gate.
    Validate(crate::validate::ValidateArgs),
    /// Sweep T or the Lv1 threshold and write CSV, JSON and an SVG plot.
    #[command(subcommand)]
    Sweep(SweepCmd),
    /// Host CPU time per LP command of the Lv1 launcher at T -> 0 (host device), as JSON.
    LauncherCost(LauncherCostArgs),
    /// Internal: a host-device worker process (started by preempt-lat itself).
    #[command(name = "__host-worker", hide = true)]
    HostWorker,
}

#[derive(Debug, Subcommand)]
pub enum SweepCmd {
    /// P99 suspend/HP-start latency against T for each level (XSched Fig. 11b's shape).
    T(SweepTArgs),
    /// Lv1 overhead (LP throughput with the launcher vs. launching everything directly)
    /// against the threshold, for several T (XSched Fig. 11c's shape).
    Threshold(SweepThresholdArgs),
}

/// Preemption level: 1 = progressive launching, 3 = interrupt/restore (CWSR on a GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
pub enum Level {
    #[value(name = "1")]
    Lv1,
    #[value(name = "3")]
    Lv3,
}

impl Level {
    pub fn number(self) -> u8 {
        match self {
            Level::Lv1 => 1,
            Level::Lv3 => 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Text,
    Json,
    Csv,
}

/// How Lv3 is asked of the kernel (see `preempt-lat doctor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    Auto,
    Ioctl,
    DbgTrap,
    UpdateQueue,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Auto => "auto",
            Mechanism::Ioctl => "ioctl",
            Mechanism::DbgTrap => "dbg-trap",
            Mechanism::UpdateQueue => "update-queue",
        }
    }
}

/// Where to run: `auto` (an AMD GPU if usable, else the host device), `host`, or `hip:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceSpec {
    Auto,
    Host,
    Hip(u32),
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Host => f.write_str("host"),
            DeviceSpec::Hip(n) => write!(f, "hip:{n}"),
        }
    }
}

pub fn parse_device(s: &str) -> Result<DeviceSpec, String> {
    match s {
        "auto" => Ok(DeviceSpec::Auto),
        "host" => Ok(DeviceSpec::Host),
        _ => match s.strip_prefix("hip:").map(str::parse::<u32>) {
            Some(Ok(n)) => Ok(DeviceSpec::Hip(n)),
            _ => Err(format!("unknown device {s:?}: use auto, host, or hip:N (N = HIP device index, e.g. hip:0)")),
        },
    }
}

/// The largest T accepted: one command of 10 s is a stuck queue, not a measurement.
pub const MAX_T_MS: f64 = 10_000.0;

pub fn parse_t_ms(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number of milliseconds (e.g. 0.5)"))?;
    if !v.is_finite() {
        return Err(format!("T must be a finite number of milliseconds, not {s}"));
    }
    if v <= 0.0 {
        return Err(format!("T must be greater than 0 ms (got {v})"));
    }
    if v > MAX_T_MS {
        return Err(format!("T = {v} ms is absurdly large: at most {MAX_T_MS} ms per command"));
    }
    if v * 1e6 < 1.0 {
        return Err(format!("T = {v} ms is below 1 ns"));
    }
    Ok(v)
}

fn parse_positive(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a positive whole number")),
    }
}

/// Options shared by measurements and sweeps.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Lv1: at most this many LP commands in flight (XSched's default 8). Must be >= --batch.
    #[arg(long, default_value_t = 8, value_parser = parse_positive)]
    pub threshold: u32,
    /// Lv1: a sync point every this many commands (XSched's default 4).
    #[arg(long, default_value_t = 4, value_parser = parse_positive)]
    pub batch: u32,
    /// Device: auto (an AMD GPU if usable, else the host device), host, or hip:N.
    #[arg(long, default_value = "auto", value_parser = parse_device)]
    pub device: DeviceSpec,
    /// Seed of the random gaps between HP requests (same seed, same gaps).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Lv3 mechanism on a GPU: auto (first usable of ioctl, dbg-trap, update-queue), ioctl
    /// (patched kernel), dbg-trap (self-debug SUSPEND_QUEUES), update-queue (UPDATE_QUEUE to
    /// inactive and back). The host device has one mechanism (SIGSTOP) and takes only auto.
    #[arg(long, value_enum, default_value_t = Mechanism::Auto)]
    pub mechanism: Mechanism,
    /// Host device: LP worker processes ("compute units"). Default: cores - 1, at least 1.
    #[arg(long, value_parser = parse_positive)]
    pub workers: Option<u32>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Preemption level: 1 (progressive launching) or 3 (interrupt/restore; CWSR on a GPU).
    #[arg(long, value_enum, default_value = "3")]
    pub level: Level,
    /// T, the execution time of one LP command, in milliseconds (0 < T <= 10000).
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms, allow_negative_numbers = true)]
    pub t_ms: f64,
    /// Preemptions measured (after warm-up).
    #[arg(long, default_value_t = 300, value_parser = parse_positive)]
    pub samples: u32,
    /// Warm-up preemptions, measured and dropped.
    #[arg(long, default_value_t = 10)]
    pub warmup: u32,
    /// Output format: text for people; json and csv carry every parameter and the environment.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the result here instead of stdout (checked to be writable before the run starts).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Args)]
pub struct SweepTArgs {
    /// Levels to sweep.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "1,3")]
    pub levels: Vec<Level>,
    /// T values in ms.
    #[arg(long = "t-ms", value_delimiter = ',', default_value = "0.01,0.1,0.5,1,2", value_parser = parse_t_ms)]
    pub t_ms: Vec<f64>,
    /// Preemptions per point.
    #[arg(long, default_value_t = 100, value_parser = parse_positive)]
    pub samples: u32,
    /// Warm-up preemptions per point.
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// Directory for sweep-t.csv, sweep-t.json and sweep-t.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Args)]
pub struct SweepThresholdArgs {
    /// Thresholds to sweep (batch = min(--batch, threshold) at each point).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6,7,8,9,10", value_parser = parse_positive)]
    pub thresholds: Vec<u32>,
    /// T values in ms.
    #[arg(long = "t-ms", value_delimiter = ',', default_value = "0.01,0.1,1", value_parser = parse_t_ms)]
    pub t_ms: Vec<f64>,
    /// LP commands per throughput measurement (raised so that each lasts at least ~50 ms).
    #[arg(long, default_value_t = 200, value_parser = parse_positive)]
    pub commands: u32,
    /// Directory for sweep-threshold.{csv,json,svg} (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Args)]
pub struct LauncherCostArgs {
    /// Commands per measurement.
    #[arg(long, default_value_t = 20000, value_parser = parse_positive)]
    pub commands: u32,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Cross-field checks clap cannot express. Returns the one-line reason.
pub fn check_common(c: &CommonArgs) -> Result<(), String> {
    if c.device == DeviceSpec::Host && c.mechanism != Mechanism::Auto {
        return Err(format!(
            "--mechanism {} needs an AMD GPU (--device hip:N); the host device's Lv3 is SIGSTOP/SIGCONT (use --mechanism auto)",
            c.mechanism.name()
        ));
    }
    if c.threshold < c.batch {
        return Err(format!(
            "--threshold ({}) must be >= --batch ({}): a batch larger than the threshold could never complete",
            c.threshold, c.batch
        ));
    }
    Ok(())
}

/// Opens `--out` for writing now, so an unwritable path fails before a long run.
pub fn open_out(p: &std::path::Path) -> Result<std::fs::File, String> {
    std::fs::File::create(p).map_err(|e| format!("--out {}: cannot write: {e}", p.display()))
}
