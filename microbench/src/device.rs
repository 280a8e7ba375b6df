//! Which device a measurement runs on: `--device auto|host|hip:N` resolved against what this
//! machine has (doctor's facts), once, before anything starts.
use crate::doctor::facts::{self, Fact, HipInfo};
use crate::exit::Failure;
use crate::measure::{Params, RunResult};
use crate::options::values::KFD_IS_FOR_APPLICATIONS;
use crate::options::{DeviceSpec, HOST_HAS_NO_LP_STATE, LpState};
use lv3::MechanismChoice;

/// The device a measurement runs on, once chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The host device with this many LP worker processes.
    Host(u32),
    /// HIP device N.
    Hip(u32),
}

impl Device {
    /// One measurement on this device (`mechanism` applies to Lv3 on a GPU).
    pub fn measure(self, p: &Params, mechanism: MechanismChoice, quiet: bool) -> Result<RunResult, String> {
        match self {
            Device::Host(_) => crate::measure::host::run(p, quiet),
            Device::Hip(i) => crate::gpu::run(p, i, mechanism, quiet),
        }
    }

    /// LP worker processes (the host device's "compute units"; 0 on a GPU).
    pub fn workers(self) -> u32 {
        match self {
            Device::Host(w) => w,
            Device::Hip(_) => 0,
        }
    }

    /// The LP state a run on this device records: the one asked for on a GPU; on the host device
    /// `None` (not applicable), and `heavy` is a usage error there (also when `--device auto`
    /// fell back to it).
    pub fn lp_state(self, requested: LpState) -> Result<Option<LpState>, Failure> {
        match (self, requested) {
            (Device::Hip(_), s) => Ok(Some(s)),
            (Device::Host(_), LpState::Light) => Ok(None),
            (Device::Host(_), LpState::Heavy) => Err(Failure::Usage(
                HOST_HAS_NO_LP_STATE.replace("{what}", "--lp-state heavy") + "; the host device was selected",
            )),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Host(_) => f.write_str("host"),
            Device::Hip(i) => write!(f, "hip:{i}"),
        }
    }
}

/// Picks the device for `--device`, `--workers` and `--mechanism`. `auto` takes hip:0 when
/// doctor's GPU path and the HIP device are usable, else the host device with a note on stderr;
/// an explicit `hip:N` that cannot run is an error with doctor's reason; `kfd` is the C and
/// Python API's (the options refuse it already). `hip` is what the HIP runtime said (see `main`).
pub fn select(
    device: DeviceSpec,
    workers: Option<u32>,
    mechanism: MechanismChoice,
    hip: impl FnOnce() -> Fact<HipInfo>,
) -> Result<Device, Failure> {
    let host = Device::Host(workers.unwrap_or_else(crate::measure::host::default_workers));
    let index = match device {
        DeviceSpec::Host => return Ok(host),
        DeviceSpec::Auto => 0,
        DeviceSpec::Hip(n) => n,
        DeviceSpec::Kfd => return Err(Failure::Usage(format!("--device kfd: {KFD_IS_FOR_APPLICATIONS}"))),
    };
    let facts = facts::gather(&kfd::sysfs::SysRoot::default(), hip());
    let why = crate::doctor::verdict::gpu_path(&facts).and_then(|()| crate::gpu::usable(index));
    match (why, device) {
        (Ok(()), _) => Ok(Device::Hip(index)),
        (Err(why), DeviceSpec::Auto) => {
            if mechanism != MechanismChoice::Auto {
                return Err(Failure::Usage(format!(
                    "--mechanism {mechanism} needs a usable AMD GPU, and there is none: {why}"
                )));
            }
            eprintln!(
                "preempt-lat: --device auto: using the host device ({why}); its figures are host figures, not GPU figures"
            );
            Ok(host)
        }
        (Err(why), _) => Err(Failure::Error(format!(
            "--device {device}: cannot run: {why} (see `preempt-lat doctor`)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lp_state_is_na_on_the_host_and_heavy_is_refused_there() {
        assert_eq!(Device::Hip(0).lp_state(LpState::Heavy).ok(), Some(Some(LpState::Heavy)));
        assert_eq!(Device::Hip(1).lp_state(LpState::Light).ok(), Some(Some(LpState::Light)));
        assert_eq!(Device::Host(3).lp_state(LpState::Light).ok(), Some(None));
        match Device::Host(3).lp_state(LpState::Heavy) {
            Err(Failure::Usage(m)) => assert!(m.contains("--lp-state heavy needs an AMD GPU"), "{m}"),
            other => panic!("heavy on the host device must be a usage error: {other:?}"),
        }
    }
}
