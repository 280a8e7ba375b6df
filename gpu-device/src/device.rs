//! The HIP device as Lv1 sees it: an [`lv1::HwQueue`] over one HIP stream (the LP queue), and
//! the HP probe on a high-priority stream.
//!
//! Sharing: lv1's launcher launches and records from one thread, its completion thread waits on
//! events, and a suspending thread synchronizes the stream, all at once through `&self`. That is
//! sound because every field is an owned HIP object (or an `Arc` of one) whose raw handle is
//! `Send + Sync` by the reasoning written next to its `unsafe impl` in hip-rt's `ffi` module: the HIP
//! runtime API is thread-safe (clr serialises each stream's submissions under the stream's own
//! lock), handles are process-wide, and each is destroyed exactly once, by its owner's `Drop`,
//! which cannot run while a `&self` borrow exists. Nothing here adds an `unsafe impl`: the
//! compiler derives `Send + Sync` from those fields (checked by `assert_send_sync` below).
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hip_rt::{Device, DeviceBuffer, Event, HostBuffer, Mem, Stream};
use lv1::{CommandId, HwQueue};

use crate::Error;
use crate::kernel::{self, DelayKernel, DelaySlot};

/// One LP command: every wave of the LP grid spins this many ticks of the GPU wall clock
/// (s_memrealtime: constant rate, `DeviceInfo::wall_clock_khz` ticks per ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayCmd {
    pub ticks: u64,
}

/// The LP hardware queue: delay-kernel launches on one HIP stream (the one whose KFD queue
/// discovery found), one 32-byte slot per command id in a device buffer.
pub struct HipLpQueue {
    dev: Arc<Device>,
    kernel: Arc<DelayKernel>,
    stream: Stream,
    slots: DeviceBuffer,
    capacity: u64,
}

impl HipLpQueue {
    /// `slots` must be zeroed (see [`kernel::slot_buffer`]); it holds `capacity` commands, and
    /// command id `i` books slot `i`. A launch past the capacity fails (the run then reports it).
    pub fn new(dev: Arc<Device>, kernel: Arc<DelayKernel>, stream: Stream, slots: DeviceBuffer) -> Self {
        let capacity = (slots.len() / kernel::SLOT_BYTES) as u64;
        HipLpQueue {
            dev,
            kernel,
            stream,
            slots,
            capacity,
        }
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Commands the slot buffer holds: ids from 0 up to this (a launch past it fails).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Blocks per command: a slot is complete when this many blocks finished.
    pub fn nblocks(&self) -> u32 {
        self.kernel.grid().blocks
    }

    /// The slots of commands `0..n` (hipMemcpy; call when the queue is idle).
    pub fn read_slots(&self, n: u64) -> Result<Vec<DelaySlot>, Error> {
        kernel::read_slots(&self.slots, usize::try_from(n.min(self.capacity)).unwrap_or(usize::MAX))
    }
}

impl HwQueue for HipLpQueue {
    type Command = DelayCmd;
    type SyncPoint = Event;
    type Error = Error;

    /// hipModuleLaunchKernel of the delay kernel into slot `id`: enqueues, does not wait.
    fn launch(&self, id: CommandId, cmd: DelayCmd) -> Result<(), Error> {
        if id >= self.capacity {
            return Err(Error::Invalid(format!(
                "LP command {id}: past the slot buffer's {} commands (the run's command budget)",
                self.capacity
            )));
        }
        self.kernel.launch(
            &self.stream,
            Mem::Device(&self.slots),
            crate::num::command_id(id)?,
            cmd.ticks,
        )
    }

    /// A timing-disabled event recorded on the LP stream (completes after every launch so far).
    fn record(&self) -> Result<Event, Error> {
        let e = self.dev.event(false)?;
        e.record(&self.stream)?;
        Ok(e)
    }

    fn wait(&self, sp: &Event) -> Result<(), Error> {
        Ok(sp.synchronize()?)
    }

    fn synchronize(&self) -> Result<(), Error> {
        Ok(self.stream.synchronize()?)
    }
}

/// The HP probe: a one-wave kernel on a high-priority stream that stores the GPU wall clock
/// (s_memrealtime) at which it started into word `idx` of pinned host memory.
pub struct HpProbe {
    /// Keeps the device (whose context owns the stream and buffers) alive as long as the probe.
    _dev: Arc<Device>,
    kernel: Arc<DelayKernel>,
    stream: Stream,
    stamps: HostBuffer,
    done: Event,
}

impl HpProbe {
    /// Room for `n` probes.
    pub fn new(dev: Arc<Device>, kernel: Arc<DelayKernel>, stream: Stream, n: usize) -> Result<Self, Error> {
        let stamps = dev.alloc_host(n.max(1) * 8)?;
        let done = dev.event(false)?;
        Ok(HpProbe {
            _dev: dev,
            kernel,
            stream,
            stamps,
            done,
        })
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The stamps buffer (word `idx` = probe `idx`'s start tick).
    pub fn stamps(&self) -> &HostBuffer {
        &self.stamps
    }

    pub fn capacity(&self) -> u32 {
        // The stamp buffer was sized from a u32 count of probes.
        u32::try_from(self.stamps.words().len()).unwrap_or(u32::MAX)
    }

    /// Clears stamp `idx`, launches the probe and records the completion event behind it.
    pub fn launch(&self, idx: u32) -> Result<(), Error> {
        self.launch_unrecorded(idx)?;
        Ok(self.done.record(&self.stream)?)
    }

    /// Clears stamp `idx` and launches the probe, without the completion event (for clock
    /// pairs, where the host polls the stamp itself: see [`HpProbe::poll_stamp`]).
    pub fn launch_unrecorded(&self, idx: u32) -> Result<(), Error> {
        let w = self
            .stamps
            .words()
            .get(idx as usize)
            .ok_or_else(|| Error::Invalid(format!("HP probe {idx}: past {} stamps", self.capacity())))?;
        w.store(0, Ordering::Release);
        self.kernel.launch_probe(&self.stream, Mem::Host(&self.stamps), idx)
    }

    /// Spins on stamp `idx` in pinned host memory until the probe has written it (`None` after
    /// `timeout`). Seeing the store directly, rather than through a stream synchronize, keeps the
    /// host-side bracket of a clock pair to launch latency plus one PCIe write.
    pub fn poll_stamp(&self, idx: u32, timeout: Duration) -> Option<u64> {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(t) = self.stamp(idx) {
                return Some(t);
            }
            if t0.elapsed() >= timeout {
                return None;
            }
            std::hint::spin_loop();
        }
    }

    /// Waits for the last launched probe; Ok(false) on timeout.
    pub fn wait(&self, timeout: Duration) -> Result<bool, Error> {
        Ok(self.done.wait_timeout(timeout)?)
    }

    /// The start stamp of probe `idx` (GPU wall-clock ticks), `None` if it has not run.
    pub fn stamp(&self, idx: u32) -> Option<u64> {
        self.stamps
            .words()
            .get(idx as usize)
            .map(|w| w.load(Ordering::Acquire))
            .filter(|&t| t != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn device_types_are_shareable_across_the_launcher_threads() {
        assert_send_sync::<HipLpQueue>();
        assert_send_sync::<HpProbe>();
        assert_send_sync::<Event>();
        // What lv1 requires of a hardware queue, checked by the compiler.
        fn is_hwq<Q: HwQueue>() {}
        is_hwq::<HipLpQueue>();
    }
}
