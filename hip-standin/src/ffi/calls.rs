//! Device, stream and event calls. (Safety: the module's contract, `ffi/mod.rs`.)
use super::{guard, h, out, ptr};
use crate::code::{self, Code};
use crate::runtime;
use std::ffi::{c_float, c_int, c_uint, c_void};

/// The stand-in's HIP version (`hipRuntimeGetVersion`): 5.2, the headers Debian 12 ships.
const VERSION: c_int = 50_222_000;
/// clr's stream priority range: 1 (low) is the least, 0 normal, -1 (high) the greatest; PyTorch
/// asserts exactly this range on ROCm.
const LEAST_PRIORITY: c_int = 1;
const GREATEST_PRIORITY: c_int = -1;

#[unsafe(no_mangle)]
pub extern "C" fn hipInit(_flags: c_uint) -> Code {
    guard(|| runtime::get().map(drop))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipGetDeviceCount(n: *mut c_int) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(n, 1) })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipSetDevice(d: c_int) -> Code {
    guard(|| if d == 0 { Ok(()) } else { Err(code::INVALID_DEVICE) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipGetDevice(d: *mut c_int) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(d, 0) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipRuntimeGetVersion(v: *mut c_int) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(v, VERSION) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipDriverGetVersion(v: *mut c_int) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(v, VERSION) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipDeviceGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) -> Code {
    // SAFETY: the module's contract (HIP accepts either pointer null).
    guard(|| unsafe {
        if !least.is_null() {
            out(least, LEAST_PRIORITY)?;
        }
        if !greatest.is_null() {
            out(greatest, GREATEST_PRIORITY)?;
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipDeviceSynchronize() -> Code {
    guard(|| runtime::get()?.synchronize())
}

/// Creates a stream; HIP clamps a priority outside its range into it, and so does this.
unsafe fn create(s: *mut *mut c_void, flags: c_uint, priority: c_int) -> Result<(), Code> {
    if s.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let p = priority.clamp(GREATEST_PRIORITY, LEAST_PRIORITY);
    let handle = runtime::get()?.create_stream(flags, p)?;
    // SAFETY: the module's contract.
    unsafe { out(s, ptr(handle)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreate(s: *mut *mut c_void) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { create(s, 0, 0) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreateWithFlags(s: *mut *mut c_void, flags: c_uint) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { create(s, flags, 0) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreateWithPriority(s: *mut *mut c_void, flags: c_uint, priority: c_int) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { create(s, flags, priority) })
}

/// Every stand-in stream has a queue of its own already; the mask is checked and not applied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipExtStreamCreateWithCUMask(s: *mut *mut c_void, size: u32, mask: *const u32) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe {
        if size == 0 || mask.is_null() {
            return Err(code::INVALID_VALUE);
        }
        create(s, 0, 0)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamDestroy(s: *mut c_void) -> Code {
    guard(|| runtime::get()?.destroy_stream(h(s)))
}

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamSynchronize(s: *mut c_void) -> Code {
    guard(|| runtime::get()?.stream(h(s))?.synchronize())
}

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamQuery(s: *mut c_void) -> Code {
    guard(|| {
        if runtime::get()?.stream(h(s))?.is_idle() {
            Ok(())
        } else {
            Err(code::NOT_READY)
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamWaitEvent(s: *mut c_void, e: *mut c_void, _flags: c_uint) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        rt.stream(h(s))?.wait_event(&rt.event(h(e))?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamGetPriority(s: *mut c_void, p: *mut c_int) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(p, runtime::get()?.stream(h(s))?.priority) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamGetFlags(s: *mut c_void, f: *mut c_uint) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(f, runtime::get()?.stream(h(s))?.flags) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventCreate(e: *mut *mut c_void) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(e, ptr(runtime::get()?.create_event())) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventCreateWithFlags(e: *mut *mut c_void, _flags: c_uint) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(e, ptr(runtime::get()?.create_event())) })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventRecord(e: *mut c_void, s: *mut c_void) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        rt.stream(h(s))?.record(&rt.event(h(e))?)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventQuery(e: *mut c_void) -> Code {
    guard(|| {
        if runtime::get()?.event(h(e))?.is_complete() {
            Ok(())
        } else {
            Err(code::NOT_READY)
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventSynchronize(e: *mut c_void) -> Code {
    guard(|| {
        runtime::get()?.event(h(e))?.synchronize();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventElapsedTime(ms: *mut c_float, start: *mut c_void, stop: *mut c_void) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        let v = rt.event(h(stop))?.elapsed_ms_since(&*rt.event(h(start))?)?;
        // SAFETY: the module's contract.
        unsafe { out(ms, v) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventDestroy(e: *mut c_void) -> Code {
    guard(|| runtime::get()?.destroy_event(h(e)))
}
