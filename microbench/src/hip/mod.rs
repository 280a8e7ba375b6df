//! The HIP device: HIP and hiprtc loaded at run time (nothing of ROCm is needed to build), safe
//! RAII wrappers, the delay kernel ([`kernel`]) and its pure calibration logic ([`calib`]).
//!
//! All `unsafe` lives in `ffi/` (one module, four small files). Every failure is a [`HipError`] (never a panic): no library,
//! a missing symbol, or a HIP error code with its name and a hint (e.g. 100 = no GPU).
#![allow(dead_code)] // The CLI (`preempt-lat`, `doctor`) wires this module in next.

pub mod calib;
mod error;
mod ffi;
pub mod kernel;
mod objects;

use std::sync::Arc;

#[allow(unused_imports)] // re-exports for the CLI
pub use calib::{Achieved, CalSample, Calibration, ClockMap, ClockPair, GfxTarget, Grid};
pub use error::HipError;
use ffi::Api;
#[allow(unused_imports)] // re-exports for the CLI
pub use kernel::{DelayKernel, DelaySlot, SlotStatus};
pub use objects::{DeviceBuffer, Event, HostBuffer, Mem, Stream};

/// Sonames tried, newest ROCm first.
pub const HIP_SONAMES: [&str; 4] = [
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "libamdhip64.so",
];
pub const HIPRTC_SONAMES: [&str; 4] = [
    "libhiprtc.so.7",
    "libhiprtc.so.6",
    "libhiprtc.so.5",
    "libhiprtc.so",
];

/// Where to look: `$ROCM_PATH/lib` first (an explicit choice), then the loader's own search
/// (LD_LIBRARY_PATH, ld.so.cache: Debian's packages), then `/opt/rocm/lib`.
pub fn library_candidates(sonames: &[&str], rocm_path: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let dirs = rocm_path
        .filter(|p| !p.is_empty())
        .map(|p| format!("{}/lib/", p.trim_end_matches('/')));
    for dir in [
        dirs,
        Some(String::new()),
        Some("/opt/rocm/lib/".to_string()),
    ]
    .into_iter()
    .flatten()
    {
        for so in sonames {
            let c = format!("{dir}{so}");
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// hiprtc candidates for a loaded HIP: the same directory and major version first.
pub fn hiprtc_candidates_for(hip_path: &str, rocm_path: Option<&str>) -> Vec<String> {
    let (dir, file) = hip_path
        .rsplit_once('/')
        .map_or(("", hip_path), |(d, f)| (d, f));
    let mut out = Vec::new();
    if let Some(major) = file
        .strip_prefix("libamdhip64.so.")
        .and_then(|v| v.split('.').next())
    {
        if !dir.is_empty() {
            out.push(format!("{dir}/libhiprtc.so.{major}"));
        }
        out.push(format!("libhiprtc.so.{major}"));
    }
    for c in library_candidates(&HIPRTC_SONAMES, rocm_path) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// HIP_VERSION encoding: major * 10_000_000 + minor * 100_000 + patch (e.g. 50221153 = 5.2.21153).
pub fn decode_version(v: i32) -> (i32, i32, i32) {
    (v / 10_000_000, v / 100_000 % 100, v % 100_000)
}

/// Device attribute ids (hipDeviceAttribute_t; stable from ROCm 5.0 to 7.x).
pub mod attr {
    pub const CLOCK_RATE_KHZ: i32 = 5;
    pub const MAX_THREADS_PER_BLOCK: i32 = 56;
    pub const MULTIPROCESSOR_COUNT: i32 = 63;
    pub const WARP_SIZE: i32 = 87;
    /// Not known to HIP 5.2 (hipErrorInvalidValue); 100000 kHz on gfx9 when present.
    pub const WALL_CLOCK_RATE_KHZ: i32 = 10017;
}

/// The s_memrealtime rate of gfx9 (100 MHz), used when HIP cannot report it.
pub const DEFAULT_WALL_CLOCK_KHZ: u32 = 100_000;

/// A loaded HIP runtime (cheap to clone).
#[derive(Clone)]
pub struct Hip {
    api: Arc<Api>,
}

impl Hip {
    /// Loads libamdhip64 (and hiprtc) from the standard places; see [`library_candidates`].
    pub fn load() -> Result<Hip, HipError> {
        let rocm = std::env::var("ROCM_PATH").ok();
        let hip = library_candidates(&HIP_SONAMES, rocm.as_deref());
        let api = Api::load(&hip, |path| hiprtc_candidates_for(path, rocm.as_deref()))?;
        calib::host_ns(std::time::Instant::now()); // fixes the host-time epoch
        Ok(Hip { api: Arc::new(api) })
    }

    /// Loads from exactly these candidates (paths or sonames), in order.
    pub fn load_from(hip: &[String], hiprtc: &[String]) -> Result<Hip, HipError> {
        Ok(Hip {
            api: Arc::new(Api::load(hip, |_| hiprtc.to_vec())?),
        })
    }

    /// The libamdhip64 that was loaded.
    pub fn library_path(&self) -> &str {
        &self.api.hip_path
    }

    /// Where hiprtc came from (a libhiprtc, or libamdhip64 itself for HIP <= 5.2).
    pub fn hiprtc_path(&self) -> Option<&str> {
        self.api.rtc_path.as_deref()
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
        Ok(self.api.device_count()?.max(0) as u32)
    }

    /// True when hipExtStreamCreateWithCUMask exists (streams with their own hardware queue).
    pub fn has_own_queue_streams(&self) -> bool {
        self.api.has_cu_mask()
    }

    /// HIP's description of an error code.
    pub fn error_string(&self, code: i32) -> Option<String> {
        self.api.error_string(code)
    }

    /// Opens device `index` (hipSetDevice) and reads what the toolkit needs to know of it.
    pub fn device(&self, index: u32) -> Result<Device, HipError> {
        let (api, i) = (&self.api, index as i32);
        api.set_device(i)?;
        let wall = api
            .attribute(attr::WALL_CLOCK_RATE_KHZ, i)
            .ok()
            .filter(|&k| k > 0);
        let info = DeviceInfo {
            index,
            name: api.device_name(i)?,
            pci_bus_id: api.pci_bus_id(i)?,
            arch: api.device_properties_bytes(i).and_then(|b| {
                calib::scan_gcn_arch_name(&b).ok_or_else(|| {
                    HipError::Invalid("no gcnArchName (gfx...) in hipDeviceProp_t".into())
                })
            }),
            cu_count: api.attribute(attr::MULTIPROCESSOR_COUNT, i)?.max(0) as u32,
            wave_size: api.attribute(attr::WARP_SIZE, i)?.max(0) as u32,
            max_threads_per_block: api.attribute(attr::MAX_THREADS_PER_BLOCK, i)?.max(0) as u32,
            clock_khz: api.attribute(attr::CLOCK_RATE_KHZ, i)?.max(0) as u32,
            wall_clock_khz: wall.map_or(DEFAULT_WALL_CLOCK_KHZ, |k| k as u32),
            wall_clock_reported: wall.is_some(),
        };
        Ok(Device {
            api: self.api.clone(),
            info,
        })
    }
}

/// What HIP says about a device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub index: u32,
    pub name: String,
    pub pci_bus_id: String,
    /// gcnArchName, e.g. gfx942:sramecc+:xnack- (from hipDeviceProp_t, scanned: see calib).
    pub arch: Result<GfxTarget, HipError>,
    pub cu_count: u32,
    pub wave_size: u32,
    pub max_threads_per_block: u32,
    /// Peak shader clock = nominal s_memtime cycles per ms (the real rate varies: DVFS).
    pub clock_khz: u32,
    /// s_memrealtime rate; [`DEFAULT_WALL_CLOCK_KHZ`] when HIP does not report it.
    pub wall_clock_khz: u32,
    pub wall_clock_reported: bool,
}

/// Stream priorities, resolved against hipDeviceGetStreamPriorityRange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamPriority {
    High,
    Normal,
    Low,
}

/// An opened device. Each call makes it current (hipSetDevice) on the calling thread first.
pub struct Device {
    api: Arc<Api>,
    pub info: DeviceInfo,
}

impl Device {
    fn current(&self) -> Result<&Api, HipError> {
        self.api.set_device(self.info.index as i32)?;
        Ok(&self.api)
    }

    /// Any attribute by its hipDeviceAttribute_t id (see [`attr`]).
    pub fn attribute(&self, id: i32) -> Result<i32, HipError> {
        self.api.attribute(id, self.info.index as i32)
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
    /// (hipExtStreamCreateWithCUMask with every CU enabled; normal priority).
    pub fn stream_own_queue(&self) -> Result<Stream, HipError> {
        let words = (self.info.cu_count.max(1) as usize).div_ceil(32);
        let mut mask = vec![u32::MAX; words];
        if let Some(last) = mask
            .last_mut()
            .filter(|_| !self.info.cu_count.is_multiple_of(32))
        {
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

    pub fn synchronize(&self) -> Result<(), HipError> {
        self.current()?.device_synchronize()
    }
}

#[cfg(test)]
mod tests;
