//! The command line of `preempt-lat`: clap's view of it, turned into [`crate::options`]
//! once, in [`Cli::into_command`]. Nothing else in the crate imports this module. Bad input gets
//! one clear line and exit status 2 (clap's convention), before anything is started.
use crate::options::{
    self, Arrival, Command, Common, DeviceSpec, Format, Level, LpState, Mode, check_lp_state, parse_positive,
    parse_positive_f64, parse_t_ms,
};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kfd::GracePeriod;
use lv3::{MechanismChoice, MechanismKind};
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
    after_help = "Examples:\n  preempt-lat --level 3 --t-ms 0.5\n  preempt-lat --level 3 --t-ms 0.5 --lp-state heavy --device hip:0\n  preempt-lat --level 1 --t-ms 0.5 --threshold 8 --batch 4 --format json --out lv1.json\n  preempt-lat sweep t --out-dir results/\n  preempt-lat sweep state --device hip:0 --out-dir results/\n  preempt-lat doctor --format json",
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
    Doctor(DoctorArgs),
    /// Validate the preemption paths of this machine's kernel and GPUs: capability probe,
    /// error-path checks (anywhere /dev/kfd opens), functional cycles with the correctness check
    /// and the bystander cost (what each preemption costs another process's kernels on the same
    /// GPU, per mechanism) (GPU only). Exit status 0 when nothing failed: a CI gate.
    Validate(ValidateArgs),
    /// Sweep T, the LP kernel's wave state or the Lv1 threshold and write CSV, JSON and an SVG plot.
    #[command(subcommand)]
    Sweep(SweepCmd),
    /// Host CPU time per LP command of the Lv1 launcher at T -> 0 (host device), as JSON.
    LauncherCost(LauncherCostArgs),
    /// Priority scheduling: HP requests (fixed rate or Poisson) against a saturating LP stream,
    /// in modes standalone-hp, standalone-lp, native (no scheduling), lv1 and lv3 (highest
    /// priority first: the LP queue is suspended while HP work is pending). Reports HP request
    /// latency, its P99 against standalone, LP throughput against standalone, preemptions and
    /// the LP correctness check; writes priority.{csv,json,svg}. Host device only for now; there the
    /// LP queue has one worker per core unless --workers says otherwise, so HP and LP share the CPUs.
    #[command(
        after_help = "Examples:\n  preempt-lat priority --device host --hp-rate 50 --hp-t-ms 1 --t-ms 0.5 --duration-s 3\n  preempt-lat priority --device host --modes standalone-hp,native,lv3 --arrival fixed --trace prio.trace.json"
    )]
    Priority(PriorityArgs),
    /// Merge JSON results (run --format json, sweep-t.json, priority.json; from any number of
    /// machines) into one table and one plot, grouped by device, mechanism, kernel and gfx
    /// target; writes report.{csv,json,svg}.
    #[command(
        after_help = "Example (one JSON per node, then one report):\n  srun --ntasks-per-node=1 sh -c 'preempt-lat --format json --out results/$(hostname).json'\n  preempt-lat report results/*.json --out-dir results/"
    )]
    Report(ReportArgs),
    /// Internal: validate's bystander process (started by preempt-lat itself): delay kernels one
    /// after another, their host stamps as JSON lines on stdout, until stdin closes.
    #[command(name = "__bystander-worker", hide = true)]
    BystanderWorker(BystanderWorkerArgs),
}

/// Arguments of the hidden `__bystander-worker`.
#[derive(Debug, Clone, Args)]
pub struct BystanderWorkerArgs {
    /// host (a CPU spin in place of the kernel) or hip:N.
    #[arg(long, value_parser = str::parse::<DeviceSpec>)]
    pub device: DeviceSpec,
    /// One kernel, in us.
    #[arg(long, default_value = "200", value_parser = |s: &str| parse_positive_f64(s, "--kernel-us", 1e6))]
    pub kernel_us: f64,
    /// Stop after this long even if stdin stays open, in ms.
    #[arg(long, default_value_t = 60_000)]
    pub max_duration_ms: u64,
}

#[derive(Debug, Subcommand)]
pub enum SweepCmd {
    /// P99 suspend/HP-start latency against T for each level (XSched Fig. 11b's shape).
    T(SweepTArgs),
    /// P99 suspend/HP-start latency against the wave state the LP kernel leaves for CWSR to save
    /// (light and heavy LP kernel, KiB per CU), at one T, for each level. GPU only.
    State(SweepStateArgs),
    /// Lv1 overhead (LP throughput with the launcher vs. launching everything directly)
    /// against the threshold, for several T (XSched Fig. 11c's shape).
    Threshold(SweepThresholdArgs),
}

// clap's view of the option types (their names and help); the types and their parsing live in
// `options`.
impl ValueEnum for Level {
    fn value_variants<'a>() -> &'a [Self] {
        &Level::ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Level::Lv1 => {
                PossibleValue::new("1").help("progressive launching (at most --threshold commands in flight)")
            }
            Level::Lv3 => PossibleValue::new("3").help("interrupt/restore: CWSR on a GPU, SIGSTOP on the host device"),
        })
    }
}

impl ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &Format::ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &Mode::ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(match self {
            Mode::StandaloneHp => "HP requests alone (the reference latency)",
            Mode::StandaloneLp => "LP commands alone (the reference throughput)",
            Mode::Native => "both, no scheduling (host: two sets of workers sharing the CPUs)",
            Mode::Lv1 => "highest priority first through Lv1 (stop launching LP commands)",
            Mode::Lv3 => "highest priority first through Lv3 (SIGSTOP on the host device)",
        }))
    }
}

impl ValueEnum for Arrival {
    fn value_variants<'a>() -> &'a [Self] {
        &Arrival::ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

/// `--mechanism`: auto or one of lv3's mechanisms, listed from lv3's own identity.
fn mechanism_parser() -> impl TypedValueParser<Value = MechanismChoice> {
    let names = std::iter::once(PossibleValue::new("auto").help("the first usable of ioctl, dbg-trap, update-queue"))
        .chain(
            MechanismKind::AUTO_ORDER
                .into_iter()
                .map(|k| PossibleValue::new(k.name())),
        );
    PossibleValuesParser::new(names).try_map(|s| s.parse::<MechanismChoice>())
}

/// `--lp-state light|heavy`, from gpu-device's own names.
fn lp_state_parser() -> impl TypedValueParser<Value = LpState> {
    let names = LpState::ALL.into_iter().map(|s| {
        PossibleValue::new(s.name()).help(match s {
            LpState::Light => "delay_kernel: a few VGPRs per wave, no LDS",
            LpState::Heavy => "delay_kernel_heavy: all 512 VGPRs+AGPRs per lane, 64 KiB LDS per block, 1 block per CU",
        })
    });
    PossibleValuesParser::new(names).try_map(|s| s.parse::<LpState>())
}

/// The LP kernel of a GPU measurement.
#[derive(Debug, Clone, Args)]
pub struct LpArgs {
    /// GPU LP kernel: light (a few VGPRs per wave, no LDS) or heavy (every wave keeps all 512
    /// VGPRs+AGPRs live and each block 64 KiB of LDS: the most state CWSR can have to save; gfx90a/
    /// gfx94x). Written in every output; on the host device n.a., and heavy is refused there.
    #[arg(long, default_value = "light", value_parser = lp_state_parser())]
    pub lp_state: LpState,
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
    #[arg(long, default_value = "auto", value_parser = str::parse::<DeviceSpec>)]
    pub device: DeviceSpec,
    /// Seed of the random gaps between HP requests (same seed, same gaps).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Lv3 mechanism on a GPU: auto (first usable of ioctl, dbg-trap, update-queue), ioctl
    /// (patched kernel), dbg-trap (self-debug SUSPEND_QUEUES), update-queue (UPDATE_QUEUE to
    /// inactive and back). The host device has one mechanism (SIGSTOP) and takes only auto.
    #[arg(long, default_value = "auto", value_parser = mechanism_parser())]
    pub mechanism: MechanismChoice,
    /// Lv3 on a GPU: how long the CP lets waves run before it saves them, in units of ~1K GPU
    /// clocks (0-255; the kernel makes 0 into 1), or `default` (the firmware's). Default 1, as
    /// ROCdbgapi: a spinning kernel never reaches a natural break, so the firmware default is
    /// always waited out in full. Applies to dbg-trap and ioctl; update-queue cannot set it.
    #[arg(long, value_name = "N|default", value_parser = str::parse::<GracePeriod>)]
    pub grace: Option<GracePeriod>,
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
    /// Also write a timeline of the run as Chrome trace-event JSON (open in Perfetto or
    /// chrome://tracing): LP commands, suspend and resume calls, suspended windows, HP requests
    /// and probes, on the host clock.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub lp: LpArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PriorityArgs {
    /// Modes to run; they always run in the order listed here (the standalone ones first: the
    /// others are compared with them).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "standalone-hp,standalone-lp,native,lv1,lv3"
    )]
    pub modes: Vec<Mode>,
    /// HP requests per second.
    #[arg(long, default_value = "20", value_parser = |s: &str| parse_positive_f64(s, "--hp-rate", 100_000.0))]
    pub hp_rate: f64,
    /// How HP requests arrive: at a fixed rate, or as a Poisson process (seeded by --seed).
    #[arg(long, value_enum, default_value_t = Arrival::Poisson)]
    pub arrival: Arrival,
    /// Execution time of one HP command, in ms.
    #[arg(long = "hp-t-ms", default_value = "2", value_parser = parse_t_ms)]
    pub hp_t_ms: f64,
    /// HP commands per request (a request completes when its last command does).
    #[arg(long, default_value_t = 1, value_parser = parse_positive)]
    pub hp_cmds: u32,
    /// T, the execution time of one LP command, in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    /// How long each mode runs, in seconds.
    #[arg(long, default_value = "3", value_parser = |s: &str| parse_positive_f64(s, "--duration-s", 3600.0))]
    pub duration_s: f64,
    /// Output format on stdout: text for people; json and csv carry every parameter and the environment.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Directory for priority.csv, priority.json and priority.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    /// Also write a timeline of every mode as Chrome trace-event JSON (Perfetto, chrome://tracing).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
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
    pub lp: LpArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Args)]
pub struct SweepStateArgs {
    /// Levels to sweep.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "1,3")]
    pub levels: Vec<Level>,
    /// LP states to run (light, heavy).
    #[arg(long, value_delimiter = ',', default_value = "light,heavy", value_parser = lp_state_parser())]
    pub states: Vec<LpState>,
    /// T in ms, the same for every point.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    /// Preemptions per point.
    #[arg(long, default_value_t = 100, value_parser = parse_positive)]
    pub samples: u32,
    /// Warm-up preemptions per point.
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// Directory for sweep-state.csv, sweep-state.json and sweep-state.svg (created if missing).
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
    pub lp: LpArgs,
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

/// Arguments of `preempt-lat report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// JSON result files.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format on stdout (the files in --out-dir are written either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Directory for report.csv, report.json and report.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
}

/// Arguments of `preempt-lat doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Output format: text for people; json (the whole report) or csv (one row per device,
    /// level and mechanism) for machines.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Read sysfs/procfs/dev under this root instead of `/` (for testing doctor on fixtures).
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
}

/// Arguments of `preempt-lat validate`.
#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
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
    /// Preempt/resume cycles per GPU and mechanism.
    #[arg(long, default_value_t = 50, value_parser = parse_positive)]
    pub cycles: u32,
}

impl From<CommonArgs> for Common {
    fn from(a: CommonArgs) -> Self {
        Common {
            threshold: a.threshold,
            batch: a.batch,
            device: a.device,
            seed: a.seed,
            mechanism: a.mechanism,
            grace: a.grace,
            workers: a.workers,
            quiet: a.quiet,
        }
    }
}

impl Cli {
    /// The typed command; `Err` is a usage error (one line, exit 2).
    pub fn into_command(self) -> Result<Command, String> {
        let common = |c: CommonArgs| -> Result<Common, String> {
            let c = Common::from(c);
            c.check()?;
            Ok(c)
        };
        // The LP state with the device it is for (heavy on `--device host` is refused now).
        let lp = |lp: LpArgs, c: &CommonArgs| -> Result<LpState, String> {
            check_lp_state(c.device, lp.lp_state)?;
            Ok(lp.lp_state)
        };
        Ok(match self.cmd {
            None => {
                let r = self.run;
                Command::Run(options::RunOptions {
                    level: r.level,
                    t_ms: r.t_ms,
                    lp_state: lp(r.lp, &r.common)?,
                    samples: r.samples,
                    warmup: r.warmup,
                    format: r.format,
                    out: r.out,
                    trace: r.trace,
                    common: common(r.common)?,
                })
            }
            Some(Cmd::Doctor(a)) => Command::Doctor(options::DoctorOptions {
                format: a.format,
                root: a.root,
            }),
            Some(Cmd::Validate(a)) => Command::Validate(options::ValidateOptions {
                format: a.format,
                all_gpus: a.all_gpus,
                t_ms: a.t_ms,
                cycles: a.cycles,
            }),
            Some(Cmd::Sweep(SweepCmd::T(a))) => Command::SweepT(options::SweepTOptions {
                levels: a.levels,
                t_ms: a.t_ms,
                lp_state: lp(a.lp, &a.common)?,
                samples: a.samples,
                warmup: a.warmup,
                out_dir: a.out_dir,
                common: common(a.common)?,
            }),
            Some(Cmd::Sweep(SweepCmd::State(a))) => {
                if a.common.device == DeviceSpec::Host {
                    return Err(options::HOST_HAS_NO_LP_STATE.replace("{what}", "sweep state"));
                }
                let mut states: Vec<LpState> = Vec::new();
                for s in a.states {
                    if !states.contains(&s) {
                        states.push(s);
                    }
                }
                Command::SweepState(options::SweepStateOptions {
                    levels: a.levels,
                    states,
                    t_ms: a.t_ms,
                    samples: a.samples,
                    warmup: a.warmup,
                    out_dir: a.out_dir,
                    common: common(a.common)?,
                })
            }
            Some(Cmd::Sweep(SweepCmd::Threshold(a))) => Command::SweepThreshold(options::SweepThresholdOptions {
                thresholds: a.thresholds,
                t_ms: a.t_ms,
                lp_state: lp(a.lp, &a.common)?,
                commands: a.commands,
                out_dir: a.out_dir,
                common: common(a.common)?,
            }),
            Some(Cmd::LauncherCost(a)) => Command::LauncherCost(options::LauncherCostOptions {
                commands: a.commands,
                common: common(a.common)?,
            }),
            Some(Cmd::Priority(a)) => {
                // In Mode::ALL's order, standalone modes first: the others are compared with them.
                let modes: Vec<Mode> = Mode::ALL.into_iter().filter(|m| a.modes.contains(m)).collect();
                let o = options::PriorityOptions {
                    modes,
                    hp_rate: a.hp_rate,
                    arrival: a.arrival,
                    hp_t_ms: a.hp_t_ms,
                    hp_cmds: a.hp_cmds,
                    t_ms: a.t_ms,
                    duration_s: a.duration_s,
                    format: a.format,
                    out_dir: a.out_dir,
                    trace: a.trace,
                    common: common(a.common)?,
                };
                o.check()?;
                Command::Priority(o)
            }
            Some(Cmd::Report(a)) => Command::Report(options::ReportOptions {
                files: a.files,
                format: a.format,
                out_dir: a.out_dir,
            }),
            Some(Cmd::BystanderWorker(a)) => Command::BystanderWorker(options::BystanderWorkerOptions {
                device: a.device,
                kernel_us: a.kernel_us,
                max_duration_ms: a.max_duration_ms,
            }),
        })
    }
}
