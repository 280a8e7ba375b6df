//! From facts to answers: for each (device, level, mechanism), can it run here, and if not,
//! why — in one line. Pure functions over [`Facts`], tested on made-up facts.
use super::facts::Facts;
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

/// Whether the GPU path (HIP + KFD with a GPU node) is usable, or the first reason it is not.
pub fn gpu_path(f: &Facts) -> Result<(), String> {
    if !f.kfd_device_present {
        return Err("no /dev/kfd: no AMD GPU driver (amdgpu with KFD) on this machine".into());
    }
    if let Some(e) = f.kfd_version.err() {
        return Err(format!("/dev/kfd does not open: {e}"));
    }
    if f.gpu_nodes().is_empty() {
        return Err("KFD is loaded but its topology has no GPU node (no AMD GPU present)".into());
    }
    match f.hip.ok() {
        None => Err(format!("HIP runtime unusable: {}", f.hip.err().unwrap_or("not loaded"))),
        Some(h) => match &h.devices {
            super::facts::Fact::Ok(n) if *n > 0 => Ok(()),
            super::facts::Fact::Ok(_) => Err("HIP sees no device".into()),
            super::facts::Fact::Err { error } => Err(format!("HIP sees no device: {error}")),
        },
    }
}

fn avail(device: &'static str, level: u8, mechanism: &'static str, r: Result<String, String>) -> Availability {
    match r {
        Ok(how) => Availability { device, level, mechanism, available: true, reason: how },
        Err(why) => Availability { device, level, mechanism, available: false, reason: why },
    }
}

/// Why the stock-kernel Lv3 mechanisms cannot run, beyond the GPU path itself.
fn lv3_prereqs(f: &Facts, mechanism: &str) -> Result<(), String> {
    gpu_path(f)?;
    let p = f.amdgpu_params.ok();
    if p.and_then(|p| p.cwsr_enable) == Some(0) {
        return Err("amdgpu cwsr_enable=0: preemption drains waves instead of saving them".into());
    }
    if mechanism == "dbg-trap" {
        if f.kfd_minor.is_some_and(|m| m < 13) {
            return Err("KFD older than 1.13 has no debugger API (Linux >= 6.5 needed)".into());
        }
        if p.and_then(|p| p.sched_policy) == Some(2) {
            return Err("sched_policy=2 (no HWS): KFD refuses the debugger API".into());
        }
        if let Some(n) = f.gpu_nodes().into_iter().find(|n| !n.capability.trap_debug_firmware_supported) {
            return Err(format!("GPU node {} lacks debug-capable firmware (capability bit TRAP_DEBUG_FIRMWARE_SUPPORTED)", n.gpu_id));
        }
    }
    Ok(())
}

/// Every (device, level, mechanism) with its answer, in the order `--mechanism auto` prefers.
pub fn availability(f: &Facts) -> Vec<Availability> {
    let not_wired = "prerequisites met, but the GPU Lv3 mechanisms are not wired into this build yet";
    vec![
        avail("hip", 3, "ioctl", Err("needs the patched kernel from patches/ (per-queue preempt ioctl), not part of this build yet".into())),
        avail("hip", 3, "dbg-trap", lv3_prereqs(f, "dbg-trap").and(Err(not_wired.to_string()))),
        avail("hip", 3, "update-queue", lv3_prereqs(f, "update-queue").and(Err(not_wired.to_string()))),
        avail("hip", 1, "progressive-launch", gpu_path(f).and(Err("prerequisites met, but the HIP device is not wired into this build yet".to_string()))),
        avail("host", 3, "sigstop", Ok("CPU worker processes stopped with SIGSTOP (host numbers, not GPU numbers)".into())),
        avail("host", 1, "progressive-launch", Ok("CPU worker processes behind the lv1 launcher (host numbers, not GPU numbers)".into())),
    ]
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
