//! Owned HIP objects: streams, events and buffers, each released on drop.

use std::sync::Arc;

use super::HipError;
use super::ffi::{Api, RawEvent, RawMem, RawStream};

macro_rules! owned {
    ($t:ident, $field:ident : $raw:ty, $destroy:ident) => {
        impl Drop for $t {
            fn drop(&mut self) {
                if let Some(r) = self.$field.take() {
                    let _ = self.api.$destroy(r); // nothing useful to do with an error in drop
                }
            }
        }
        impl $t {
            pub(super) fn raw(&self) -> &$raw {
                self.$field.as_ref().expect("present until drop")
            }
        }
    };
}

/// A HIP stream (destroyed on drop).
pub struct Stream {
    pub(super) api: Arc<Api>,
    pub(super) raw: Option<RawStream>,
}
owned!(Stream, raw: RawStream, stream_destroy);

impl Stream {
    pub fn synchronize(&self) -> Result<(), HipError> {
        self.api.stream_synchronize(self.raw())
    }
}

/// A HIP event (destroyed on drop).
pub struct Event {
    pub(super) api: Arc<Api>,
    pub(super) raw: Option<RawEvent>,
}
owned!(Event, raw: RawEvent, event_destroy);

impl Event {
    pub fn record(&self, stream: &Stream) -> Result<(), HipError> {
        self.api.event_record(self.raw(), stream.raw())
    }
    pub fn synchronize(&self) -> Result<(), HipError> {
        self.api.event_synchronize(self.raw())
    }
    /// True when complete (hipErrorNotReady is false, not an error).
    pub fn query(&self) -> Result<bool, HipError> {
        self.api.event_query(self.raw())
    }
    /// Waits for completion by polling hipEventQuery: Ok(true) when complete, Ok(false) when
    /// `timeout` passed first. Unlike [`Event::synchronize`] it cannot block forever (a queue left
    /// suspended, a hung GPU); it spins (yielding) for the first 2 ms, then sleeps 50 us per poll.
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> Result<bool, HipError> {
        let t0 = std::time::Instant::now();
        loop {
            if self.query()? {
                return Ok(true);
            }
            let waited = t0.elapsed();
            if waited >= timeout {
                return Ok(false);
            }
            if waited < std::time::Duration::from_millis(2) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
    /// Milliseconds from `start` to this event (both recorded with timing on).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32, HipError> {
        self.api.event_elapsed_ms(start.raw(), self.raw())
    }
}

/// Device memory (hipMalloc; hipFree on drop, which waits for the device).
pub struct DeviceBuffer {
    pub(super) api: Arc<Api>,
    pub(super) mem: Option<RawMem>,
}
owned!(DeviceBuffer, mem: RawMem, free);

impl DeviceBuffer {
    pub fn len(&self) -> usize {
        self.raw().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), HipError> {
        self.api.copy_out(self.raw(), offset, dst)
    }
    pub fn copy_from_host(&self, offset: usize, src: &[u8]) -> Result<(), HipError> {
        self.api.copy_in(self.raw(), offset, src)
    }
    /// Zeroes the whole buffer, in `stream` order.
    pub fn zero_async(&self, stream: &Stream) -> Result<(), HipError> {
        self.api.memset_async(self.raw(), 0, stream.raw())
    }
}

/// Pinned, coherent host memory the GPU can write (hipHostFree on drop).
pub struct HostBuffer {
    pub(super) api: Arc<Api>,
    pub(super) mem: Option<RawMem>,
}
owned!(HostBuffer, mem: RawMem, free);

impl HostBuffer {
    /// The buffer as 64-bit words, read/written atomically (the GPU may write at any time).
    pub fn words(&self) -> &[std::sync::atomic::AtomicU64] {
        self.api.host_words(self.raw()).unwrap_or(&[])
    }
}

/// Memory a kernel can be given.
#[derive(Clone, Copy)]
pub enum Mem<'a> {
    Device(&'a DeviceBuffer),
    Host(&'a HostBuffer),
}

impl Mem<'_> {
    pub(super) fn raw(&self) -> &RawMem {
        match self {
            Mem::Device(b) => b.raw(),
            Mem::Host(b) => b.raw(),
        }
    }
}
