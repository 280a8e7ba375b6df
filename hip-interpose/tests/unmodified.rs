//! An unmodified HIP program (examples/hip/two_priorities.c: two streams at HIP's two extreme
//! priorities) on the stand-in runtime, with and without the interposer. The stand-in's streams
//! are worker processes, so the interposer's suspensions stop real processes: every LP command
//! must still complete exactly once. Host figures; the HP latency comparison is a benchmark
//! (scripts/bench-interposer.sh), not asserted here.
mod support;
use std::time::Duration;
use support::{exit_line, run};

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn the_interposer_suspends_the_low_stream_for_each_request_and_loses_no_lp_command() {
    let r = run(
        true,
        &["--lp", "40", "--lp-ms", "10", "--hp", "20", "--gap-ms", "5"],
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(
        r.get("lp_exactly_once"),
        40.0,
        "every LP command completed exactly once"
    );
    assert!(
        r.stderr.contains("has a queue of its own"),
        "the low stream was taken over:\n{}",
        r.stderr
    );
    let support::ExitLine {
        marks,
        suspends,
        resumes,
        failures,
        ..
    } = exit_line(&r.stderr);
    assert_eq!(marks, 20, "one mark per HP request");
    assert!(
        (1..=20).contains(&suspends),
        "the LP stream stopped for the requests: {suspends}"
    );
    assert_eq!(suspends, resumes, "everything suspended was resumed");
    assert_eq!(failures, 0);
}

#[test]
fn without_the_interposer_the_same_program_runs_unscheduled() {
    let r = run(
        false,
        &["--lp", "10", "--lp-ms", "10", "--hp", "5", "--gap-ms", "5"],
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_exactly_once"), 10.0);
    assert!(!r.stderr.contains("preempt-hip"), "no interposer, no line of it");
}

#[test]
fn a_high_stream_waiting_on_a_low_streams_event_is_not_deadlocked() {
    // The first HP request waits (hipStreamWaitEvent) on an event recorded on the LP stream
    // after its first command: suspending LP for that request would wait forever
    // (hip-standin's tests show that wait). The interposer resumes LP until the event completes.
    let r = run(
        true,
        &[
            "--lp",
            "20",
            "--lp-ms",
            "10",
            "--hp",
            "10",
            "--gap-ms",
            "5",
            "--hp-waits-on-lp",
        ],
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_exactly_once"), 20.0);
    let support::ExitLine {
        suspends,
        resumes,
        failures,
        ..
    } = exit_line(&r.stderr);
    assert_eq!((suspends, failures), (resumes, 0));
}

#[test]
fn interposer_off_and_bad_settings_pass_every_call_through() {
    let mut c = support::command(true, &["--lp", "5", "--lp-ms", "5", "--hp", "3"]);
    c.env("PREEMPT_GRANULARITY", "thread");
    let out = hip_testkit::wait_bounded(c.spawn().unwrap(), LIMIT, "bad setting run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("PREEMPT_GRANULARITY=\"thread\": expected stream or process; the interposer is off"),
        "one line says why:\n{err}"
    );
    let mut c = support::command(true, &["--lp", "5", "--lp-ms", "5", "--hp", "3"]);
    c.env("PREEMPT_INTERPOSE", "0");
    let out = hip_testkit::wait_bounded(c.spawn().unwrap(), LIMIT, "off run");
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("preempt-hip"));
}

#[test]
fn with_kernels_that_fill_the_device_suspension_frees_it_and_nothing_is_lost() {
    // PREEMPT_STANDIN_CUS=exclusive: one kernel at a time, as delay kernels that occupy every CU
    // of a GPU; a suspended LP kernel gives the CUs up and takes them back after the request.
    // Plain and with the HP stream waiting on an LP event (the pin must resume LP onto the CUs).
    for extra in [&[][..], &["--hp-waits-on-lp"][..]] {
        let mut args = vec!["--lp", "30", "--lp-ms", "10", "--hp", "10", "--gap-ms", "3"];
        args.extend_from_slice(extra);
        let mut c = support::command(true, &args);
        c.env("PREEMPT_STANDIN_CUS", "exclusive");
        let r = support::finish(c.spawn().unwrap(), LIMIT);
        assert_eq!(r.code, Some(0), "{extra:?} stderr:\n{}", r.stderr);
        assert_eq!(r.get("lp_exactly_once"), 30.0, "{extra:?}");
        let support::ExitLine {
            suspends: s,
            resumes: res,
            failures: f,
            ..
        } = exit_line(&r.stderr);
        assert_eq!((s, f), (res, 0), "{extra:?}");
        assert!(s >= 1, "{extra:?}: the LP stream was suspended");
    }
}
