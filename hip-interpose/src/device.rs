//! Where a preemptible stream comes from and how it is suspended: one implementation per
//! device (the stand-in runtime's host queues, a GPU's KFD queues), chosen once per process.
use crate::ffi::next;
use preempt_api::gpu::{GpuDevice, KernelChoice, OwnQueueStream};
use preempt_api::{GracePeriod, Lv3Request, Lv3Setup, MechanismChoice};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A device's preemptible streams.
pub trait Device: Send + Sync {
    /// For the log: which device and mechanism.
    fn describe(&self) -> String;
    /// A stream with a queue of its own that [`Device::suspend`] can stop: the program's
    /// `hipStream_t` (a number), and whether it is a blocking stream (null-stream work waits for
    /// it), which the device decides.
    fn create(&self, flags: u32, priority: i32) -> Result<Created, String>;
    /// Destroys a stream [`Device::create`] made.
    fn destroy(&self, key: usize) -> Result<(), String>;
    fn suspend(&self, key: usize) -> Result<(), String>;
    fn resume(&self, key: usize) -> Result<(), String>;
}

/// A stream [`Device::create`] made.
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

impl Device for StandIn {
    fn describe(&self) -> String {
        "the stand-in HIP runtime (host device: Lv3 is SIGSTOP of a stream's worker processes; host figures)".into()
    }
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

/// A GPU: preempt-api's own-queue streams on the calling thread's current device, suspended by
/// the Lv3 mechanism `auto` picks (docs/interposer.md#on-a-gpu). Opened at the first stream
/// that needs it; written from the sources, not yet run on a GPU.
#[derive(Default)]
pub struct Gpu {
    open: OnceLock<Result<GpuSide, String>>,
    streams: Mutex<HashMap<usize, OwnQueueStream>>,
}

struct GpuSide {
    gpu: GpuDevice,
    lv3: Lv3Setup,
}

impl Gpu {
    fn side(&self) -> Result<&GpuSide, String> {
        self.open
            .get_or_init(|| {
                let index = next::current_device().map_err(|c| hip("hipGetDevice", c))?;
                let index = u32::try_from(index).map_err(|_| format!("hipGetDevice said {index}"))?;
                let gpu = GpuDevice::open(index, KernelChoice::default()).map_err(|e| e.to_string())?;
                let lv3 = Lv3Setup::build(Lv3Request::optional(MechanismChoice::default(), GracePeriod::default()))
                    .map_err(|e| e.to_string())?;
                if lv3.preemptor.is_none() {
                    return Err(format!("no Lv3 mechanism here: {}", lv3.info.why));
                }
                Ok(GpuSide { gpu, lv3 })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Device for Gpu {
    fn describe(&self) -> String {
        match self.side() {
            Ok(s) => format!(
                "hip:{} through /dev/kfd, Lv3 by {}",
                s.gpu.device().info.index,
                s.lv3.info.name.as_deref().unwrap_or("none")
            ),
            Err(e) => format!("a GPU without Lv3 ({e})"),
        }
    }
    /// The CU-mask route takes no flags: the stream is a blocking one whatever the program asked.
    fn create(&self, _flags: u32, _priority: i32) -> Result<Created, String> {
        let side = self.side()?;
        let pre = side.lv3.preemptor.as_ref().ok_or("no Lv3 mechanism")?;
        let s = side.gpu.own_queue_stream(pre).map_err(|e| e.to_string())?;
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
        let side = self.side()?;
        let pre = side.lv3.preemptor.as_ref().ok_or("no Lv3 mechanism")?;
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
