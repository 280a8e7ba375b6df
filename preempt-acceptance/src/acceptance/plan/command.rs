//! Each stage's child: its command line (an existing subcommand, or `__acceptance-stage`), the
//! file its stdout goes to, and the result files `report` merges.
use super::flag::flag;
use super::{Mech, SHARES, Sizes, Stage, T_MS, Work, mechanism_arg};
use crate::options::{
    AcceptanceStageOptions, Common, InternalStage, Levels, OverheadOptions, PerPoint, Preset, PriorityOptions,
    RunOptions, SoakOptions, SweepRateOptions, SweepStateOptions, SweepTOptions, SweepThresholdOptions,
};
use clap::ValueEnum;
use preempt_api::DeviceSpec;
use std::path::Path;

/// The levels a sweep t and `overhead` run on `device`: every level it has.
fn levels(device: DeviceSpec) -> &'static str {
    if device.has_lv2() { "1,2,3" } else { "1,3" }
}

/// A child's command line, flag by flag: each flag named by the options field it sets
/// ([`flag!`]).
#[derive(Default)]
struct Line(Vec<String>);

impl Line {
    /// The subcommand's words (`sweep t`, `priority`, ...).
    fn of(words: &[&str]) -> Self {
        Line(words.iter().map(|w| (*w).to_string()).collect())
    }
    fn opt(mut self, flag: String, value: impl ToString) -> Self {
        self.0.push(flag);
        self.0.push(value.to_string());
        self
    }
    fn switch(mut self, flag: String) -> Self {
        self.0.push(flag);
        self
    }
    fn extend(mut self, more: Vec<String>) -> Self {
        self.0.extend(more);
        self
    }
}

/// The child's arguments (after the program) for `stage` writing into `dir`; `chosen` is the
/// mechanism of a stage with `needs_any` (none: `auto`). `None` for the kernel log.
pub fn args(stage: &Stage, device: DeviceSpec, quick: bool, dir: &Path, chosen: Option<Mech>) -> Option<Vec<String>> {
    let z = Sizes::of(quick);
    let path = |f: &str| dir.join(f).display().to_string();
    let out_dir = dir.display().to_string();
    let chosen = chosen.map(mechanism_arg).unwrap_or_default();
    let device_flag = || flag!(Common, device);
    let line = match stage.work {
        Work::Internal(which, mech) => {
            let name = which.to_possible_value().map(|v| v.get_name().to_string())?;
            let mut l = Line::of(&["__acceptance-stage", &name])
                .opt(flag!(AcceptanceStageOptions, device), device)
                .opt(flag!(AcceptanceStageOptions, t_ms), T_MS)
                .opt(flag!(AcceptanceStageOptions, out_dir), out_dir)
                .extend(mech.map(mechanism_arg).unwrap_or_default());
            if quick && which.sized() {
                l = l.switch(flag!(AcceptanceStageOptions, quick));
            }
            // Its result is its file: no --quiet, which the stage has not.
            return Some(l.0);
        }
        Work::Latency(level, mech) => Line::default()
            .opt(device_flag(), device)
            .opt(flag!(RunOptions, level), level.number())
            .opt(flag!(RunOptions, t_ms), T_MS)
            .opt(flag!(RunOptions, samples), z.samples)
            .opt(flag!(RunOptions, warmup), z.warmup)
            .opt(flag!(RunOptions, format), "json")
            .opt(flag!(RunOptions, out), path("run.json"))
            .opt(flag!(RunOptions, trace), path("run.trace.json"))
            .extend(mech.map(mechanism_arg).unwrap_or_default()),
        Work::SweepT => Line::of(&["sweep", "t"])
            .opt(device_flag(), device)
            .opt(flag!(Levels, list), levels(device))
            .opt(flag!(SweepTOptions, t_ms), z.sweep_t_ms)
            .opt(flag!(PerPoint, samples), z.sweep_samples)
            .opt(flag!(PerPoint, warmup), z.warmup)
            .opt(flag!(SweepTOptions, out_dir), out_dir)
            .extend(chosen),
        Work::SweepThreshold => Line::of(&["sweep", "threshold"])
            .opt(device_flag(), device)
            .opt(flag!(SweepThresholdOptions, thresholds), z.thresholds)
            .opt(flag!(SweepThresholdOptions, t_ms), z.threshold_t_ms)
            .opt(flag!(SweepThresholdOptions, commands), z.commands)
            .opt(flag!(SweepThresholdOptions, out_dir), out_dir),
        Work::SweepState => Line::of(&["sweep", "state"])
            .opt(device_flag(), device)
            .opt(flag!(Levels, list), "1,3")
            .opt(flag!(SweepStateOptions, t_ms), T_MS)
            .opt(flag!(PerPoint, samples), z.sweep_samples)
            .opt(flag!(SweepStateOptions, out_dir), out_dir)
            .extend(chosen),
        Work::Soak(length) => {
            // A minute's windows for an hour, shorter ones for a shorter trial (60 windows down to
            // 1-s windows).
            let minutes = length.as_secs_f64() / 60.0;
            let window_s = minutes.clamp(1.0, 60.0);
            Line::of(&["soak"])
                .opt(device_flag(), device)
                .opt(flag!(SoakOptions, minutes), minutes)
                .opt(flag!(SoakOptions, window_s), window_s)
                .opt(flag!(SoakOptions, out_dir), out_dir)
                .extend(chosen)
        }
        Work::Priority => Line::of(&["priority"])
            .opt(device_flag(), device)
            .opt(flag!(PriorityOptions, duration_arg), z.priority_s)
            .opt(flag!(PriorityOptions, out_dir), out_dir)
            .opt(flag!(PriorityOptions, trace), path("priority.trace.json"))
            .extend(chosen),
        Work::Partition => Line::of(&["priority"])
            .opt(device_flag(), device)
            .opt(flag!(PriorityOptions, policy), "up")
            .opt(flag!(PriorityOptions, shares), SHARES)
            .opt(flag!(PriorityOptions, t_ms), T_MS)
            .opt(flag!(PriorityOptions, duration_arg), z.partition_s)
            .switch(flag!(PriorityOptions, standalone))
            .opt(flag!(PriorityOptions, out_dir), out_dir)
            .extend(chosen),
        Work::Preset(p) => {
            let mut l = Line::of(&["priority"])
                .opt(device_flag(), device)
                .opt(flag!(PriorityOptions, preset), p.name())
                .opt(flag!(PriorityOptions, out_dir), out_dir);
            if quick {
                l = l.opt(flag!(PriorityOptions, duration_arg), Sizes::quick_preset_s(p));
            }
            l.extend(chosen)
        }
        Work::RatePreset(p) => {
            let mut l = Line::of(&["sweep", "rate"])
                .opt(device_flag(), device)
                .opt(flag!(SweepRateOptions, preset), p.name())
                .opt(flag!(SweepRateOptions, out_dir), out_dir);
            if quick {
                // The seeds' comparison rate and the low end of the curve, 1 s each.
                l = l
                    .opt(flag!(SweepRateOptions, rates), "100,1000")
                    .opt(flag!(SweepRateOptions, duration_arg), 1);
            }
            if device.is_host() {
                // 32 clients of one worker each: with a worker per core per client, a host's
                // processes would outnumber its cores many times over and starve the scheduler.
                l = l.opt(flag!(Common, workers), 1);
            }
            l.extend(chosen)
        }
        Work::Overhead => Line::of(&["overhead"])
            .opt(device_flag(), device)
            .opt(flag!(OverheadOptions, levels), levels(device))
            .opt(flag!(OverheadOptions, t_ms), T_MS)
            .opt(flag!(OverheadOptions, runs), z.overhead_runs)
            .opt(flag!(OverheadOptions, commands), z.overhead_commands)
            .opt(flag!(OverheadOptions, format), "json")
            .extend(chosen),
        Work::KernelLog => return None,
    };
    Some(line.switch(flag!(Common, quiet)).0)
}

/// The files a stage writes that `report` merges (the others are in the archive all the same).
pub fn result_files(work: Work) -> &'static [&'static str] {
    match work {
        Work::Latency(..) => &["run.json"],
        Work::SweepT => &["sweep-t.json"],
        Work::SweepState => &["sweep-state.json"],
        Work::Priority => &["priority.json"],
        Work::Soak(_) => &["soak.json"],
        Work::Partition => &["schedule.json"],
        Work::Preset(Preset::Fig9) => &["priority.json"],
        Work::Preset(_) => &["schedule.json"],
        Work::RatePreset(_) => &["sweep-rate.json"],
        Work::Overhead => &["overhead.json"],
        Work::Internal(InternalStage::Example5, _) => &[crate::acceptance::stage_result::EXAMPLE5_RESULT],
        Work::Internal(..) | Work::SweepThreshold | Work::KernelLog => &[],
    }
}

/// The file a stage's child writes its stdout into: `overhead` writes its result nowhere else,
/// so its stdout (`--format json`) is its result file; every other stage's is `stdout.txt`.
pub fn stdout_file(work: Work) -> &'static str {
    match work {
        Work::Overhead => "overhead.json",
        _ => "stdout.txt",
    }
}
