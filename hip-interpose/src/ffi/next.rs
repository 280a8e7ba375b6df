//! The functions the program would have called: the next definition after this library in the
//! lookup order (`dlsym(RTLD_NEXT)`: the HIP runtime, real or stand-in), resolved once, and
//! the stand-in's own suspension calls where they exist. Safe wrappers for the rest of the
//! crate (hooks call the raw pointers themselves, with the program's arguments).
use super::{Code, Dim3, Raw};
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

/// `hipErrorNotSupported`: what a hook returns when the runtime lacks the call it stands for.
pub const NOT_SUPPORTED: Code = 801;
/// `hipEventDisableTiming`.
const EVENT_DISABLE_TIMING: c_uint = 2;
/// `hipErrorNotReady`.
pub const NOT_READY: Code = 600;

/// Looks `name` up after this library.
///
/// # Safety
/// `F` is the C function type the symbol has (a pointer-sized `extern "C" fn`).
unsafe fn sym<F: Copy>(name: &CStr, next: bool) -> Option<F> {
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    let handle = if next { libc::RTLD_NEXT } else { libc::RTLD_DEFAULT };
    // SAFETY: a NUL-terminated name; dlsym is thread-safe.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if p.is_null() {
        None
    } else {
        // SAFETY: F is a function pointer type of the symbol's signature (the caller's contract).
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

macro_rules! table {
    ($($field:ident = $name:literal : fn($($a:ty),*);)*) => {
        /// The runtime's functions this library calls on.
        #[allow(non_snake_case)]
        pub struct Next {
            $(pub $field: Option<unsafe extern "C" fn($($a),*) -> Code>,)*
            /// The stand-in's suspension calls (absent on a real runtime).
            pub standin_suspend: Option<unsafe extern "C" fn(Raw) -> Code>,
            pub standin_resume: Option<unsafe extern "C" fn(Raw) -> Code>,
            pub standin_version: Option<unsafe extern "C" fn() -> c_uint>,
            pub get_error_name: Option<unsafe extern "C" fn(Code) -> *const c_char>,
        }

        impl Next {
            fn resolve() -> Next {
                // SAFETY: each type is the function's signature in hip_runtime_api.h / hip_ext.h.
                unsafe {
                    Next {
                        $($field: sym($name, true),)*
                        standin_suspend: sym(c"preempt_standin_stream_suspend", false),
                        standin_resume: sym(c"preempt_standin_stream_resume", false),
                        standin_version: sym(c"preempt_standin_version", false),
                        get_error_name: sym(c"hipGetErrorName", true),
                    }
                }
            }
        }
    };
}

table! {
    stream_create_with_priority = c"hipStreamCreateWithPriority": fn(*mut Raw, c_uint, c_int);
    stream_destroy = c"hipStreamDestroy": fn(Raw);
    get_device = c"hipGetDevice": fn(*mut c_int);
    device_get_pci_bus_id = c"hipDeviceGetPCIBusId": fn(*mut c_char, c_int, c_int);
    launch_kernel = c"hipLaunchKernel": fn(*const c_void, Dim3, Dim3, *mut *mut c_void, usize, Raw);
    launch_kernel_spt = c"hipLaunchKernel_spt": fn(*const c_void, Dim3, Dim3, *mut *mut c_void, usize, Raw);
    ext_launch_kernel = c"hipExtLaunchKernel": fn(*const c_void, Dim3, Dim3, *mut *mut c_void, usize, Raw, Raw, Raw, c_int);
    launch_cooperative_kernel = c"hipLaunchCooperativeKernel": fn(*const c_void, Dim3, Dim3, *mut *mut c_void, c_uint, Raw);
    module_launch_kernel = c"hipModuleLaunchKernel": fn(Raw, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Raw, *mut *mut c_void, *mut *mut c_void);
    ext_module_launch_kernel = c"hipExtModuleLaunchKernel": fn(Raw, u32, u32, u32, u32, u32, u32, usize, Raw, *mut *mut c_void, *mut *mut c_void, Raw, Raw, u32);
    memcpy_async = c"hipMemcpyAsync": fn(*mut c_void, *const c_void, usize, c_int, Raw);
    memset_async = c"hipMemsetAsync": fn(*mut c_void, c_int, usize, Raw);
    memcpy_htod_async = c"hipMemcpyHtoDAsync": fn(*mut c_void, *mut c_void, usize, Raw);
    memcpy_dtoh_async = c"hipMemcpyDtoHAsync": fn(*mut c_void, *mut c_void, usize, Raw);
    memcpy_dtod_async = c"hipMemcpyDtoDAsync": fn(*mut c_void, *mut c_void, usize, Raw);
    memset_d32_async = c"hipMemsetD32Async": fn(*mut c_void, c_int, usize, Raw);
    graph_launch = c"hipGraphLaunch": fn(Raw, Raw);
    launch_host_func = c"hipLaunchHostFunc": fn(Raw, *mut c_void, *mut c_void);
    event_create_with_flags = c"hipEventCreateWithFlags": fn(*mut Raw, c_uint);
    event_record = c"hipEventRecord": fn(Raw, Raw);
    event_query = c"hipEventQuery": fn(Raw);
    event_destroy = c"hipEventDestroy": fn(Raw);
    stream_wait_event = c"hipStreamWaitEvent": fn(Raw, Raw, c_uint);
    stream_synchronize = c"hipStreamSynchronize": fn(Raw);
    stream_query = c"hipStreamQuery": fn(Raw);
}

/// The table, resolved at the first call.
pub fn next() -> &'static Next {
    static NEXT: OnceLock<Next> = OnceLock::new();
    NEXT.get_or_init(Next::resolve)
}

fn ok(c: Code) -> Result<(), Code> {
    if c == 0 { Ok(()) } else { Err(c) }
}

// Safe wrappers: each passes values (handles by number) and local out-parameters only.

/// A stream from the runtime itself.
pub fn create_stream(flags: u32, priority: i32) -> Result<usize, Code> {
    let f = next().stream_create_with_priority.ok_or(NOT_SUPPORTED)?;
    let mut s: Raw = std::ptr::null_mut();
    // SAFETY: a valid out-parameter.
    ok(unsafe { f(&mut s, flags, priority) })?;
    Ok(s as usize)
}

pub fn destroy_stream(s: usize) -> Result<(), Code> {
    let f = next().stream_destroy.ok_or(NOT_SUPPORTED)?;
    // SAFETY: the runtime validates handles.
    ok(unsafe { f(s as Raw) })
}

/// The calling thread's current device ordinal.
pub fn current_device() -> Result<i32, Code> {
    let f = next().get_device.ok_or(NOT_SUPPORTED)?;
    let mut d: c_int = 0;
    // SAFETY: a valid out-parameter.
    ok(unsafe { f(&mut d) })?;
    Ok(d)
}

/// Device `device`'s PCI address, as `hipDeviceGetPCIBusId` writes it (`0000:c1:00.0`).
pub fn pci_bus_id(device: i32) -> Result<String, Code> {
    let f = next().device_get_pci_bus_id.ok_or(NOT_SUPPORTED)?;
    const LEN: c_int = 64;
    let mut buf = [0 as c_char; LEN as usize];
    // SAFETY: the runtime writes at most LEN - 1 bytes and a NUL into the buffer of LEN bytes.
    ok(unsafe { f(buf.as_mut_ptr(), LEN - 1, device) })?;
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// An event without timing (the interposer's marks).
pub fn create_event() -> Result<usize, Code> {
    let f = next().event_create_with_flags.ok_or(NOT_SUPPORTED)?;
    let mut e: Raw = std::ptr::null_mut();
    // SAFETY: a valid out-parameter.
    ok(unsafe { f(&mut e, EVENT_DISABLE_TIMING) })?;
    Ok(e as usize)
}

pub fn record_event(e: usize, s: usize) -> Result<(), Code> {
    let f = next().event_record.ok_or(NOT_SUPPORTED)?;
    // SAFETY: the runtime validates handles.
    ok(unsafe { f(e as Raw, s as Raw) })
}

/// Work submitted to `s` from now on waits for `e`'s latest record.
pub fn stream_wait_event(s: usize, e: usize) -> Result<(), Code> {
    let f = next().stream_wait_event.ok_or(NOT_SUPPORTED)?;
    // SAFETY: the runtime validates handles.
    ok(unsafe { f(s as Raw, e as Raw, 0) })
}

/// `Ok(true)` once everything the event's latest record covers has completed.
pub fn query_event(e: usize) -> Result<bool, Code> {
    let f = next().event_query.ok_or(NOT_SUPPORTED)?;
    // SAFETY: the runtime validates handles.
    match unsafe { f(e as Raw) } {
        0 => Ok(true),
        NOT_READY => Ok(false),
        c => Err(c),
    }
}

/// The runtime's name for `c` (for log lines).
pub fn error_name(c: Code) -> String {
    let Some(f) = next().get_error_name else {
        return format!("hipError {c}");
    };
    // SAFETY: hipGetErrorName returns a static NUL-terminated string (or null).
    let p = unsafe { f(c) };
    if p.is_null() {
        return format!("hipError {c}");
    }
    // SAFETY: not null, NUL-terminated, static.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Whether the runtime is this project's stand-in (its suspension calls are there).
pub fn is_standin() -> bool {
    let n = next();
    n.standin_version.is_some() && n.standin_suspend.is_some() && n.standin_resume.is_some()
}

/// The stand-in's host Lv3 of one stream.
pub fn standin_suspend(s: usize) -> Result<(), Code> {
    let f = next().standin_suspend.ok_or(NOT_SUPPORTED)?;
    // SAFETY: the stand-in validates handles.
    ok(unsafe { f(s as Raw) })
}

pub fn standin_resume(s: usize) -> Result<(), Code> {
    let f = next().standin_resume.ok_or(NOT_SUPPORTED)?;
    // SAFETY: the stand-in validates handles.
    ok(unsafe { f(s as Raw) })
}
