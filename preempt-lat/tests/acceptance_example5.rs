//! `acceptance`'s example5 stage on the host device, run alone (`--only example5`). Always: a
//! Python that cannot import `preempt_kfd` (the system's python3 without its site directories,
//! named by `PREEMPT_PYTHON`) makes the stage SKIP with the line naming the Python and
//! scripts/build-user.sh, the example's scripts still archived, its targets N/A. When the
//! package is built into `target/py-venv` (scripts/check-python.sh builds it there; building it
//! takes minutes, too long for `cargo test`), also the PASS path with that venv's Python;
//! check-python.sh runs that path every time through preempt-py/tests/test_acceptance_example5.py.
//! Every run is bounded by the test.
mod common;

use common::only_stage::{self, members};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("acceptance-example5-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `acceptance --only example5` with `PREEMPT_PYTHON=python`: the summary and stderr.
fn accept(python: &Path, out: &Path) -> (Value, String) {
    let mut c = common::preempt_lat();
    c.env("PREEMPT_PYTHON", python);
    only_stage::run(c, "example5", out, LIMIT)
}

fn stage(summary: &Value) -> &Value {
    only_stage::stage(summary, "example5")
}

/// The device's Example 5 target rows: (scope, id, verdict).
fn targets(summary: &Value) -> Vec<(String, String, String)> {
    summary["devices"][0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["scope"].as_str().unwrap().starts_with("Example 5"))
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap().to_string();
            (s("scope"), s("id"), s("verdict"))
        })
        .collect()
}

fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name)).unwrap()
}

#[test]
fn without_the_package_the_stage_is_skipped_naming_the_python_and_build_user() {
    let dir = scratch("skip");
    // python3 with no site directories (-S): whatever is installed where, it cannot import the
    // package, and it still says who it is.
    let python = dir.join("python-without-site");
    std::fs::write(&python, "#!/bin/sh\nexec python3 -S \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t0 = Instant::now();
    let (s, stderr) = accept(&python, &dir.join("out"));
    let st = stage(&s);
    assert_eq!(st["status"], "SKIP", "{st}\n{stderr}");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("PREEMPT_PYTHON={} (", python.display())),
        "{reason}"
    );
    assert!(
        reason.contains(
            ") cannot import preempt_kfd (ModuleNotFoundError: No module named 'preempt_kfd'): scripts/build-user.sh \
             builds it and installs it into the active environment"
        ),
        "{reason}"
    );
    assert_eq!(s["ok"], true, "a SKIP fails nothing");
    assert!(t0.elapsed() < Duration::from_secs(30), "took {:?}", t0.elapsed());
    // The targets it would have measured: N/A with its reason, every level of the host device.
    let rows = targets(&s);
    assert_eq!(rows.len(), 9, "{rows:?}");
    assert!(rows.iter().all(|(_, _, v)| v == "N/A"), "{rows:?}");
    // The example as it is in examples/, archived with the import check's output.
    let archive = dir.join("out").join(s["archive"].as_str().unwrap());
    for name in ["example5_inference.py", "example5_chart.py"] {
        let got = members(&archive, &format!("-example5/{name}"));
        assert_eq!(got.len(), 1, "{name}");
        assert_eq!(got[0].1, example(name), "{name}");
    }
    let probe = members(&archive, "-example5/probe.stderr.txt");
    assert!(probe[0].1.contains("No module named 'preempt_kfd'"), "{}", probe[0].1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn with_the_package_built_into_the_venv_the_stage_passes_with_its_figures_judged() {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let python = target.join("py-venv/bin/python");
    let imports = Command::new(&python)
        .args(["-c", "import preempt_kfd"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !imports {
        eprintln!(
            "skipped: {} cannot import preempt_kfd (scripts/check-python.sh builds it; it runs this path itself)",
            python.display()
        );
        return;
    }
    let dir = scratch("pass");
    let t0 = Instant::now();
    let (s, stderr) = accept(&python, &dir);
    let took = t0.elapsed();
    let st = stage(&s);
    assert_eq!(st["status"], "PASS", "{st}\n{stderr}");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "host figures, stand-in: one delay command of 5 ms per request, 6 requests per replica: lv1 high P99 "
        ),
        "{reason}"
    );
    assert!(reason.ends_with("; every delay command exactly once"), "{reason}");
    let facts = &st["facts"];
    assert_eq!(facts["host_figures"], true);
    assert_eq!(facts["example"]["exit"], 0, "{facts}");
    for lv in ["lv1", "lv2", "lv3"] {
        let f = &facts["levels"][lv];
        for k in [
            "high_p99_vs_baseline",
            "low_high_p99",
            "throughput_loss_percent",
            "high_p99_ms",
        ] {
            assert!(f[k].as_f64().is_some(), "{lv} {k}: {f}");
        }
    }
    assert!(
        facts["python"]["found"]["package"]
            .as_str()
            .unwrap()
            .contains("preempt_kfd")
    );
    // Judged per level from example5.json: a verdict, never N/A.
    let rows = targets(&s);
    assert_eq!(rows.len(), 9, "{rows:?}");
    assert!(rows.iter().all(|(_, _, v)| v == "PASS" || v == "FAIL"), "{rows:?}");
    assert_eq!(st["results"].as_array().unwrap().len(), 1, "{st}");
    let archive = dir.join(s["archive"].as_str().unwrap());
    let json = members(&archive, "-example5/example5.json");
    let v: Value = serde_json::from_str(&json[0].1).unwrap();
    assert_eq!((v["device"].as_str(), v["requests"].as_u64()), (Some("host"), Some(6)));
    assert!(members(&archive, "-example5/example5.svg")[0].1.starts_with("<svg"));
    assert!(
        members(&archive, "__pycache__").is_empty(),
        "no bytecode in the archive"
    );
    eprintln!("example5 --quick on the host device: {took:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
