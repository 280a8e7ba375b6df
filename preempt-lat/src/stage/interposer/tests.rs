use super::*;
use setup::Missing;

fn line(p50: f64, p99: f64, lp: u64) -> ProgramLine {
    ProgramLine {
        hp_requests: 15,
        hp_p50_us: p50,
        hp_p99_us: p99,
        hp_max_us: p99,
        lp_commands: lp,
        lp_exactly_once: lp,
        lp_bad: 0,
    }
}

fn rec(mode: Mode, l: ProgramLine) -> RunRecord {
    RunRecord {
        mode,
        command: String::new(),
        ended: "exit status: 0".into(),
        exit: Some(0),
        seconds: 0.5,
        line: Some(l),
        line_error: None,
        interposer: (mode == Mode::With).then_some(ExitLine {
            pid: 7,
            marks: 15,
            suspends: 15,
            resumes: 15,
            failures: 0,
        }),
        interposer_lines: Vec::new(),
        stderr_last: String::new(),
    }
}

/// Figures of a host run (docs/interposer.md's exclusive rows, in small).
fn good() -> Vec<RunRecord> {
    vec![
        rec(Mode::Alone, line(1219.0, 3615.0, 0)),
        rec(Mode::Without, line(16430.0, 19857.0, 30)),
        rec(Mode::With, line(1345.0, 4247.0, 30)),
    ]
}

#[test]
fn three_good_runs_pass_with_their_figures() {
    let w = Workload::HOST_QUICK;
    let r = judge(&good(), &w, true).unwrap();
    assert_eq!(
        r,
        "host figures (stand-in runtime, kernels filling the device): HP P50/P99 us alone 1219/3615, without the \
         interposer 16430/19857, with it 1345/4247 (P50 0.08x without); 15 suspends, as many resumes, 0 failures, \
         15 marks; every LP command exactly once (30 of 20 ms)"
    );
    let gpu = judge(&good(), &w, false).unwrap();
    assert!(gpu.starts_with("HP P50/P99 us alone"), "{gpu}");
    assert!(gpu.contains("(P99 0.21x without)"), "a GPU compares P99: {gpu}");
    // The record as the archive holds it: the line's figures beside the run's.
    let v = serde_json::to_value(&good()[2]).unwrap();
    assert_eq!(
        (v["mode"].as_str(), v["hp_p99_us"].as_f64()),
        (Some("with"), Some(4247.0))
    );
    assert_eq!(v["interposer"]["suspends"], 15);
}

#[test]
fn each_check_fails_with_its_reason() {
    let w = Workload::HOST_QUICK;
    let fails = |edit: &dyn Fn(&mut Vec<RunRecord>)| {
        let mut runs = good();
        edit(&mut runs);
        judge(&runs, &w, true).unwrap_err()
    };
    let e = fails(&|r| {
        r[1].exit = Some(3);
        r[1].ended = "exit status: 3".into();
        r[1].stderr_last = "two_priorities: hipModuleLoad(&mod, path) failed: hipErrorInvalidImage".into();
    });
    assert_eq!(
        e,
        "without: the program ended exit status: 3; its stderr: two_priorities: hipModuleLoad(&mod, path) failed: \
         hipErrorInvalidImage"
    );
    let e = fails(&|r| {
        if let Some(l) = r[2].line.as_mut() {
            l.lp_exactly_once = 29;
            l.lp_bad = 1;
        }
    });
    assert_eq!(e, "with: 29 of 30 LP commands completed exactly once, 1 did not");
    let e = fails(&|r| {
        r[0].line = None;
        r[0].line_error = Some("no key=value line (hp_requests=...) on its stdout".into());
    });
    assert_eq!(e, "alone: no key=value line (hp_requests=...) on its stdout");
    let e = fails(&|r| r[2].interposer = None);
    assert!(e.starts_with("with: no exit line of the interposer"), "{e}");
    for (s, res, f) in [(0, 0, 0), (3, 2, 0), (3, 3, 1)] {
        let e = fails(&|r| {
            r[2].interposer = Some(ExitLine {
                pid: 1,
                marks: 15,
                suspends: s,
                resumes: res,
                failures: f,
            });
        });
        assert!(
            e.starts_with(&format!(
                "with: the interposer made {s} suspends, {res} resumes, {f} failures"
            )),
            "{e}"
        );
    }
    let e = fails(&|r| {
        if let Some(l) = r[2].line.as_mut() {
            l.hp_p50_us = 16430.0;
        }
    });
    assert!(
        e.starts_with(
            "host figures (stand-in runtime, kernels filling the device): HP P50 with the interposer is not below"
        ),
        "{e}"
    );
}

/// One slow request of 15 makes a host run's P99 its maximum: it does not decide the host's
/// verdict, while a GPU's P99 does.
#[test]
fn a_tail_worse_under_the_interposer_fails_a_gpu_and_not_the_host() {
    let mut runs = good();
    if let Some(l) = runs[2].line.as_mut() {
        l.hp_p99_us = 24600.0;
    }
    let w = Workload::HOST_QUICK;
    let host = judge(&runs, &w, true).unwrap();
    assert!(host.contains("with it 1345/24600 (P50 0.08x without)"), "{host}");
    let gpu = judge(&runs, &w, false).unwrap_err();
    assert!(
        gpu.starts_with("HP P99 with the interposer is not below the run without it"),
        "{gpu}"
    );
}

#[test]
fn a_missing_prerequisite_is_skip_on_the_host_and_fail_on_a_gpu() {
    let missing = || {
        Err(Problem::Missing(Missing::NotBuilt {
            files: vec![setup::INTERPOSER_LIB.into()],
            dir: "/t/release".into(),
            command: "cargo build --release -p hip-interpose".into(),
        }))
    };
    let want =
        "libpreempt_hip.so not built (not in /t/release nor its deps/): `cargo build --release -p hip-interpose`";
    let host = result(missing(), true, serde_json::Value::Null);
    assert_eq!((host.status, host.reason.as_str()), (Status::Skip, want));
    let gpu = result(missing(), false, serde_json::Value::Null);
    assert_eq!((gpu.status, gpu.reason.as_str()), (Status::Fail, want));
    let cc = result(
        Err(Problem::Missing(Missing::Compiler {
            provides: setup::HOST_PROVIDES,
        })),
        true,
        serde_json::Value::Null,
    );
    assert_eq!(
        cc.reason,
        "no C compiler: `cc` is not on PATH (`sudo scripts/install-deps.sh build` installs gcc and libamdhip64-dev)"
    );
    let failed = result(Err(Problem::Failed(Error::msg("x"))), true, serde_json::Value::Null);
    assert_eq!((failed.status, failed.reason.as_str()), (Status::Fail, "x"));
    assert_eq!(
        result(Ok("y".into()), false, serde_json::Value::Null).status,
        Status::Pass
    );
}
