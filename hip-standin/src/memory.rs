//! "Device" memory: host allocations the stand-in hands out as device pointers. Kernels' side
//! effects and copies find their allocation by address, so an address outside every allocation
//! is an error (`hipErrorInvalidValue`), never a stray write.
use crate::code::{self, Code};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

type Block = Arc<Mutex<Box<[u8]>>>;

/// The live allocations by base address.
#[derive(Default)]
pub struct Memory {
    blocks: Mutex<BTreeMap<usize, Block>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Largest single allocation (the stand-in runs on the host: a typo must not eat its memory).
pub const MAX_ALLOC: usize = 1 << 30;

impl Memory {
    /// A zeroed block of `n` bytes (at least 1); its address is the device pointer.
    pub fn alloc(&self, n: usize) -> Result<usize, Code> {
        if n > MAX_ALLOC {
            return Err(code::OUT_OF_MEMORY);
        }
        let b: Box<[u8]> = vec![0u8; n.max(1)].into_boxed_slice();
        let addr = b.as_ptr() as usize;
        lock(&self.blocks).insert(addr, Arc::new(Mutex::new(b)));
        Ok(addr)
    }

    /// Frees the block at `addr` (its base address, as `hipFree` requires).
    pub fn free(&self, addr: usize) -> Result<(), Code> {
        lock(&self.blocks).remove(&addr).map(drop).ok_or(code::INVALID_VALUE)
    }

    /// Whether `[addr, addr + n)` lies inside one allocation.
    pub fn contains(&self, addr: usize, n: usize) -> bool {
        self.find(addr, n).is_ok()
    }

    fn find(&self, addr: usize, n: usize) -> Result<(Block, usize), Code> {
        let blocks = lock(&self.blocks);
        let (base, b) = blocks.range(..=addr).next_back().ok_or(code::INVALID_VALUE)?;
        let off = addr - base;
        let len = lock(b).len();
        if off.checked_add(n).is_none_or(|end| end > len) {
            return Err(code::INVALID_VALUE);
        }
        Ok((Arc::clone(b), off))
    }

    /// Copies `src` into device memory at `addr`.
    pub fn write(&self, addr: usize, src: &[u8]) -> Result<(), Code> {
        let (b, off) = self.find(addr, src.len())?;
        lock(&b)[off..off + src.len()].copy_from_slice(src);
        Ok(())
    }

    /// Copies device memory at `addr` into `dst`.
    pub fn read(&self, addr: usize, dst: &mut [u8]) -> Result<(), Code> {
        let (b, off) = self.find(addr, dst.len())?;
        dst.copy_from_slice(&lock(&b)[off..off + dst.len()]);
        Ok(())
    }

    /// Sets `n` bytes at `addr` to `value`.
    pub fn fill(&self, addr: usize, value: u8, n: usize) -> Result<(), Code> {
        let (b, off) = self.find(addr, n)?;
        lock(&b)[off..off + n].fill(value);
        Ok(())
    }

    /// Applies `f` to the `n` bytes at `addr` under the block's lock (a kernel's read-modify-write).
    pub fn update(&self, addr: usize, n: usize, f: impl FnOnce(&mut [u8])) -> Result<(), Code> {
        let (b, off) = self.find(addr, n)?;
        f(&mut lock(&b)[off..off + n]);
        Ok(())
    }
}
