//! An opened device: what HIP says about it, and the factory of streams, events, buffers and
//! modules on it.

use std::sync::Arc;

use crate::ffi::Api;
use crate::{DeviceBuffer, Event, HipError, HostBuffer, Module, Stream};

/// Device attribute ids (hipDeviceAttribute_t; stable from ROCm 5.0 to 7.x).
pub mod attr {
    pub const CLOCK_RATE_KHZ: i32 = 5;
    pub const MAX_THREADS_PER_BLOCK: i32 = 56;
    pub const MULTIPROCESSOR_COUNT: i32 = 63;
    pub const WARP_SIZE: i32 = 87;
    /// Not known to HIP 5.2 (hipErrorInvalidValue); when absent, [`crate::default_wall_clock_khz`].
    pub const WALL_CLOCK_RATE_KHZ: i32 = 10017;
}

/// What HIP says about a device.
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let info = hip_rt::Hip::load()?.device(0)?.info;
/// let ms_per_wall_tick = 1.0 / f64::from(info.wall_clock_khz);
/// println!("{}: {} CUs of wave{}, {ms_per_wall_tick} ms per s_memrealtime tick", info.name, info.cu_count, info.wave_size);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub index: u32,
    pub name: String,
    pub pci_bus_id: String,
    /// gcnArchName, e.g. `gfx942:sramecc+:xnack-` (scanned from hipDeviceProp_t: see
    /// [`scan_gcn_arch_name`]).
    pub gcn_arch_name: Result<String, HipError>,
    pub cu_count: u32,
    pub wave_size: u32,
    pub max_threads_per_block: u32,
    /// Peak shader clock = nominal s_memtime cycles per ms (the real rate varies: DVFS).
    pub clock_khz: u32,
    /// s_memrealtime rate; [`crate::default_wall_clock_khz`] of the gfx target when HIP does not
    /// report it.
    pub wall_clock_khz: u32,
    /// HIP reported `wall_clock_khz` (false: the per-target fallback).
    pub wall_clock_reported: bool,
}

/// Stream priorities, resolved against hipDeviceGetStreamPriorityRange.
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let dev = hip_rt::Hip::load()?.device(0)?;
/// let urgent = dev.stream(hip_rt::StreamPriority::High)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamPriority {
    High,
    Normal,
    Low,
}

/// An opened device. Each call makes it current (hipSetDevice) on the calling thread first.
///
/// ```no_run
/// # fn main() -> Result<(), hip_rt::HipError> {
/// let dev = hip_rt::Hip::load()?.device(0)?;
/// println!("{} at {}: {} CUs, {:?}", dev.info.name, dev.info.pci_bus_id, dev.info.cu_count, dev.info.gcn_arch_name);
/// let stream = dev.stream_own_queue()?; // a hardware queue of its own
/// let done = dev.event(false)?;
/// done.record(&stream)?;
/// done.synchronize()?;
/// # Ok(()) }
/// ```
pub struct Device {
    pub(crate) api: Arc<Api>,
    /// `info.index` as HIP's `int` device ordinal (checked once, at open).
    pub(crate) ordinal: i32,
    pub info: DeviceInfo,
}

/// A HIP attribute that is a count or a rate: a negative answer (never seen) reads as 0.
fn non_negative(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

impl Device {
    pub(crate) fn open(api: &Arc<Api>, index: u32) -> Result<Device, HipError> {
        let i = i32::try_from(index)
            .map_err(|_| HipError::Invalid(format!("device index {index} is out of HIP's int range")))?;
        api.set_device(i)?;
        let wall = api.attribute(attr::WALL_CLOCK_RATE_KHZ, i).ok().filter(|&k| k > 0);
        let gcn_arch_name = api.device_properties_bytes(i).and_then(|b| {
            scan_gcn_arch_name(&b).ok_or_else(|| HipError::Invalid("no gcnArchName (gfx...) in hipDeviceProp_t".into()))
        });
        let fallback_wall_khz = crate::default_wall_clock_khz(gcn_arch_name.as_deref().unwrap_or(""));
        let info = DeviceInfo {
            index,
            name: api.device_name(i)?,
            pci_bus_id: api.pci_bus_id(i)?,
            gcn_arch_name,
            cu_count: non_negative(api.attribute(attr::MULTIPROCESSOR_COUNT, i)?),
            wave_size: non_negative(api.attribute(attr::WARP_SIZE, i)?),
            max_threads_per_block: non_negative(api.attribute(attr::MAX_THREADS_PER_BLOCK, i)?),
            clock_khz: non_negative(api.attribute(attr::CLOCK_RATE_KHZ, i)?),
            wall_clock_khz: wall.map_or(fallback_wall_khz, non_negative),
            wall_clock_reported: wall.is_some(),
        };
        Ok(Device {
            api: api.clone(),
            ordinal: i,
            info,
        })
    }

    pub(crate) fn current(&self) -> Result<&Api, HipError> {
        self.api.set_device(self.ordinal)?;
        Ok(&self.api)
    }

    /// Any attribute by its hipDeviceAttribute_t id (see [`attr`]).
    pub fn attribute(&self, id: i32) -> Result<i32, HipError> {
        self.api.attribute(id, self.ordinal)
    }

    /// (least, greatest) stream priority; in HIP a lower number is a higher priority.
    pub fn priority_range(&self) -> Result<(i32, i32), HipError> {
        self.current()?.stream_priority_range()
    }

    /// A non-blocking stream. HIP pools hardware queues per priority (4 per pool by default),
    /// so streams may share a queue; see [`Device::stream_own_queue`].
    pub fn stream(&self, priority: StreamPriority) -> Result<Stream, HipError> {
        let (least, greatest) = self.priority_range()?;
        let p = match priority {
            StreamPriority::High => greatest,
            StreamPriority::Low => least,
            StreamPriority::Normal => 0.clamp(least.min(greatest), least.max(greatest)),
        };
        Ok(Stream {
            raw: Some(self.current()?.stream_create(p)?),
            api: self.api.clone(),
        })
    }

    /// A stream with a hardware queue of its own, never shared with another stream
    /// (hipExtStreamCreateWithCUMask with every CU enabled; normal priority). It is a *blocking*
    /// stream (the call has no flags): null-stream work waits for it. Whoever stops its queue
    /// from outside HIP holds a [`crate::NullStreamBlocked`] meanwhile.
    pub fn stream_own_queue(&self) -> Result<Stream, HipError> {
        let words = (self.info.cu_count.max(1) as usize).div_ceil(32);
        let mut mask = vec![u32::MAX; words];
        if let Some(last) = mask.last_mut().filter(|_| !self.info.cu_count.is_multiple_of(32)) {
            *last = (1u32 << (self.info.cu_count % 32)) - 1;
        }
        Ok(Stream {
            raw: Some(self.current()?.stream_create_cu_mask(&mask)?),
            api: self.api.clone(),
        })
    }

    /// An event; `timing` false gives hipEventDisableTiming (cheaper, for sync points only).
    pub fn event(&self, timing: bool) -> Result<Event, HipError> {
        let flags = if timing { 0 } else { 0x2 };
        Ok(Event {
            raw: Some(self.current()?.event_create(flags)?),
            api: self.api.clone(),
        })
    }

    /// Device memory (hipMalloc), not zeroed.
    pub fn alloc_device(&self, bytes: usize) -> Result<DeviceBuffer, HipError> {
        Ok(DeviceBuffer {
            mem: Some(self.current()?.alloc(bytes, false)?),
            api: self.api.clone(),
        })
    }

    /// Pinned host memory the GPU writes directly (coherent, mapped).
    pub fn alloc_host(&self, bytes: usize) -> Result<HostBuffer, HipError> {
        Ok(HostBuffer {
            mem: Some(self.current()?.alloc(bytes, true)?),
            api: self.api.clone(),
        })
    }

    /// Loads a code object (hipModuleLoadData) on this device. Its kernel metadata is read first
    /// (see [`crate::code_object`]): a launch is checked against it.
    pub fn load_module(&self, image: &[u8]) -> Result<Module, HipError> {
        Module::load(self, image)
    }

    /// hipDeviceSynchronize.
    pub fn synchronize(&self) -> Result<(), HipError> {
        crate::null_stream::check("hipDeviceSynchronize")?;
        self.current()?.device_synchronize()
    }
}

/// A gfx target id as HIP prints it: `gfx` + 3 to 5 hex digits, then `:feature+`/`:feature-`.
fn is_target_id(s: &str) -> bool {
    let mut parts = s.split(':');
    let Some(digits) = parts.next().and_then(|p| p.strip_prefix("gfx")) else {
        return false;
    };
    (3..=5).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && parts.all(|f| {
            let name = f.strip_suffix('+').or_else(|| f.strip_suffix('-'));
            name.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric()))
        })
}

/// Finds gcnArchName in the raw bytes of a hipDeviceProp_t of unknown ABI: the NUL-terminated
/// strings that start at a field boundary (after a NUL) and read as a gfx target id. One with
/// features is preferred (older HIPs may also put a bare `gfxNNN` in `name`).
///
/// ```
/// let mut props = vec![0u8; 64];
/// props[8..14].copy_from_slice(b"gfx942");
/// props[32..54].copy_from_slice(b"gfx942:sramecc+:xnack-");
/// assert_eq!(hip_rt::scan_gcn_arch_name(&props).as_deref(), Some("gfx942:sramecc+:xnack-"));
/// ```
pub fn scan_gcn_arch_name(props: &[u8]) -> Option<String> {
    let mut best: Option<String> = None;
    for i in 0..props.len().saturating_sub(3) {
        if &props[i..i + 3] != b"gfx" || (i > 0 && props[i - 1] != 0) {
            continue;
        }
        let end = props[i..].iter().take(256).position(|&b| b == 0).map(|n| i + n);
        let Some(t) = end
            .and_then(|e| std::str::from_utf8(&props[i..e]).ok())
            .filter(|s| is_target_id(s))
        else {
            continue;
        };
        if t.contains(':') {
            return Some(t.to_string());
        }
        best.get_or_insert(t.to_string());
    }
    best
}
