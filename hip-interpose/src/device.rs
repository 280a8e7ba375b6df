//! Where a preemptible stream comes from and how it is suspended: one implementation per
//! device (the stand-in runtime's host queues, a GPU's KFD queues), chosen once per process.
use crate::ffi::next;
use preempt_api::gpu::{GpuDevice, KernelChoice, OwnQueueStream};
use preempt_api::sched::proto::Device as SchedDevice;
use preempt_api::{GracePeriod, Lv3Request, Lv3Setup, MechanismChoice, Preemptor};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What makes and suspends preemptible streams: a device's Lv3 (below) or the interposer's
/// Lv1 ([`crate::lv1`]).
pub trait Streams: Send + Sync {
    /// A stream that [`Streams::suspend`] can stop: the program's `hipStream_t` (a number), and
    /// whether it is a blocking stream (null-stream work waits for it), which the device
    /// decides.
    fn create(&self, flags: u32, priority: i32) -> Result<Created, String>;
    /// Destroys a stream [`Streams::create`] made.
    fn destroy(&self, key: usize) -> Result<(), String>;
    fn suspend(&self, key: usize) -> Result<(), String>;
    fn resume(&self, key: usize) -> Result<(), String>;
}

/// A device: its preemptible streams at Lv3 (each with a queue of its own), and who it is.
pub trait Device: Streams {
    /// For the log: which device and mechanism.
    fn describe(&self) -> String;
    /// The device's identity for the scheduler daemon (the same in every process of the node).
    fn sched_device(&self) -> Result<SchedDevice, String>;
    /// Whether its streams can be suspended at Lv3 here; else why not (the interposer then
    /// falls back to Lv1 under `PREEMPT_LEVEL=auto`).
    fn lv3_ready(&self) -> Result<(), String>;
}

/// A stream [`Streams::create`] made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    pub key: usize,
    pub blocking: bool,
}

/// `hipStreamNonBlocking`.
pub const NON_BLOCKING: u32 = 1;

/// The device for this process: the stand-in where its calls are there, else the GPU.
pub fn open() -> Box<dyn Device> {
    if next::is_standin() {
        Box::new(StandIn)
    } else {
        Box::new(Gpu::default())
    }
}

/// The stand-in runtime: every stream is a host queue of its own already; host Lv3 is the
/// stand-in's SIGSTOP of the stream's workers.
pub struct StandIn;

fn hip(what: &str, c: i32) -> String {
    format!("{what}: {}", next::error_name(c))
}

impl Streams for StandIn {
    fn create(&self, flags: u32, priority: i32) -> Result<Created, String> {
        let key = next::create_stream(flags, priority).map_err(|c| hip("hipStreamCreateWithPriority", c))?;
        Ok(Created {
            key,
            blocking: flags & NON_BLOCKING == 0,
        })
    }
    fn destroy(&self, key: usize) -> Result<(), String> {
        next::destroy_stream(key).map_err(|c| hip("hipStreamDestroy", c))
    }
    fn suspend(&self, key: usize) -> Result<(), String> {
        next::standin_suspend(key).map_err(|c| hip("preempt_standin_stream_suspend", c))
    }
    fn resume(&self, key: usize) -> Result<(), String> {
        next::standin_resume(key).map_err(|c| hip("preempt_standin_stream_resume", c))
    }
}

impl Device for StandIn {
    fn describe(&self) -> String {
        "the stand-in HIP runtime (host device: Lv3 is SIGSTOP of a stream's worker processes; host figures)".into()
    }
    /// The stand-in is one host device, `host:0`, in every process.
    fn sched_device(&self) -> Result<SchedDevice, String> {
        Ok(SchedDevice::host(0))
    }
    fn lv3_ready(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A GPU: preempt-api's own-queue streams on the calling thread's current device, suspended by
/// the Lv3 mechanism `auto` picks (docs/interposer.md#on-a-gpu). The device is opened at the
/// first stream that needs it (or when the daemon asks who it is), the mechanism at the first
/// own-queue stream; written from the sources, not yet run on a GPU.
#[derive(Default)]
pub struct Gpu {
    gpu: OnceLock<Result<GpuDevice, String>>,
    lv3: OnceLock<Result<Lv3Setup, String>>,
    streams: Mutex<HashMap<usize, OwnQueueStream>>,
}

impl Gpu {
    /// The calling thread's current HIP device, opened once.
    fn gpu(&self) -> Result<&GpuDevice, String> {
        self.gpu
            .get_or_init(|| {
                let index = next::current_device().map_err(|c| hip("hipGetDevice", c))?;
                let index = u32::try_from(index).map_err(|_| format!("hipGetDevice said {index}"))?;
                GpuDevice::open(index, KernelChoice::default()).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The Lv3 mechanism `auto` picks, built once; an error where none works.
    fn lv3(&self) -> Result<&std::sync::Arc<Preemptor>, String> {
        let setup = self
            .lv3
            .get_or_init(|| {
                Lv3Setup::build(Lv3Request::optional(MechanismChoice::default(), GracePeriod::default()))
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)?;
        setup
            .preemptor
            .as_ref()
            .ok_or_else(|| format!("no Lv3 mechanism here: {}", setup.info.why))
    }
}

impl Streams for Gpu {
    /// The CU-mask route takes no flags: the stream is a blocking one whatever the program asked.
    fn create(&self, _flags: u32, _priority: i32) -> Result<Created, String> {
        let s = self.gpu()?.own_queue_stream(self.lv3()?).map_err(|e| e.to_string())?;
        let key = s.handle();
        lock(&self.streams).insert(key, s);
        Ok(Created { key, blocking: true })
    }
    fn destroy(&self, key: usize) -> Result<(), String> {
        // Dropping it resumes it and destroys the stream.
        lock(&self.streams)
            .remove(&key)
            .map(drop)
            .ok_or_else(|| "not an interposer stream".into())
    }
    fn suspend(&self, key: usize) -> Result<(), String> {
        let pre = self.lv3()?;
        let streams = lock(&self.streams);
        streams
            .get(&key)
            .ok_or("not an interposer stream")?
            .suspend(pre)
            .map_err(|e| e.to_string())
    }
    fn resume(&self, key: usize) -> Result<(), String> {
        let streams = lock(&self.streams);
        streams
            .get(&key)
            .ok_or("not an interposer stream")?
            .resume()
            .map_err(|e| e.to_string())
    }
}

impl Device for Gpu {
    fn describe(&self) -> String {
        match (self.gpu(), self.lv3()) {
            (Ok(g), Ok(p)) => format!("hip:{} through /dev/kfd, Lv3 by {}", g.device().info.index, p.kind()),
            (Ok(g), Err(e)) => format!("hip:{} without Lv3 ({e})", g.device().info.index),
            (Err(e), _) => format!("no GPU opened ({e})"),
        }
    }
    fn lv3_ready(&self) -> Result<(), String> {
        self.gpu()?;
        self.lv3().map(drop)
    }
    /// From the current device's PCI address and the KFD topology alone: a process that only
    /// tells the daemon about its urgent work never opens its GPU for preemption.
    fn sched_device(&self) -> Result<SchedDevice, String> {
        let pci = match self.gpu.get() {
            Some(Ok(g)) => g.device().info.pci_bus_id.clone(),
            _ => {
                let index = next::current_device().map_err(|c| hip("hipGetDevice", c))?;
                next::pci_bus_id(index).map_err(|c| hip("hipDeviceGetPCIBusId", c))?
            }
        };
        preempt_api::gpu::kfd_gpu_id_at(&pci)
            .map(SchedDevice::kfd)
            .ok_or_else(|| format!("no unique KFD node at PCI {pci}: the daemon cannot place this GPU"))
    }
}
