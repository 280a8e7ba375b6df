//! Lv1, where a device has no Lv3 (forced here with `PREEMPT_LEVEL=1` on the stand-in, whose
//! streams could be stopped at Lv3): the low stream's launches wait on the host while a
//! request is in flight, at most `PREEMPT_LV1_THRESHOLD` of its commands are on the device, and
//! the same unmodified program still completes every LP command exactly once, with and without
//! the high stream waiting on a low stream's event. Host figures are not asserted.
mod support;
use std::time::Duration;
use support::settled;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn at_lv1_the_low_streams_launches_are_held_and_no_lp_command_is_lost_or_deadlocked() {
    for extra in [&[][..], &["--hp-waits-on-lp"][..]] {
        let mut args = vec!["--lp", "30", "--lp-ms", "5", "--hp", "10", "--gap-ms", "3"];
        args.extend_from_slice(extra);
        let mut c = support::command(true, &args);
        c.env("PREEMPT_LEVEL", "1")
            .env("PREEMPT_LV1_THRESHOLD", "2")
            .env("PREEMPT_STANDIN_CUS", "exclusive");
        let r = support::finish(c.spawn().unwrap(), LIMIT);
        assert_eq!(r.code, Some(0), "{extra:?} stderr:\n{}", r.stderr);
        assert_eq!(r.get("lp_exactly_once"), 30.0, "{extra:?}: every LP command once");
        assert!(
            r.stderr
                .contains("is preemptible at Lv1 (at most 2 commands on the device)"),
            "{extra:?}: the low stream was taken over at Lv1:\n{}",
            r.stderr
        );
        assert!(
            !r.stderr.contains("has a queue of its own"),
            "{extra:?}: no Lv3 stream at PREEMPT_LEVEL=1:\n{}",
            r.stderr
        );
        let e = settled(&r.stderr, &format!("{extra:?}"));
        assert!(e.marks >= 10, "{extra:?}: a mark per HP submission: {}", e.marks);
        assert!(e.suspends >= 1, "{extra:?}: the LP stream was held for the requests");
    }
}

#[test]
fn an_lv1_setting_that_does_not_parse_leaves_the_program_alone() {
    let mut c = support::command(true, &["--lp", "4", "--lp-ms", "1", "--hp", "2"]);
    c.env("PREEMPT_LV1_THRESHOLD", "0");
    let r = support::finish(c.spawn().unwrap(), LIMIT);
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_exactly_once"), 4.0);
    assert!(
        r.stderr
            .contains("PREEMPT_LV1_THRESHOLD=\"0\": expected a number from 1 to 1024; the interposer is off"),
        "one line naming the setting:\n{}",
        r.stderr
    );
}
