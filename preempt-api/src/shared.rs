//! A device opened once for the sessions a run opens in turn (one per mode, point or window):
//! a GPU whose delay kernel and calibration the sessions share, with the mechanism and grace
//! period they all ask for; any other device with what its sessions need (the host device's
//! worker program). Every session is opened by [`Session`]'s own device arms: a device added
//! there needs nothing here.
use crate::error::{Error, Result};
use crate::gpu::{GpuDevice, KernelChoice};
use crate::{DeviceSpec, GracePeriod, MechanismChoice, Options, Session, WorkerExe};
use std::sync::Arc;

/// What [`SharedDevice::open`] opens, by name.
#[derive(Debug, Clone)]
pub struct Share {
    /// Resolved (not `auto`); not `kfd`, which runs no delay commands.
    pub device: DeviceSpec,
    /// The worker program of a device of worker processes ([`DeviceSpec::is_host`]; `None`:
    /// [`crate::host::default_worker`]).
    pub worker: Option<WorkerExe>,
    /// A GPU's delay kernel.
    pub kernel: KernelChoice,
    /// A GPU's Lv3 mechanism and grace period, for every session.
    pub mechanism: MechanismChoice,
    pub grace: GracePeriod,
}

/// A device opened once; [`SharedDevice::session`] opens each session on it.
pub struct SharedDevice {
    spec: DeviceSpec,
    /// `hip:N`, opened with its kernel.
    gpu: Option<Arc<GpuDevice>>,
    /// A device of worker processes: their program.
    worker: Option<WorkerExe>,
    mechanism: MechanismChoice,
    grace: GracePeriod,
}

impl SharedDevice {
    /// Opens the device of `s` (see [`Share`]); `InvalidArgument` for `auto` and `kfd`.
    pub fn open(s: Share) -> Result<Self> {
        let gpu = match s.device {
            d @ (DeviceSpec::Auto | DeviceSpec::Kfd) => {
                return Err(Error::invalid(format!(
                    "{d}: a device shared by sessions runs delay commands and is named (auto resolved first; kfd \
                     runs none)"
                )));
            }
            DeviceSpec::Hip(i) => Some(Arc::new(GpuDevice::open(i, s.kernel)?)),
            // Its sessions open the device themselves.
            _ => None,
        };
        let worker = match (s.device.is_host(), s.worker) {
            (true, Some(w)) => Some(w),
            (true, None) => Some(crate::host::default_worker()?),
            (false, _) => None,
        };
        Ok(SharedDevice {
            spec: s.device,
            gpu,
            worker,
            mechanism: s.mechanism,
            grace: s.grace,
        })
    }

    /// A session with `opts`, completed with what this device needs: a GPU's shared device,
    /// mechanism and grace period; a worker program.
    pub fn session(&self, opts: Options) -> Result<Session> {
        let opts = Options {
            worker: self.worker.clone().or(opts.worker),
            ..opts
        };
        match &self.gpu {
            Some(gpu) => Session::on_gpu(
                Arc::clone(gpu),
                Options {
                    mechanism: self.mechanism,
                    grace: self.grace,
                    ..opts
                },
            ),
            None => Session::open(self.spec, opts),
        }
    }

    /// The device in the API's grammar.
    pub fn spec(&self) -> DeviceSpec {
        self.spec
    }

    /// The GPU, where the device is one.
    pub fn gpu(&self) -> Option<&Arc<GpuDevice>> {
        self.gpu.as_ref()
    }

    /// The worker program, where the device is worker processes.
    pub fn worker(&self) -> Option<&WorkerExe> {
        self.worker.as_ref()
    }

    /// A GPU's Lv3 mechanism and grace period asked for.
    pub fn mechanism(&self) -> (MechanismChoice, GracePeriod) {
        (self.mechanism, self.grace)
    }

    /// The device in progress lines and notes: `hip:N (name, CUs)`, or the device's word
    /// (`host device` for the host device).
    pub fn label(&self) -> String {
        match &self.gpu {
            Some(gpu) => {
                let i = &gpu.device().info;
                format!("hip:{} ({}, {} CUs)", i.index, i.name, i.cu_count)
            }
            None if self.spec.is_host() => "host device".into(),
            None => self.spec.to_string(),
        }
    }
}
