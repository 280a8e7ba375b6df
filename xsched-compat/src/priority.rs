//! XSched's priority on the interposer's scale.
//!
//! XSched: `int32_t`, a larger number is more urgent (`PRIORITY_MIN` -255 to `PRIORITY_MAX` 255,
//! `PRIORITY_DEFAULT` 0). The interposer: HIP's sense, a smaller number is more urgent (HIP's own
//! calls have three levels, -1, 0 and 1; docs/interposer.md#priority-the-programs-own-words), and
//! for a library layered on it the range -255 to 255. The mapping is the negation: XSched's 3, 2
//! and 1 are the interposer's -3, -2 and -1, three levels that preempt one another as XSched's
//! programs expect, and XSched's 1 and -1 meet HIP's most and least urgent.
//!
//! Why by value and not by rank among the process's queues: a rank would change a stream's level
//! whenever another queue is created, re-prioritised or destroyed (so one call would
//! re-prioritise streams it never named), and it would mean different things in different
//! processes, while the interposer's daemon compares levels across processes. By value, a queue's
//! level depends on its own number only, the same in every process, and the mapping is one to
//! one and monotone. `PRIORITY_NO_EXECUTE` is the least urgent level, as `PRIORITY_MIN`: still
//! executed (docs say so).
use crate::types::{PRIORITY_MAX, PRIORITY_MIN, PRIORITY_NO_EXECUTE};

/// HIP's most urgent, normal and least urgent priorities (XSched's 1, 0 and -1).
pub const HIP_HIGH: i32 = -1;
pub const HIP_NORMAL: i32 = 0;
pub const HIP_LOW: i32 = 1;

/// Whether `p` is a priority XSched accepts (`PRIORITY_NO_EXECUTE` to `PRIORITY_MAX`).
pub fn valid(p: i32) -> bool {
    (PRIORITY_NO_EXECUTE..=PRIORITY_MAX).contains(&p)
}

/// The interposer's priority for XSched's `p` (a valid one: [`valid`]).
pub fn to_hip(p: i32) -> i32 {
    -p.max(PRIORITY_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PRIORITY_DEFAULT;

    #[test]
    fn every_level_kept_and_more_urgent_is_smaller() {
        // A larger XSched number (more urgent) always maps to a smaller one (more urgent), so
        // the seeds' 3, 2 and 1 stay three levels.
        for p in PRIORITY_MIN..PRIORITY_MAX {
            assert!(to_hip(p + 1) < to_hip(p), "{p}");
        }
        assert_eq!((to_hip(3), to_hip(2), to_hip(1)), (-3, -2, HIP_HIGH));
        assert_eq!(to_hip(PRIORITY_DEFAULT), HIP_NORMAL);
        assert_eq!(to_hip(-1), HIP_LOW);
        assert_eq!((to_hip(PRIORITY_MAX), to_hip(PRIORITY_MIN)), (-255, 255));
        assert_eq!(to_hip(PRIORITY_NO_EXECUTE), to_hip(PRIORITY_MIN), "still executed");
        assert!(valid(PRIORITY_NO_EXECUTE) && valid(PRIORITY_MAX));
        assert!(!valid(PRIORITY_NO_EXECUTE - 1) && !valid(PRIORITY_MAX + 1));
    }
}
