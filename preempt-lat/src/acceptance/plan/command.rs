//! Each stage's child: its command line (an existing subcommand, or `__acceptance-stage`), the
//! file its stdout goes to, and the result files `report` merges.
use super::{Mech, SHARES, Sizes, Stage, T_MS, Work, mechanism_arg};
use crate::options::{InternalStage, Preset};
use clap::ValueEnum;
use preempt_api::DeviceSpec;
use std::path::Path;

/// The levels a sweep t and `overhead` run on `device`: every level it has.
fn levels(device: DeviceSpec) -> &'static str {
    if device.has_lv2() { "1,2,3" } else { "1,3" }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The child's arguments (after the program) for `stage` writing into `dir`; `chosen` is the
/// mechanism of a stage with `needs_any` (none: `auto`). `None` for the kernel log.
pub fn args(stage: &Stage, device: DeviceSpec, quick: bool, dir: &Path, chosen: Option<Mech>) -> Option<Vec<String>> {
    let z = Sizes::of(quick);
    let dev = device.to_string();
    let path = |f: &str| dir.join(f).display().to_string();
    let out_dir = dir.display().to_string();
    let chosen = chosen.map(mechanism_arg).unwrap_or_default();
    let mut a = match stage.work {
        Work::Internal(which, mech) => {
            let name = which.to_possible_value().map(|v| v.get_name().to_string())?;
            let mut a = strings(&[
                "__acceptance-stage",
                &name,
                "--device",
                &dev,
                "--t-ms",
                T_MS,
                "--out-dir",
            ]);
            a.push(out_dir);
            a.extend(mech.map(mechanism_arg).unwrap_or_default());
            if quick && which.sized() {
                a.push("--quick".into());
            }
            return Some(a);
        }
        Work::Latency(level, mech) => {
            let mut a = strings(&[
                "--device",
                &dev,
                "--level",
                &level.number().to_string(),
                "--t-ms",
                T_MS,
                "--samples",
                &z.samples.to_string(),
                "--warmup",
                &z.warmup.to_string(),
                "--format",
                "json",
                "--out",
                &path("run.json"),
                "--trace",
                &path("run.trace.json"),
            ]);
            a.extend(mech.map(mechanism_arg).unwrap_or_default());
            a
        }
        Work::SweepT => {
            let mut a = strings(&[
                "sweep",
                "t",
                "--device",
                &dev,
                "--levels",
                levels(device),
                "--t-ms",
                z.sweep_t_ms,
                "--samples",
                &z.sweep_samples.to_string(),
                "--warmup",
                &z.warmup.to_string(),
                "--out-dir",
                &out_dir,
            ]);
            a.extend(chosen);
            a
        }
        Work::SweepThreshold => strings(&[
            "sweep",
            "threshold",
            "--device",
            &dev,
            "--thresholds",
            z.thresholds,
            "--t-ms",
            z.threshold_t_ms,
            "--commands",
            &z.commands.to_string(),
            "--out-dir",
            &out_dir,
        ]),
        Work::SweepState => {
            let mut a = strings(&[
                "sweep",
                "state",
                "--device",
                &dev,
                "--levels",
                "1,3",
                "--t-ms",
                T_MS,
                "--samples",
                &z.sweep_samples.to_string(),
                "--out-dir",
                &out_dir,
            ]);
            a.extend(chosen);
            a
        }
        Work::Soak(length) => {
            // A minute's windows for an hour, shorter ones for a shorter trial (60 windows down to
            // 1-s windows).
            let minutes = length.as_secs_f64() / 60.0;
            let window_s = minutes.clamp(1.0, 60.0);
            let mut a = strings(&[
                "soak",
                "--device",
                &dev,
                "--minutes",
                &minutes.to_string(),
                "--window-s",
                &window_s.to_string(),
                "--out-dir",
                &out_dir,
            ]);
            a.extend(chosen);
            a
        }
        Work::Priority => {
            let mut a = strings(&[
                "priority",
                "--device",
                &dev,
                "--duration-s",
                &z.priority_s.to_string(),
                "--out-dir",
                &out_dir,
                "--trace",
                &path("priority.trace.json"),
            ]);
            a.extend(chosen);
            a
        }
        Work::Partition => {
            let mut a = strings(&[
                "priority",
                "--device",
                &dev,
                "--policy",
                "up",
                "--shares",
                SHARES,
                "--t-ms",
                T_MS,
                "--duration-s",
                &z.partition_s.to_string(),
                "--standalone",
                "--out-dir",
                &out_dir,
            ]);
            a.extend(chosen);
            a
        }
        Work::Preset(p) => {
            let mut a = strings(&[
                "priority",
                "--device",
                &dev,
                "--preset",
                p.name(),
                "--out-dir",
                &out_dir,
            ]);
            if quick {
                a.extend(strings(&["--duration-s", &Sizes::quick_preset_s(p).to_string()]));
            }
            a.extend(chosen);
            a
        }
        Work::RatePreset(p) => {
            let mut a = strings(&[
                "sweep",
                "rate",
                "--device",
                &dev,
                "--preset",
                p.name(),
                "--out-dir",
                &out_dir,
            ]);
            if quick {
                // The seeds' comparison rate and the low end of the curve, 1 s each.
                a.extend(strings(&["--rates", "100,1000", "--duration-s", "1"]));
            }
            if device.is_host() {
                // 32 clients of one worker each: with a worker per core per client, a host's
                // processes would outnumber its cores many times over and starve the scheduler.
                a.extend(strings(&["--workers", "1"]));
            }
            a.extend(chosen);
            a
        }
        Work::Overhead => {
            let mut a = strings(&[
                "overhead",
                "--device",
                &dev,
                "--levels",
                levels(device),
                "--t-ms",
                T_MS,
                "--runs",
                &z.overhead_runs.to_string(),
                "--commands",
                &z.overhead_commands.to_string(),
                "--format",
                "json",
            ]);
            a.extend(chosen);
            a
        }
        Work::KernelLog => return None,
    };
    a.push("--quiet".into());
    Some(a)
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
        Work::Internal(InternalStage::Example5, _) => &[crate::acceptance::stage::example5::RESULT],
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
