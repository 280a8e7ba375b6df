//! The HIP calls this library defines in front of the runtime's. What is intercepted and why,
//! and what passes through untouched: docs/interposer.md#what-is-intercepted.
//!
//! # Safety (every hook)
//! A hook is called by a program as the HIP function of its name, with that function's
//! contract; it passes every argument on unchanged to the runtime's definition, so the
//! runtime's own checks apply. Of the arguments, the interposer itself reads only handles as
//! numbers (never dereferenced) and, for stream creation, writes the out-parameter after
//! checking it is not null.
use crate::ffi::next::{self, NOT_SUPPORTED};
use crate::ffi::{Code, Dim3, Raw};
use crate::interposer::{self, Interposer};
use std::ffi::{c_int, c_uint, c_void};

use crate::interposer::{quietly, submission};

/// Runs the program's submission `call` on `stream` (see [`submission`]).
fn submit(stream: Raw, call: impl FnOnce() -> Code) -> Code {
    submission(stream as usize, call)
}

/// Stream creation: a queue of its own where the interposer takes the stream over, else the
/// runtime's stream, registered.
fn create(s: *mut Raw, flags: c_uint, priority: c_int) -> Code {
    let Some(f) = next::next().stream_create_with_priority else {
        return NOT_SUPPORTED;
    };
    let ip: Option<&Interposer> = if s.is_null() { None } else { interposer::get() };
    if let Some(ip) = ip
        && let Some(Ok(key)) = quietly(|| ip.create_own(flags, priority))
    {
        // SAFETY: not null; the program's out-parameter (the module's contract).
        unsafe { s.write(key as Raw) };
        quietly(|| {
            ip.program_stream_created(key, flags);
            Some(())
        });
        return 0;
    }
    // SAFETY: the program's arguments (the module's contract).
    let c = unsafe { f(s, flags, priority) };
    if c == 0
        && let Some(ip) = ip
    {
        // SAFETY: the runtime just wrote it.
        let key = unsafe { s.read() } as usize;
        quietly(|| {
            ip.register_plain(key, flags, priority);
            ip.program_stream_created(key, flags);
            Some(())
        });
    }
    c
}

fn default_priority() -> c_int {
    interposer::get().map_or(0, |ip| ip.cfg.default_priority)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreate(s: *mut Raw) -> Code {
    create(s, 0, default_priority())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreateWithFlags(s: *mut Raw, flags: c_uint) -> Code {
    create(s, flags, default_priority())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreateWithPriority(s: *mut Raw, flags: c_uint, priority: c_int) -> Code {
    create(s, flags, priority)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamDestroy(s: Raw) -> Code {
    if let Some(r) = quietly(|| interposer::get().and_then(|ip| ip.destroy(s as usize))) {
        return match r {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("preempt-hip: destroying stream {:#x}: {e}", s as usize);
                400 // hipErrorInvalidHandle
            }
        };
    }
    match next::next().stream_destroy {
        // SAFETY: the program's argument.
        Some(f) => unsafe { f(s) },
        None => NOT_SUPPORTED,
    }
}

/// A hook for a call that submits work on the stream given as `$stream`.
macro_rules! submission {
    ($name:ident, $field:ident, ($($arg:ident : $ty:ty),*), $stream:ident) => {
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)] // HIP's signature
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> Code {
            let Some(f) = next::next().$field else {
                return NOT_SUPPORTED;
            };
            // The null stream's work may go to the interposer's substitute for it.
            let $stream = interposer::route($stream as usize) as Raw;
            // SAFETY: the program's arguments, passed on unchanged but for that (the module's
            // contract).
            submit($stream, || unsafe { f($($arg),*) })
        }
    };
}

submission!(hipLaunchKernel, launch_kernel, (func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, shared: usize, stream: Raw), stream);
submission!(hipLaunchKernel_spt, launch_kernel_spt, (func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, shared: usize, stream: Raw), stream);
submission!(hipExtLaunchKernel, ext_launch_kernel, (func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, shared: usize, stream: Raw, start: Raw, stop: Raw, flags: c_int), stream);
submission!(hipLaunchCooperativeKernel, launch_cooperative_kernel, (func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, shared: c_uint, stream: Raw), stream);
submission!(hipModuleLaunchKernel, module_launch_kernel, (f_: Raw, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, shared: c_uint, stream: Raw, params: *mut *mut c_void, extra: *mut *mut c_void), stream);
submission!(hipExtModuleLaunchKernel, ext_module_launch_kernel, (f_: Raw, gx: u32, gy: u32, gz: u32, lx: u32, ly: u32, lz: u32, shared: usize, stream: Raw, params: *mut *mut c_void, extra: *mut *mut c_void, start: Raw, stop: Raw, flags: u32), stream);
submission!(hipMemcpyAsync, memcpy_async, (dst: *mut c_void, src: *const c_void, n: usize, kind: c_int, stream: Raw), stream);
submission!(hipMemsetAsync, memset_async, (dst: *mut c_void, value: c_int, n: usize, stream: Raw), stream);
submission!(hipMemcpyHtoDAsync, memcpy_htod_async, (dst: *mut c_void, src: *mut c_void, n: usize, stream: Raw), stream);
submission!(hipMemcpyDtoHAsync, memcpy_dtoh_async, (dst: *mut c_void, src: *mut c_void, n: usize, stream: Raw), stream);
submission!(hipMemcpyDtoDAsync, memcpy_dtod_async, (dst: *mut c_void, src: *mut c_void, n: usize, stream: Raw), stream);
submission!(hipMemsetD32Async, memset_d32_async, (dst: *mut c_void, value: c_int, n: usize, stream: Raw), stream);
submission!(hipGraphLaunch, graph_launch, (graph: Raw, stream: Raw), stream);
submission!(hipLaunchHostFunc, launch_host_func, (stream: Raw, func: *mut c_void, data: *mut c_void), stream);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventRecord(e: Raw, s: Raw) -> Code {
    let Some(f) = next::next().event_record else {
        return NOT_SUPPORTED;
    };
    let s = interposer::route(s as usize) as Raw;
    // SAFETY: the program's arguments.
    let c = submit(s, || unsafe { f(e, s) });
    if c == 0 && interposer::active() {
        quietly(|| interposer::get().map(|ip| ip.event_recorded(e as usize, s as usize)));
    }
    c
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamWaitEvent(s: Raw, e: Raw, flags: c_uint) -> Code {
    let Some(f) = next::next().stream_wait_event else {
        return NOT_SUPPORTED;
    };
    let s = interposer::route(s as usize) as Raw;
    if interposer::active() {
        quietly(|| interposer::get().map(|ip| ip.before_wait(s as usize, e as usize)));
    }
    // SAFETY: the program's arguments.
    submit(s, || unsafe { f(s, e, flags) })
}

/// A host wait on the null stream waits for its substitute where its work went there.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamSynchronize(s: Raw) -> Code {
    match next::next().stream_synchronize {
        // SAFETY: the program's argument, or the substitute's handle.
        Some(f) => unsafe { f(interposer::route(s as usize) as Raw) },
        None => NOT_SUPPORTED,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamQuery(s: Raw) -> Code {
    match next::next().stream_query {
        // SAFETY: the program's argument, or the substitute's handle.
        Some(f) => unsafe { f(interposer::route(s as usize) as Raw) },
        None => NOT_SUPPORTED,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventDestroy(e: Raw) -> Code {
    let Some(f) = next::next().event_destroy else {
        return NOT_SUPPORTED;
    };
    if interposer::active() {
        quietly(|| interposer::get().map(|ip| ip.event_destroyed(e as usize)));
    }
    // SAFETY: the program's argument.
    unsafe { f(e) }
}

/// The interposer's own call, for libraries layered on it (XSched's C API names): a new
/// priority for a stream the program created, in HIP's sense (smaller is more urgent) from -255
/// to 255 (clamped), so that an API with more levels than HIP's three keeps them. 0 when done;
/// -1 when the interposer is off or does not know the stream (one line on stderr says why).
#[unsafe(no_mangle)]
pub extern "C" fn preempt_hip_set_stream_priority(stream: Raw, priority: c_int) -> c_int {
    let r = quietly(|| Some(interposer::get()?.set_priority(stream as usize, priority)));
    match r {
        Some(Ok(())) => 0,
        Some(Err(e)) => {
            eprintln!("preempt-hip: {e}");
            -1
        }
        None => -1,
    }
}

/// The interposer's interface version: how a library layered on it knows it is loaded.
#[unsafe(no_mangle)]
pub extern "C" fn preempt_hip_version() -> c_uint {
    1
}
