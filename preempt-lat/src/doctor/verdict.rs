//! From facts to answers: for each (device, level, mechanism), can it run here, and if not,
//! why — in one line. Pure functions over [`Facts`], tested on made-up facts.
use super::facts::{Fact, Facts};
use kfd::KfdVersion;
use lv3::mechanism::{self, ProbeFacts};
use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Availability {
    pub device: &'static str,
    pub level: u8,
    pub mechanism: &'static str,
    pub available: bool,
    /// Why not (or, when available, what it runs on).
    pub reason: String,
}

/// Why the GPU path (HIP + KFD with a GPU node) is not usable: the first reason found, one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoGpuPath {
    #[error("no /dev/kfd: no AMD GPU driver (amdgpu with KFD) on this machine")]
    NoKfd,
    #[error("/dev/kfd does not open: {0}")]
    KfdClosed(String),
    #[error("KFD is loaded but its topology has no GPU node (no AMD GPU present)")]
    NoGpuNode,
    /// What loading the HIP runtime said.
    #[error("HIP runtime unusable: {0}")]
    NoHip(String),
    /// HIP counts no device.
    #[error("HIP sees no device")]
    NoHipDevice,
    /// HIP's device count failed with this.
    #[error("HIP sees no device: {0}")]
    HipCount(String),
}

/// Whether the GPU path (HIP + KFD with a GPU node) is usable, or the first reason it is not.
pub fn gpu_path(f: &Facts) -> Result<(), NoGpuPath> {
    if !f.kfd_device_present {
        return Err(NoGpuPath::NoKfd);
    }
    if let Some(e) = f.kfd_version.err() {
        return Err(NoGpuPath::KfdClosed(e.to_string()));
    }
    if f.gpu_nodes().is_empty() {
        return Err(NoGpuPath::NoGpuNode);
    }
    match f.hip.ok() {
        None => Err(NoGpuPath::NoHip(f.hip.err().unwrap_or("not loaded").to_string())),
        Some(h) => match &h.devices {
            Fact::Ok(n) if *n > 0 => Ok(()),
            Fact::Ok(_) => Err(NoGpuPath::NoHipDevice),
            Fact::Err { error } => Err(NoGpuPath::HipCount(error.clone())),
        },
    }
}

/// An answer for one row, a line either way: how it runs (`Ok`), or why it cannot (`Err`): a
/// reason shown in the table, not an error (so it stays text).
fn avail(device: &'static str, level: u8, mechanism: &'static str, r: Result<String, String>) -> Availability {
    match r {
        Ok(how) => Availability {
            device,
            level,
            mechanism,
            available: true,
            reason: how,
        },
        Err(why) => Availability {
            device,
            level,
            mechanism,
            available: false,
            reason: why,
        },
    }
}

/// The facts lv3's mechanism chooser decides on, taken from doctor's facts (so that fixture
/// trees and made-up facts drive it too). `patched_ioctl` is the probe of the patched-kernel
/// ioctl, when it was made.
pub fn probe_facts(f: &Facts) -> ProbeFacts {
    let p = f.amdgpu_params.ok();
    let gpus = f.gpu_nodes();
    ProbeFacts {
        kfd: Some(match (&f.kfd_version, f.kfd_minor) {
            (Fact::Ok(_), Some(minor)) => Ok(KfdVersion { major: 1, minor }),
            (Fact::Ok(v), None) => Err(format!("unparsed KFD version {v}")),
            (Fact::Err { error }, _) => Err(error.clone()),
        }),
        sched_policy: p.and_then(|p| p.sched_policy),
        cwsr_enable: p.and_then(|p| p.cwsr_enable),
        gpu_nodes: gpus.len(),
        trap_debug_support: !gpus.is_empty() && gpus.iter().all(|n| n.capability.trap_debug_support),
        trap_debug_firmware: !gpus.is_empty() && gpus.iter().all(|n| n.capability.trap_debug_firmware_supported),
        patched_ioctl: f.patched_ioctl,
    }
}

/// Every (device, level, mechanism) with its answer, in the order `--mechanism auto` prefers.
pub fn availability(f: &Facts) -> Vec<Availability> {
    let gpu = gpu_path(f);
    // On real hardware only (see docs/hardware-validation.md): never verified here. An answer
    // as `avail` takes it (a reason, not an error).
    let unverified = |r: Result<String, String>| {
        r.map(|how| format!("{how} (GPU path: verified by review and fakes, not yet on hardware)"))
    };
    let mut v: Vec<Availability> = mechanism::probe_order(&probe_facts(f))
        .into_iter()
        .map(|verdict| {
            let r = gpu
                .clone()
                .map_err(|e| e.to_string())
                .and_then(|()| match verdict.why_not {
                    None => Ok(format!("CWSR through {}", verdict.kind.name())),
                    Some(why) => Err(why),
                });
            avail("hip", 3, verdict.kind.name(), unverified(r))
        })
        .collect();
    // Not a question of this machine: the hardware scheduler has no per-queue Lv2 route.
    v.push(avail("hip", 2, "none", Err(preempt_api::LV2_ON_GPU_WHY.into())));
    v.push(avail(
        "hip",
        1,
        preempt_api::Mechanism::Launcher.name(),
        unverified(
            gpu.map(|()| "HIP stream and events behind the lv1 launcher".to_string())
                .map_err(|e| e.to_string()),
        ),
    ));
    v.push(avail(
        "host",
        3,
        preempt_api::Mechanism::Sigstop.name(),
        Ok("CPU worker processes stopped with SIGSTOP (host numbers, not GPU numbers)".into()),
    ));
    v.push(avail(
        "host",
        2,
        preempt_api::Mechanism::Lv2Hold.name(),
        Ok(
            "CPU worker processes finish the command they run and take no new one (host numbers, not GPU numbers)"
                .into(),
        ),
    ));
    v.push(avail(
        "host",
        1,
        preempt_api::Mechanism::Launcher.name(),
        Ok("CPU worker processes behind the lv1 launcher (host numbers, not GPU numbers)".into()),
    ));
    v
}

/// The one-line summary doctor ends with.
pub fn summary(f: &Facts) -> String {
    match gpu_path(f) {
        Ok(()) => "an AMD GPU is present: see the levels above for what runs on it".into(),
        Err(why) => format!(
            "no usable AMD GPU here ({why}); preempt-lat runs on the host device, and its figures are host figures, not GPU figures"
        ),
    }
}

// The note is the device layer's, which gives it before an Lv3 run too.
pub use preempt_api::gpu::multi_gpu_note;
