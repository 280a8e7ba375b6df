//! The C entry points, with XSched's declarations (include/xsched/xqueue.h, hint.h and
//! platforms/hip/hal/include/xsched/hip/hal/hal.h of XpuOS/xsched): each checks the caller's
//! out-pointer, calls the safe layer (`crate::api`) and writes the result.
//!
//! # Safety (every entry point)
//! Handles are numbers looked up in the process's tables, never dereferenced; `hipStream_t` is
//! passed to the interposer as a handle too. The only memory touched is an out-parameter, after
//! checking that it is not null; a non-null out-parameter must point to a writable `uint64_t`,
//! as XSched's headers require. A panic never crosses into C: it returns `kXSchedErrorUnknown`.
mod interposer;

use crate::api::{self, Compat};
use crate::types::{Handle, XResult};
use std::ffi::{c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f` on the process's state; a panic becomes `kXSchedErrorUnknown`.
fn guard(f: impl FnOnce(&'static Compat) -> XResult) -> XResult {
    catch_unwind(AssertUnwindSafe(|| f(api::global()))).unwrap_or(XResult::ErrorUnknown)
}

/// Writes a new handle to the caller's out-parameter.
///
/// # Safety
/// `out` is null (refused) or points to a writable `uint64_t`.
unsafe fn put(out: *mut Handle, r: Result<Handle, XResult>) -> XResult {
    match r {
        Ok(h) => {
            // SAFETY: not null (checked by every caller before `r` was made); the caller's
            // out-parameter (this function's contract). Unaligned writes are allowed for.
            unsafe { out.write_unaligned(h) };
            XResult::Success
        }
        Err(e) => e,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn XHintSetScheduler(scheduler: c_int, policy: c_int) -> XResult {
    guard(|c| c.set_scheduler(scheduler, policy))
}

/// # Safety
/// `hwq` is null or points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HipQueueCreate(hwq: *mut Handle, stream: *mut c_void) -> XResult {
    if hwq.is_null() {
        return XResult::ErrorInvalidValue;
    }
    // SAFETY: not null; the caller's out-parameter.
    guard(|c| unsafe { put(hwq, c.hip_queue_create(stream as usize)) })
}

#[unsafe(no_mangle)]
pub extern "C" fn HwQueueDestroy(hwq: Handle) -> XResult {
    guard(|c| c.hw_queue_destroy(hwq))
}

/// # Safety
/// `xq` is null or points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn XQueueCreate(xq: *mut Handle, hwq: Handle, level: i64, flags: i64) -> XResult {
    if xq.is_null() {
        return XResult::ErrorInvalidValue;
    }
    // SAFETY: not null; the caller's out-parameter.
    guard(|c| unsafe { put(xq, c.xqueue_create(hwq, level, flags)) })
}

/// # Safety
/// `xq` is null or points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn XQueueGet(xq: *mut Handle, hwq: Handle) -> XResult {
    if xq.is_null() {
        return XResult::ErrorInvalidValue;
    }
    // SAFETY: not null; the caller's out-parameter.
    guard(|c| unsafe { put(xq, c.xqueue_get(hwq)) })
}

#[unsafe(no_mangle)]
pub extern "C" fn XQueueDestroy(xq: Handle) -> XResult {
    guard(|c| c.xqueue_destroy(xq))
}

#[unsafe(no_mangle)]
pub extern "C" fn XQueueSetPreemptLevel(xq: Handle, level: i64) -> XResult {
    guard(|c| c.set_preempt_level(xq, level))
}

#[unsafe(no_mangle)]
pub extern "C" fn XQueueSetLaunchConfig(xq: Handle, threshold: i64, batch_size: i64) -> XResult {
    guard(|c| c.set_launch_config(xq, threshold, batch_size))
}

#[unsafe(no_mangle)]
pub extern "C" fn XHintPriority(xq: Handle, prio: i32) -> XResult {
    guard(|c| c.hint_priority(interposer::get(), xq, prio))
}

#[unsafe(no_mangle)]
pub extern "C" fn XQueueSuspend(xq: Handle, _flags: i64) -> XResult {
    guard(|c| c.suspend_or_resume(xq))
}

#[unsafe(no_mangle)]
pub extern "C" fn XQueueResume(xq: Handle, _flags: i64) -> XResult {
    guard(|c| c.suspend_or_resume(xq))
}
