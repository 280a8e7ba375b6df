//! Whether `hip:N` can run a measurement here, and why not: doctor's facts, the device itself,
//! and per Lv3 mechanism the kernel's answer. Nothing here opens the device's queues.
use kfd::sysfs::SysRoot;
use lv3::mechanism::{self, ProbeFacts};
use preempt_api::MechanismKind;

/// Whether `hip:device_index` can run a measurement here; the reason if not (for main.rs, before
/// it starts anything). Does not compile the kernel or touch KFD queues.
pub fn usable(device_index: u32) -> Result<(), gpu_device::Error> {
    gpu_device::usable(device_index)
}

/// Why `hip:N` cannot run a measurement here.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// Doctor's facts: no GPU path (no KFD, no GPU node, no HIP device).
    #[error(transparent)]
    Path(#[from] crate::doctor::verdict::NoGpuPath),
    /// The device itself (it does not exist, its target is unknown to this HIP, ...).
    #[error(transparent)]
    Device(#[from] gpu_device::Error),
}

/// Whether `hip:device_index` can run a measurement here, doctor's `facts` first (the first
/// reason if not).
pub fn runnable(facts: &crate::doctor::facts::Facts, device_index: u32) -> Result<(), Unusable> {
    crate::doctor::verdict::gpu_path(facts)?;
    Ok(usable(device_index)?)
}

/// Why `kind` cannot run on this machine (doctor's probe, e.g. the patched ioctl on a stock
/// kernel), or None when it can. `validate`'s per-mechanism checks turn this into a skip: a
/// mechanism the kernel does not offer is not a failure of the mechanism.
pub fn unusable_reason(kind: MechanismKind) -> Option<String> {
    mechanism::probe_order(&ProbeFacts::gather(&SysRoot::default()))
        .into_iter()
        .find(|v| v.kind == kind && !v.usable())
        .map(|v| format!("skipped: {v}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_device::hip_rt::Hip;
    use preempt_api::MechanismChoice;

    #[test]
    fn functional_without_a_gpu_is_a_skip() {
        if let Err(e) = Hip::load() {
            eprintln!("SKIPPED: HIP is not installed here: {e}");
            return;
        }
        if let Err((skip, why)) = crate::gpu::functional(0, MechanismChoice::Auto, 0.5, 3) {
            assert!(skip, "no GPU must be a skip, not a failure: {why}");
        }
    }

    #[test]
    fn usable_without_a_gpu_says_why() {
        let Ok(hip) = Hip::load() else {
            eprintln!("SKIPPED: HIP is not installed here");
            return;
        };
        match usable(0) {
            Ok(()) => eprintln!("a GPU is usable here: {:?}", hip.device_count()),
            Err(e) => {
                let e = e.to_string();
                eprintln!("usable(0): {e}");
                if hip.device_count().is_err_and(|d| d.is_no_device()) {
                    assert!(e.contains("hipGetDeviceCount failed: hipErrorNoDevice (100)"), "{e}");
                    assert!(e.contains("/dev/kfd"), "{e}");
                }
            }
        }
    }
}
