//! The only file of `hip` with `unsafe`: libamdhip64 and hiprtc opened with libloading, a typed
//! table of the C functions used, and one small safe method per call.
//!
//! Invariants the safe methods rely on (upheld by the rest of `hip`, which is the only user):
//! * the libraries are never unloaded ([`ManuallyDrop`]), so the table's pointers stay valid;
//! * raw handles are created here and destroyed here exactly once (the wrappers own them);
//! * code objects loaded with [`Api::module_load_data`] come from `kernels/delay.hip`, so a
//!   function named `delay_kernel`/`hp_probe` has the argument list the launchers pass.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::mem::ManuallyDrop;
use std::sync::atomic::AtomicU64;

use libloading::Library;

use super::error::{self, HipError};

type Ptr = *mut c_void;
type Status = c_int;
type StrFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// Size of the zeroed buffer handed to hipGetDeviceProperties*: hipDeviceProp_t is under 2 KiB
/// in every HIP ABI (R0000 of 5.x, R0600 of 6.x/7.x); 64 KiB leaves room for any future growth.
pub(super) const PROPS_BUF_BYTES: usize = 64 * 1024;
/// The slot size of `DelaySlot` in kernels/delay.hip.
pub(super) const DELAY_SLOT_BYTES: usize = 32;

/// Finds `name` in `lib` as a value of type `T`.
///
/// # Safety
/// `T` must be the exact `extern "C"` fn-pointer type of the C function `name`.
unsafe fn sym<T: Copy>(lib: &Library, path: &str, name: &'static str) -> Result<T, HipError> {
    let cname = format!("{name}\0");
    // SAFETY: the caller guarantees that `T` is the symbol's true type.
    match unsafe { lib.get::<T>(cname.as_bytes()) } {
        Ok(s) => Ok(*s),
        Err(_) => Err(HipError::MissingSymbol { library: path.to_string(), symbol: name }),
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
    unsafe { Ok((RtcFns::load(lib, path)?, sym::<StrFn>(lib, path, "hiprtcGetErrorString")?)) }
}

type PropsFn = unsafe extern "C" fn(*mut c_void, c_int) -> Status;
type CuMaskFn = unsafe extern "C" fn(*mut Ptr, u32, *const u32) -> Status;

macro_rules! raw_handle {
    ($($name:ident),*) => {$(
        /// An opaque HIP handle, owned by exactly one wrapper.
        pub(super) struct $name(Ptr);
        // SAFETY: HIP handles are process-wide runtime objects; the HIP runtime API is thread-safe
        // and lets any host thread use them (the wrappers destroy each handle once).
        unsafe impl Send for $name {}
        // SAFETY: as for Send; every use goes through HIP's own locking.
        unsafe impl Sync for $name {}
    )*};
}
raw_handle!(RawStream, RawEvent, RawModule);

/// A kernel function of a loaded module, with the name it was looked up by.
pub(super) struct RawFunction(Ptr, &'static str);
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
    rtc: Result<(RtcFns, StrFn), HipError>,
    pub(super) hip_path: String,
    pub(super) rtc_path: Option<String>,
    // HIP cannot be unloaded safely (its atexit handlers and threads live in it): never dlclose.
    _libs: Vec<ManuallyDrop<Library>>,
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
    /// Opens the first loadable HIP of `hip_candidates`, then hiprtc from `rtc_candidates`,
    /// falling back to the hiprtc symbols inside libamdhip64 (HIP <= 5.2).
    pub(super) fn load(hip_candidates: &[String], rtc_candidates: &[String]) -> Result<Api, HipError> {
        let (lib, hip_path) = open_first("libamdhip64", hip_candidates)?;
        // SAFETY: a library exporting the HIP names is HIP, with the signatures declared above.
        let hip = unsafe { HipFns::load(&lib, &hip_path)? };
        // SAFETY: as above: `const char* hipGetErrorName(hipError_t)`.
        let err_name = unsafe { sym::<StrFn>(&lib, &hip_path, "hipGetErrorName")? };
        // SAFETY: as above: `const char* hipGetErrorString(hipError_t)`.
        let err_string = unsafe { sym::<StrFn>(&lib, &hip_path, "hipGetErrorString")? };
        let props = ["hipGetDevicePropertiesR0600", "hipGetDeviceProperties"].into_iter().find_map(|n| {
            // SAFETY: both are `hipError_t f(hipDeviceProp_t*, int)` (the struct differs by ABI).
            unsafe { sym::<PropsFn>(&lib, &hip_path, n) }.ok().map(|f| (f, n))
        });
        // SAFETY: `hipError_t hipExtStreamCreateWithCUMask(hipStream_t*, uint32_t, const uint32_t*)`.
        let cu_mask = unsafe { sym::<CuMaskFn>(&lib, &hip_path, "hipExtStreamCreateWithCUMask") }.ok();
        let mut libs = vec![];
        let (rtc, rtc_path) = match open_first("libhiprtc", rtc_candidates) {
            Ok((rlib, rpath)) => {
                // SAFETY: a library exporting the hiprtc names is hiprtc.
                let t = unsafe { load_rtc(&rlib, &rpath) };
                libs.push(ManuallyDrop::new(rlib));
                (t, Some(rpath))
            }
            // SAFETY: HIP <= 5.2 carries hiprtc inside libamdhip64, with the same signatures.
            Err(not_found) => match unsafe { load_rtc(&lib, &hip_path) } {
                Ok(t) => (Ok(t), Some(format!("{hip_path} (built-in hiprtc)"))),
                Err(_) => (Err(not_found), None),
            },
        };
        libs.push(ManuallyDrop::new(lib));
        Ok(Api { hip, err_name, err_string, props, cu_mask, rtc, hip_path, rtc_path, _libs: libs })
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
        Err(HipError::Hip { func, code: st, name, explanation: error::hip_error_explanation(st) })
    }

    /// HIP's own one-line description of an error code.
    pub(super) fn error_string(&self, code: i32) -> Option<String> {
        // SAFETY: as in `check`.
        c_string(unsafe { (self.err_string)(code) })
    }

    pub(super) fn runtime_version(&self) -> Result<i32, HipError> {
        let mut v = 0;
        // SAFETY: writes one int through a valid pointer.
        self.check("hipRuntimeGetVersion", unsafe { (self.hip.runtime_get_version)(&mut v) })?;
        Ok(v)
    }

    pub(super) fn driver_version(&self) -> Result<i32, HipError> {
        let mut v = 0;
        // SAFETY: writes one int through a valid pointer.
        self.check("hipDriverGetVersion", unsafe { (self.hip.driver_get_version)(&mut v) })?;
        Ok(v)
    }

    pub(super) fn device_count(&self) -> Result<i32, HipError> {
        let mut n = 0;
        // SAFETY: writes one int through a valid pointer.
        self.check("hipGetDeviceCount", unsafe { (self.hip.get_device_count)(&mut n) })?;
        Ok(n)
    }

    pub(super) fn set_device(&self, dev: i32) -> Result<(), HipError> {
        // SAFETY: plain value argument; HIP validates the index.
        self.check("hipSetDevice", unsafe { (self.hip.set_device)(dev) })
    }

    pub(super) fn device_synchronize(&self) -> Result<(), HipError> {
        // SAFETY: no arguments.
        self.check("hipDeviceSynchronize", unsafe { (self.hip.device_synchronize)() })
    }

    pub(super) fn attribute(&self, attr: i32, dev: i32) -> Result<i32, HipError> {
        let mut v = 0;
        // SAFETY: writes one int; HIP validates attr and dev.
        self.check("hipDeviceGetAttribute", unsafe { (self.hip.device_get_attribute)(&mut v, attr, dev) })?;
        Ok(v)
    }

    fn string_query(&self, func: &'static str, f: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status, dev: i32) -> Result<String, HipError> {
        let mut buf = [0 as c_char; 512];
        // SAFETY: HIP writes at most len-1 bytes plus NUL into the buffer of that length.
        self.check(func, unsafe { f(buf.as_mut_ptr(), (buf.len() - 1) as c_int, dev) })?;
        let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub(super) fn device_name(&self, dev: i32) -> Result<String, HipError> {
        self.string_query("hipDeviceGetName", self.hip.device_get_name, dev)
    }

    pub(super) fn pci_bus_id(&self, dev: i32) -> Result<String, HipError> {
        self.string_query("hipDeviceGetPCIBusId", self.hip.device_get_pci_bus_id, dev)
    }

    /// The raw bytes of hipDeviceProp_t (layout depends on the HIP ABI; scan, don't index).
    pub(super) fn device_properties_bytes(&self, dev: i32) -> Result<Vec<u8>, HipError> {
        let (f, name) = self.props.ok_or_else(|| HipError::MissingSymbol {
            library: self.hip_path.clone(),
            symbol: "hipGetDeviceProperties",
        })?;
        let mut buf = vec![0u64; PROPS_BUF_BYTES / 8];
        // SAFETY: the struct HIP writes is far smaller than the zeroed, 8-aligned buffer.
        self.check(name, unsafe { f(buf.as_mut_ptr().cast(), dev) })?;
        Ok(buf.iter().flat_map(|w| w.to_ne_bytes()).collect())
    }

    pub(super) fn has_cu_mask(&self) -> bool {
        self.cu_mask.is_some()
    }

    pub(super) fn stream_priority_range(&self) -> Result<(i32, i32), HipError> {
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: writes two ints through valid pointers.
        self.check("hipDeviceGetStreamPriorityRange", unsafe { (self.hip.stream_priority_range)(&mut least, &mut greatest) })?;
        Ok((least, greatest))
    }

    /// A non-blocking stream (flag hipStreamNonBlocking = 1) of the given priority.
    pub(super) fn stream_create(&self, priority: i32) -> Result<RawStream, HipError> {
        let mut s = std::ptr::null_mut();
        // SAFETY: writes one handle through a valid pointer.
        self.check("hipStreamCreateWithPriority", unsafe { (self.hip.stream_create_with_priority)(&mut s, 1, priority) })?;
        Ok(RawStream(s))
    }

    /// A stream with its own hardware queue (hipExtStreamCreateWithCUMask).
    pub(super) fn stream_create_cu_mask(&self, mask: &[u32]) -> Result<RawStream, HipError> {
        let f = self.cu_mask.ok_or_else(|| HipError::MissingSymbol {
            library: self.hip_path.clone(),
            symbol: "hipExtStreamCreateWithCUMask",
        })?;
        let mut s = std::ptr::null_mut();
        // SAFETY: HIP reads mask.len() words from the slice and writes one handle.
        self.check("hipExtStreamCreateWithCUMask", unsafe { f(&mut s, mask.len() as u32, mask.as_ptr()) })?;
        Ok(RawStream(s))
    }

    pub(super) fn stream_destroy(&self, s: RawStream) -> Result<(), HipError> {
        // SAFETY: the handle came from stream_create* and is consumed here (destroyed once).
        self.check("hipStreamDestroy", unsafe { (self.hip.stream_destroy)(s.0) })
    }

    pub(super) fn stream_synchronize(&self, s: &RawStream) -> Result<(), HipError> {
        // SAFETY: a live stream handle.
        self.check("hipStreamSynchronize", unsafe { (self.hip.stream_synchronize)(s.0) })
    }

    pub(super) fn event_create(&self, flags: u32) -> Result<RawEvent, HipError> {
        let mut e = std::ptr::null_mut();
        // SAFETY: writes one handle through a valid pointer.
        self.check("hipEventCreateWithFlags", unsafe { (self.hip.event_create_with_flags)(&mut e, flags) })?;
        Ok(RawEvent(e))
    }

    pub(super) fn event_record(&self, e: &RawEvent, s: &RawStream) -> Result<(), HipError> {
        // SAFETY: live handles.
        self.check("hipEventRecord", unsafe { (self.hip.event_record)(e.0, s.0) })
    }

    pub(super) fn event_synchronize(&self, e: &RawEvent) -> Result<(), HipError> {
        // SAFETY: a live event handle.
        self.check("hipEventSynchronize", unsafe { (self.hip.event_synchronize)(e.0) })
    }

    /// Ok(true) when the event completed, Ok(false) on hipErrorNotReady.
    pub(super) fn event_query(&self, e: &RawEvent) -> Result<bool, HipError> {
        // SAFETY: a live event handle.
        match unsafe { (self.hip.event_query)(e.0) } {
            600 => Ok(false),
            st => self.check("hipEventQuery", st).map(|_| true),
        }
    }

    pub(super) fn event_elapsed_ms(&self, start: &RawEvent, stop: &RawEvent) -> Result<f32, HipError> {
        let mut ms = 0f32;
        // SAFETY: writes one float; live handles.
        self.check("hipEventElapsedTime", unsafe { (self.hip.event_elapsed_time)(&mut ms, start.0, stop.0) })?;
        Ok(ms)
    }

    pub(super) fn event_destroy(&self, e: RawEvent) -> Result<(), HipError> {
        // SAFETY: consumed here, destroyed once.
        self.check("hipEventDestroy", unsafe { (self.hip.event_destroy)(e.0) })
    }

    /// Device memory, or pinned host memory (hipHostMallocMapped | hipHostMallocCoherent).
    pub(super) fn alloc(&self, bytes: usize, host: bool) -> Result<RawMem, HipError> {
        if bytes == 0 {
            return Err(HipError::Invalid("zero-byte allocation".into()));
        }
        let mut p = std::ptr::null_mut();
        // SAFETY: writes one pointer through a valid pointer.
        if host {
            self.check("hipHostMalloc", unsafe { (self.hip.host_malloc)(&mut p, bytes, 0x2 | 0x4000_0000) })?;
        } else {
            self.check("hipMalloc", unsafe { (self.hip.malloc)(&mut p, bytes) })?;
        }
        if p.is_null() || (host && p.align_offset(8) != 0) {
            return Err(HipError::Invalid("HIP returned a null or unaligned allocation".into()));
        }
        Ok(RawMem { ptr: p, bytes, host })
    }

    /// Frees (HIP waits for the device to stop using it: hipFree synchronizes).
    pub(super) fn free(&self, m: RawMem) -> Result<(), HipError> {
        // SAFETY: consumed here, freed once, with the matching deallocator.
        if m.host {
            self.check("hipHostFree", unsafe { (self.hip.host_free)(m.ptr) })
        } else {
            self.check("hipFree", unsafe { (self.hip.free)(m.ptr) })
        }
    }

    fn range(m: &RawMem, offset: usize, len: usize) -> Result<(), HipError> {
        match offset.checked_add(len) {
            Some(end) if end <= m.bytes => Ok(()),
            _ => Err(HipError::Invalid(format!("range {offset}+{len} outside a {}-byte buffer", m.bytes))),
        }
    }

    /// Copies m[offset..offset+dst.len()] to `dst` (hipMemcpyDefault: works for both kinds).
    pub(super) fn copy_out(&self, m: &RawMem, offset: usize, dst: &mut [u8]) -> Result<(), HipError> {
        Self::range(m, offset, dst.len())?;
        // SAFETY: both ranges are in bounds (checked above) and do not overlap.
        self.check("hipMemcpy", unsafe { (self.hip.memcpy)(dst.as_mut_ptr().cast(), m.ptr.cast::<u8>().add(offset).cast(), dst.len(), 4) })
    }

    pub(super) fn copy_in(&self, m: &RawMem, offset: usize, src: &[u8]) -> Result<(), HipError> {
        Self::range(m, offset, src.len())?;
        // SAFETY: as in copy_out.
        self.check("hipMemcpy", unsafe { (self.hip.memcpy)(m.ptr.cast::<u8>().add(offset).cast(), src.as_ptr().cast(), src.len(), 4) })
    }

    pub(super) fn memset_async(&self, m: &RawMem, value: u8, s: &RawStream) -> Result<(), HipError> {
        // SAFETY: the whole allocation, on a live stream.
        self.check("hipMemsetAsync", unsafe { (self.hip.memset_async)(m.ptr, value as c_int, m.bytes, s.0) })
    }

    /// The host view of pinned memory, as 64-bit atomics (the GPU may write it at any time).
    pub(super) fn host_words<'a>(&self, m: &'a RawMem) -> Option<&'a [AtomicU64]> {
        // SAFETY: pinned host memory, 8-aligned (checked at allocation), live while `m` is, and
        // only ever accessed atomically from the host.
        m.host.then(|| unsafe { std::slice::from_raw_parts(m.ptr as *const AtomicU64, m.bytes / 8) })
    }

    pub(super) fn module_load_data(&self, image: &[u8]) -> Result<RawModule, HipError> {
        if image.len() < 4 || &image[..4] != b"\x7fELF" {
            return Err(HipError::Invalid("code object is not an ELF image".into()));
        }
        let mut m = std::ptr::null_mut();
        // SAFETY: `image` is a complete ELF code object that outlives the call (HIP copies it).
        self.check("hipModuleLoadData", unsafe { (self.hip.module_load_data)(&mut m, image.as_ptr().cast()) })?;
        Ok(RawModule(m))
    }

    pub(super) fn module_function(&self, m: &RawModule, name: &'static str) -> Result<RawFunction, HipError> {
        let cname = CString::new(name).map_err(|_| HipError::Invalid("NUL in kernel name".into()))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, one handle written.
        self.check("hipModuleGetFunction", unsafe { (self.hip.module_get_function)(&mut f, m.0, cname.as_ptr()) })?;
        Ok(RawFunction(f, name))
    }

    pub(super) fn module_unload(&self, m: RawModule) -> Result<(), HipError> {
        // SAFETY: consumed here, unloaded once (its functions are dropped with it).
        self.check("hipModuleUnload", unsafe { (self.hip.module_unload)(m.0) })
    }

    fn launch(&self, f: &RawFunction, grid: u32, block: u32, s: &RawStream, args: &mut [Ptr]) -> Result<(), HipError> {
        if grid == 0 || block == 0 || block > 1024 {
            return Err(HipError::Invalid(format!("bad launch shape {grid}x{block}")));
        }
        // SAFETY: `args` points at one live value per kernel parameter, in order, of the types
        // of the kernel's C signature (the callers below); HIP copies them before returning.
        self.check("hipModuleLaunchKernel", unsafe {
            (self.hip.module_launch_kernel)(f.0, grid, 1, 1, block, 1, 1, 0, s.0, args.as_mut_ptr(), std::ptr::null_mut())
        })
    }

    /// `delay_kernel(DelaySlot* slots, u32 cmd_id, u64 cycles, u32 nblocks)` with grid = nblocks.
    pub(super) fn launch_delay(&self, f: &RawFunction, s: &RawStream, slots: &RawMem, cmd_id: u32, cycles: u64, grid: u32, block: u32) -> Result<(), HipError> {
        if f.1 != "delay_kernel" || (cmd_id as usize + 1) * DELAY_SLOT_BYTES > slots.bytes {
            return Err(HipError::Invalid(format!("delay launch: {} with slot {cmd_id} of a {}-byte buffer", f.1, slots.bytes)));
        }
        let (mut p, mut id, mut cy, mut n) = (slots.ptr, cmd_id, cycles, grid);
        let mut args = [(&raw mut p).cast(), (&raw mut id).cast(), (&raw mut cy).cast(), (&raw mut n).cast()];
        self.launch(f, grid, block, s, &mut args)
    }

    /// `hp_probe(u64* stamps, u32 idx)`, one wave.
    pub(super) fn launch_probe(&self, f: &RawFunction, s: &RawStream, stamps: &RawMem, idx: u32) -> Result<(), HipError> {
        if f.1 != "hp_probe" || (idx as usize + 1) * 8 > stamps.bytes {
            return Err(HipError::Invalid(format!("probe launch: {} with stamp {idx} of a {}-byte buffer", f.1, stamps.bytes)));
        }
        let (mut p, mut i) = (stamps.ptr, idx);
        let mut args = [(&raw mut p).cast(), (&raw mut i).cast()];
        self.launch(f, 1, 64, s, &mut args)
    }

    /// Compiles `source` with hiprtc; returns (code object, compiler log).
    pub(super) fn rtc_compile(&self, source: &str, name: &str, options: &[String]) -> Result<(Vec<u8>, String), HipError> {
        let (rtc, err_str) = self.rtc.as_ref().map_err(Clone::clone)?;
        let invalid = |_| HipError::Invalid("NUL byte in hiprtc input".into());
        let (src, cname) = (CString::new(source).map_err(invalid)?, CString::new(name).map_err(invalid)?);
        let opts: Vec<CString> = options.iter().map(|o| CString::new(o.as_str())).collect::<Result<_, _>>().map_err(invalid)?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let fail = |func: &'static str, code: Status, log: String| {
            // SAFETY: hiprtcGetErrorString accepts any code and returns a static string.
            let name = c_string(unsafe { err_str(code) }).unwrap_or_else(|| error::rtc_error_name(code).into());
            HipError::Rtc { func, code, name, log }
        };
        let mut prog: Ptr = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings that outlive the call; no headers (count 0, null arrays).
        let st = unsafe { (rtc.create_program)(&mut prog, src.as_ptr(), cname.as_ptr(), 0, std::ptr::null(), std::ptr::null()) };
        if st != 0 {
            return Err(fail("hiprtcCreateProgram", st, String::new()));
        }
        // SAFETY: `prog` is live until destroy_program at the end; every out-buffer is sized by
        // the matching size query first.
        let result = unsafe {
            let st = (rtc.compile_program)(prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr());
            let mut log_len = 0usize;
            let mut log = String::new();
            if (rtc.get_program_log_size)(prog, &mut log_len) == 0 && log_len > 1 {
                let mut buf = vec![0u8; log_len + 1];
                if (rtc.get_program_log)(prog, buf.as_mut_ptr().cast()) == 0 {
                    log = String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap_or(log_len)]).into_owned();
                }
            }
            let mut code_len = 0usize;
            if st != 0 {
                Err(fail("hiprtcCompileProgram", st, log))
            } else {
                match (rtc.get_code_size)(prog, &mut code_len) {
                    0 => {
                        let mut code = vec![0u8; code_len];
                        match (rtc.get_code)(prog, code.as_mut_ptr().cast()) {
                            0 => Ok((code, log)),
                            s => Err(fail("hiprtcGetCode", s, log)),
                        }
                    }
                    s => Err(fail("hiprtcGetCodeSize", s, log)),
                }
            }
        };
        // SAFETY: destroys the live program once.
        unsafe { (rtc.destroy_program)(&mut prog) };
        result
    }

    pub(super) fn rtc_status(&self) -> Result<(), HipError> {
        self.rtc.as_ref().map(|_| ()).map_err(Clone::clone)
    }
}
