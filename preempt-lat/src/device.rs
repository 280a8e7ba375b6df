//! Which device a measurement runs on: `--device auto|host|hip:N` resolved against what this
//! machine has (doctor's facts), once, before anything starts.
use crate::doctor::facts::{self, Fact, HipInfo};
use crate::error::Error;
use crate::exit::Failure;
use crate::measure::{Params, RunResult};
use crate::options::values::KFD_IS_FOR_APPLICATIONS;
use crate::options::{DeviceSpec, HOST_HAS_NO_LP_STATE, Level, LpState};
use preempt_api::gpu::KernelChoice;
use preempt_api::{GracePeriod, MechanismChoice, Options, Share, SharedDevice};

/// The device a measurement runs on, once chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The host device with this many LP worker processes.
    Host(u32),
    /// HIP device N.
    Hip(u32),
}

impl Device {
    /// One measurement on this device (`mechanism` applies to Lv3 on a GPU), through
    /// preempt-api's latency layer: the device is set up there, the loop is
    /// [`crate::measure::samples`].
    pub fn measure(self, p: &Params, mechanism: MechanismChoice, quiet: bool) -> Result<RunResult, Error> {
        match self {
            Device::Host(_) => crate::measure_on::host(p, quiet),
            Device::Hip(device) => crate::measure_on::gpu(p, device, mechanism, quiet),
        }
    }

    /// Where the threshold sweep's runs get their sessions and native runs: the device opened
    /// once, a GPU with the sweep's LP kernel (`lp_state`); its sessions run at Lv1 only.
    pub fn open_shared_lv1(self, lp_state: Option<LpState>) -> Result<SharedDevice, Error> {
        let defaults = Options::default();
        let kernel = KernelChoice::for_state(lp_state.unwrap_or_default());
        self.source(kernel, defaults.mechanism, defaults.grace)
    }

    /// `priority`'s LP workers: on the host device one per core unless `--workers` says
    /// otherwise, so HP and LP share the CPUs (`priority --help`); 0 on a GPU.
    pub fn priority_workers(self, asked: Option<u32>) -> u32 {
        match self {
            Device::Hip(_) => 0,
            Device::Host(_) => asked.unwrap_or_else(|| u32::try_from(crate::env::cores()).unwrap_or(1)),
        }
    }

    /// Where a run that opens several application-API sessions (`priority`: one per mode) gets
    /// them: the device opened once.
    pub fn open_shared(self, mechanism: MechanismChoice, grace: GracePeriod) -> Result<SharedDevice, Error> {
        self.source(KernelChoice::default(), mechanism, grace)
    }

    /// The device opened once for sessions: the host device's worker program, or `hip:N` with
    /// `kernel`, its sessions' mechanism and grace period.
    fn source(
        self,
        kernel: KernelChoice,
        mechanism: MechanismChoice,
        grace: GracePeriod,
    ) -> Result<SharedDevice, Error> {
        let worker = match self {
            Device::Host(_) => Some(crate::host_direct::worker_exe()?),
            Device::Hip(_) => None,
        };
        Ok(SharedDevice::open(Share {
            device: self.spec(),
            worker,
            kernel,
            mechanism,
            grace,
        })?)
    }

    /// The device in the API's grammar (`auto` resolved): what it is called (`Display`) and what
    /// it is like ([`DeviceSpec::is_host`]).
    pub fn spec(self) -> DeviceSpec {
        match self {
            Device::Host(_) => DeviceSpec::HOST,
            Device::Hip(i) => DeviceSpec::Hip(i),
        }
    }

    /// Whether the device is CPU worker processes (host figures, no LP state, Lv3 = SIGSTOP).
    pub fn is_host(self) -> bool {
        self.spec().is_host()
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

impl Device {
    /// Whether a measurement at `level` can run here: Lv2 on a GPU is a usage error with the
    /// API's refusal (the options refuse it already where the device was named; this catches
    /// `--device auto` that chose a GPU).
    pub fn check_level(self, level: Level) -> Result<(), Failure> {
        match level {
            Level::Lv2 => self.check_lv2("--level 2"),
            _ => Ok(()),
        }
    }

    /// Whether `asked` (an option and its value that want Lv2, e.g. `--modes lv2`) can run here:
    /// on a device without Lv2 a usage error with the API's refusal (after `--device auto` chose
    /// a GPU; a named one is refused by the options).
    pub fn check_lv2(self, asked: &str) -> Result<(), Failure> {
        if !self.spec().has_lv2() {
            return Err(Failure::Usage(format!(
                "{asked}: {} (--device auto chose it)",
                preempt_api::lv2_unavailable(self.spec()).message
            )));
        }
        Ok(())
    }
}

/// The API's word for the device (`host`, `hip:N`).
impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.spec().fmt(f)
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
    let host = Device::Host(workers.unwrap_or_else(crate::host_direct::default_workers));
    let index = match device {
        DeviceSpec::Host(_) => return Ok(host),
        DeviceSpec::Auto => 0,
        DeviceSpec::Hip(n) => n,
        DeviceSpec::Kfd => return Err(Failure::Usage(format!("--device kfd: {KFD_IS_FOR_APPLICATIONS}"))),
    };
    let facts = facts::gather(&kfd::sysfs::SysRoot::default(), hip());
    let why = crate::gpu::runnable(&facts, index);
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
    fn a_device_is_named_and_described_by_its_spec() {
        assert_eq!(Device::Host(3).to_string(), "host");
        assert_eq!(Device::Hip(2).to_string(), "hip:2");
        assert!(Device::Host(3).is_host());
        assert!(!Device::Hip(0).is_host());
    }

    #[test]
    fn lv2_runs_on_the_host_device_and_is_a_usage_error_on_a_gpu() {
        assert!(Device::Host(2).check_level(Level::Lv2).is_ok());
        for l in [Level::Lv1, Level::Lv3] {
            assert!(Device::Hip(0).check_level(l).is_ok());
        }
        match Device::Hip(0).check_level(Level::Lv2) {
            Err(Failure::Usage(m)) => {
                let api = preempt_api::lv2_unavailable(DeviceSpec::Hip(0)).message;
                assert!(
                    m.starts_with("--level 2: ") && m.contains(&api) && !m.contains('\n'),
                    "{m}"
                );
            }
            other => panic!("Lv2 on a GPU must be a usage error: {other:?}"),
        }
        // priority's lv2 mode after --device auto chose a GPU: the same refusal, naming the option.
        assert!(Device::Host(1).check_lv2("--modes lv2").is_ok());
        match Device::Hip(1).check_lv2("--modes lv2") {
            Err(Failure::Usage(m)) => assert!(
                m.starts_with("--modes lv2: Lv2 is unavailable on hip:1: ") && m.ends_with("(--device auto chose it)"),
                "{m}"
            ),
            other => panic!("--modes lv2 on a GPU must be a usage error: {other:?}"),
        }
    }

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
