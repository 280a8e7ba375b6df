//! XSched's C types and their numbers, written from the declarations of
//! `include/xsched/types.h` (XpuOS/xsched at bd494cb7a72958cd11900243a0798df00d856c6e). C
//! enums are `int`; values arriving from C are read as integers and checked, never as Rust
//! enums (an out-of-range enum value would be undefined behaviour).

/// `XResult`: what every call returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XResult {
    Success = 0,
    ErrorHardware = 1,
    ErrorInvalidValue = 2,
    ErrorNotFound = 3,
    ErrorNotAllowed = 4,
    ErrorNotSupported = 5,
    ErrorBadResponse = 6,
    ErrorUnknown = 999,
}

/// `XQueueHandle`, `HwQueueHandle`: `uint64_t`.
pub type Handle = u64;

/// `XPreemptLevel`: `kPreemptLevelBlock` (Lv1).
pub const PREEMPT_LEVEL_BLOCK: i64 = 1;
/// `kPreemptLevelDeactivate` (Lv2).
pub const PREEMPT_LEVEL_DEACTIVATE: i64 = 2;
/// `kPreemptLevelInterrupt` (Lv3): what every queue here gets.
pub const PREEMPT_LEVEL_INTERRUPT: i64 = 3;

/// `XQueueCreateFlag`: `kQueueCreateFlagBlockingSubmit`, the only flag.
pub const QUEUE_CREATE_FLAG_BLOCKING_SUBMIT: i64 = 0x1;

/// `XSchedulerType`: `kSchedulerAppManaged`.
pub const SCHEDULER_APP_MANAGED: i32 = 1;
/// `kSchedulerLocal`: the policy runs in the process.
pub const SCHEDULER_LOCAL: i32 = 2;
/// `kSchedulerGlobal`: XSched's daemon schedules (here: the interposer's daemon, preempt-sched).
pub const SCHEDULER_GLOBAL: i32 = 3;

/// `XPolicyType`: `kPolicyHighestPriorityFirst`, 1 in every XSched version (the other policies'
/// numbers changed in 1.2.0, so none of them is named here).
pub const POLICY_HIGHEST_PRIORITY_FIRST: i32 = 1;

/// `Priority` (`int32_t`, a larger number is more urgent): `PRIORITY_NO_EXECUTE`.
pub const PRIORITY_NO_EXECUTE: i32 = -256;
/// `PRIORITY_MIN`.
pub const PRIORITY_MIN: i32 = -255;
/// `PRIORITY_DEFAULT`.
pub const PRIORITY_DEFAULT: i32 = 0;
/// `PRIORITY_MAX`.
pub const PRIORITY_MAX: i32 = 255;

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers as `include/xsched/types.h` declares them (the commit above): a program
    /// written for XSched compares against these.
    #[test]
    fn numbers_are_xscheds() {
        let codes = [
            (XResult::Success, 0),
            (XResult::ErrorHardware, 1),
            (XResult::ErrorInvalidValue, 2),
            (XResult::ErrorNotFound, 3),
            (XResult::ErrorNotAllowed, 4),
            (XResult::ErrorNotSupported, 5),
            (XResult::ErrorBadResponse, 6),
            (XResult::ErrorUnknown, 999),
        ];
        for (c, n) in codes {
            assert_eq!(c as i32, n, "{c:?}");
        }
        assert_eq!(std::mem::size_of::<XResult>(), std::mem::size_of::<std::ffi::c_int>());
        assert_eq!(
            (PREEMPT_LEVEL_BLOCK, PREEMPT_LEVEL_DEACTIVATE, PREEMPT_LEVEL_INTERRUPT),
            (1, 2, 3)
        );
        assert_eq!((SCHEDULER_APP_MANAGED, SCHEDULER_LOCAL, SCHEDULER_GLOBAL), (1, 2, 3));
        assert_eq!(POLICY_HIGHEST_PRIORITY_FIRST, 1);
        assert_eq!(
            (PRIORITY_NO_EXECUTE, PRIORITY_MIN, PRIORITY_DEFAULT, PRIORITY_MAX),
            (-256, -255, 0, 255)
        );
    }
}
