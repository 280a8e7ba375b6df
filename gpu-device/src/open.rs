//! Can a run happen on `hip:N` here? [`open`] checks what a run needs without compiling anything
//! or touching KFD queues.
use std::time::Instant;

use hip_rt::{Device, DeviceInfo, Hip};

use crate::Error;
use crate::calib::{self, GfxTarget};

/// The device's gfx target, parsed from HIP's gcnArchName.
pub fn gfx_target(info: &DeviceInfo) -> Result<GfxTarget, Error> {
    let arch = |source: Error| Error::Arch {
        index: info.index,
        source: Box::new(source),
    };
    let name = info.gcn_arch_name.clone().map_err(|e| arch(e.into()))?;
    GfxTarget::parse(&name).map_err(arch)
}

/// Opens device `index` and checks what a run needs: the device exists, its gfx target is known,
/// hiprtc is there and new enough for that target, streams can get a hardware queue of their own,
/// and /dev/kfd exists. Also fixes the epoch of [`calib::host_ns`].
pub fn open(hip: &Hip, index: u32) -> Result<Device, Error> {
    calib::host_ns(Instant::now());
    let count = hip.device_count()?;
    if index >= count {
        return Err(Error::NoSuchDevice { index, count });
    }
    let dev = hip.device(index)?;
    let arch = gfx_target(&dev.info)?;
    hip.hiprtc_status().map_err(Error::NoHiprtc)?;
    let (major, minor, _) = hip_rt::decode_version(hip.runtime_version()?);
    if let Some(need) = calib::min_hip_for_target(&arch.processor).filter(|&m| (major, minor) < m) {
        return Err(Error::HipTooOld {
            have: (major, minor),
            need,
            processor: arch.processor,
        });
    }
    if !hip.has_own_queue_streams() {
        return Err(Error::NoOwnQueueStreams);
    }
    if !std::path::Path::new(kfd::KFD_DEVICE).exists() {
        return Err(Error::NoKfd);
    }
    Ok(dev)
}

/// Whether `hip:device_index` can run a measurement here; the reason if not. Loads HIP, does not
/// compile the kernel or touch KFD queues.
pub fn usable(device_index: u32) -> Result<(), Error> {
    let hip = Hip::load()?;
    open(&hip, device_index).map(|_| ())
}
