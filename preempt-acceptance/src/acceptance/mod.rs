//! `preempt-lat acceptance`: the first run on a new machine, for someone who is not us. Every
//! stage ([`plan`]: environment, HIP smoke, calibration, queue discovery, dynamic queues,
//! suspend/resume per mechanism, latency runs, sweeps, priority, the helper policy's bandwidth
//! partition, the overhead comparison, the HIP interposer, bystander, the kernel log) runs
//! in a child process of this executable with a time bound ([`runner`]), and is reported PASS,
//! FAIL or SKIP with its reason and time; a stage is skipped, with the reason, when one it needs
//! did not pass ([`sequence`]). Then the targets measurable today are judged ([`targets`],
//! [`outcome`]), a GPU's failing target fails the run ([`gate`]), and everything (each stage's text, JSON, CSV and SVG, its stdout and stderr, the
//! summary) goes into one `.tar.gz` ([`archive`]) whose path is printed last. `report` reads
//! such archives back, many nodes into one table ([`fleet`]).
//!
//! Ctrl-C: the stage's child is stopped as at its bound (it resumes what it suspended and writes
//! what it measured), the stages after it are skipped, and the archive is written; a second
//! Ctrl-C leaves at once (the child then gets SIGTERM from the kernel: [`runner::adopt_parent`]).
pub mod archive;
pub mod fleet;
pub mod gate;
pub mod kernel_log;
pub mod outcome;
pub mod plan;
pub mod runner;
pub mod sequence;
pub mod stage_result;
pub mod summary;
pub mod targets;

use crate::error::{Context, Error, UsageError, failed, usage};
use crate::exit::{Outcome, Verdict};
use crate::options::{AcceptanceOptions, Format};
use preempt_api::DeviceSpec;
use preempt_cli::stop::requested as stop_requested;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use summary::Summary;

/// Doctor's report (`doctor --format json`) from a child with a time bound: HIP is loaded
/// there, never in this process, which only runs stages.
fn doctor(program: &Path, out_dir: &Path) -> Result<Value, Error> {
    let tmp = out_dir.join(format!(".acceptance-doctor-{}.json", std::process::id()));
    let file = std::fs::File::create(&tmp).with_context(|| tmp.display().to_string())?;
    let mut cmd = Command::new(program);
    cmd.arg("doctor")
        .args([plan::flag::flag!(crate::options::DoctorOptions, format), "json".into()])
        .stdout(file)
        .stderr(Stdio::null());
    let ended = runner::run(cmd, DOCTOR_BOUND, &stop_requested, runner::Steps::STAGE);
    let text = std::fs::read_to_string(&tmp).unwrap_or_default();
    let _ = std::fs::remove_file(&tmp);
    let ended = ended.context("starting doctor")?;
    if !ended.status.is_some_and(|s| s.success()) || ended.over_bound {
        return Err(failed!("doctor: {}", ended.describe()));
    }
    serde_json::from_str(&text).context("doctor's JSON")
}

/// How long doctor may take (it loads HIP and asks for its devices).
const DOCTOR_BOUND: Duration = Duration::from_secs(120);

/// The devices to run, from doctor's answer: `--all-gpus` is every GPU HIP sees (none: hip:0,
/// whose first stage then says why); `auto` is hip:0 where doctor finds the GPU path usable, else
/// the host device (with a note, as every command gives it); `host` and `hip:N` are taken as
/// they are (a `hip:N` that cannot run fails at its first stage, with doctor's reason).
fn devices(o: &AcceptanceOptions, doctor: impl FnOnce() -> Result<Value, Error>) -> Vec<DeviceSpec> {
    if !(o.all_gpus || o.device == DeviceSpec::Auto) {
        return vec![o.device];
    }
    let report = doctor();
    let usable = report.as_ref().is_ok_and(|v| v["gpu_usable"] == true);
    let why = match &report {
        Ok(v) => v["summary"].as_str().unwrap_or("doctor gave no summary").to_string(),
        Err(e) => e.to_string(),
    };
    if o.all_gpus {
        let n = report.as_ref().ok().and_then(|v| v["facts"]["hip"]["devices"].as_u64());
        return match n.and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0 && usable) {
            Some(n) => (0..n).map(DeviceSpec::Hip).collect(),
            None => {
                eprintln!("preempt-lat acceptance: --all-gpus: no usable GPU ({why}); running hip:0, which says why");
                vec![DeviceSpec::Hip(0)]
            }
        };
    }
    if usable {
        vec![DeviceSpec::Hip(0)]
    } else {
        eprintln!(
            "preempt-lat: --device auto: using the host device ({why}); its figures are host figures, not GPU figures"
        );
        vec![DeviceSpec::HOST]
    }
}

/// `--only` and `--stage-bound` name stages of the devices' plans: a typo would otherwise skip
/// every stage, or bound none, and pass.
fn check_ids(o: &AcceptanceOptions, devices: &[DeviceSpec]) -> Result<(), UsageError> {
    let mut known: Vec<String> = Vec::new();
    for &d in devices {
        for s in plan::stages(d, o.quick, o.long) {
            if !known.contains(&s.id) {
                known.push(s.id);
            }
        }
    }
    let named = o.only.iter().map(|id| ("--only", id));
    for (opt, id) in named.chain(o.stage_bounds.iter().map(|(id, _)| ("--stage-bound", id))) {
        if !known.contains(id) {
            return Err(usage!(
                "{opt} {id}: no such stage for {}; the stages: {}",
                devices.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// This machine's name for the archive: the host name with anything but letters, digits, `.`,
/// `_` and `-` made `-`.
fn hostname() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let h: String = h
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if h.is_empty() { "node".into() } else { h }
}

/// Days since 1970-01-01 as a civil date (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, u32::try_from(m).unwrap_or(1), u32::try_from(d).unwrap_or(1))
}

/// A moment in UTC: (`2026-01-31T12:00:00Z`, `20260131T120000Z`).
fn utc(t: SystemTime) -> (String, String) {
    let s = i64::try_from(t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())).unwrap_or(0);
    let (y, m, d) = civil(s.div_euclid(86_400));
    let sod = s.rem_euclid(86_400);
    let (hh, mm, ss) = (sod / 3600, sod / 60 % 60, sod % 60);
    (
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z"),
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z"),
    )
}

/// `preempt-lat acceptance`.
pub fn run(o: &AcceptanceOptions, git_revision: &str) -> Outcome {
    crate::output::files::prepare(&o.out_dir)?;
    let program = std::env::current_exe().context("cannot find this executable to run the stages")?;
    let devices = devices(o, || doctor(&program, &o.out_dir));
    check_ids(o, &devices)?;
    let node = o.node.clone().unwrap_or_else(hostname);
    let started = SystemTime::now();
    let (started_utc, stamp) = utc(started);
    let which = if o.all_gpus {
        "all-gpus".to_string()
    } else {
        devices
            .iter()
            .map(|&d| sequence::dir_name(d))
            .collect::<Vec<_>>()
            .join("-")
    };
    let name = format!("acceptance-{node}-{which}-{stamp}-{}", std::process::id());
    let top = o.out_dir.join(&name);
    std::fs::create_dir_all(&top).with_context(|| format!("{}: cannot create", top.display()))?;
    let archive_path = o.out_dir.join(format!("{name}.tar.gz"));
    eprintln!(
        "preempt-lat acceptance: node {node}, {} device(s): {}; results in {}",
        devices.len(),
        devices.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        top.display()
    );
    let cx = sequence::Context {
        program: &program,
        top: &top,
        quick: o.quick,
        long: o.long,
        only: &o.only,
        bounds: &o.stage_bounds,
    };
    let mut s = Summary {
        tool: summary::TOOL.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_revision: git_revision.into(),
        node,
        started_utc,
        quick: o.quick,
        command: std::env::args().collect(),
        interrupted: false,
        devices: Vec::new(),
        passed: 0,
        failed: 0,
        skipped: 0,
        ok: false,
        gated: false,
        failed_targets: Vec::new(),
        archive: format!("{name}.tar.gz"),
    };
    for &d in &devices {
        s.devices.push(sequence::run_device(&cx, d));
    }
    s.interrupted = stop_requested();
    s.tally();
    gate::decide(&mut s, !o.no_gate);
    for format in [Format::Text, Format::Json, Format::Csv] {
        let path = top.join(format!("summary.{}", format.extension()));
        crate::atomic_file::write_file(&path, |w| crate::output::export(format, &s, w))?;
    }
    archive::write(&top, &name, &archive_path)?;
    // The archive holds everything: the directory goes (a failure to remove it loses nothing).
    if let Err(e) = std::fs::remove_dir_all(&top) {
        eprintln!("preempt-lat acceptance: {}: not removed: {e}", top.display());
    }
    let mut out = std::io::stdout().lock();
    crate::output::export(o.format, &s, &mut out).context("writing the summary")?;
    if o.format == Format::Text {
        use std::io::Write;
        writeln!(out, "archive (attach it to a bug report):\n{}", archive_path.display())
            .context("writing the summary")?;
    }
    eprintln!("preempt-lat acceptance: archive {}", archive_path.display());
    Ok(Verdict::from_ok(s.ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_are_civil_dates() {
        let at = |s: u64| utc(UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(at(0).0, "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century divisible by 400) and the day after.
        assert_eq!(at(951_782_400).0, "2000-02-29T00:00:00Z");
        assert_eq!(at(951_868_799).1, "20000229T235959Z");
        assert_eq!(at(951_955_199).1, "20000301T235959Z");
        assert_eq!(at(4_102_444_800).0, "2100-01-01T00:00:00Z");
    }

    #[test]
    fn devices_come_from_doctors_answer_and_never_from_hip_in_this_process() {
        use clap::Parser;
        let opts =
            |args: &[&str]| match crate::options::Cli::try_parse_from(["preempt-lat", "acceptance"].iter().chain(args))
                .unwrap()
                .checked()
            {
                Ok(crate::options::Command::Acceptance(o)) => o,
                other => panic!("{other:?}"),
            };
        let gpus = |n: u64, usable: bool| -> Result<Value, Error> {
            Ok(serde_json::json!({"gpu_usable": usable, "summary": "s", "facts": {"hip": {"devices": n}}}))
        };
        let never = || -> Result<Value, Error> { panic!("doctor is not asked for an explicit device") };
        assert_eq!(devices(&opts(&["--device", "hip:3"]), never), [DeviceSpec::Hip(3)]);
        assert_eq!(devices(&opts(&["--device", "host"]), never), [DeviceSpec::HOST]);
        assert_eq!(
            devices(&opts(&["--all-gpus"]), || gpus(3, true)),
            [DeviceSpec::Hip(0), DeviceSpec::Hip(1), DeviceSpec::Hip(2)]
        );
        // No usable GPU: hip:0, whose first stage says why.
        assert_eq!(devices(&opts(&["--all-gpus"]), || gpus(0, false)), [DeviceSpec::Hip(0)]);
        assert_eq!(
            devices(&opts(&["--all-gpus"]), || Err(Error::msg("timed out"))),
            [DeviceSpec::Hip(0)]
        );
        assert_eq!(devices(&opts(&[]), || gpus(8, true)), [DeviceSpec::Hip(0)]);
        assert_eq!(devices(&opts(&[]), || gpus(0, false)), [DeviceSpec::HOST]);
    }

    #[test]
    fn the_host_name_is_fit_for_a_file_name() {
        let h = hostname();
        assert!(!h.is_empty() && h.len() <= 64);
        assert!(
            h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
            "{h}"
        );
    }
}
