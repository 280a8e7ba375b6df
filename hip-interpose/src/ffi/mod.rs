//! The runtime's side: its own functions found behind this library ([`next`]), the C types
//! they take, and the process-level registrations (fork, exit). With `hooks` (the calls this
//! library defines in front of the runtime's), the only `unsafe` of the crate.
pub mod next;

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

/// Registers `child` to run in a fork child and `exit` at process exit (once, from the
/// interposer's start).
pub fn at_fork_and_exit(child: extern "C" fn(), exit: extern "C" fn()) {
    // SAFETY: both are plain functions of the interposer's that only touch its atomics and
    // locks; registering them has no other effect.
    unsafe {
        libc::pthread_atfork(None, None, Some(child));
        libc::atexit(exit);
    }
}
