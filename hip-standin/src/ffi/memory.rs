//! Device memory calls. (Safety: the module's contract, `ffi/mod.rs`.)
use super::{guard, h, out};
use crate::code::{self, Code};
use crate::runtime::{self, Runtime};
use std::ffi::{c_int, c_void};

/// hipMemcpyKind.
const HOST_TO_HOST: c_int = 0;
const HOST_TO_DEVICE: c_int = 1;
const DEVICE_TO_HOST: c_int = 2;
const DEVICE_TO_DEVICE: c_int = 3;
const DEFAULT: c_int = 4;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMalloc(p: *mut *mut c_void, size: usize) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { out(p, runtime::get()?.mem.alloc(size)? as *mut c_void) })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipFree(p: *mut c_void) -> Code {
    guard(|| {
        if p.is_null() {
            Ok(())
        } else {
            runtime::get()?.mem.free(h(p))
        }
    })
}

/// Copies `n` bytes, the direction from `kind` (or, for `hipMemcpyDefault`, from which
/// pointers are device memory).
///
/// # Safety
/// Host-side pointers hold `n` bytes.
unsafe fn copy(rt: &Runtime, dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Result<(), Code> {
    if n == 0 {
        return Ok(());
    }
    if dst.is_null() || src.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let kind = match kind {
        DEFAULT => match (rt.mem.contains(src as usize, n), rt.mem.contains(dst as usize, n)) {
            (false, false) => HOST_TO_HOST,
            (false, true) => HOST_TO_DEVICE,
            (true, false) => DEVICE_TO_HOST,
            (true, true) => DEVICE_TO_DEVICE,
        },
        k => k,
    };
    match kind {
        HOST_TO_HOST => {
            // SAFETY: both host buffers hold n bytes (the caller's contract); `copy` allows overlap.
            unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), n) };
            Ok(())
        }
        HOST_TO_DEVICE => {
            // SAFETY: the host source holds n bytes.
            let s = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) };
            rt.mem.write(dst as usize, s)
        }
        DEVICE_TO_HOST => {
            // SAFETY: the host destination holds n bytes.
            let d = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), n) };
            rt.mem.read(src as usize, d)
        }
        DEVICE_TO_DEVICE => {
            let mut tmp = vec![0u8; n];
            rt.mem.read(src as usize, &mut tmp)?;
            rt.mem.write(dst as usize, &tmp)
        }
        _ => Err(code::INVALID_VALUE),
    }
}

/// A synchronous copy waits for the whole device first (the null stream's legacy ordering).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemcpy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        rt.synchronize()?;
        // SAFETY: the module's contract.
        unsafe { copy(rt, dst, src, n, kind) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    n: usize,
    kind: c_int,
    s: *mut c_void,
) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        rt.stream(h(s))?.synchronize()?;
        // SAFETY: the module's contract.
        unsafe { copy(rt, dst, src, n, kind) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipMemset(dst: *mut c_void, value: c_int, n: usize) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        rt.synchronize()?;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // memset's value is a byte
        rt.mem.fill(h(dst), value as u8, n)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipMemsetAsync(dst: *mut c_void, value: c_int, n: usize, s: *mut c_void) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        rt.stream(h(s))?.synchronize()?;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // memset's value is a byte
        rt.mem.fill(h(dst), value as u8, n)
    })
}
