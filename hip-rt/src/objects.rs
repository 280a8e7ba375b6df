//! Owned HIP objects: streams, events and buffers, each released on drop.

use std::sync::Arc;

use crate::HipError;
use crate::ffi::{Api, RawEvent, RawMem, RawStream};

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
            pub(crate) fn raw(&self) -> &$raw {
                self.$field.as_ref().expect("present until drop")
            }
        }
    };
}

/// A HIP stream (destroyed on drop). Work on one stream runs in order; see
/// [`crate::Device::stream`] and [`crate::Device::stream_own_queue`].
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let dev = hip_rt::Hip::load()?.device(0)?;
/// let stream = dev.stream(hip_rt::StreamPriority::High)?;
/// let buf = dev.alloc_device(4096)?;
/// buf.zero_async(&stream)?;
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
pub struct Stream {
    pub(crate) api: Arc<Api>,
    pub(crate) raw: Option<RawStream>,
}
owned!(Stream, raw: RawStream, stream_destroy);

impl Stream {
    /// Waits until all work enqueued on the stream has completed (hipStreamSynchronize).
    pub fn synchronize(&self) -> Result<(), HipError> {
        self.api.stream_synchronize(self.raw())
    }

    /// The raw `hipStream_t`, as a number, for other libraries to launch on (PyTorch's
    /// `torch.cuda.ExternalStream`, a C++ scheduler). It stays valid while this `Stream` lives:
    /// the owner must outlive every use of the number.
    pub fn handle(&self) -> usize {
        self.raw().addr()
    }
}

/// A HIP event (destroyed on drop): a point in a stream to wait for or time against.
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let dev = hip_rt::Hip::load()?.device(0)?;
/// let stream = dev.stream(hip_rt::StreamPriority::Normal)?;
/// let (start, stop) = (dev.event(true)?, dev.event(true)?);
/// start.record(&stream)?;
/// stop.record(&stream)?;
/// if stop.wait_timeout(std::time::Duration::from_secs(1))? {
///     println!("{} ms", stop.elapsed_ms_since(&start)?);
/// }
/// # Ok(()) }
/// ```
pub struct Event {
    pub(crate) api: Arc<Api>,
    pub(crate) raw: Option<RawEvent>,
}
owned!(Event, raw: RawEvent, event_destroy);

impl Event {
    /// Records the event at the current end of `stream` (hipEventRecord).
    pub fn record(&self, stream: &Stream) -> Result<(), HipError> {
        self.api.event_record(self.raw(), stream.raw())
    }
    /// Blocks until the event has completed (hipEventSynchronize).
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
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let dev = hip_rt::Hip::load()?.device(0)?;
/// let buf = dev.alloc_device(16)?;
/// buf.copy_from_host(0, &[1, 2, 3, 4])?;
/// let mut back = [0u8; 4];
/// buf.copy_to_host(0, &mut back)?;
/// assert_eq!(back, [1, 2, 3, 4]);
/// assert!(buf.copy_to_host(14, &mut back).is_err()); // out of range: refused
/// # Ok(()) }
/// ```
pub struct DeviceBuffer {
    pub(crate) api: Arc<Api>,
    pub(crate) mem: Option<RawMem>,
}
owned!(DeviceBuffer, mem: RawMem, free);

impl DeviceBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.raw().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `dst.len()` bytes from `offset` into `dst` (hipMemcpy; waits).
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), HipError> {
        crate::null_stream::check("hipMemcpy")?;
        self.api.copy_out(self.raw(), offset, dst)
    }
    /// Copies `src` to `offset` (hipMemcpy; waits).
    pub fn copy_from_host(&self, offset: usize, src: &[u8]) -> Result<(), HipError> {
        crate::null_stream::check("hipMemcpy")?;
        self.api.copy_in(self.raw(), offset, src)
    }
    /// Zeroes the whole buffer, in `stream` order.
    pub fn zero_async(&self, stream: &Stream) -> Result<(), HipError> {
        self.api.memset_async(self.raw(), 0, stream.raw())
    }
}

/// Pinned, coherent host memory the GPU can write (hipHostFree on drop, which waits for the
/// device). The host sees it only as 64-bit atomics.
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// use std::sync::atomic::Ordering;
/// let dev = hip_rt::Hip::load()?.device(0)?;
/// let stamps = dev.alloc_host(64 * 8)?;
/// stamps.words()[0].store(0, Ordering::Release);
/// assert_eq!(stamps.words().len(), 64);
/// # Ok(()) }
/// ```
pub struct HostBuffer {
    pub(crate) api: Arc<Api>,
    pub(crate) mem: Option<RawMem>,
}
owned!(HostBuffer, mem: RawMem, free);

impl HostBuffer {
    /// The buffer as 64-bit words, read/written atomically (the GPU may write at any time).
    pub fn words(&self) -> &[std::sync::atomic::AtomicU64] {
        self.api.host_words(self.raw()).unwrap_or(&[])
    }
}

/// Memory a kernel can be given: a borrow of a buffer of this crate (see [`crate::KernelArgs::mem`]).
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let dev = hip_rt::Hip::load()?.device(0)?;
/// let (d, h) = (dev.alloc_device(8)?, dev.alloc_host(8)?);
/// let args = hip_rt::KernelArgs::new().mem(&d).mem(hip_rt::Mem::Host(&h));
/// assert_eq!(args.len(), 2);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy)]
pub enum Mem<'a> {
    Device(&'a DeviceBuffer),
    Host(&'a HostBuffer),
}

impl<'a> From<&'a DeviceBuffer> for Mem<'a> {
    fn from(b: &'a DeviceBuffer) -> Self {
        Mem::Device(b)
    }
}

impl<'a> From<&'a HostBuffer> for Mem<'a> {
    fn from(b: &'a HostBuffer) -> Self {
        Mem::Host(b)
    }
}

impl Mem<'_> {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.raw().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn raw(&self) -> &RawMem {
        match self {
            Mem::Device(b) => b.raw(),
            Mem::Host(b) => b.raw(),
        }
    }
}
