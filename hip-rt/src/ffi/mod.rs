//! The only place in hip-rt with `unsafe` (this file and its children `calls.rs`, `mem.rs` and
//! `rtc.rs`): libamdhip64 and hiprtc opened with libloading, a typed table of the C functions used,
//! and one small safe method per call.
//!
//! Invariants the safe methods rely on (upheld by the rest of the crate, the only user):
//! * the libraries are never unloaded ([`ManuallyDrop`]), so the table's pointers stay valid;
//! * raw handles are created here and destroyed here exactly once (the wrappers own them, and a
//!   destroying method takes the raw handle by value);
//! * a kernel launch passes exactly the explicit parameters that the code object's own metadata
//!   declares for that kernel, each as a pointer to a value of exactly the declared size (checked
//!   in [`Api::launch`] against the metadata read by [`Api::module_load_data`] from the same
//!   image that HIP loads); pointer parameters can only be allocations owned by this crate.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::mem::ManuallyDrop;

use libloading::Library;
use libloading::os::unix;

use crate::code_object::KernelInfo;
use crate::error::{self, HipError};
use crate::loader::{Origin, Search};

mod calls;
mod mem;
mod rtc;
#[cfg(test)]
mod tests;

type Ptr = *mut c_void;
type Status = c_int;
type StrFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// Size of the zeroed buffer handed to hipGetDeviceProperties*: hipDeviceProp_t is under 2 KiB
/// in every HIP ABI (R0000 of 5.x, R0600 of 6.x/7.x); 64 KiB leaves room for any future growth.
pub(super) const PROPS_BUF_BYTES: usize = 64 * 1024;

/// Finds `name` in `lib` as a value of type `T`.
///
/// # Safety
/// `T` must be the exact `extern "C"` fn-pointer type of the C function `name`.
unsafe fn sym<T: Copy>(lib: &Library, path: &str, name: &'static str) -> Result<T, HipError> {
    let cname = format!("{name}\0");
    // SAFETY: the caller guarantees that `T` is the symbol's true type.
    match unsafe { lib.get::<T>(cname.as_bytes()) } {
        Ok(s) => Ok(*s),
        Err(_) => Err(HipError::MissingSymbol {
            library: path.to_string(),
            symbol: name,
        }),
    }
}

macro_rules! table {
    ($t:ident { $($f:ident = $s:literal ($($a:ty),*);)* }) => {
        struct $t { $($f: unsafe extern "C" fn($($a),*) -> Status,)* }
        impl $t {
            /// # Safety
            /// `lib` must be HIP (resp. hiprtc): every symbol of these names has the C signature
            /// declared here, as in every ROCm since 5.0 (checked against the 5.2 and 6.x headers).
            unsafe fn load(lib: &Library, path: &str) -> Result<Self, HipError> {
                // SAFETY: forwarded from this function's contract.
                Ok(Self { $($f: unsafe { sym(lib, path, $s)? },)* })
            }
        }
    };
}

table!(HipFns {
    runtime_get_version = "hipRuntimeGetVersion"(*mut c_int);
    driver_get_version = "hipDriverGetVersion"(*mut c_int);
    get_device_count = "hipGetDeviceCount"(*mut c_int);
    device_get_attribute = "hipDeviceGetAttribute"(*mut c_int, c_int, c_int);
    device_get_name = "hipDeviceGetName"(*mut c_char, c_int, c_int);
    device_get_pci_bus_id = "hipDeviceGetPCIBusId"(*mut c_char, c_int, c_int);
    set_device = "hipSetDevice"(c_int);
    device_synchronize = "hipDeviceSynchronize"();
    stream_create_with_priority = "hipStreamCreateWithPriority"(*mut Ptr, c_uint, c_int);
    stream_priority_range = "hipDeviceGetStreamPriorityRange"(*mut c_int, *mut c_int);
    stream_destroy = "hipStreamDestroy"(Ptr);
    stream_synchronize = "hipStreamSynchronize"(Ptr);
    event_create_with_flags = "hipEventCreateWithFlags"(*mut Ptr, c_uint);
    event_record = "hipEventRecord"(Ptr, Ptr);
    event_synchronize = "hipEventSynchronize"(Ptr);
    event_query = "hipEventQuery"(Ptr);
    event_elapsed_time = "hipEventElapsedTime"(*mut f32, Ptr, Ptr);
    event_destroy = "hipEventDestroy"(Ptr);
    malloc = "hipMalloc"(*mut Ptr, usize);
    free = "hipFree"(Ptr);
    host_malloc = "hipHostMalloc"(*mut Ptr, usize, c_uint);
    host_free = "hipHostFree"(Ptr);
    memcpy = "hipMemcpy"(Ptr, *const c_void, usize, c_int);
    memset_async = "hipMemsetAsync"(Ptr, c_int, usize, Ptr);
    module_load_data = "hipModuleLoadData"(*mut Ptr, *const c_void);
    module_get_function = "hipModuleGetFunction"(*mut Ptr, Ptr, *const c_char);
    module_launch_kernel = "hipModuleLaunchKernel"(
        Ptr, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Ptr, *mut Ptr, *mut Ptr);
    module_unload = "hipModuleUnload"(Ptr);
});

table!(RtcFns {
    create_program = "hiprtcCreateProgram"(
        *mut Ptr, *const c_char, *const c_char, c_int, *const *const c_char, *const *const c_char);
    compile_program = "hiprtcCompileProgram"(Ptr, c_int, *const *const c_char);
    get_program_log_size = "hiprtcGetProgramLogSize"(Ptr, *mut usize);
    get_program_log = "hiprtcGetProgramLog"(Ptr, *mut c_char);
    get_code_size = "hiprtcGetCodeSize"(Ptr, *mut usize);
    get_code = "hiprtcGetCode"(Ptr, *mut c_char);
    destroy_program = "hiprtcDestroyProgram"(*mut Ptr);
});

/// # Safety
/// As [`RtcFns::load`]; also `const char* hiprtcGetErrorString(hiprtcResult)`.
unsafe fn load_rtc(lib: &Library, path: &str) -> Result<(RtcFns, StrFn), HipError> {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        Ok((
            RtcFns::load(lib, path)?,
            sym::<StrFn>(lib, path, "hiprtcGetErrorString")?,
        ))
    }
}

type PropsFn = unsafe extern "C" fn(*mut c_void, c_int) -> Status;
type CuMaskFn = unsafe extern "C" fn(*mut Ptr, u32, *const u32) -> Status;
/// `hipError_t hipExtHostAlloc(void** ptr, size_t size, unsigned int flags)`: hipHostMalloc's
/// successor (hipHostMalloc is deprecated in its favour, same flag values: hip_runtime_api.h of
/// ROCm 6.3+); absent from older HIP, where hipHostMalloc is used.
type HostAllocFn = unsafe extern "C" fn(*mut Ptr, usize, c_uint) -> Status;

macro_rules! raw_handle {
    ($($name:ident),*) => {$(
        /// An opaque HIP handle, owned by exactly one wrapper.
        pub(super) struct $name(Ptr);
        // SAFETY: HIP handles are process-wide runtime objects; the HIP runtime API is thread-safe
        // and lets any host thread use them (the wrappers destroy each handle once).
        unsafe impl Send for $name {}
        // SAFETY: as for Send; every use goes through HIP's own locking. A user may launch on a
        // stream from one thread while another waits on that stream's events and a third
        // synchronizes it: clr serialises submissions to one stream under that stream's lock, and waits
        // (hipEventSynchronize, hipStreamSynchronize, hipEventQuery) only read completion
        // signals. Destruction needs the owning wrapper by value (Drop), so no call can race it.
        unsafe impl Sync for $name {}
    )*};
}
raw_handle!(RawStream, RawEvent);

impl RawStream {
    /// The `hipStream_t` value, for handing to other libraries (its provenance is exposed: a
    /// binding may turn the number back into the pointer it hands to C).
    pub(crate) fn addr(&self) -> usize {
        self.0.expose_provenance()
    }
}

/// A loaded module, with the kernel metadata of the image it was loaded from.
pub(crate) struct RawModule {
    ptr: Ptr,
    kernels: Vec<KernelInfo>,
}
// SAFETY: as for the other handles: a hipModule_t is usable from any thread.
unsafe impl Send for RawModule {}
// SAFETY: as for Send.
unsafe impl Sync for RawModule {}

impl RawModule {
    pub(crate) fn kernels(&self) -> &[KernelInfo] {
        &self.kernels
    }
}

/// A kernel function of a loaded module, with its metadata (name and explicit parameters).
/// It must not outlive its module (the safe [`crate::Function`] holds the module).
pub(crate) struct RawFunction {
    ptr: Ptr,
    info: KernelInfo,
}
impl RawFunction {
    pub(crate) fn info(&self) -> &KernelInfo {
        &self.info
    }
}
// SAFETY: as for the other handles: a hipFunction_t is usable from any thread.
unsafe impl Send for RawFunction {}
// SAFETY: as for Send.
unsafe impl Sync for RawFunction {}

/// An allocation: device memory (hipMalloc) or pinned, coherent, mapped host memory (hipHostMalloc).
pub(super) struct RawMem {
    ptr: Ptr,
    bytes: usize,
    host: bool,
}
// SAFETY: a HIP allocation is addressable from every host thread; host views are atomics.
unsafe impl Send for RawMem {}
// SAFETY: as for Send.
unsafe impl Sync for RawMem {}

impl RawMem {
    pub(super) fn len(&self) -> usize {
        self.bytes
    }
}

/// The loaded libraries and their function tables.
pub(super) struct Api {
    hip: HipFns,
    err_name: StrFn,
    err_string: StrFn,
    props: Option<(PropsFn, &'static str)>,
    cu_mask: Option<CuMaskFn>,
    ext_host_alloc: Option<HostAllocFn>,
    rtc: Result<(RtcFns, StrFn), HipError>,
    pub(super) hip_path: String,
    pub(super) hip_origin: Origin,
    pub(super) rtc_path: Option<String>,
    pub(super) rtc_origin: Option<Origin>,
    // HIP cannot be unloaded safely (its atexit handlers and threads live in it): never dlclose.
    _libs: Vec<ManuallyDrop<Library>>,
}

/// A library already loaded in this process under `name` (a soname, file name or path), or
/// `None`. Nothing is loaded: with `RTLD_NOLOAD`, dlopen only finds (and takes a reference on) a
/// library that is loaded already, by its name, soname or file (docs/kfd-facts.md#one-hip-runtime-per-process).
fn already_loaded(name: &str) -> Option<Library> {
    // RTLD_NOW because glibc refuses a mode without RTLD_LAZY or RTLD_NOW; it binds nothing here.
    // RTLD_LOCAL (0) leaves the library's scope as its loader made it.
    let flags = unix::RTLD_NOW | unix::RTLD_LOCAL | libc::RTLD_NOLOAD;
    // SAFETY: with RTLD_NOLOAD dlopen loads nothing, so no initializer or terminator runs: it
    // returns a handle on a library that is already loaded and initialised, or NULL.
    unsafe { unix::Library::open(Some(name), flags) }
        .ok()
        .map(Library::from)
}

/// The file `lib` was loaded from (dladdr on its symbol `symbol`), when the loader knows it.
fn file_of(lib: &Library, symbol: &str) -> Option<String> {
    let cname = format!("{symbol}\0");
    // SAFETY: the symbol is taken as an address only (`*mut c_void`): it is never called or read.
    let addr = unsafe { lib.get::<*mut c_void>(cname.as_bytes()) }.ok().map(|s| *s)?;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads `addr` and writes `info`, a valid Dl_info.
    if unsafe { libc::dladdr(addr.cast_const(), info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so it filled `info` (zeroed before, so every field is initialised).
    let info = unsafe { info.assume_init() };
    // dli_fname belongs to the loader and lives as long as the library, which is never unloaded.
    c_string(info.dli_fname).filter(|f| !f.is_empty())
}

/// Runs `search` for `library`: the first of `in_process` already loaded (its path from
/// `symbol`), else the first of `open` that loads. The library, its path (the file, or the name
/// it was opened by) and why it is the one.
fn find(library: &'static str, search: &Search, symbol: &str) -> Result<(Library, String, Origin), HipError> {
    for probe in &search.in_process {
        if let Some(lib) = already_loaded(probe) {
            let path = file_of(&lib, symbol).unwrap_or_else(|| probe.clone());
            let origin = Origin::InProcess { probe: probe.clone() };
            return Ok((lib, path, origin));
        }
    }
    let (lib, path) = open_first(library, &search.open)?;
    let origin = Origin::Opened {
        candidate: path.clone(),
    };
    Ok((lib, path, origin))
}

fn open_first(library: &'static str, candidates: &[String]) -> Result<(Library, String), HipError> {
    let mut tried = Vec::new();
    for c in candidates {
        // SAFETY: dlopen runs the library's initializers; ROCm's only set up internal state.
        match unsafe { Library::new(c) } {
            Ok(lib) => return Ok((lib, c.clone())),
            Err(e) => tried.push((c.clone(), e.to_string())),
        }
    }
    Err(HipError::LibraryNotFound { library, tried })
}

fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: HIP/hiprtc return NUL-terminated strings that live as long as the library.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

impl Api {
    /// Finds HIP with `hip` (one already in the process first), then hiprtc with `rtc(HIP's path,
    /// why that HIP)`, falling back to the hiprtc symbols inside libamdhip64 (HIP <= 5.2).
    pub(super) fn load(hip: &Search, rtc: impl Fn(&str, &Origin) -> Search) -> Result<Api, HipError> {
        let (lib, hip_path, hip_origin) = find("libamdhip64", hip, "hipRuntimeGetVersion")?;
        // SAFETY: a library exporting the HIP names is HIP, with the signatures declared above.
        let hip = unsafe { HipFns::load(&lib, &hip_path)? };
        // SAFETY: as above: `const char* hipGetErrorName(hipError_t)`.
        let err_name = unsafe { sym::<StrFn>(&lib, &hip_path, "hipGetErrorName")? };
        // SAFETY: as above: `const char* hipGetErrorString(hipError_t)`.
        let err_string = unsafe { sym::<StrFn>(&lib, &hip_path, "hipGetErrorString")? };
        let props = ["hipGetDevicePropertiesR0600", "hipGetDeviceProperties"]
            .into_iter()
            .find_map(|n| {
                // SAFETY: both are `hipError_t f(hipDeviceProp_t*, int)` (the struct differs by ABI).
                unsafe { sym::<PropsFn>(&lib, &hip_path, n) }.ok().map(|f| (f, n))
            });
        // SAFETY: `hipError_t hipExtStreamCreateWithCUMask(hipStream_t*, uint32_t, const uint32_t*)`.
        let cu_mask = unsafe { sym::<CuMaskFn>(&lib, &hip_path, "hipExtStreamCreateWithCUMask") }.ok();
        // SAFETY: `hipError_t hipExtHostAlloc(void**, size_t, unsigned int)` (HostAllocFn).
        let ext_host_alloc = unsafe { sym::<HostAllocFn>(&lib, &hip_path, "hipExtHostAlloc") }.ok();
        let mut libs = vec![];
        let (rtc, rtc_path, rtc_origin) = match find("libhiprtc", &rtc(&hip_path, &hip_origin), "hiprtcCreateProgram") {
            Ok((rlib, rpath, why)) => {
                // SAFETY: a library exporting the hiprtc names is hiprtc.
                let t = unsafe { load_rtc(&rlib, &rpath) };
                libs.push(ManuallyDrop::new(rlib));
                (t, Some(rpath), Some(why))
            }
            // SAFETY: HIP <= 5.2 carries hiprtc inside libamdhip64, with the same signatures.
            Err(not_found) => match unsafe { load_rtc(&lib, &hip_path) } {
                Ok(t) => (
                    Ok(t),
                    Some(format!("{hip_path} (built-in hiprtc)")),
                    Some(Origin::BuiltIn),
                ),
                Err(_) => (Err(not_found), None, None),
            },
        };
        libs.push(ManuallyDrop::new(lib));
        Ok(Api {
            hip,
            err_name,
            err_string,
            props,
            cu_mask,
            ext_host_alloc,
            rtc,
            hip_path,
            hip_origin,
            rtc_path,
            rtc_origin,
            _libs: libs,
        })
    }

    fn check(&self, func: &'static str, st: Status) -> Result<(), HipError> {
        if st == 0 {
            return Ok(());
        }
        // SAFETY: hipGetErrorName accepts any code and returns a static string (or NULL).
        let name = c_string(unsafe { (self.err_name)(st) })
            .filter(|n| n.starts_with("hip"))
            .or_else(|| error::hip_error_name(st).map(str::to_string))
            .unwrap_or_else(|| format!("hipError{st}"));
        Err(HipError::Hip {
            func,
            code: st,
            name,
            explanation: error::hip_error_explanation(st),
        })
    }

    /// HIP's own one-line description of an error code.
    pub(crate) fn error_string(&self, code: i32) -> Option<String> {
        // SAFETY: as in `check`.
        c_string(unsafe { (self.err_string)(code) })
    }
}
