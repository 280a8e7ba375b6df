//! Modules, their kernels and the checked launch.
//!
//! # Why [`Function::launch`] is safe
//! hipModuleLaunchKernel reads, for each explicit parameter of the kernel (as the code object's
//! metadata declares it), `size` bytes through the matching entry of the `kernelParams` array. A
//! wrong count or size makes HIP read host memory it was not given. So the binding reads the same
//! metadata itself when a module is loaded ([`crate::code_object`]) and refuses a launch whose
//! [`KernelArgs`] do not match it one to one: a pointer where the kernel takes a global buffer, a
//! value of exactly the declared size where it takes a value (other parameter kinds, such as
//! images or samplers, cannot be passed and such kernels cannot be launched). The check is done
//! in the FFI module right before the call, so no safe caller can get past it.
//!
//! A pointer parameter can only be given as a [`Mem`]: a borrow of a [`DeviceBuffer`] or
//! [`HostBuffer`] that this crate allocated. The borrow lasts for the call, so the allocation is
//! live when HIP reads the address; the kernel may still run after the call returns, and that
//! is covered by the buffers' drop: hipFree and hipHostFree wait for the device first.
//!
//! What the binding cannot check is what the kernel's own code does with what it is given (an
//! index past the end of a buffer, say): device code is outside Rust's reach, as in every GPU
//! binding. With the default (non-XNACK) memory model a GPU access outside the process's GPU
//! mappings faults on the device and comes back as an error of a later call
//! (hipErrorIllegalAddress). Bounds that a kernel relies on (the length of a buffer it indexes)
//! are the caller's contract with its own kernel: check them before the launch.
//!
//! [`DeviceBuffer`]: crate::DeviceBuffer
//! [`HostBuffer`]: crate::HostBuffer
//! [`Mem`]: crate::Mem

use std::sync::Arc;

pub use crate::args::{KernelArgs, LaunchConfig};
use crate::code_object::KernelInfo;
use crate::ffi::{Api, RawFunction, RawModule};
use crate::{Device, HipError, Stream};

/// A loaded code object (hipModuleLoadData; unloaded when it and every [`Function`] taken from it
/// are dropped).
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let hip = hip_rt::Hip::load()?;
/// let dev = hip.device(0)?;
/// let image = std::fs::read("kernels.co").expect("a code object");
/// let module = dev.load_module(&image)?;
/// for k in module.kernels() {
///     println!("{}: {} parameters", k.name, k.params.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    api: Arc<Api>,
    raw: Option<RawModule>,
    /// The device's HIP ordinal.
    ordinal: i32,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if let Some(m) = self.raw.take() {
            let _ = self.api.module_unload(m); // nothing useful to do with an error in drop
        }
    }
}

impl Module {
    pub(crate) fn load(dev: &Device, image: &[u8]) -> Result<Module, HipError> {
        let raw = dev.current()?.module_load_data(image)?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                api: dev.api.clone(),
                raw: Some(raw),
                ordinal: dev.ordinal,
            }),
        })
    }

    /// The kernels of the code object and their explicit parameters, from its metadata.
    pub fn kernels(&self) -> &[KernelInfo] {
        self.raw().kernels()
    }

    fn raw(&self) -> &RawModule {
        self.inner.raw.as_ref().expect("present until drop")
    }

    /// The kernel `name` (hipModuleGetFunction); it keeps the module loaded.
    pub fn function(&self, name: &str) -> Result<Function, HipError> {
        let m = &self.inner;
        m.api.set_device(m.ordinal)?;
        let raw = m.api.module_function(self.raw(), name)?;
        Ok(Function {
            module: self.clone(),
            raw,
        })
    }
}

/// A kernel of a loaded [`Module`], launched with a [`KernelArgs`] list that must match its
/// parameters (see [the `launch` module](crate::launch) for why that makes the launch safe).
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// use hip_rt::{Hip, KernelArgs, LaunchConfig, Mem, StreamPriority};
/// let hip = Hip::load()?;
/// let dev = hip.device(0)?;
/// // extern "C" __global__ void fill(unsigned long long* out, unsigned n, unsigned long long v, float s)
/// let module = dev.load_module(&std::fs::read("fill.co").expect("a code object"))?;
/// let fill = module.function("fill")?;
/// let out = dev.alloc_device(64 * 8)?;
/// let stream = dev.stream(StreamPriority::Normal)?;
/// let args = KernelArgs::new().mem(Mem::Device(&out)).u32(64).u64(7).f32(1.0);
/// fill.launch(&stream, LaunchConfig::linear(1, 64), &args)?;
/// stream.synchronize()?;
/// // A list that does not match the kernel is refused before HIP is called:
/// assert!(fill.launch(&stream, LaunchConfig::linear(1, 64), &KernelArgs::new().u32(64)).is_err());
/// # Ok(()) }
/// ```
pub struct Function {
    module: Module,
    raw: RawFunction,
}

impl Function {
    /// The kernel's name and explicit parameters.
    pub fn info(&self) -> &KernelInfo {
        self.raw.info()
    }

    /// Enqueues the kernel on `stream` (does not wait). `args` must match the kernel's
    /// parameters one to one, else `HipError::Invalid` and nothing is launched.
    pub fn launch(&self, stream: &Stream, cfg: LaunchConfig, args: &KernelArgs<'_>) -> Result<(), HipError> {
        let m = &self.module.inner;
        m.api.set_device(m.ordinal)?;
        m.api.launch(&self.raw, stream.raw(), &cfg, &args.args)
    }
}
