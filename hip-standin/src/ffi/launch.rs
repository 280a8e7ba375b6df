//! Modules and launches. (Safety: the module's contract, `ffi/mod.rs`.)
use super::{guard, h, out, ptr};
use crate::code::{self, Code};
use crate::runtime;
use std::ffi::{CStr, c_char, c_uint, c_void};

/// The module handle every load returns: the stand-in's kernels are built in.
const MODULE: usize = 0x5e_0008;

/// `hipModuleLoad`: the file must exist (a program's wrong path fails as on a GPU); its
/// contents are not read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipModuleLoad(m: *mut *mut c_void, fname: *const c_char) -> Code {
    guard(|| {
        runtime::get()?;
        if fname.is_null() {
            return Err(code::INVALID_VALUE);
        }
        // SAFETY: a NUL-terminated string (the module's contract).
        let path = unsafe { CStr::from_ptr(fname) }.to_string_lossy().into_owned();
        if !std::path::Path::new(&path).is_file() {
            return Err(code::FILE_NOT_FOUND);
        }
        // SAFETY: the module's contract.
        unsafe { out(m, ptr(MODULE)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipModuleLoadData(m: *mut *mut c_void, image: *const c_void) -> Code {
    guard(|| {
        runtime::get()?;
        if image.is_null() {
            return Err(code::INVALID_VALUE);
        }
        // SAFETY: the module's contract.
        unsafe { out(m, ptr(MODULE)) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipModuleUnload(m: *mut c_void) -> Code {
    guard(|| {
        if h(m) == MODULE {
            Ok(())
        } else {
            Err(code::INVALID_HANDLE)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipModuleGetFunction(f: *mut *mut c_void, m: *mut c_void, name: *const c_char) -> Code {
    guard(|| {
        if h(m) != MODULE {
            return Err(code::INVALID_HANDLE);
        }
        if name.is_null() {
            return Err(code::INVALID_VALUE);
        }
        // SAFETY: a NUL-terminated string (the module's contract).
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        let handle = runtime::get()?.function(&name)?;
        // SAFETY: the module's contract.
        unsafe { out(f, ptr(handle)) }
    })
}

/// Reads the kernel's arguments from `params` and queues it on `stream`.
///
/// # Safety
/// `params` holds one pointer per argument of `f`'s kernel, each to a value of its size.
unsafe fn launch(
    f: *mut c_void,
    stream: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> Result<(), Code> {
    let rt = runtime::get()?;
    let k = rt.kernel(h(f))?;
    if params.is_null() || !extra.is_null() {
        // The `extra` packing (HIP_LAUNCH_PARAM_BUFFER_POINTER) is not implemented.
        return Err(code::NOT_SUPPORTED);
    }
    let mut args = Vec::new();
    for (i, n) in k.arg_sizes().iter().enumerate() {
        // SAFETY: params holds one pointer per argument (the caller's contract).
        let p = unsafe { *params.add(i) };
        if p.is_null() {
            return Err(code::INVALID_VALUE);
        }
        // SAFETY: each argument pointer points to a value of the argument's size.
        args.push(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), *n) }.to_vec());
    }
    rt.launch(h(stream), k.call(&args, &rt.mem)?)
}

#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // HIP's signature
pub unsafe extern "C" fn hipModuleLaunchKernel(
    f: *mut c_void,
    _gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    _bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    _shared: c_uint,
    stream: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> Code {
    // SAFETY: the module's contract.
    guard(|| unsafe { launch(f, stream, params, extra) })
}

/// `hipExtModuleLaunchKernel`: start and stop events, when given, are recorded around the
/// kernel on its stream.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // HIP's signature
pub unsafe extern "C" fn hipExtModuleLaunchKernel(
    f: *mut c_void,
    _gx: u32,
    _gy: u32,
    _gz: u32,
    _lx: u32,
    _ly: u32,
    _lz: u32,
    _shared: usize,
    stream: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    start: *mut c_void,
    stop: *mut c_void,
    _flags: u32,
) -> Code {
    guard(|| {
        let rt = runtime::get()?;
        let s = rt.stream(h(stream))?;
        if !start.is_null() {
            s.record(&rt.event(h(start))?)?;
        }
        // SAFETY: the module's contract.
        unsafe { launch(f, stream, params, extra) }?;
        if !stop.is_null() {
            s.record(&rt.event(h(stop))?)?;
        }
        Ok(())
    })
}

/// A launch by host stub address (what `hipcc`'s `<<<>>>` calls) needs device code the
/// stand-in cannot run: refused.
#[repr(C)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

#[unsafe(no_mangle)]
pub extern "C" fn hipLaunchKernel(
    _f: *const c_void,
    _grid: Dim3,
    _block: Dim3,
    _args: *mut *mut c_void,
    _shared: usize,
    _stream: *mut c_void,
) -> Code {
    guard(|| Err(code::INVALID_DEVICE_FUNCTION))
}
