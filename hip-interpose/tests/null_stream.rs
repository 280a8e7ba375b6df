//! The null stream's work on a stream of the interposer's (`PREEMPT_NULL_STREAM=own`, the
//! default under `PREEMPT_PRIORITY=0|1`): the unmodified program with its low-priority work on
//! the null stream, as a program using only the default stream has it, suspended for its own
//! high-priority requests, and left alone by default.
mod support;
use std::time::Duration;
use support::{exit_line, settled};

const LIMIT: Duration = Duration::from_secs(120);

fn run(env: &[(&str, &str)], extra: &[&str]) -> hip_testkit::Run {
    let mut args = vec![
        "--lp-on-null",
        "--lp",
        "30",
        "--lp-ms",
        "10",
        "--hp",
        "10",
        "--gap-ms",
        "3",
    ];
    args.extend_from_slice(extra);
    let mut c = support::command(true, &args);
    c.env("PREEMPT_STANDIN_CUS", "exclusive");
    for (k, v) in env {
        c.env(k, v);
    }
    support::finish(c.spawn().unwrap(), LIMIT)
}

#[test]
fn the_default_streams_work_is_suspended_for_requests_and_none_is_lost() {
    for extra in [&[][..], &["--hp-waits-on-lp"][..]] {
        let r = run(&[("PREEMPT_NULL_STREAM", "own")], extra);
        assert_eq!(r.code, Some(0), "{extra:?} stderr:\n{}", r.stderr);
        assert_eq!(r.get("lp_exactly_once"), 30.0, "{extra:?}: every LP command once");
        assert!(
            r.stderr.contains("the null stream's work goes to stream"),
            "{extra:?}:\n{}",
            r.stderr
        );
        let s = settled(&r.stderr, &format!("{extra:?}")).suspends;
        assert!(s >= 1, "{extra:?}: the default stream's work was suspended");
    }
}

#[test]
fn a_program_declared_low_has_its_default_stream_taken_over_unless_told_to_keep_it() {
    let r = run(&[("PREEMPT_PRIORITY", "1")], &[]);
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert!(
        r.stderr.contains("the null stream's work goes to stream"),
        "{}",
        r.stderr
    );
    for env in [
        &[][..],
        &[("PREEMPT_PRIORITY", "1"), ("PREEMPT_NULL_STREAM", "keep")][..],
    ] {
        let r = run(env, &[]);
        assert_eq!(r.code, Some(0), "{env:?} stderr:\n{}", r.stderr);
        assert_eq!(r.get("lp_exactly_once"), 30.0);
        assert!(!r.stderr.contains("the null stream's work"), "{env:?}:\n{}", r.stderr);
        assert_eq!(
            exit_line(&r.stderr).suspends,
            0,
            "{env:?}: the null stream is never suspended"
        );
    }
}

#[test]
fn a_blocking_stream_sends_the_null_streams_work_back_after_its_work_so_far() {
    // HIP's legacy ordering binds a blocking stream to the null stream: from then on the null
    // stream's work stays there, and nothing launched before is lost or reordered.
    let r = run(&[("PREEMPT_NULL_STREAM", "own")], &["--blocking-stream"]);
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_exactly_once"), 30.0);
    assert!(
        r.stderr
            .contains("a blocking stream was made: the null stream's work goes to the null stream again, for HIP's legacy ordering\n"),
        "{}",
        r.stderr
    );
    settled(&r.stderr, "a blocking stream");
}
