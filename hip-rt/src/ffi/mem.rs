//! Memory, modules and the checked kernel launch (see the invariants in ffi/mod.rs).

use std::ffi::{CString, c_int, c_uint};
use std::sync::atomic::AtomicU64;

use super::{Api, HipError, Ptr, RawFunction, RawMem, RawModule, RawStream};
use crate::args::{self, Arg, LaunchConfig};
use crate::code_object;

impl Api {
    /// Device memory, or pinned host memory (Mapped | Coherent: the GPU writes stamps the host
    /// polls) through hipExtHostAlloc where HIP has it, else the deprecated hipHostMalloc.
    pub(crate) fn alloc(&self, bytes: usize, host: bool) -> Result<RawMem, HipError> {
        /// hipHostAllocMapped / hipHostMallocMapped, and hipExtHostAllocCoherent /
        /// hipHostMallocCoherent: the same values for both calls.
        const MAPPED_COHERENT: c_uint = 0x2 | 0x4000_0000;
        if bytes == 0 {
            return Err(HipError::Invalid("zero-byte allocation".into()));
        }
        let mut p = std::ptr::null_mut();
        if host {
            match self.ext_host_alloc {
                // SAFETY: writes one pointer through a valid pointer; freed by hipHostFree.
                Some(f) => self.check("hipExtHostAlloc", unsafe { f(&mut p, bytes, MAPPED_COHERENT) })?,
                // SAFETY: as above.
                None => self.check("hipHostMalloc", unsafe {
                    (self.hip.host_malloc)(&mut p, bytes, MAPPED_COHERENT)
                })?,
            }
        } else {
            // SAFETY: writes one pointer through a valid pointer.
            self.check("hipMalloc", unsafe { (self.hip.malloc)(&mut p, bytes) })?;
        }
        if p.is_null() || (host && p.align_offset(8) != 0) {
            return Err(HipError::Invalid("HIP returned a null or unaligned allocation".into()));
        }
        Ok(RawMem { ptr: p, bytes, host })
    }

    /// Frees (HIP waits for the device to stop using it: hipFree synchronizes).
    pub(crate) fn free(&self, m: RawMem) -> Result<(), HipError> {
        // Both synchronize the device: while a blocking stream is held stopped, leak instead.
        crate::null_stream::check(if m.host { "hipHostFree" } else { "hipFree" })?;
        if m.host {
            // SAFETY: consumed here, freed once, with the deallocator of hipHostMalloc and
            // hipExtHostAlloc alike.
            self.check("hipHostFree", unsafe { (self.hip.host_free)(m.ptr) })
        } else {
            // SAFETY: consumed here, freed once, with the deallocator matching hipMalloc.
            self.check("hipFree", unsafe { (self.hip.free)(m.ptr) })
        }
    }

    fn range(m: &RawMem, offset: usize, len: usize) -> Result<(), HipError> {
        match offset.checked_add(len) {
            Some(end) if end <= m.bytes => Ok(()),
            _ => Err(HipError::Invalid(format!(
                "range {offset}+{len} outside a {}-byte buffer",
                m.bytes
            ))),
        }
    }

    /// Copies m[offset..offset+dst.len()] to `dst` (hipMemcpyDefault: works for both kinds).
    pub(crate) fn copy_out(&self, m: &RawMem, offset: usize, dst: &mut [u8]) -> Result<(), HipError> {
        Self::range(m, offset, dst.len())?;
        // SAFETY: both ranges are in bounds (checked above) and do not overlap.
        self.check("hipMemcpy", unsafe {
            (self.hip.memcpy)(
                dst.as_mut_ptr().cast(),
                m.ptr.cast::<u8>().add(offset).cast(),
                dst.len(),
                4,
            )
        })
    }

    pub(crate) fn copy_in(&self, m: &RawMem, offset: usize, src: &[u8]) -> Result<(), HipError> {
        Self::range(m, offset, src.len())?;
        // SAFETY: as in copy_out.
        self.check("hipMemcpy", unsafe {
            (self.hip.memcpy)(m.ptr.cast::<u8>().add(offset).cast(), src.as_ptr().cast(), src.len(), 4)
        })
    }

    pub(crate) fn memset_async(&self, m: &RawMem, value: u8, s: &RawStream) -> Result<(), HipError> {
        // SAFETY: the whole allocation, on a live stream.
        self.check("hipMemsetAsync", unsafe {
            (self.hip.memset_async)(m.ptr, value as c_int, m.bytes, s.0)
        })
    }

    /// The host view of pinned memory, as 64-bit atomics (the GPU may write it at any time).
    pub(crate) fn host_words<'a>(&self, m: &'a RawMem) -> Option<&'a [AtomicU64]> {
        m.host.then(|| {
            // SAFETY: pinned host memory, 8-aligned (checked at allocation), live while `m` is,
            // and only ever accessed atomically from the host.
            unsafe { std::slice::from_raw_parts(m.ptr as *const AtomicU64, m.bytes / 8) }
        })
    }

    /// Loads a code object, after reading its kernel metadata (which every launch is checked
    /// against). Refuses anything that is not a 64-bit little-endian AMDGPU ELF with metadata.
    pub(crate) fn module_load_data(&self, image: &[u8]) -> Result<RawModule, HipError> {
        let kernels = code_object::kernels(image)?;
        let mut m = std::ptr::null_mut();
        // SAFETY: `image` is a complete ELF code object (its header and notes were parsed above)
        // that outlives the call (HIP copies it).
        self.check("hipModuleLoadData", unsafe {
            (self.hip.module_load_data)(&mut m, image.as_ptr().cast())
        })?;
        Ok(RawModule { ptr: m, kernels })
    }

    /// The kernel `name` of a module; its metadata must be in the module's code object.
    pub(crate) fn module_function(&self, m: &RawModule, name: &str) -> Result<RawFunction, HipError> {
        let info = m
            .kernels
            .iter()
            .find(|k| k.name == name)
            .cloned()
            .ok_or_else(|| HipError::Invalid(format!("no kernel named {name:?} in the code object's metadata")))?;
        let cname = CString::new(name).map_err(|_| HipError::Invalid("NUL in kernel name".into()))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, one handle written.
        self.check("hipModuleGetFunction", unsafe {
            (self.hip.module_get_function)(&mut f, m.ptr, cname.as_ptr())
        })?;
        Ok(RawFunction { ptr: f, info })
    }

    pub(crate) fn module_unload(&self, m: RawModule) -> Result<(), HipError> {
        // SAFETY: consumed here, unloaded once; every RawFunction of it is owned by a safe
        // `Function` that holds the module alive, so none is left to use.
        self.check("hipModuleUnload", unsafe { (self.hip.module_unload)(m.ptr) })
    }

    /// hipModuleLaunchKernel of `f` on `s` with `args`, after checking `args` against the
    /// kernel's metadata: the same number of explicit parameters, each pointer parameter a
    /// crate-owned allocation, each value of exactly the declared size.
    pub(crate) fn launch(
        &self,
        f: &RawFunction,
        s: &RawStream,
        cfg: &LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<(), HipError> {
        cfg.check()?;
        args::check_args(&f.info, args.iter().map(Arg::shape))?;
        // One 8-byte cell per argument, filled first; then one pointer per cell (the cells
        // no longer move).
        let cells: Vec<u64> = args
            .iter()
            .map(|a| match a {
                Arg::Mem(m) => m.raw().ptr as u64,
                Arg::Value(v) => u64::from_ne_bytes(v.bytes),
            })
            .collect();
        let mut ptrs: Vec<Ptr> = cells.iter().map(|c| (c as *const u64).cast_mut().cast()).collect();
        let ([gx, gy, gz], [bx, by, bz]) = (cfg.grid, cfg.block);
        // SAFETY: `ptrs` has exactly one entry per explicit kernel parameter of `f` (as HIP
        // reads them from the same code object's metadata), each pointing at a live 8-byte cell
        // whose first `size` bytes (size <= 8, checked) hold the parameter's value in native
        // byte order; HIP copies them into the kernarg segment before returning. Pointer values
        // come from live allocations of this crate (borrowed by `args` for this call; freeing
        // one later waits for the device: hipFree/hipHostFree synchronize). `f` and `s` are live.
        self.check("hipModuleLaunchKernel", unsafe {
            (self.hip.module_launch_kernel)(
                f.ptr,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                cfg.shared_mem_bytes,
                s.0,
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}
