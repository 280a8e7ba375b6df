use super::python::{Chosen, answer};
use super::*;

fn ran(exit: i32) -> Ran {
    Ran {
        exit: Some(exit),
        ended: format!("exit status: {exit}"),
        stderr_last: String::new(),
    }
}

/// A host run's JSON as the example writes it: Phase 2 at lv1 and lv3, figures per level.
fn result(levels: &[&str]) -> Value {
    let mut by_level = serde_json::Map::new();
    let mut runs = json!({"test2": {"high": {"p99": 10.0}}});
    for (i, lv) in levels.iter().enumerate() {
        let k = 1.0 + i as f64;
        by_level.insert(
            lv.to_string(),
            json!({"high_p99_vs_test2": 0.5 * k, "low_high_p99": 3.0 * k, "throughput_loss_vs_test2": 0.05 * k,
                   "high_p99_vs_alone": 1.1, "low_high_p50": 2.0}),
        );
        runs[format!("phase2_{lv}")] = json!({"high": {"p99": 5.0 * k}, "low": {"p99": 15.0 * k}});
    }
    json!({"device": "host", "model": "stand-in: one delay command of 5 ms per request", "requests": 6,
           "levels": levels, "runs": runs, "summary_by_level": by_level, "exactly_once": true})
}

#[test]
fn a_run_that_exits_0_with_every_level_passes_with_its_figures() {
    let v = result(&["lv1", "lv3"]);
    let line = judge(&ran(0), Ok(&v), true).unwrap();
    assert_eq!(
        line,
        "host figures, stand-in: one delay command of 5 ms per request, 6 requests per replica: \
         lv1 high P99 0.50x the baseline's, low/high P99 3.00x, throughput lost 5.0 %; \
         lv3 high P99 1.00x the baseline's, low/high P99 6.00x, throughput lost 10.0 %; \
         every delay command exactly once"
    );
    let f = figures(&v);
    assert_eq!(f["lv3"]["high_p99_vs_baseline"], 1.0);
    assert_eq!(f["lv3"]["throughput_loss_percent"], 10.0);
    assert_eq!(
        (&f["lv1"]["high_p99_ms"], &f["lv1"]["baseline_high_p99_ms"]),
        (&json!(5.0), &json!(10.0))
    );
}

#[test]
fn a_level_the_example_skipped_says_why_and_one_with_no_figures_fails() {
    // BERT on a GPU: Lv1 skipped by the example itself, Lv3 judged.
    let mut v = result(&["lv3"]);
    v["levels"] = json!(["lv1", "lv3"]);
    v["model"] = json!("bert-large (...)");
    v["runs"]["phase2_lv1"] = json!({"skipped": "PyTorch's kernels do not pass through the LV1 launcher"});
    let line = judge(&ran(0), Ok(&v), false).unwrap();
    assert!(
        line.starts_with("bert-large (...), 6 requests per replica: lv3 high P99 0.50x"),
        "{line}"
    );
    assert!(
        line.ends_with("; lv1 skipped: PyTorch's kernels do not pass through the LV1 launcher"),
        "{line}"
    );
    assert_eq!(figures(&v)["lv1"]["skipped"], v["runs"]["phase2_lv1"]["skipped"]);
    // A level asked, neither judged nor skipped.
    v["runs"]["phase2_lv1"] = json!({});
    assert_eq!(
        judge(&ran(0), Ok(&v), false).unwrap_err(),
        "example5.json has no Phase 2 figures at lv1, nor why it was skipped"
    );
    // Every level skipped: nothing measured.
    let mut none = result(&[]);
    none["levels"] = json!(["lv3"]);
    none["runs"]["phase2_lv3"] = json!({"skipped": "no Lv3 here (why)"});
    assert_eq!(
        judge(&ran(0), Ok(&none), false).unwrap_err(),
        "Phase 2 ran at no level (lv3 skipped: no Lv3 here (why))"
    );
}

#[test]
fn the_exit_status_and_the_exactly_once_check_fail_the_stage() {
    let v = result(&["lv3"]);
    let mut r = ran(3);
    r.stderr_last = "FAILED: a stream's delay commands did not complete exactly once".into();
    let e = judge(&r, Ok(&v), true).unwrap_err();
    assert!(
        e.starts_with("a stream's delay commands did not complete exactly once (exit status 3); its stderr: FAILED"),
        "{e}"
    );
    let mut r = ran(1);
    r.stderr_last = "example5: DeviceError: no such device".into();
    assert_eq!(
        judge(&r, Ok(&v), false).unwrap_err(),
        "the example ended exit status: 1; its stderr: example5: DeviceError: no such device"
    );
    let missing = "No such file or directory (os error 2)".to_string();
    assert!(
        judge(&ran(0), Err(&missing), true)
            .unwrap_err()
            .contains("example5.json cannot be read")
    );
    let mut v = v;
    v["exactly_once"] = json!(false);
    assert!(judge(&ran(0), Ok(&v), true).is_err());
}

#[test]
fn the_python_is_preempt_python_when_set_else_python3() {
    let p = Chosen::from(Some("/opt/env/bin/python".into()));
    assert_eq!(p.named(), "PREEMPT_PYTHON=/opt/env/bin/python");
    assert!(p.from_env);
    for unset in [None, Some("".into())] {
        let p = Chosen::from(unset);
        assert_eq!((p.program.to_str(), p.from_env), (Some("python3"), false));
        assert_eq!(p.named(), "`python3` on PATH");
    }
}

#[test]
fn a_python_without_the_package_is_named_with_what_installs_it() {
    let p = Chosen::from(None);
    let found = answer(
        &p,
        true,
        "exit status: 0",
        "/usr/bin/python3\n3.11.7\n/v/preempt_kfd/__init__.py\n",
        "",
    );
    assert_eq!(found.unwrap().package, "/v/preempt_kfd/__init__.py");
    let err = answer(
        &p,
        false,
        "exit status: 1",
        "/usr/bin/python3\n3.11.7\n",
        "Traceback (most recent call last):\n  File \"<string>\", line 1\nModuleNotFoundError: No module named 'preempt_kfd'\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`python3` on PATH (/usr/bin/python3, Python 3.11.7) cannot import preempt_kfd (ModuleNotFoundError: No \
         module named 'preempt_kfd'): scripts/build-user.sh builds it and installs it into the active environment \
         (or set PREEMPT_PYTHON to a Python that has it)"
    );
    // Not a Python at all (a script that fails before saying who it is).
    let err = answer(
        &Chosen::from(Some("/x/py".into())),
        false,
        "exit status: 127",
        "",
        "sh: bad\n",
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("no Python to run Example 5: PREEMPT_PYTHON=/x/py cannot be started (exit status: 127: sh: bad); scripts/build-user.sh"),
        "{err}"
    );
}

/// The example's own command line: the stand-in on the host device (`--quick`: 6 requests after
/// 1), `auto` on a GPU (the seeds' 100 and 10 without `--quick`), JSON and SVG in the stage's
/// directory; the files written are the example's, byte for byte.
#[test]
fn the_example_runs_as_a_user_runs_it_in_the_stage_directory() {
    let dir = Path::new("/tmp/x");
    for dev in [DeviceSpec::HOST, DeviceSpec::Hip(1)] {
        for quick in [false, true] {
            let line: Vec<String> = args(dev, quick, dir)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let model = if dev.is_host() { "stand-in" } else { "auto" };
            let mut want: Vec<String> = [
                "/tmp/x/example5_inference.py",
                "--device",
                &dev.to_string(),
                "--model",
                model,
            ]
            .map(String::from)
            .into();
            match (dev.is_host(), quick) {
                (true, true) => want.extend(["--requests", "6", "--warmup", "1"].map(String::from)),
                (true, false) => want.extend(["--requests", "30", "--warmup", "3"].map(String::from)),
                (false, true) => want.extend(["--requests", "20", "--warmup", "2"].map(String::from)),
                (false, false) => {}
            }
            want.extend(["--json", "/tmp/x/example5.json", "--svg", "/tmp/x/example5.svg"].map(String::from));
            assert_eq!(line, want, "{dev} quick {quick}");
        }
    }
    // The files written are the example's, byte for byte.
    assert_eq!(
        SOURCES.map(|(name, _)| name),
        ["example5_inference.py", "example5_chart.py"]
    );
    assert!(SOURCES[0].1.contains("import preempt_kfd as pk"));
}
