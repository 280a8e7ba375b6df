//! The exported HIP calls. Each reads the caller's pointers (the only `unsafe` of this crate),
//! hands plain values to [`crate::runtime`], writes its out-parameters and returns a
//! `hipError_t`; a panic is caught and returned as `hipErrorUnknown`, never unwound into C.
//!
//! # Safety (every function here)
//! The caller keeps HIP's contract: out-parameters are valid for a write of their type (a
//! null one is refused with `hipErrorInvalidValue`), strings are NUL-terminated, host buffers
//! hold `sizeBytes`, `kernelParams` holds one pointer per kernel argument, each to a value of
//! the argument's size. Device pointers and handles are never dereferenced: they are looked up.
use crate::code::{self, Code};
use crate::runtime;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

mod calls;
mod launch;
mod memory;

thread_local! {
    static LAST: Cell<Code> = const { Cell::new(code::SUCCESS) };
}

/// Runs `f`, records a failure as the thread's last error, and returns its code.
fn guard(f: impl FnOnce() -> Result<(), Code>) -> Code {
    let c = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => code::SUCCESS,
        Ok(Err(c)) => c,
        Err(_) => code::UNKNOWN,
    };
    if c != code::SUCCESS {
        LAST.with(|l| l.set(c));
    }
    c
}

/// Writes `v` through the out-parameter `p`.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn out<T>(p: *mut T, v: T) -> Result<(), Code> {
    if p.is_null() {
        return Err(code::INVALID_VALUE);
    }
    // SAFETY: not null, and valid for a write by the caller's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// A handle as the number the runtime keys it by.
fn h(p: *mut c_void) -> usize {
    p as usize
}

/// A number as the handle the program holds.
fn ptr(h: usize) -> *mut c_void {
    h as *mut c_void
}

/// The stand-in's interface version: how the interposer knows it runs on the stand-in.
#[unsafe(no_mangle)]
pub extern "C" fn preempt_standin_version() -> c_uint {
    crate::STANDIN_VERSION
}

/// Suspends `stream` (host Lv3: its workers are stopped, the running kernel where it is).
#[unsafe(no_mangle)]
pub extern "C" fn preempt_standin_stream_suspend(stream: *mut c_void) -> Code {
    guard(|| runtime::get()?.stream(h(stream))?.suspend())
}

/// Resumes `stream`.
#[unsafe(no_mangle)]
pub extern "C" fn preempt_standin_stream_resume(stream: *mut c_void) -> Code {
    guard(|| runtime::get()?.stream(h(stream))?.resume())
}

/// Writes how many times `stream` was suspended and how many of those suspends found a kernel
/// running (started, not completed).
///
/// # Safety
/// `suspends` and `mid_kernel` are each null or valid for a write of a u64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_standin_stream_suspend_counts(
    stream: *mut c_void,
    suspends: *mut u64,
    mid_kernel: *mut u64,
) -> Code {
    guard(|| {
        let (all, mid) = runtime::get()?.stream(h(stream))?.suspend_counts();
        // SAFETY: valid for a write or null (refused), by the caller's contract.
        unsafe {
            out(suspends, all)?;
            out(mid_kernel, mid)
        }
    })
}

/// 1 if `stream` is suspended, 0 if not, -1 if it is no stream.
#[unsafe(no_mangle)]
pub extern "C" fn preempt_standin_stream_is_suspended(stream: *mut c_void) -> c_int {
    match runtime::get().and_then(|rt| rt.stream(h(stream))) {
        Ok(s) => c_int::from(s.is_suspended()),
        Err(_) => -1,
    }
}

/// Writes up to `cap` of `stream`'s worker pids to `pids`; returns how many it has (-1: no stream).
///
/// # Safety
/// `pids` is valid for `cap` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_standin_stream_pids(stream: *mut c_void, pids: *mut c_int, cap: usize) -> c_int {
    let Ok(s) = runtime::get().and_then(|rt| rt.stream(h(stream))) else {
        return -1;
    };
    let all = s.pids();
    if !pids.is_null() {
        for (i, p) in all.iter().take(cap).enumerate() {
            // SAFETY: i < cap, and `pids` holds `cap` by the caller's contract.
            unsafe { pids.add(i).write(*p) };
        }
    }
    c_int::try_from(all.len()).unwrap_or(c_int::MAX)
}

/// `hipGetErrorName`.
#[unsafe(no_mangle)]
pub extern "C" fn hipGetErrorName(e: Code) -> *const c_char {
    c_name(e)
}

/// `hipGetErrorString` (the stand-in's strings are the names).
#[unsafe(no_mangle)]
pub extern "C" fn hipGetErrorString(e: Code) -> *const c_char {
    c_name(e)
}

fn c_name(e: Code) -> *const c_char {
    // NUL-terminated copies of code::NAMES, made once.
    static NAMES: std::sync::OnceLock<Vec<(Code, std::ffi::CString)>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        code::NAMES
            .iter()
            .map(|(c, n)| (*c, std::ffi::CString::new(*n).unwrap_or_default()))
            .collect()
    });
    names
        .iter()
        .find(|(c, _)| *c == e)
        .or_else(|| names.iter().find(|(c, _)| *c == code::UNKNOWN))
        .map_or(std::ptr::null(), |(_, n)| n.as_ptr())
}

/// `hipGetLastError`: the thread's last error, then reset.
#[unsafe(no_mangle)]
pub extern "C" fn hipGetLastError() -> Code {
    LAST.with(|l| l.replace(code::SUCCESS))
}

/// `hipPeekAtLastError`.
#[unsafe(no_mangle)]
pub extern "C" fn hipPeekAtLastError() -> Code {
    LAST.with(Cell::get)
}
