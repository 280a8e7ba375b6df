//! The HIP interposer's own calls, found with `dlsym(RTLD_DEFAULT)`: present when
//! `libpreempt_hip.so` is preloaded, absent otherwise (then this library's calls are no-ops).
use crate::api::Backend;
use std::ffi::{CStr, c_int, c_uint, c_void};
use std::sync::OnceLock;

type Version = unsafe extern "C" fn() -> c_uint;
type SetPriority = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The interposer's calls this library uses; `None` where it is not loaded.
pub struct Interposer {
    set_priority: Option<SetPriority>,
}

fn sym(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a NUL-terminated name and the pseudo-handle RTLD_DEFAULT; it only
    // looks the name up.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

fn find() -> Interposer {
    let version = sym(c"preempt_hip_version");
    let setter = sym(c"preempt_hip_set_stream_priority");
    if version.is_null() || setter.is_null() {
        return Interposer { set_priority: None };
    }
    // SAFETY: the interposer (hip-interpose/src/hooks.rs) defines `preempt_hip_version` as
    // `extern "C" fn() -> c_uint`; the symbol is that function.
    let v = unsafe { std::mem::transmute::<*mut c_void, Version>(version)() };
    // Interface version 1 is the one whose setter is declared as below.
    if v < 1 {
        return Interposer { set_priority: None };
    }
    // SAFETY: hooks.rs defines `preempt_hip_set_stream_priority(hipStream_t, c_int) -> c_int`.
    let set = unsafe { std::mem::transmute::<*mut c_void, SetPriority>(setter) };
    Interposer {
        set_priority: Some(set),
    }
}

/// The interposer as loaded in this process, looked up once (a preloaded library is there
/// before any call of ours).
pub fn get() -> &'static Interposer {
    static I: OnceLock<Interposer> = OnceLock::new();
    I.get_or_init(find)
}

impl Backend for Interposer {
    fn loaded(&self) -> bool {
        self.set_priority.is_some()
    }

    fn set_priority(&self, stream: usize, hip_priority: i32) -> bool {
        match self.set_priority {
            // SAFETY: the interposer's setter takes the stream as a handle (a number it looks
            // up in its table, never dereferenced) and returns 0 when done.
            Some(f) => unsafe { f(stream as *mut c_void, hip_priority) == 0 },
            None => false,
        }
    }
}
