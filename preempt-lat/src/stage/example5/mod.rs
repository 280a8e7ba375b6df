//! The Example 5 stage: XSched's Example 5 through the Python package (docs/example5.md), the way
//! a user runs it. The example (examples/example5_inference.py and its chart module, built into
//! this executable and written into the stage's directory: no checkout needed) runs under a
//! Python that imports `preempt_kfd` ([`python`]), bounded in time: three replicas at three
//! priorities, Tests 1-3, then Phase 2 at every level of the device. It passes when the example
//! exits 0 (its exactly-once check of the stand-in's delay commands) and its JSON has Phase 2's
//! figures at every level it ran (a level it skipped says why: Lv1 with PyTorch's kernels, which
//! do not pass through the Lv1 launcher). The JSON (`example5.json`) is a result file: the
//! targets `throughput-loss`, `example5-high-vs-baseline` and `example5-low-high` are judged
//! from it per level, in the summary and by `report`.
//!
//! On `hip:N` the model is the example's `auto` (BERT-Large at FP16 where PyTorch imports, else
//! the stand-in: one delay command per request); on the host device the stand-in, whose figures
//! are host figures. A Python without the package is SKIP on either, naming what installs it:
//! the package is an optional part of an install (scripts/build-user.sh builds it), not the
//! device's.
pub mod python;

use super::StageResult;
use crate::acceptance::runner;
use crate::acceptance::summary::Status;
use crate::error::{Context, Error};
use crate::measure::control::stop_requested;
use preempt_api::DeviceSpec;
use python::{Chosen, Unavailable};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The example, as it is in examples/: the script and the chart module it imports from its own
/// directory.
pub const SOURCES: [(&str, &str); 2] = [
    (SCRIPT, include_str!("../../../../examples/example5_inference.py")),
    (
        "example5_chart.py",
        include_str!("../../../../examples/example5_chart.py"),
    ),
];

pub const SCRIPT: &str = "example5_inference.py";
/// The example's `--json`: the stage's result file.
pub const RESULT: &str = crate::acceptance::stage_result::EXAMPLE5_RESULT;
/// The example's `--svg`: each priority's latency CDF, the baseline and each level.
pub const CHART: &str = "example5.svg";

/// The example's `--requests` and `--warmup`: `--quick`'s few (6 and 1 on the host device, a
/// short check that every run completes and is judged; 20 and 2 on a GPU, where BERT-Large's
/// forwards are short and P99 of 6 would be the maximum), the host device's 30 of
/// docs/example5.md, and on a GPU the seeds' 100 and 10 (the example's own defaults).
pub fn sizes(host: bool, quick: bool) -> Option<(u32, u32)> {
    match (host, quick) {
        (true, true) => Some((6, 1)),
        (false, true) => Some((20, 2)),
        (true, false) => Some((30, 3)),
        (false, false) => None,
    }
}

/// The example's bound: a quick host run takes a few seconds on a 2-core VM (30 requests about
/// half a minute); a GPU's full run builds three BERT-Large replicas and makes eight runs of 100
/// requests each. Over that is a hang (a stream left suspended), killed and reported.
fn example_bound(quick: bool) -> Duration {
    Duration::from_secs(if quick { 240 } else { 900 })
}

/// The example's arguments after the Python, writing into `dir`.
pub fn args(device: DeviceSpec, quick: bool, dir: &Path) -> Vec<OsString> {
    let host = device.is_host();
    let mut a: Vec<OsString> = vec![
        dir.join(SCRIPT).into(),
        "--device".into(),
        device.to_string().into(),
        "--model".into(),
        if host { "stand-in" } else { "auto" }.into(),
    ];
    if let Some((requests, warmup)) = sizes(host, quick) {
        a.extend(["--requests".into(), requests.to_string().into()]);
        a.extend(["--warmup".into(), warmup.to_string().into()]);
    }
    a.extend(["--json".into(), dir.join(RESULT).into()]);
    a.extend(["--svg".into(), dir.join(CHART).into()]);
    a
}

/// A step's failure: the example cannot run here (SKIP), or something went wrong (FAIL).
#[derive(Debug, thiserror::Error)]
enum Problem {
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    #[error(transparent)]
    Failed(#[from] Error),
}

/// Runs the stage for `device`, writing into `dir`.
pub fn run(device: DeviceSpec, quick: bool, dir: &Path) -> StageResult {
    let mut facts = json!({ "host_figures": device.is_host() });
    match steps(device, quick, dir, &mut facts) {
        Err(Problem::Unavailable(u)) => StageResult {
            status: Status::Skip,
            reason: u.to_string(),
            facts,
        },
        Err(Problem::Failed(e)) => super::outcome(Err(e), facts),
        Ok(Err(why)) => super::outcome(Err(why), facts),
        Ok(Ok(reason)) => super::outcome(Ok::<_, String>(reason), facts),
    }
}

/// How the example ran.
#[derive(Debug, Clone)]
struct Ran {
    exit: Option<i32>,
    /// How it ended (exit status, or what stopped it).
    ended: String,
    /// The last line of its stderr (the example's own `example5: ...` says why).
    stderr_last: String,
}

fn steps(device: DeviceSpec, quick: bool, dir: &Path, facts: &mut Value) -> Result<Result<String, String>, Problem> {
    for (name, text) in SOURCES {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    let chosen = Chosen::from(std::env::var_os(python::PYTHON_ENV));
    facts["python"] = json!({ "chosen": chosen.named() });
    let found = python::probe(&chosen, dir)??;
    facts["python"] = json!({ "chosen": chosen.named(), "found": found });
    super::interrupted()?;
    let args = args(device, quick, dir);
    let (out_path, err_path) = (dir.join("example5.stdout.txt"), dir.join("example5.stderr.txt"));
    let out = std::fs::File::create(&out_path).with_context(|| out_path.display().to_string())?;
    let err = std::fs::File::create(&err_path).with_context(|| err_path.display().to_string())?;
    let mut cmd = Command::new(&chosen.program);
    // No __pycache__ in the stage's directory (the archive keeps what the stage wrote), and
    // the tables on stdout as they are printed, should the run be stopped.
    cmd.args(&args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdout(out)
        .stderr(err);
    let bound = example_bound(quick);
    let ended = runner::run(cmd, bound, &stop_requested, python::STOP)
        .with_context(|| format!("starting {}", chosen.named()))?;
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let ran = Ran {
        exit: ended.status.and_then(|s| s.code()),
        ended: if ended.over_bound {
            format!("over its bound of {} s: {}", bound.as_secs(), ended.describe())
        } else {
            ended.describe()
        },
        stderr_last: stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("")
            .to_string(),
    };
    let mut line: Vec<String> = vec![chosen.program.to_string_lossy().into_owned()];
    line.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
    facts["example"] = json!({
        "command": line.join(" "),
        "ended": ran.ended,
        "exit": ran.exit,
        "seconds": ended.seconds,
    });
    let result = std::fs::read_to_string(dir.join(RESULT))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()));
    if let Ok(v) = &result {
        facts["model"] = v["model"].clone();
        facts["requests"] = v["requests"].clone();
        facts["levels"] = figures(v);
    }
    Ok(judge(&ran, result.as_ref(), device.is_host()))
}

/// Phase 2's figures per level the example was asked for: those it judged, with the P99s they
/// come from (ms), or why the level was skipped.
pub fn figures(v: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let p99 = |run: &str, who: &str| v["runs"][run][who]["p99"].clone();
    for lv in v["levels"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        let run = format!("phase2_{lv}");
        let s = &v["summary_by_level"][lv];
        let fig = if s.is_object() {
            json!({
                "high_p99_vs_baseline": s["high_p99_vs_test2"],
                "low_high_p99": s["low_high_p99"],
                "throughput_loss_percent": s["throughput_loss_vs_test2"].as_f64().map(|x| x * 100.0),
                "high_p99_vs_alone": s["high_p99_vs_alone"],
                "low_high_p50": s["low_high_p50"],
                "high_p99_ms": p99(&run, "high"),
                "low_p99_ms": p99(&run, "low"),
                "baseline_high_p99_ms": p99("test2", "high"),
            })
        } else {
            json!({ "skipped": v["runs"][&run]["skipped"] })
        };
        out.insert(lv.to_string(), fig);
    }
    Value::Object(out)
}

/// The verdict on the example's run and its JSON (`result`: it, or why it could not be read):
/// PASS's line with the figures per level, or what failed.
fn judge(ran: &Ran, result: Result<&Value, &String>, host: bool) -> Result<String, String> {
    let said = if ran.stderr_last.is_empty() {
        String::new()
    } else {
        format!("; its stderr: {}", ran.stderr_last)
    };
    match ran.exit {
        Some(0) => {}
        Some(3) => {
            return Err(format!(
                "a stream's delay commands did not complete exactly once (exit status 3){said}"
            ));
        }
        _ => return Err(format!("the example ended {}{said}", ran.ended)),
    }
    let v = result.map_err(|e| format!("the example exited 0 but {RESULT} cannot be read: {e}"))?;
    if v["exactly_once"] != true {
        return Err(format!(
            "{RESULT} does not say every delay command completed exactly once"
        ));
    }
    let levels: Vec<&str> = v["levels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut ran_at = Vec::new();
    let mut skipped = Vec::new();
    for lv in &levels {
        let s = &v["summary_by_level"][lv];
        if s.is_object() {
            let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
            ran_at.push(format!(
                "{lv} high P99 {:.2}x the baseline's, low/high P99 {:.2}x, throughput lost {:.1} %",
                f("high_p99_vs_test2"),
                f("low_high_p99"),
                100.0 * f("throughput_loss_vs_test2")
            ));
        } else if let Some(why) = v["runs"][format!("phase2_{lv}")]["skipped"].as_str() {
            skipped.push(format!("{lv} skipped: {why}"));
        } else {
            return Err(format!(
                "{RESULT} has no Phase 2 figures at {lv}, nor why it was skipped"
            ));
        }
    }
    if ran_at.is_empty() {
        return Err(format!(
            "Phase 2 ran at no level ({})",
            if skipped.is_empty() {
                "none asked".to_string()
            } else {
                skipped.join("; ")
            }
        ));
    }
    let model = v["model"].as_str().unwrap_or("?");
    let label = if host { "host figures, " } else { "" };
    let once = if model.starts_with("stand-in") {
        "; every delay command exactly once"
    } else {
        ""
    };
    let rest: Vec<String> = ran_at.into_iter().chain(skipped).collect();
    Ok(format!(
        "{label}{model}, {} requests per replica: {}{once}",
        v["requests"],
        rest.join("; ")
    ))
}

#[cfg(test)]
mod tests;
