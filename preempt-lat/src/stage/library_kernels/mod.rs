//! The library-kernels stage: kernels that a library launches and our code never sees (a GEMM, a
//! 2-D convolution), suspended and resumed many times mid-run at Lv3, every result compared with
//! an unpreempted reference (examples/library_kernels.py, docs/library-kernels.md). The script,
//! its modules and the stand-in torch are built into this executable and written into the
//! stage's directory (no checkout needed), then run under the Python of Example 5's stage
//! (`$PREEMPT_PYTHON`, else `python3`), bounded in time.
//!
//! On `hip:N` the script's GPU route: PyTorch's `torch.matmul` (hipBLAS/hipBLASLt) and
//! `conv2d` (MIOpen) on a `preempt_kfd` Lv3 stream. On the host device its host route: the
//! stand-in torch over the stand-in HIP runtime (built beside this executable) and its library
//! kernels, naive f32 loops; host figures, not hipBLAS/MIOpen. PASS when the script exits 0
//! (every result equal to the reference, every suspend resumed, some found a kernel running);
//! SKIP, with the script's reason, when its route cannot run here (exit 4: no PyTorch, no GPU
//! PyTorch sees, no `preempt_kfd`; on the host, the stand-in not built); FAIL otherwise.
use super::StageResult;
use super::example5::python::{self, Chosen};
use super::interposer::setup::{self, Missing};
use crate::acceptance::runner;
use crate::acceptance::summary::Status;
use crate::error::{Context, Error};
use crate::measure::control::stop_requested;
use preempt_api::DeviceSpec;
use serde_json::{Map, Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const SCRIPT: &str = "library_kernels.py";

/// The script, its modules beside it, and the stand-in torch where the script looks for it
/// (relative to the stage's directory).
pub const SOURCES: [(&str, &str); 9] = [
    (SCRIPT, include_str!("../../../../examples/library_kernels.py")),
    (
        "library_kernels_check.py",
        include_str!("../../../../examples/library_kernels_check.py"),
    ),
    (
        "library_kernels_routes.py",
        include_str!("../../../../examples/library_kernels_routes.py"),
    ),
    (
        "xsched_seed002/standin_torch/torch/__init__.py",
        include_str!("../../../../examples/xsched_seed002/standin_torch/torch/__init__.py"),
    ),
    (
        "xsched_seed002/standin_torch/torch/cuda.py",
        include_str!("../../../../examples/xsched_seed002/standin_torch/torch/cuda.py"),
    ),
    (
        "xsched_seed002/standin_torch/torch/_tensors.py",
        include_str!("../../../../examples/xsched_seed002/standin_torch/torch/_tensors.py"),
    ),
    (
        "xsched_seed002/standin_torch/torch/nn/__init__.py",
        include_str!("../../../../examples/xsched_seed002/standin_torch/torch/nn/__init__.py"),
    ),
    (
        "xsched_seed002/standin_torch/torch/nn/functional.py",
        include_str!("../../../../examples/xsched_seed002/standin_torch/torch/nn/functional.py"),
    ),
    (
        "xsched_seed002/standin_torch/torch/backends/__init__.py",
        include_str!("../../../../examples/xsched_seed002/standin_torch/torch/backends/__init__.py"),
    ),
];

/// The script's bound: a quick host run takes a few seconds on a 2-core VM, a full one about
/// half a minute; a GPU's 50 launches of each kernel and their copies back take well under a
/// minute. Over that is a hang (a stream left suspended), killed and reported.
fn script_bound(quick: bool) -> Duration {
    Duration::from_secs(if quick { 120 } else { 400 })
}

/// The script's arguments after the Python, in `dir`: `--quick` on the host device is 4 launches
/// of each kernel and 20 suspends, on a GPU 20 launches; otherwise the script's defaults (50
/// suspends; 20 launches on the host, 50 on a GPU).
pub fn args(device: DeviceSpec, quick: bool, dir: &Path) -> Vec<OsString> {
    let bound = script_bound(quick).as_secs() - 10;
    let mut a: Vec<OsString> = vec![
        dir.join(SCRIPT).into(),
        "--device".into(),
        device.to_string().into(),
        "--timeout-s".into(),
        bound.to_string().into(),
    ];
    let sizes: &[&str] = match (device.is_host(), quick) {
        (true, true) => &["--runs", "4", "--suspends", "20"],
        (false, true) => &["--runs", "20"],
        _ => &[],
    };
    a.extend(sizes.iter().map(OsString::from));
    a
}

/// Runs the stage for `device`, writing into `dir`.
pub fn run(device: DeviceSpec, quick: bool, dir: &Path) -> StageResult {
    let mut facts = json!({ "host_figures": device.is_host() });
    match steps(device, quick, dir, &mut facts) {
        Ok(Verdict::Pass(why)) => super::outcome(Ok::<_, Error>(why), facts),
        Ok(Verdict::Fail(why)) => super::outcome(Err(why), facts),
        Ok(Verdict::Skip(why)) => StageResult {
            status: Status::Skip,
            reason: why,
            facts,
        },
        Err(e) => super::outcome(Err(e), facts),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Pass(String),
    Fail(String),
    Skip(String),
}

fn steps(device: DeviceSpec, quick: bool, dir: &Path, facts: &mut Value) -> Result<Verdict, Error> {
    for (name, text) in SOURCES {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("{}: cannot create", parent.display()))?;
        }
        std::fs::write(&p, text).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    let chosen = Chosen::from(std::env::var_os(python::PYTHON_ENV));
    facts["python"] = json!(chosen.named());
    let scratch = setup::Scratch::new()?;
    let mut cmd = Command::new(&chosen.program);
    if device.is_host() {
        match host_env(&scratch.0) {
            Ok(env) => {
                cmd.envs(env);
            }
            Err(m) => return Ok(Verdict::Skip(m.to_string())),
        }
    }
    super::interrupted()?;
    let args = args(device, quick, dir);
    let (out_path, err_path) = (
        dir.join("library_kernels.stdout.txt"),
        dir.join("library_kernels.stderr.txt"),
    );
    let out = std::fs::File::create(&out_path).with_context(|| out_path.display().to_string())?;
    let err = std::fs::File::create(&err_path).with_context(|| err_path.display().to_string())?;
    cmd.args(&args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdout(out)
        .stderr(err);
    let bound = script_bound(quick);
    let ended = match runner::run(cmd, bound, &stop_requested, python::STOP) {
        Ok(e) => e,
        Err(e) => {
            return Ok(Verdict::Skip(format!(
                "no Python to run the script: {} cannot be started ({e})",
                chosen.named()
            )));
        }
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let line = summary(&stdout);
    let mut command: Vec<String> = vec![chosen.program.to_string_lossy().into_owned()];
    command.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
    facts["script"] = json!({
        "command": command.join(" "),
        "ended": ended.describe(),
        "exit": ended.status.and_then(|s| s.code()),
        "seconds": ended.seconds,
        "over_bound": ended.over_bound,
    });
    facts["summary"] = Value::Object(line.clone());
    let last = stderr.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("");
    Ok(judge(
        ended.status.and_then(|s| s.code()),
        &line,
        last,
        device.is_host(),
    ))
}

/// The stand-in under libamdhip64's names in `scratch` and the host worker, as the script's
/// environment; what is not built is named with the command that builds it.
fn host_env(scratch: &Path) -> Result<Vec<(&'static str, PathBuf)>, Missing> {
    let profile = setup::profile_dir().map_err(|e| Missing::NotBuilt {
        files: vec![setup::STANDIN_LIB.into()],
        dir: e.to_string(),
        command: setup::build_command(["hip-standin"]),
    })?;
    let found = setup::built(
        &profile,
        &[
            (setup::STANDIN_LIB, "hip-standin"),
            ("preempt-host-worker", "host-device"),
        ],
    )?;
    let lib = setup::standin_dir(scratch, &found[0]).map_err(|e| Missing::NotBuilt {
        files: vec![setup::STANDIN_LIB.into()],
        dir: format!("{} ({e})", scratch.display()),
        command: setup::build_command(["hip-standin"]),
    })?;
    Ok(vec![
        ("LD_LIBRARY_PATH", lib),
        ("PREEMPT_HOST_WORKER", found[1].clone()),
    ])
}

/// The script's summary line (`library_kernels ok=...`) as key/values; empty when there is none.
pub fn summary(stdout: &str) -> Map<String, Value> {
    let Some(line) = stdout.lines().rfind(|l| l.starts_with("library_kernels ok=")) else {
        return Map::new();
    };
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let v = v.parse::<f64>().map_or_else(|_| json!(v), |n| json!(n));
            (k.to_string(), v)
        })
        .collect()
}

/// The verdict from the script's exit status, its summary and its last stderr line.
fn judge(exit: Option<i32>, s: &Map<String, Value>, stderr_last: &str, host: bool) -> Verdict {
    let n = |k: &str| s.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let said = |what: &str| match s.get("reason").and_then(Value::as_str) {
        Some(r) => format!("{what}: {}", r.replace('_', " ")),
        None if !stderr_last.is_empty() => format!("{what}: {stderr_last}"),
        None => what.to_string(),
    };
    match exit {
        Some(0) if n("ok") == 1.0 => {
            let label = if host {
                "host figures on the stand-in HIP runtime (not hipBLAS/MIOpen): "
            } else {
                ""
            };
            Verdict::Pass(format!(
                "{label}{} GEMM and {} conv launches, {} suspends and resumes ({} found a kernel running), \
                 every result {} the reference",
                n("gemm_runs"),
                n("conv_runs"),
                n("suspends"),
                n("mid_kernel"),
                if s.get("compare").and_then(Value::as_str) == Some("close") {
                    "within tolerance of"
                } else {
                    "bit-exact against"
                }
            ))
        }
        Some(0) => Verdict::Fail("the script exited 0 without its summary line saying ok=1".into()),
        Some(4) => Verdict::Skip(format!("the script cannot run here: {stderr_last}")),
        Some(3) => Verdict::Fail(said(&format!(
            "{} mismatched elements in {} runs, {} suspends, {} resumes",
            n("mismatches"),
            n("mismatched_runs"),
            n("suspends"),
            n("resumes")
        ))),
        _ => Verdict::Fail(said(&format!("the script ended with exit status {exit:?}"))),
    }
}

#[cfg(test)]
mod tests;
