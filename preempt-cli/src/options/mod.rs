//! What a user asked for, typed and checked: the command line of `preempt-lat` is parsed by clap
//! straight into these types ([`Cli::checked`]), once, and nothing below `main` sees clap. Each
//! field's doc comment is its `--help` text. Bad input gets one clear line and exit status 2
//! (clap's convention), before anything is started: clap's value parsers ([`values`]) check each
//! value, [`Command::check`] what spans several.
pub mod acceptance;
pub mod class;
mod common;
mod inspect;
mod internal;
mod overhead;
pub mod preset;
mod priority;
mod runs;
mod soak;
mod sweep_rate;
pub mod values;

use crate::error::{UsageError, usage};
pub use acceptance::{AcceptanceOptions, AcceptanceStageOptions, InternalStage};
use clap::{Parser, Subcommand};
pub use common::*;
pub use inspect::*;
pub use internal::*;
use overhead::OVERHEAD_EXAMPLES;
pub use overhead::*;
pub use preset::{Preset, RatePreset};
pub use priority::*;
pub use runs::*;
use soak::SOAK_EXAMPLES;
pub use soak::*;
use sweep_rate::SWEEP_RATE_EXAMPLES;
pub use sweep_rate::*;
use values::check_in_flight;
pub use values::{Arrival, DeviceSpec, Format, Level, LpState, Mode, PolicyKind, check_level};

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
    /// the LP correctness check; writes priority.{csv,json,svg} and priority-cdf.svg. Each mode runs in a session of the
    /// application API (host device, or hip:N: written for hardware, not yet run on a GPU). On the
    /// host device the LP queue has one worker per core unless --workers says otherwise, so HP and
    /// LP share the CPUs. With --class (or --policy up|kedf|laxity): the class experiment instead
    /// (see --policy).
    #[command(
        after_help = "Examples:\n  preempt-lat priority --device host --hp-rate 50 --hp-t-ms 1 --t-ms 0.5 --duration-s 3\n  preempt-lat priority --device host --preset 8.2.1   # the seeds' test 8.2.1: frames and speech under laxity\n  preempt-lat priority --device host --modes standalone-hp,native,lv3 --arrival fixed --trace prio.trace.json"
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
    /// the presets, Example 5, the interposer, bystander, the kernel log), each PASS/FAIL/SKIP with
    /// its reason and time and stopped at its time bound, a stage skipped when one it needs failed;
    /// the targets measurable today judged; everything in one .tar.gz to attach. Exit status 0 when
    /// no stage failed, 3 when one failed, the run was interrupted, or (on a GPU, without
    /// --no-gate) a target failed, named on the summary's last lines; the host device's targets
    /// are information (host figures), never gated on.
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
    /// Stability over a long run (an hour by default): 7.2.1's priority load (lv3) and 8.3.1's
    /// HP client against an LP client (hpf) in turn, window after window, in one process on a
    /// device opened once. Per window: HP P50/P99, the exactly-once check, this process's RSS,
    /// open descriptors and threads. At the end: each experiment's P99 drift (last third of its
    /// windows against the first third) and the growth since the second window. Exit status 3
    /// when a window's check failed, descriptors or threads grew, or RSS grew past
    /// --rss-growth-mib. Writes soak.{csv,json}.
    #[command(after_help = SOAK_EXAMPLES)]
    Soak(SoakOptions),
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
            Command::Soak(o) => o.check(),
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

#[cfg(test)]
mod tests;
