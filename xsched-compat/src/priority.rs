//! XSched's priority on HIP's scale.
//!
//! XSched: `int32_t`, a larger number is more urgent (`PRIORITY_MIN` -255 to `PRIORITY_MAX` 255,
//! `PRIORITY_DEFAULT` 0). HIP on AMD: three levels, a smaller number is more urgent (-1, 0, 1;
//! docs/interposer.md#priority-the-programs-own-words). The mapping is by sign: above the default
//! is HIP's most urgent, the default is normal, below it the least urgent.
//!
//! Why by sign and not by rank among the process's queues: a rank would change a stream's HIP
//! level whenever another queue is created, re-prioritised or destroyed (so one call would
//! re-prioritise streams it never named), and it would mean different things in different
//! processes, while the interposer's daemon compares HIP levels across processes. By sign, a
//! queue's level depends on its own number only, the same in every process, and the mapping is
//! monotone: a more urgent XSched priority never gets a less urgent HIP one. What is lost: two
//! positive priorities (say 1 and 2) are the same HIP level and do not preempt each other.
//! `PRIORITY_NO_EXECUTE` is the least urgent level: still executed (docs say so).
use crate::types::{PRIORITY_MAX, PRIORITY_NO_EXECUTE};

/// HIP's most urgent, normal and least urgent priorities.
pub const HIP_HIGH: i32 = -1;
pub const HIP_NORMAL: i32 = 0;
pub const HIP_LOW: i32 = 1;

/// Whether `p` is a priority XSched accepts (`PRIORITY_NO_EXECUTE` to `PRIORITY_MAX`).
pub fn valid(p: i32) -> bool {
    (PRIORITY_NO_EXECUTE..=PRIORITY_MAX).contains(&p)
}

/// The HIP priority for XSched's `p`.
pub fn to_hip(p: i32) -> i32 {
    match p.cmp(&0) {
        std::cmp::Ordering::Greater => HIP_HIGH,
        std::cmp::Ordering::Equal => HIP_NORMAL,
        std::cmp::Ordering::Less => HIP_LOW,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{PRIORITY_DEFAULT, PRIORITY_MIN};

    #[test]
    fn monotone_and_by_sign() {
        // A larger XSched number (more urgent) never maps to a larger HIP number (less urgent).
        for p in PRIORITY_NO_EXECUTE..PRIORITY_MAX {
            assert!(to_hip(p + 1) <= to_hip(p), "{p}");
        }
        assert_eq!(to_hip(PRIORITY_MAX), HIP_HIGH);
        assert_eq!(to_hip(1), HIP_HIGH);
        assert_eq!(to_hip(PRIORITY_DEFAULT), HIP_NORMAL);
        assert_eq!(to_hip(-1), HIP_LOW);
        assert_eq!(to_hip(PRIORITY_MIN), HIP_LOW);
        assert_eq!(to_hip(PRIORITY_NO_EXECUTE), HIP_LOW);
        assert!(valid(PRIORITY_NO_EXECUTE) && valid(PRIORITY_MAX));
        assert!(!valid(PRIORITY_NO_EXECUTE - 1) && !valid(PRIORITY_MAX + 1));
    }
}
