//! A user's Python script written for XSched (examples/xsched_seed002/test_xsched_integration.py:
//! through ctypes on `libpreempt.so` and `libhalhip.so`, six tasks at XSched priorities 3, 3, 2,
//! 2, 1, 1, each on a `torch.cuda.Stream()` of its own in a thread of its own, every request
//! timed) run unchanged on the stand-in HIP runtime, with the stand-in torch
//! (examples/xsched_seed002/standin_torch) first on PYTHONPATH. Each run is a real process,
//! bounded in time; skipped, with a line that says so, where python3 is not installed.
//!
//! Asserted: what the user depends on. Every task makes every request in every mode; the XSched
//! calls reach the interposer (with `both`, the six baseline streams still exist at HIP's normal
//! level when the XSched streams run, so every request on a stream XHintPriority raised is marked
//! as outranking them, and they are suspended and resumed); nothing is left suspended; without
//! the interposer the run completes and one line says what is needed.
//!
//! Not asserted: any latency, and that priority 3 is served before priority 1, because with this
//! script it is not, whatever the scheduler:
//! - it waits with `torch.cuda.synchronize(stream)`, which in PyTorch (and in the stand-in) waits
//!   for every stream of the device (the argument is a device; a Stream reads as the current
//!   one), so each request also waits for the other tasks' work, higher or lower;
//! - xsched-compat maps XSched priorities onto HIP's three levels by sign
//!   (docs/interposer.md#xscheds-c-api-names), so 3, 2 and 1 are one level: under `xsched` alone
//!   no task outranks another, and this test says so (no mark, no suspension).
//!
//! Needs, in the same target directory: this crate's cdylib, `libpreempt_hip.so`
//! (hip-interpose), `libhip_standin.so` (hip-standin) and `preempt-host-worker` (host-device):
//! `cargo test --workspace` builds them, or `cargo build -p hip-interpose -p hip-standin -p host-device`.
mod support;
use hip_testkit::wait_bounded;
use preempt_hip::exit_line::ExitLine;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{lib_dir, on_standin};

/// Timed requests per task: enough that every task overlaps the others.
const REQUESTS: usize = 8;
/// The script's tasks and their XSched priorities, in its order.
const TASKS: [(&str, i32); 6] = [
    ("Task-High-1", 3),
    ("Task-High-2", 3),
    ("Task-Norm-1", 2),
    ("Task-Norm-2", 2),
    ("Task-Low-1", 1),
    ("Task-Low-2", 1),
];

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/xsched_seed002")
        .join(rel)
}

/// One task's summary line and latencies, as the script prints them.
struct Task {
    name: String,
    priority: i32,
    latencies: Vec<f64>,
}

/// A `== mode: ...` section of the script's output.
struct Section {
    mode: String,
    tasks: Vec<Task>,
}

struct Report {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    sections: Vec<Section>,
}

impl Report {
    fn section(&self, mode: &str) -> &Section {
        self.sections
            .iter()
            .find(|s| s.mode == mode)
            .unwrap_or_else(|| panic!("no {mode} section; stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }

    fn exit_line(&self) -> ExitLine {
        ExitLine::find(&self.stderr)
            .unwrap_or_else(|| panic!("no exit line of the interposer; stderr:\n{}", self.stderr))
    }
}

/// Reads the summary: `== MODE: ...` headers, `NAME prio P n=N ...` lines, each followed by
/// `  latencies: x x ...`.
fn parse(stdout: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("== ") {
            let mode = rest.split(':').next().unwrap_or_default().to_string();
            sections.push(Section {
                mode,
                tasks: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("  latencies: ") {
            let task = sections
                .last_mut()
                .and_then(|s| s.tasks.last_mut())
                .expect("latencies follow a task line");
            task.latencies = rest.split_whitespace().map(|x| x.parse().expect("a latency")).collect();
        } else if line.starts_with("Task-") {
            let w: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(w.get(1), Some(&"prio"), "a task line: {line}");
            let s = sections.last_mut().expect("a task line follows a header");
            s.tasks.push(Task {
                name: w[0].to_string(),
                priority: w[2].parse().expect("a priority"),
                latencies: Vec::new(),
            });
        }
    }
    sections
}

/// Whether python3 runs here (with ctypes); prints why not.
fn python3() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import ctypes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("seed_002: SKIPPED: python3 (with ctypes) is not installed here");
    }
    ok
}

/// The script, unchanged, with `--test MODE --requests REQUESTS`.
fn run(mode: &str, preload: bool) -> Option<Report> {
    if !python3() {
        return None;
    }
    let mut c = Command::new("python3");
    c.arg(example("test_xsched_integration.py"))
        .args(["--test", mode, "--requests", &REQUESTS.to_string()])
        .env("PYTHONPATH", example("standin_torch"))
        // No __pycache__ written into the repository.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("XSCHED_LIB_PATH", lib_dir());
    on_standin(&mut c, preload);
    let out = wait_bounded(c.spawn().expect("python3 starts"), Duration::from_secs(120), mode);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Some(Report {
        code: out.status.code(),
        sections: parse(&stdout),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Exit 0, the stand-in torch in use (not a PyTorch found on the path), and in each of `modes`
/// the six tasks with their priorities, each with every request timed.
fn check_complete(r: &Report, modes: &[&str]) {
    assert_eq!(r.code, Some(0), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("torch (stand-in, not PyTorch)") && r.stderr.contains("host figures"),
        "the stand-in torch says what it is; stderr:\n{}",
        r.stderr
    );
    assert_eq!(r.sections.len(), modes.len(), "stdout:\n{}", r.stdout);
    for mode in modes {
        let s = r.section(mode);
        let got: Vec<(&str, i32)> = s.tasks.iter().map(|t| (t.name.as_str(), t.priority)).collect();
        assert_eq!(got, TASKS, "{mode}: stdout:\n{}", r.stdout);
        for t in &s.tasks {
            assert_eq!(t.latencies.len(), REQUESTS, "{mode} {}: stdout:\n{}", t.name, r.stdout);
            assert!(
                t.latencies.iter().all(|x| x.is_finite() && *x > 0.0),
                "{mode} {}: {:?}",
                t.name,
                t.latencies
            );
        }
    }
}

/// The line xsched-compat prints when XHintPriority finds no interposer.
fn refusals(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.starts_with("xsched-compat:") && l.contains("LD_PRELOAD="))
        .count()
}

#[test]
fn baseline_runs_every_task_without_xsched() {
    let Some(r) = run("baseline", false) else { return };
    check_complete(&r, &["baseline"]);
    assert!(!r.stderr.contains("preempt-hip"), "no interposer, no line of it");
    assert!(!r.stderr.contains("xsched-compat:"), "no XSched call was refused");
}

#[test]
fn xsched_under_the_interposer_takes_every_call_and_runs_every_task() {
    let Some(r) = run("xsched", true) else { return };
    check_complete(&r, &["xsched"]);
    assert_eq!(
        refusals(&r.stderr),
        0,
        "XHintPriority reached the interposer; stderr:\n{}",
        r.stderr
    );
    // The stand-in torch's calls pass through the interposer as PyTorch's do: it took the six
    // streams over, and knew each one XHintPriority named.
    let own = r
        .stderr
        .lines()
        .filter(|l| l.ends_with("has a queue of its own"))
        .count();
    assert_eq!(own, 6, "stderr:\n{}", r.stderr);
    assert!(
        !r.stderr.contains("not known to the interposer"),
        "stderr:\n{}",
        r.stderr
    );
    let ExitLine {
        marks,
        suspends,
        resumes,
        failures,
        ..
    } = r.exit_line();
    assert_eq!(failures, 0, "stderr:\n{}", r.stderr);
    // 3, 2 and 1 are three levels: every request of the four tasks at 3 and 2 (each task's
    // untimed first one included) outranks a less urgent task's stream and is marked; the two
    // at 1 outrank none. The less urgent streams are suspended for them, and resumed.
    assert_eq!(marks, 4 * (REQUESTS as u64 + 1), "stderr:\n{}", r.stderr);
    assert!(suspends >= 1, "stderr:\n{}", r.stderr);
    assert_eq!(suspends, resumes, "stderr:\n{}", r.stderr);
}

#[test]
fn both_under_the_interposer_the_hinted_streams_outrank_the_baseline_ones() {
    let Some(r) = run("both", true) else { return };
    check_complete(&r, &["baseline", "xsched"]);
    assert_eq!(refusals(&r.stderr), 0, "stderr:\n{}", r.stderr);
    let ExitLine {
        marks,
        suspends,
        resumes,
        failures,
        ..
    } = r.exit_line();
    // Every request of the XSched phase (each task's untimed first one included) ran on a stream
    // that XHintPriority raised above the baseline's six, which still exist at HIP 0 (PyTorch
    // never destroys its streams): one mark each. Without the hints none would be marked.
    assert_eq!(marks, 6 * (REQUESTS as u64 + 1), "stderr:\n{}", r.stderr);
    assert!(
        suspends >= 1,
        "the baseline streams were suspended; stderr:\n{}",
        r.stderr
    );
    assert_eq!(
        suspends, resumes,
        "everything suspended was resumed; stderr:\n{}",
        r.stderr
    );
    assert_eq!(failures, 0);
}

#[test]
fn xsched_without_the_interposer_completes_and_says_what_is_needed() {
    let Some(r) = run("xsched", false) else { return };
    check_complete(&r, &["xsched"]);
    assert_eq!(
        refusals(&r.stderr),
        1,
        "one line says what is needed; stderr:\n{}",
        r.stderr
    );
    assert!(r.stderr.contains("libpreempt_hip.so"));
    assert!(ExitLine::find(&r.stderr).is_none());
}
