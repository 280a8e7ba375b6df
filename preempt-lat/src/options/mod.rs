//! What a user asked for, typed and checked: the command line of `preempt-lat` is parsed by clap
//! straight into these types ([`Cli::checked`]), once, and nothing below `main` sees clap. Each
//! field's doc comment is its `--help` text. Bad input gets one clear line and exit status 2
//! (clap's convention), before anything is started: clap's value parsers ([`values`]) check each
//! value, [`Command::check`] what spans several.
pub mod acceptance;
pub mod class;
pub mod values;

use crate::error::{UsageError, usage};
pub use acceptance::{AcceptanceOptions, AcceptanceStageOptions, InternalStage};
use clap::{Args, Parser, Subcommand};
use kfd::GracePeriod;
use lv3::{MechanismChoice, MechanismKind};
use std::path::PathBuf;
pub use values::{Arrival, DeviceSpec, Format, Level, LpState, Mode, PolicyKind, check_level};
use values::{
    check_in_flight, parse_positive, parse_positive_f64, parse_shares, parse_t_ms, parse_threshold, parse_workers,
};

#[derive(Debug, Parser)]
#[command(
    name = "preempt-lat",
    version,
    about = "Preemption latency of GPU compute queues on AMD GPUs (Lv1 progressive launching, Lv3 CWSR), or of the host device",
    long_about = "Preemption latency of GPU compute queues on AMD GPUs, XSched-style.\n\n\
A low-priority (LP) queue runs delay commands of T each; at random moments a high-priority (HP) \
request arrives, the LP queue is suspended (Lv1: stop launching and wait for the in-flight \
commands; Lv2, host device only: let the running command finish and start no new one; Lv3: save \
the running waves), a tiny HP probe runs, and the LP queue is resumed. \
Reported per sample, in nanoseconds: suspend latency (suspend call until the LP queue runs \
nothing), HP start latency (HP request until the probe starts) and resume latency; and a \
correctness check that every LP command completed exactly once.\n\n\
Exit status: 0 done, every check passed; 3 a check failed; 2 bad input; 1 could not run. Ctrl-C \
(SIGTERM, SIGHUP) stops within about 1-2 s (on a GPU, after an Lv1 drain under way) and writes what \
was measured, marked interrupted: the LP \
commands still running after the bounded close (1 s) are abandoned, and their check is then \
reported as not checked (neither a pass nor a failure: exit status 0, or 3 if a check that was \
made failed). A second Ctrl-C exits at once (130).\n\n\
Without a usable AMD GPU, --device auto runs on the host device (CPU worker processes; Lv3 = \
SIGSTOP/SIGCONT) and says so: those are host figures, not GPU figures. Run `preempt-lat doctor` \
to see what this machine can do.",
    after_help = "Examples:\n  preempt-lat --level 3 --t-ms 0.5\n  preempt-lat --level 3 --t-ms 0.5 --lp-state heavy --device hip:0\n  preempt-lat --level 1 --t-ms 0.5 --threshold 8 --batch 4 --format json --out lv1.json\n  preempt-lat sweep t --out-dir results/\n  preempt-lat sweep state --device hip:0 --out-dir results/\n  preempt-lat doctor --format json",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Option<Command>,
    /// The default command's options (a run), when no subcommand is given.
    #[command(flatten)]
    run: RunOptions,
}

impl Cli {
    /// The command to run, checked; `Err` is a usage error (one line, exit 2).
    pub fn checked(self) -> Result<Command, UsageError> {
        let mut c = self.cmd.unwrap_or(Command::Run(self.run));
        c.check()?;
        Ok(c)
    }
}

/// The command to run, as parsed.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// One measurement (the default command: no subcommand).
    #[command(skip)]
    Run(RunOptions),
    /// Report what this machine can do: kernel, /dev/kfd, KFD version, GPUs, module parameters,
    /// and for each preemption level and mechanism whether it can run here and why not.
    Doctor(DoctorOptions),
    /// Validate the preemption paths of this machine's kernel and GPUs: capability probe,
    /// error-path checks (anywhere /dev/kfd opens), functional cycles with the correctness check
    /// and the bystander cost (what each preemption costs another process's kernels on the same
    /// GPU, per mechanism) (GPU only). Exit status 0 when nothing failed: a CI gate.
    Validate(ValidateOptions),
    /// Sweep T, the LP kernel's wave state or the Lv1 threshold and write CSV, JSON and an SVG plot.
    #[command(subcommand)]
    Sweep(Sweep),
    /// Host CPU time per LP command of the Lv1 launcher at T -> 0 (host device): text, JSON or CSV.
    LauncherCost(LauncherCostOptions),
    /// Priority scheduling: HP requests (fixed rate or Poisson) against a saturating LP stream,
    /// in modes standalone-hp, standalone-lp, native (no scheduling), lv1, lv2 (host device only)
    /// and lv3 (highest priority first: the LP queue is suspended while HP work is pending). Reports HP request
    /// latency, its P99 against standalone, LP throughput against standalone, preemptions and
    /// the LP correctness check; writes priority.{csv,json,svg}. Each mode runs in a session of the
    /// application API (host device, or hip:N: written for hardware, not yet run on a GPU). On the
    /// host device the LP queue has one worker per core unless --workers says otherwise, so HP and
    /// LP share the CPUs. With --class (or --policy up|kedf|laxity): the class experiment instead
    /// (see --policy).
    #[command(
        after_help = "Examples:\n  preempt-lat priority --device host --hp-rate 50 --hp-t-ms 1 --t-ms 0.5 --duration-s 3\n  preempt-lat priority --device host --modes standalone-hp,native,lv3 --arrival fixed --trace prio.trace.json"
    )]
    Priority(PriorityOptions),
    /// Merge JSON results (run --format json, sweep-t.json, sweep-state.json, priority.json; from
    /// any number of machines) into one table and one plot, grouped by device, mechanism, kernel
    /// and gfx target, and judge every result (those too, and sweep-threshold.json,
    /// launcher-cost and overhead JSON, schedule.json, sweep-rate.json, the Example 5 example's
    /// --json) against the seeds' targets: one table,
    /// each row the target, the measured value, the device (host figures labelled) and
    /// PASS/FAIL; writes report.{csv,json,svg} and targets.{csv,json}. Acceptance archives (and
    /// directories of them) add one table of stages and targets per node and GPU
    /// (report-acceptance.{csv,json}), and their results join the merge and the judging. A FAIL is information,
    /// not an error: the exit status is 3 only when a result failed its correctness check.
    #[command(
        after_help = "Examples (one JSON per node, then one report; or one acceptance archive per node or GPU):\n  srun --ntasks-per-node=1 sh -c 'preempt-lat --format json --out results/$(hostname).json'\n  preempt-lat report results/*.json --out-dir results/\n  preempt-lat report acceptance/ --out-dir acceptance-report/"
    )]
    Report(ReportOptions),
    /// The first run on a new machine, for a bug report: every stage (environment, HIP smoke,
    /// calibration, queue discovery, suspend/resume per mechanism, latency runs, sweeps, priority,
    /// bystander, the kernel log), each PASS/FAIL/SKIP with its reason and time and stopped at its
    /// time bound, a stage skipped when one it needs failed; the targets measurable today judged;
    /// everything in one .tar.gz to attach. Exit status 0 when no stage failed, 3 when one failed
    /// or the run was interrupted (targets are judged, not gated on).
    #[command(
        after_help = "Examples:\n  preempt-lat acceptance --all-gpus --out-dir acceptance/\n  preempt-lat acceptance --device host --quick\n  preempt-lat report acceptance/   # every archive in the directory: one table per node and GPU"
    )]
    Acceptance(AcceptanceOptions),
    /// Internal: one stage of `acceptance` (started by preempt-lat itself), its result as
    /// stage.json in --out-dir.
    #[command(name = "__acceptance-stage", hide = true)]
    AcceptanceStage(AcceptanceStageOptions),
    /// Internal: validate's bystander process (started by preempt-lat itself): delay kernels one
    /// after another, their host stamps as JSON lines on stdout, until stdin closes.
    #[command(name = "__bystander-worker", hide = true)]
    BystanderWorker(BystanderWorkerOptions),
    /// What being scheduled costs when nothing is preempted (XSched Fig. 12a and 12b): the same
    /// LP work (delay commands of T, back to back) natively (straight onto the device: no
    /// launcher, no session) and scheduled (through an application-API session's LP stream:
    /// Lv1 through the launcher; Lv3 with the mechanism armed and the helper registered, never
    /// entered). Per setup over --runs: whole-run time and its overhead against native (target <
    /// 3.4 %), this process's CPU as a share of one core and its increase over native (target <
    /// 5 points), min / median / max; the exactly-once check. Text, JSON (what `report` judges)
    /// or CSV on stdout.
    #[command(after_help = OVERHEAD_EXAMPLES)]
    Overhead(OverheadOptions),
    /// Internal: an LP process of `priority --processes` (started by preempt-lat itself): a
    /// session scheduled by the daemon, its streams registered, until stdin closes.
    #[command(name = "__sched-lp", hide = true)]
    SchedLp(SchedLpOptions),
}

#[derive(Debug, Clone, Subcommand)]
pub enum Sweep {
    /// P99 suspend/HP-start latency against T for each level (XSched Fig. 11b's shape).
    T(SweepTOptions),
    /// P99 suspend/HP-start latency against the wave state the LP kernel leaves for CWSR to save
    /// (light and heavy LP kernel, KiB per CU), at one T, for each level. GPU only.
    State(SweepStateOptions),
    /// Lv1 overhead (LP throughput with the launcher vs. launching everything directly)
    /// against the threshold, for several T (XSched Fig. 11c's shape).
    Threshold(SweepThresholdOptions),
    /// The class experiment (`priority --policy`) once per offered request rate: per-class
    /// latency (p50, P99) and throughput against the rate (XSched Fig. 15b's shape: K-EDF,
    /// log-normal arrivals). Writes sweep-rate.{csv,json,svg}.
    #[command(after_help = SWEEP_RATE_EXAMPLES)]
    Rate(SweepRateOptions),
}

impl Command {
    /// What clap cannot check value by value: the combinations refused (a usage error, one
    /// line), in the order a reader meets them; and the lists put in order (priority's modes in
    /// run order, sweep state's states once each).
    pub fn check(&mut self) -> Result<(), UsageError> {
        match self {
            Command::Run(o) => {
                check_level("--level", o.common.device, o.level)?;
                check_lp_state(o.common.device, o.lp.lp_state)?;
                if let (Some(out), Some(trace)) = (&o.out, &o.trace)
                    && std::path::absolute(out).ok() == std::path::absolute(trace).ok()
                {
                    return Err(usage!(
                        "--out and --trace both name {}: give each its own file",
                        out.display()
                    ));
                }
                o.common.check()?;
                check_in_flight(o.common.lv1.threshold, o.t_ms)
            }
            Command::Sweep(Sweep::T(o)) => {
                o.levels.check(o.common.device)?;
                check_lp_state(o.common.device, o.lp.lp_state)?;
                o.common.check()?;
                o.t_ms
                    .iter()
                    .try_for_each(|&t| check_in_flight(o.common.lv1.threshold, t))
            }
            Command::Sweep(Sweep::State(o)) => {
                if o.common.device.is_host() {
                    return Err(UsageError::new(HOST_HAS_NO_LP_STATE.replace("{what}", "sweep state")));
                }
                // GPU only: auto runs it on hip:0 or not at all, so no Lv2 either way.
                let gpu = match o.common.device {
                    DeviceSpec::Auto => DeviceSpec::Hip(0),
                    d => d,
                };
                o.levels.check(gpu)?;
                let mut states: Vec<LpState> = Vec::new();
                for &s in &o.states {
                    if !states.contains(&s) {
                        states.push(s);
                    }
                }
                o.states = states;
                o.common.check()?;
                check_in_flight(o.common.lv1.threshold, o.t_ms)
            }
            Command::Sweep(Sweep::Threshold(o)) => {
                check_lp_state(o.common.device, o.lp.lp_state)?;
                o.common.check()?;
                o.t_ms
                    .iter()
                    .try_for_each(|&t| values::check_measurement(o.commands, t))
            }
            Command::Sweep(Sweep::Rate(o)) => {
                o.common.check()?;
                o.check()
            }
            Command::LauncherCost(o) => o.lv1.check(),
            Command::Priority(o) => {
                o.modes = Mode::ALL.into_iter().filter(|m| o.modes.contains(m)).collect();
                if o.modes.contains(&Mode::Lv2) {
                    values::refuse_lv2("--modes lv2", o.common.device)?;
                }
                o.common.check()?;
                check_in_flight(o.common.lv1.threshold, o.t_ms)?;
                o.check()
            }
            Command::Overhead(o) => {
                o.common.check()?;
                o.check()
            }
            Command::Doctor(_)
            | Command::Validate(_)
            | Command::Report(_)
            | Command::Acceptance(_)
            | Command::AcceptanceStage(_)
            | Command::BystanderWorker(_)
            | Command::SchedLp(_) => Ok(()),
        }
    }
}

/// The Lv1 launcher's settings.
#[derive(Debug, Clone, Copy, Args)]
pub struct Lv1Options {
    /// Lv1: at most this many LP commands in flight. Must be >= --batch, at most 65536, and with T
    /// at most 600 s of LP work in flight (an Lv1 suspend waits for it). Default 8, as the seeds'
    /// experiments set it (`XQueueSetLaunchConfig(8, 4)`); XSched's own default is 16.
    #[arg(long, default_value_t = 8, value_parser = parse_threshold)]
    pub threshold: u32,
    /// Lv1: a sync point every this many commands. Default 4, as the seeds' experiments set it;
    /// XSched's own default is 8.
    #[arg(long, default_value_t = 4, value_parser = parse_positive)]
    pub batch: u32,
}

impl Lv1Options {
    /// A batch larger than the threshold is refused (a usage error).
    pub fn check(&self) -> Result<(), UsageError> {
        if self.threshold < self.batch {
            return Err(usage!(
                "--threshold ({}) must be >= --batch ({}): a batch larger than the threshold could never complete",
                self.threshold,
                self.batch
            ));
        }
        Ok(())
    }
}

/// Options shared by measurements and sweeps.
#[derive(Debug, Clone, Args)]
pub struct Common {
    #[command(flatten)]
    pub lv1: Lv1Options,
    /// Device the LP and HP work runs on.
    ///
    /// hip is hip:0. kfd (binding KFD queue ids a scheduler already has) is the C and Python
    /// API's and refused here: preempt-lat runs its LP work on a queue of its own.
    #[arg(long, default_value = "auto", value_parser = values::device())]
    pub device: DeviceSpec,
    /// Seed of the random gaps between HP requests (same seed, same gaps).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Lv3 mechanism on a GPU. The host device has one mechanism (SIGSTOP) and takes only auto.
    #[arg(long, default_value = "auto", value_parser = values::mechanism())]
    pub mechanism: MechanismChoice,
    /// Lv3 on a GPU: how long the CP lets waves run before it saves them, in units of ~1K GPU
    /// clocks (0-255; the kernel makes 0 into 1), or `default` (the firmware's). Default 1, as
    /// ROCdbgapi: a spinning kernel never reaches a natural break, so the firmware default is
    /// always waited out in full. Applies to preempt-queues and dbg-trap; update-queue cannot set
    /// it.
    #[arg(long, value_name = "N|default", value_parser = str::parse::<GracePeriod>)]
    pub grace: Option<GracePeriod>,
    /// Host device: LP worker processes ("compute units"). Default: cores - 1, at least 1.
    #[arg(long, value_parser = parse_workers)]
    pub workers: Option<u32>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

impl Common {
    /// The grace period Lv3 asks for: `--grace`, else [`GracePeriod::SHORTEST`] (ROCdbgapi's
    /// choice; see docs/kfd-facts.md#grace-period).
    pub fn grace(&self) -> GracePeriod {
        self.grace.unwrap_or(GracePeriod::SHORTEST)
    }

    /// Cross-field checks: the one-line reason a combination is refused (a usage error).
    pub fn check(&self) -> Result<(), UsageError> {
        if let Some(g) = self.grace {
            if self.device.is_host() {
                return Err(usage!(
                    "--grace {g} applies to Lv3 on an AMD GPU ({}); the host device's SIGSTOP has no grace period",
                    MechanismKind::names_where(MechanismKind::sets_grace_period).join(", ")
                ));
            }
            if let MechanismChoice::Only(k) = self.mechanism
                && !k.sets_grace_period()
            {
                return Err(usage!(
                    "--grace {g}: {k} cannot set a grace period (its ioctl has no such argument; the device's setting \
                     applies): drop --grace or use --mechanism {}",
                    MechanismKind::names_where(MechanismKind::sets_grace_period).join("|")
                ));
            }
        }
        if self.device.is_host() && self.mechanism != MechanismChoice::Auto {
            return Err(usage!(
                "--mechanism {} needs an AMD GPU (--device hip:N); the host device's Lv3 is SIGSTOP/SIGCONT (use --mechanism auto)",
                self.mechanism
            ));
        }
        self.lv1.check()
    }
}

/// The LP kernel of a GPU measurement.
#[derive(Debug, Clone, Copy, Args)]
pub struct LpOptions {
    /// GPU LP kernel: light (a few VGPRs per wave, no LDS) or heavy (every wave keeps all 512
    /// VGPRs+AGPRs live and each block 64 KiB of LDS: the most state CWSR can have to save; gfx90a/
    /// gfx94x). Written in every output; on the host device n.a., and heavy is refused there.
    #[arg(long, default_value = "light", value_parser = values::lp_state())]
    pub lp_state: LpState,
}

/// `--lp-state heavy` with `--device host` (or `sweep state` there): refused, because the host
/// device's LP commands are CPU worker processes with no GPU wave state for a save to move.
/// `light` on the host device is accepted and recorded as not applicable.
pub fn check_lp_state(device: DeviceSpec, state: LpState) -> Result<(), UsageError> {
    if device.is_host() && state == LpState::Heavy {
        return Err(UsageError::new(
            HOST_HAS_NO_LP_STATE.replace("{what}", "--lp-state heavy"),
        ));
    }
    Ok(())
}

/// Why the host device has no LP state (`{what}` = the option refused).
pub const HOST_HAS_NO_LP_STATE: &str = "{what} needs an AMD GPU (--device hip:N): the LP state is how much wave \
    state (VGPRs, AGPRs, LDS) the GPU's LP kernel leaves for CWSR to save, and the host device's LP commands are CPU \
    worker processes with none (its Lv3 is SIGSTOP/SIGCONT)";

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

/// `priority`: HP requests against a saturating LP stream, per mode.
#[derive(Debug, Clone, Args)]
pub struct PriorityOptions {
    /// Modes to run; they always run in the order listed here (the standalone ones first: the
    /// others are compared with them). Default: every mode the device has, all six on the host
    /// device, all but lv2 on a GPU (no per-queue Lv2 on gfx942 under HWS; lv2 asked for there is
    /// refused, docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws).
    #[arg(long, value_enum, value_delimiter = ',')]
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
    /// HP commands per request (a request completes when its last command does), at most 10000.
    #[arg(long, default_value_t = 1, value_parser = values::parse_hp_cmds)]
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
    /// Also write a timeline of every mode as Chrome trace-event JSON (Perfetto, chrome://tracing):
    /// at most 200000 events, shared by the modes (each keeps its first ones); it says how many it
    /// left out.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The policy. hpf without --class: the modes above (HP requests against one saturating LP
    /// stream). hpf with --class, up, kedf, laxity: the class experiment instead (every class an
    /// LP stream of one session, each with its own arrivals; --modes, --hp-* do not apply): hpf =
    /// while a class has work, the classes of lower prio= are suspended (Example 5's high,
    /// normal and low), up = utilization partition (one queue holds the device for a slice of
    /// --round-ms x its share; Fig. 9 bottom), kedf = the --k earliest deadlines run (Fig. 15b),
    /// laxity = a class runs at prio= until its laxity= is used up, then at crit= (8.2.1).
    /// Writes schedule.{csv,json}.
    #[arg(long, value_enum, default_value_t = PolicyKind::Hpf)]
    pub policy: PolicyKind,
    /// up: saturating queues q0, q1, ... with these shares, T = --t-ms each (e.g. 75:25).
    #[arg(long, value_name = "A:B[:C...]", value_parser = parse_shares)]
    pub shares: Option<values::Shares>,
    /// A class of the class experiment (repeat it): NAME:key=value:..., keys rate (requests/s;
    /// 0 = saturating, the default), t (ms per command, 0.5), cmds (per request, 1), share (up),
    /// deadline (ms, kedf), prio (hpf: larger runs first; laxity), laxity (ms) and crit (laxity).
    /// E.g. --class video:rate=100:t=1:deadline=10 --class bulk:t=1:deadline=1000, or --policy
    /// hpf --class high:rate=20:t=2:prio=2 --class normal:rate=20:t=2:prio=1 --class low:prio=0.
    #[arg(long = "class", value_name = "NAME:KEY=V:...", value_parser = class::parse)]
    pub classes: Vec<class::ClassSpec>,
    /// kedf: how many classes run at once.
    #[arg(long, default_value_t = 1, value_parser = |s: &str| parse_positive(s).and_then(|k| if k <= 64 { Ok(k as usize) } else { Err(usage!("--k {k}: at most 64")) }))]
    pub k: usize,
    /// up: the round the slices add up to, in ms.
    #[arg(long = "round-ms", default_value = "10", value_parser = |s: &str| parse_positive_f64(s, "--round-ms", 10_000.0))]
    pub round_ms: f64,
    /// Instead of the modes (--policy hpf, no --class): the HP and LP sides in separate
    /// processes coordinated by the scheduler daemon (preempt-sched, beside preempt-lat), N LP
    /// processes of one stream each; reports what the daemon's hop costs on HP start (p50/p99
    /// against the in-process helper, with the same N streams in this process). Writes
    /// priority-processes.{csv,json}.
    #[arg(long, value_name = "N", value_parser = |s: &str| parse_positive(s).and_then(|n| if n <= 64 { Ok(n) } else { Err(usage!("--processes {n}: at most 64")) }))]
    pub processes: Option<u32>,
    /// --processes: HP blocks timed on each side.
    #[arg(long, default_value_t = 1000, value_parser = parse_positive)]
    pub hop_samples: u32,
    /// --arrival lognormal: the shape of the log-normal gaps (mean gap 1/rate).
    #[arg(long, default_value_t = values::DEFAULT_SIGMA, value_parser = |s: &str| parse_positive_f64(s, "--sigma", 10.0))]
    pub sigma: f64,
    /// The class experiment: run each class alone first (same arrivals, same duration), then report
    /// each class's P99 against alone and the combined throughput's loss against the classes
    /// alone (their sum, or the device's capacity where a class saturates).
    #[arg(long)]
    pub standalone: bool,
    #[command(flatten)]
    pub common: Common,
}

impl PriorityOptions {
    /// Whether this is the class experiment (`--class`, `--shares`, or a policy other than hpf)
    /// rather than priority's modes (hpf and neither).
    pub fn runs_classes(&self) -> bool {
        self.policy != PolicyKind::Hpf || self.shares.is_some() || !self.classes.is_empty()
    }

    /// The classes of a class experiment: `--shares` makes saturating queues `q0`, `q1`, ...
    /// with those shares and T = `--t-ms`; otherwise the `--class` list.
    pub fn class_specs(&self) -> Vec<class::ClassSpec> {
        match &self.shares {
            Some(shares) => shares
                .0
                .iter()
                .enumerate()
                .map(|(i, &s)| class::ClassSpec::saturating(format!("q{i}"), self.t_ms, s))
                .collect(),
            None => self.classes.clone(),
        }
    }

    /// Cross-field checks of a class experiment (one line each, a usage error).
    fn check_classes(&self) -> Result<(), UsageError> {
        let p = self.policy.name();
        if self.shares.is_some() && self.policy != PolicyKind::Up {
            return Err(usage!(
                "--shares is for --policy up, not {p}: give the classes with --class, each with {}",
                class::needs(self.policy)
            ));
        }
        if self.shares.is_some() && !self.classes.is_empty() {
            return Err(UsageError::new("give --shares or --class, not both"));
        }
        let cs = self.class_specs();
        if cs.len() < 2 {
            return Err(usage!(
                "--policy {p} needs two classes or more: --shares 75:25, or --class twice"
            ));
        }
        class::check_set(self.policy, &cs)
    }

    /// The modes to run on `device` (`auto` resolved), in run order: those of `--modes`, else
    /// every mode the device has ([`Mode::on`]).
    pub fn modes_on(&self, device: DeviceSpec) -> Vec<Mode> {
        if self.modes.is_empty() {
            Mode::on(device)
        } else {
            self.modes.clone()
        }
    }

    /// HP work per second of wall time: rate x commands x HP T.
    pub fn hp_load(&self) -> f64 {
        self.hp_rate * f64::from(self.hp_cmds) * self.hp_t_ms / 1000.0
    }

    /// Cross-field checks: the one-line reason a combination is refused (a usage error).
    pub fn check(&self) -> Result<(), UsageError> {
        if self.processes.is_some() && self.policy != PolicyKind::Hpf {
            return Err(usage!("--processes is for --policy hpf, not {}", self.policy.name()));
        }
        if self.runs_classes() {
            if self.processes.is_some() {
                return Err(UsageError::new(
                    "--processes runs priority's modes (HP requests against LP processes), not the class experiment (--class, --shares)",
                ));
            }
            return self.check_classes();
        }
        if self.standalone {
            return Err(UsageError::new(
                "--standalone is for the class experiment (--class, or --policy up, kedf or laxity); priority's modes have standalone-hp and standalone-lp",
            ));
        }
        let load = self.hp_load();
        if load >= 0.9 {
            return Err(usage!(
                "--hp-rate x --hp-cmds x --hp-t-ms = {load:.2} s of HP work per second: the HP requests alone would \
                 (nearly) saturate the device; lower one of them"
            ));
        }
        // No --modes: the device's modes, which issue HP requests.
        let has_hp = self.modes.is_empty() || self.modes.iter().any(|m| m.has_hp());
        if self.duration_s * self.hp_rate < 1.0 && has_hp {
            // Debug: 1e-300 as 1e-300, not as 300 zeros.
            return Err(usage!(
                "--duration-s {:?} at --hp-rate {:?} makes no HP request: raise either",
                self.duration_s,
                self.hp_rate
            ));
        }
        Ok(())
    }
}

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

/// `sweep rate --help`'s examples: the host defaults, Fig. 15b on a GPU, a template.
const SWEEP_RATE_EXAMPLES: &str = "Examples:
  preempt-lat sweep rate --device host
      host defaults: 4 clients, K = 2, 1 s per rate (K below the clients, so K-EDF suspends)
  preempt-lat sweep rate --device hip:0 --clients 32 --k 16 --duration-s 10 --out-dir fig15b/
      XSched Fig. 15b on a GPU: K-EDF with K = 16, log-normal arrivals (sigma 2), 100 to 1200 req/s
  preempt-lat sweep rate --device host --rates 50,100,200 --class video:rate=3:t=1:deadline=10 \\
      --class speech:rate=1:t=2:deadline=40 --class bulk:t=1:deadline=1000
      a template: video gets 3/4 of each rate, speech 1/4; bulk (no rate=) stays saturating";

/// `sweep rate`: the class experiment at each offered rate.
#[derive(Debug, Clone, Args)]
pub struct SweepRateOptions {
    /// Total request rates to sweep, requests per second (the x axis).
    #[arg(long, value_delimiter = ',', default_value = "100,200,400,600,800,1000,1200",
          value_parser = |s: &str| parse_positive_f64(s, "--rates", 100_000.0))]
    pub rates: Vec<f64>,
    /// The policy (as `priority --policy`): kedf (Fig. 15b), up, laxity, or hpf (with --class
    /// templates of different prio=).
    #[arg(long, value_enum, default_value_t = PolicyKind::Kedf)]
    pub policy: PolicyKind,
    /// kedf: how many classes run at once (host default 2; Fig. 15b's is 16, with more clients).
    #[arg(long, default_value_t = 2, value_parser = |s: &str| parse_positive(s).and_then(|k| if k <= 64 { Ok(k as usize) } else { Err(usage!("--k {k}: at most 64")) }))]
    pub k: usize,
    /// The built-in set-up (without --class): this many identical clients c0, c1, ..., each an
    /// equal part of the rate (host default 4).
    #[arg(long, default_value_t = 4, value_parser = |s: &str| parse_positive(s).and_then(|n| if n <= 64 { Ok(n) } else { Err(usage!("--clients {n}: at most 64")) }),
          conflicts_with = "classes")]
    pub clients: u32,
    /// The built-in set-up: T of each request (one command), in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms, conflicts_with = "classes")]
    pub t_ms: f64,
    /// The built-in set-up: a request is due this long after it arrives, in ms (kedf's
    /// deadline, laxity's laxity).
    #[arg(long = "deadline-ms", default_value = "20", value_parser = |s: &str| parse_positive_f64(s, "--deadline-ms", 3_600_000.0),
          conflicts_with = "classes")]
    pub deadline_ms: f64,
    /// A class template instead of the built-in set-up (repeat it; keys as `priority --class`):
    /// at each swept rate R, a class with rate=W gets R x W / (sum of the W) requests per
    /// second; a class without rate= stays saturating.
    #[arg(long = "class", value_name = "NAME:KEY=V:...", value_parser = class::parse)]
    pub classes: Vec<class::ClassSpec>,
    /// How requests arrive (Fig. 15b: lognormal).
    #[arg(long, value_enum, default_value_t = Arrival::Lognormal)]
    pub arrival: Arrival,
    /// --arrival lognormal: the shape of the log-normal gaps (mean gap 1/rate).
    #[arg(long, default_value_t = values::DEFAULT_SIGMA, value_parser = |s: &str| parse_positive_f64(s, "--sigma", 10.0))]
    pub sigma: f64,
    /// up: the round the slices add up to, in ms.
    #[arg(long = "round-ms", default_value = "10", value_parser = |s: &str| parse_positive_f64(s, "--round-ms", 10_000.0))]
    pub round_ms: f64,
    /// How long each rate runs, in seconds (host default 1).
    #[arg(long, default_value = "1", value_parser = |s: &str| parse_positive_f64(s, "--duration-s", 3600.0))]
    pub duration_s: f64,
    /// At each rate, run each class alone first, then report P99 against alone and the
    /// throughput's loss (as `priority --standalone`; each rate then takes classes + 1 runs).
    #[arg(long)]
    pub standalone: bool,
    /// Directory for sweep-rate.csv, sweep-rate.json and sweep-rate.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

impl SweepRateOptions {
    /// The classes whose rates are swept: the --class templates, else the built-in set-up.
    pub fn template(&self) -> Vec<class::ClassSpec> {
        if self.classes.is_empty() {
            class::built_in(self.clients, self.t_ms, self.deadline_ms)
        } else {
            self.classes.clone()
        }
    }

    /// Cross-field checks (one line each, a usage error); the rates put in order, once each.
    fn check(&mut self) -> Result<(), UsageError> {
        if self.policy == PolicyKind::Hpf && self.classes.is_empty() {
            return Err(UsageError::new(
                "sweep rate --policy hpf needs --class templates with prio=: the built-in clients share one priority, so nothing would be suspended",
            ));
        }
        let t = self.template();
        class::check_set(self.policy, &t)?;
        if class::at_rate(&t, 1.0).is_none() {
            return Err(UsageError::new(
                "sweep rate needs a class with requests to sweep: give one --class a rate= above 0",
            ));
        }
        self.rates.sort_by(f64::total_cmp);
        self.rates.dedup();
        Ok(())
    }
}

/// `overhead --help`'s examples.
const OVERHEAD_EXAMPLES: &str = "Examples:
  preempt-lat overhead --device host
      host defaults: 500 commands of T = 0.5 ms per setup and run, 5 runs (seconds in all)
  preempt-lat overhead --device hip:0 --mechanism dbg-trap --format json > overhead.json
      on a GPU: Lv3 with dbg-trap armed keeps the process in debug mode through its runs
  preempt-lat report overhead.json
      the overhead and scheduler-cpu targets judged";

/// `overhead`: native against scheduled, nothing preempted.
#[derive(Debug, Clone, Args)]
pub struct OverheadOptions {
    /// The scheduled setups to compare with native: 1 (an LP stream at Lv1: through the
    /// launcher), 2 (at Lv2, host device only: the helper registered, nothing armed), 3 (at Lv3:
    /// the mechanism armed, the helper registered). Also lv1, lv2, lv3.
    #[arg(long = "levels", value_name = "LEVELS", value_delimiter = ',', default_value = "1,3", value_parser = values::level())]
    pub levels: Vec<Level>,
    /// T, the execution time of one LP command, in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    /// LP commands per setup and run, back to back (host default 500: 0.25 s at T = 0.5 ms).
    #[arg(long, default_value_t = 500, value_parser = parse_positive)]
    pub commands: u32,
    /// Runs; every setup runs once per run (in a rotating order), and each figure is reported as
    /// min / median / max over the runs.
    #[arg(long, default_value_t = 5, value_parser = parse_positive)]
    pub runs: u32,
    /// Output format on stdout: text for people; json (every figure with its spread, what
    /// `report` judges) and csv (a row per setup) carry every parameter.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub common: Common,
}

impl OverheadOptions {
    /// The most commands one run submits (a GPU stream books a slot per command).
    pub const MAX_COMMANDS: u32 = 1_000_000;

    /// Cross-field checks (one line, a usage error); the levels put in order, once each.
    fn check(&mut self) -> Result<(), UsageError> {
        if self.commands > Self::MAX_COMMANDS {
            return Err(usage!(
                "--commands {}: at most {} per run",
                self.commands,
                Self::MAX_COMMANDS
            ));
        }
        // A run is --commands x T per setup: on a GPU a Ctrl-C waits for its direct launches (the
        // host device's are killed after the bounded close).
        values::check_measurement(self.commands, self.t_ms)?;
        for &l in &self.levels {
            check_level("--levels", self.common.device, l)?;
        }
        self.levels = [Level::Lv1, Level::Lv2, Level::Lv3]
            .into_iter()
            .filter(|l| self.levels.contains(l))
            .collect();
        Ok(())
    }
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

#[cfg(test)]
mod tests;
