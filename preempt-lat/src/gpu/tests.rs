//! The GPU device's slot check feeding this crate's correctness tally.
use gpu_device::kernel::DELAY_TAG_MAGIC;
use gpu_device::verify::{Window, check_slots};
use gpu_device::{ClockMap, DelaySlot};

use crate::measure::Correctness;

/// 1 tick = 10 ns (100 MHz), tick 0 = host 0.
const MAP: ClockMap = ClockMap {
    anchor_ticks: 0,
    anchor_host_ns: 0.0,
    ns_per_tick: 10.0,
    late_bias_max_ns: 0.0,
};
const NB: u32 = 4;

fn ok(id: u64, s: u64, e: u64) -> DelaySlot {
    DelaySlot {
        start: s / 10,
        end: e / 10,
        blocks: NB,
        done: 1,
        tag: id ^ DELAY_TAG_MAGIC,
    }
}

#[test]
fn commands_ending_inside_a_suspension_fail_the_tally() {
    let slots = [ok(0, 0, 1000), ok(1, 1000, 1700), ok(2, 1750, 2500)];
    let c = check_slots(
        &slots,
        NB,
        &[Window {
            sample: 0,
            from_ns: 1500,
            to_ns: 1800,
        }],
        &MAP,
        10.0,
        false,
    );
    let m = Correctness::check(3, &[(0, true), (1, true), (2, true)], &c.records, 1);
    assert!(m.failed());
    assert_eq!(m.wrong_result, vec![1, 2]);
}

#[test]
fn incomplete_duplicated_wrong_tag_and_bad_stamps_reach_the_tally() {
    let mut dup = ok(1, 0, 100);
    dup.done = 2;
    let mut wrong = ok(2, 0, 100);
    wrong.tag = 7;
    let mut partial = ok(3, 0, 100);
    partial.blocks = 2;
    let backwards = DelaySlot {
        start: 50,
        end: 50,
        ..ok(4, 0, 0)
    };
    let slots = [DelaySlot::default(), dup, wrong, partial, backwards, ok(5, 0, 100)];
    let c = check_slots(&slots, NB, &[], &MAP, 0.0, false);
    let done: Vec<(u64, bool)> = (0..6).map(|i| (i, true)).collect();
    let m = Correctness::check(6, &done, &c.records, 1);
    assert!(m.failed());
    assert_eq!(m.missing, vec![0, 3]);
    assert_eq!(m.duplicated, vec![1]);
    assert_eq!(m.wrong_result, vec![2, 4]);
    assert_eq!(m.completed_once, 6);
}
