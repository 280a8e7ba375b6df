//! The C side: the HIP calls this library defines in front of the runtime's (`hooks`), and the
//! runtime's own functions found behind it ([`next`]). The only `unsafe` of the crate: calling
//! through function pointers found by name, and the program's raw arguments passed on.
//!
//! # Safety (every hook)
//! A hook is called by a program as the HIP function of its name, with that function's
//! contract; it passes every argument on unchanged to the runtime's definition, so the
//! runtime's own checks apply. Of the arguments, the interposer itself reads only handles as
//! numbers (never dereferenced) and, for stream creation, writes the out-parameter after
//! checking it is not null.
pub mod next;
mod hooks;

use std::ffi::c_void;

/// `hipError_t`.
pub type Code = i32;
/// A HIP handle (`hipStream_t`, `hipEvent_t`, `hipFunction_t`, ...).
pub type Raw = *mut c_void;

/// HIP's `dim3`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

extern "C" fn child_after_fork() {
    crate::interposer::forked();
}

extern "C" fn at_exit() {
    if let Some(ip) = crate::interposer::get() {
        ip.release_all();
    }
}

/// Registers the fork-child and exit handlers (once, from the interposer's start).
pub fn at_fork_and_exit() {
    // SAFETY: both handlers are plain functions that only touch atomics and the interposer's
    // own locks; registering them has no other effect.
    unsafe {
        libc::pthread_atfork(None, None, Some(child_after_fork));
        libc::atexit(at_exit);
    }
}
