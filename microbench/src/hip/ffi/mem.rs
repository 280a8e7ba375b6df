//! Memory, modules and the two typed kernel launches (see the invariants in ffi/mod.rs).

use std::ffi::{CString, c_int};
use std::sync::atomic::AtomicU64;

use super::{Api, DELAY_SLOT_BYTES, HipError, Ptr, RawFunction, RawMem, RawModule, RawStream};

impl Api {
    /// Device memory, or pinned host memory (hipHostMallocMapped | hipHostMallocCoherent).
    pub(in crate::hip) fn alloc(&self, bytes: usize, host: bool) -> Result<RawMem, HipError> {
        if bytes == 0 {
            return Err(HipError::Invalid("zero-byte allocation".into()));
        }
        let mut p = std::ptr::null_mut();
        if host {
            // SAFETY: writes one pointer through a valid pointer; flags Mapped | Coherent.
            self.check("hipHostMalloc", unsafe {
                (self.hip.host_malloc)(&mut p, bytes, 0x2 | 0x4000_0000)
            })?;
        } else {
            // SAFETY: writes one pointer through a valid pointer.
            self.check("hipMalloc", unsafe { (self.hip.malloc)(&mut p, bytes) })?;
        }
        if p.is_null() || (host && p.align_offset(8) != 0) {
            return Err(HipError::Invalid(
                "HIP returned a null or unaligned allocation".into(),
            ));
        }
        Ok(RawMem {
            ptr: p,
            bytes,
            host,
        })
    }

    /// Frees (HIP waits for the device to stop using it: hipFree synchronizes).
    pub(in crate::hip) fn free(&self, m: RawMem) -> Result<(), HipError> {
        if m.host {
            // SAFETY: consumed here, freed once, with the deallocator matching hipHostMalloc.
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
    pub(in crate::hip) fn copy_out(
        &self,
        m: &RawMem,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), HipError> {
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

    pub(in crate::hip) fn copy_in(
        &self,
        m: &RawMem,
        offset: usize,
        src: &[u8],
    ) -> Result<(), HipError> {
        Self::range(m, offset, src.len())?;
        // SAFETY: as in copy_out.
        self.check("hipMemcpy", unsafe {
            (self.hip.memcpy)(
                m.ptr.cast::<u8>().add(offset).cast(),
                src.as_ptr().cast(),
                src.len(),
                4,
            )
        })
    }

    pub(in crate::hip) fn memset_async(
        &self,
        m: &RawMem,
        value: u8,
        s: &RawStream,
    ) -> Result<(), HipError> {
        // SAFETY: the whole allocation, on a live stream.
        self.check("hipMemsetAsync", unsafe {
            (self.hip.memset_async)(m.ptr, value as c_int, m.bytes, s.0)
        })
    }

    /// The host view of pinned memory, as 64-bit atomics (the GPU may write it at any time).
    pub(in crate::hip) fn host_words<'a>(&self, m: &'a RawMem) -> Option<&'a [AtomicU64]> {
        m.host.then(|| {
            // SAFETY: pinned host memory, 8-aligned (checked at allocation), live while `m` is,
            // and only ever accessed atomically from the host.
            unsafe { std::slice::from_raw_parts(m.ptr as *const AtomicU64, m.bytes / 8) }
        })
    }

    pub(in crate::hip) fn module_load_data(&self, image: &[u8]) -> Result<RawModule, HipError> {
        if image.len() < 4 || &image[..4] != b"\x7fELF" {
            return Err(HipError::Invalid("code object is not an ELF image".into()));
        }
        let mut m = std::ptr::null_mut();
        // SAFETY: `image` is a complete ELF code object that outlives the call (HIP copies it).
        self.check("hipModuleLoadData", unsafe {
            (self.hip.module_load_data)(&mut m, image.as_ptr().cast())
        })?;
        Ok(RawModule(m))
    }

    pub(in crate::hip) fn module_function(
        &self,
        m: &RawModule,
        name: &'static str,
    ) -> Result<RawFunction, HipError> {
        let cname =
            CString::new(name).map_err(|_| HipError::Invalid("NUL in kernel name".into()))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, one handle written.
        self.check("hipModuleGetFunction", unsafe {
            (self.hip.module_get_function)(&mut f, m.0, cname.as_ptr())
        })?;
        Ok(RawFunction(f, name))
    }

    pub(in crate::hip) fn module_unload(&self, m: RawModule) -> Result<(), HipError> {
        // SAFETY: consumed here, unloaded once (its functions are dropped with it).
        self.check("hipModuleUnload", unsafe { (self.hip.module_unload)(m.0) })
    }

    fn launch(
        &self,
        f: &RawFunction,
        grid: u32,
        block: u32,
        s: &RawStream,
        args: &mut [Ptr],
    ) -> Result<(), HipError> {
        if grid == 0 || block == 0 || block > 1024 {
            return Err(HipError::Invalid(format!(
                "bad launch shape {grid}x{block}"
            )));
        }
        // SAFETY: `args` points at one live value per kernel parameter, in order, of the types
        // of the kernel's C signature (the callers below); HIP copies them before returning.
        self.check("hipModuleLaunchKernel", unsafe {
            (self.hip.module_launch_kernel)(
                f.0,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                s.0,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// `delay_kernel(DelaySlot* slots, u32 cmd_id, u64 cycles, u32 nblocks)`, launched as `grid`
    /// blocks of `block` threads, with nblocks = grid.
    pub(in crate::hip) fn launch_delay(
        &self,
        f: &RawFunction,
        s: &RawStream,
        slots: &RawMem,
        cmd_id: u32,
        cycles: u64,
        (grid, block): (u32, u32),
    ) -> Result<(), HipError> {
        if f.1 != "delay_kernel" || (cmd_id as usize + 1) * DELAY_SLOT_BYTES > slots.bytes {
            return Err(HipError::Invalid(format!(
                "delay launch: {} with slot {cmd_id} of a {}-byte buffer",
                f.1, slots.bytes
            )));
        }
        let (mut p, mut id, mut cy, mut n) = (slots.ptr, cmd_id, cycles, grid);
        let mut args = [
            (&raw mut p).cast(),
            (&raw mut id).cast(),
            (&raw mut cy).cast(),
            (&raw mut n).cast(),
        ];
        self.launch(f, grid, block, s, &mut args)
    }

    /// `hp_probe(u64* stamps, u32 idx)`, one wave.
    pub(in crate::hip) fn launch_probe(
        &self,
        f: &RawFunction,
        s: &RawStream,
        stamps: &RawMem,
        idx: u32,
    ) -> Result<(), HipError> {
        if f.1 != "hp_probe" || (idx as usize + 1) * 8 > stamps.bytes {
            return Err(HipError::Invalid(format!(
                "probe launch: {} with stamp {idx} of a {}-byte buffer",
                f.1, stamps.bytes
            )));
        }
        let (mut p, mut i) = (stamps.ptr, idx);
        let mut args = [(&raw mut p).cast(), (&raw mut i).cast()];
        self.launch(f, 1, 64, s, &mut args)
    }
}
