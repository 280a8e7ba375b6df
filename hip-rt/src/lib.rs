//! The HIP runtime and hiprtc, loaded at run time (nothing of ROCm is needed to build), with safe
//! RAII wrappers. It knows nothing of any particular kernel: code objects are compiled from a
//! caller's source ([`Hip::compile`]), loaded ([`Device::load_module`]) and launched with a typed
//! argument list ([`Function::launch`] with [`KernelArgs`]) that is checked against the code
//! object's own kernel metadata ([`code_object`]).
//!
//! Shape (as cudarc's): a function table loaded with libloading (`ffi`, the only module with
//! `unsafe`), one thin `Result` method per C call, and owning types that release their handle on
//! drop: [`Hip`] (the loaded libraries), [`Device`], [`Stream`], [`Event`], [`DeviceBuffer`],
//! [`HostBuffer`], [`Module`] and [`Function`].
//!
//! Every failure is a [`HipError`] (never a panic): no library, a missing symbol, a HIP error
//! code with its name and a hint (e.g. 100 = no GPU), or an argument refused before calling HIP.
//!
//! ```no_run
//! # fn main() -> Result<(), hip_rt::HipError> {
//! use hip_rt::{Hip, KernelArgs, LaunchConfig, Mem, StreamPriority};
//! let hip = Hip::load()?;
//! let dev = hip.device(0)?;
//! let src = r#"extern "C" __global__ void set(unsigned* p, unsigned v) { p[0] = v; }"#;
//! let code = hip.compile(src, "set.hip", &["--offload-arch=gfx942".to_string()])?;
//! let module = dev.load_module(&code.image)?;
//! let set = module.function("set")?;
//! let stream = dev.stream(StreamPriority::Normal)?;
//! let out = dev.alloc_host(8)?;
//! set.launch(&stream, LaunchConfig::linear(1, 64), &KernelArgs::new().mem(Mem::Host(&out)).u32(7))?;
//! stream.synchronize()?;
//! assert_eq!(out.words()[0].load(std::sync::atomic::Ordering::Acquire) as u32, 7);
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod args;
pub mod code_object;
mod device;
mod error;
#[allow(unsafe_code)] // the one module with `unsafe`: see its docs for the invariants
mod ffi;
pub mod launch;
mod loader;
mod msgpack;
mod null_stream;
mod objects;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

use std::sync::Arc;

pub use device::{Device, DeviceInfo, StreamPriority, attr, scan_gcn_arch_name};
pub use error::{HipError, hip_error_explanation, hip_error_name, rtc_error_name};
use ffi::Api;
pub use launch::{Function, KernelArgs, LaunchConfig, Module};
pub use loader::{HIP_SONAMES, HIPRTC_SONAMES, Origin, hiprtc_candidates_for, library_candidates};
use loader::{Search, hip_search, hiprtc_search};
pub use null_stream::NullStreamBlocked;
pub use objects::{DeviceBuffer, Event, HostBuffer, Mem, Stream};

/// HIP_VERSION encoding: major * 10_000_000 + minor * 100_000 + patch (e.g. 50221153 = 5.2.21153).
///
/// ```
/// assert_eq!(hip_rt::decode_version(50221153), (5, 2, 21153));
/// ```
pub fn decode_version(v: i32) -> (i32, i32, i32) {
    (v / 10_000_000, v / 100_000 % 100, v % 100_000)
}

/// The s_memrealtime (`wall_clock64()`) rate of a gfx target, in kHz, used when HIP cannot
/// report it (hipDeviceAttributeWallClockRate is unknown to HIP 5.2): 100 MHz on gfx940/941/942
/// and on gfx10 and later, 25 MHz on the other gfx9 parts (gfx90a, gfx908, gfx906, gfx900; Vega 10
/// is really 27 MHz). The table is LLVM libc's (`libc/src/time/gpu/time_utils.h`); HIP's own
/// answer, when it gives one, always wins. Anything else (not a gfx name): 100 MHz.
///
/// ```
/// assert_eq!(hip_rt::default_wall_clock_khz("gfx942:sramecc+:xnack-"), 100_000);
/// assert_eq!(hip_rt::default_wall_clock_khz("gfx90a:sramecc+:xnack-"), 25_000);
/// ```
pub fn default_wall_clock_khz(gcn_arch_name: &str) -> u32 {
    let processor = gcn_arch_name.split(':').next().unwrap_or("");
    match processor.strip_prefix("gfx") {
        Some(p) if p.starts_with("94") => 100_000,
        Some(p) if p.len() == 3 && p.starts_with('9') => 25_000,
        _ => 100_000,
    }
}

/// A compiled code object and the compiler's log (see [`Hip::compile`]).
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let hip = hip_rt::Hip::load()?;
/// let src = r#"extern "C" __global__ void nop() {}"#;
/// let code = hip.compile(src, "nop.hip", &["--offload-arch=gfx90a".to_string()])?;
/// assert_eq!(hip_rt::code_object::kernels(&code.image)?[0].name, "nop");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CompiledCode {
    /// The ELF code object, for [`Device::load_module`].
    pub image: Vec<u8>,
    /// hiprtc's log (warnings), possibly empty.
    pub log: String,
}

/// A loaded HIP runtime (cheap to clone; the libraries are never unloaded).
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let hip = hip_rt::Hip::load()?;
/// let (major, minor, _) = hip_rt::decode_version(hip.runtime_version()?);
/// println!("HIP {major}.{minor} from {}", hip.library_path());
/// match hip.device_count() {
///     Ok(n) => println!("{n} GPU(s)"),
///     Err(e) if e.is_no_device() => println!("no GPU: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Hip {
    api: Arc<Api>,
}

impl Hip {
    /// Loads libamdhip64 (and hiprtc): the HIP runtime already loaded in this process when there
    /// is one (PyTorch's, after `import torch`: [`Origin::InProcess`], found without loading
    /// anything), else the first of [`library_candidates`] that loads; hiprtc beside it. Two
    /// runtimes in one process would not know each other's streams
    /// (docs/kfd-facts.md#one-hip-runtime-per-process); [`Hip::library_origin`] says which case.
    pub fn load() -> Result<Hip, HipError> {
        let rocm = std::env::var("ROCM_PATH").ok();
        // A runtime under a soname HIP_SONAMES does not list shows here (a bundler's renamed copy).
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        Hip::load_in(rocm.as_deref(), &maps)
    }

    /// [`Hip::load`] with `ROCM_PATH` and `/proc/self/maps` given.
    fn load_in(rocm: Option<&str>, maps: &str) -> Result<Hip, HipError> {
        let api = Api::load(&hip_search(rocm, maps), |path, why| hiprtc_search(path, why, rocm))?;
        Ok(Hip { api: Arc::new(api) })
    }

    /// Loads from exactly these candidates (paths or sonames), in order, without looking for a
    /// runtime already in the process.
    pub fn load_from(hip: &[String], hiprtc: &[String]) -> Result<Hip, HipError> {
        let search = |open: &[String]| Search {
            in_process: Vec::new(),
            open: open.to_vec(),
        };
        Ok(Hip {
            api: Arc::new(Api::load(&search(hip), |_, _| search(hiprtc))?),
        })
    }

    /// The libamdhip64 in use: the candidate that opened, or, for a runtime that was already in
    /// the process, its file.
    pub fn library_path(&self) -> &str {
        &self.api.hip_path
    }

    /// Why [`Hip::library_path`] is the one: already in the process, or opened.
    pub fn library_origin(&self) -> &Origin {
        &self.api.hip_origin
    }

    /// Where hiprtc came from (a libhiprtc, or libamdhip64 itself for HIP <= 5.2).
    pub fn hiprtc_path(&self) -> Option<&str> {
        self.api.rtc_path.as_deref()
    }

    /// Why [`Hip::hiprtc_path`] is the one (`None` when no hiprtc was found).
    pub fn hiprtc_origin(&self) -> Option<&Origin> {
        self.api.rtc_origin.as_ref()
    }

    /// Ok when run-time compilation is available; else why not.
    pub fn hiprtc_status(&self) -> Result<(), HipError> {
        self.api.rtc_status()
    }

    /// hipRuntimeGetVersion, raw (see [`decode_version`]).
    pub fn runtime_version(&self) -> Result<i32, HipError> {
        self.api.runtime_version()
    }

    /// hipDriverGetVersion, raw.
    pub fn driver_version(&self) -> Result<i32, HipError> {
        self.api.driver_version()
    }

    /// Number of GPUs HIP sees; no GPU at all is `Err` with code 100 (hipErrorNoDevice).
    pub fn device_count(&self) -> Result<u32, HipError> {
        Ok(u32::try_from(self.api.device_count()?).unwrap_or(0))
    }

    /// True when hipExtStreamCreateWithCUMask exists (streams with their own hardware queue).
    pub fn has_own_queue_streams(&self) -> bool {
        self.api.has_cu_mask()
    }

    /// The pinned host allocator in use: `hipExtHostAlloc` (ROCm 6.3+), else the deprecated
    /// `hipHostMalloc` it replaces (same flags).
    pub fn host_allocator(&self) -> &'static str {
        self.api.host_allocator()
    }

    /// HIP's description of an error code.
    pub fn error_string(&self, code: i32) -> Option<String> {
        self.api.error_string(code)
    }

    /// Compiles `source` (named `name` in diagnostics) with hiprtc and `options` (e.g.
    /// `--offload-arch=gfx942:sramecc+:xnack-`, `-O3`). Needs no GPU in principle. Note that an
    /// old hiprtc may crash the process on a target it does not know: check the target first.
    pub fn compile(&self, source: &str, name: &str, options: &[String]) -> Result<CompiledCode, HipError> {
        let (image, log) = self.api.rtc_compile(source, name, options)?;
        Ok(CompiledCode { image, log })
    }

    /// Opens device `index` (hipSetDevice) and reads what HIP says about it.
    pub fn device(&self, index: u32) -> Result<Device, HipError> {
        Device::open(&self.api, index)
    }
}

#[cfg(test)]
mod tests;
