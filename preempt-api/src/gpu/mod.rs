//! The one GPU set-up for preemption. Everything in this repository that opens an AMD GPU to
//! preempt its work comes through here: [`crate::Session`] (and so the C ABI and Python),
//! `preempt-lat`'s latency run, its `priority` modes, `validate`'s cycles and bystander check,
//! and the threshold sweep. The first hardware run therefore exercises one path.
//!
//! - [`GpuDevice::open`]: load HIP, open `hip:N` with gpu-device's checks (gfx target, hiprtc,
//!   streams with queues of their own, /dev/kfd); the delay kernel of a [`KernelChoice`] is
//!   compiled at the first use and calibrated (wall-clock ticks per ms) when first needed.
//! - [`GpuDevice::lp_queue`]: THE low-priority queue set-up: a HIP stream with a hardware queue
//!   of its own, its first use, at Lv3 its KFD queue found by gpu-device's discovery (as the
//!   mechanism needs it: [`lv3::MechanismKind`]), and a zeroed slot buffer for exactly-once
//!   checks. One stream is created at a time (discovery diffs the process's queues).
//! - [`GpuSuspension`]: THE Lv3 guard on a GPU queue: the check that the stream's queue is still
//!   the one discovery bound it to ([`QueueBinding::check`]: one `stat`, a refusal when the queue
//!   was destroyed or its id reused), the null-stream fence, then the mechanism's suspension;
//!   resume drops the fence only after a successful resume.
//! - [`GpuDevice::own_queue_stream`]: a stream of the program's own (no delay kernel, no slots)
//!   on a queue of its own with its KFD queue found, the same way: what the HIP interposer gives
//!   a program's low-priority stream.
//! - The mechanism itself comes from [`crate::Lv3Setup::build`].
//! - [`prepare`] and [`Prepared::lp`]: a run of delay commands (a latency run, the threshold
//!   sweep, the bystander check, `acceptance`'s GPU stages) prepares its GPU with these two calls.
//!
//! Written from the kernel and ROCm sources and gpu-device's tested pieces; it has not run on a
//! GPU yet (docs/c-api.md#on-a-gpu and docs/hardware-validation.md say what to expect).
mod latency;
mod own_queue;
mod prepare;
mod streams;
mod suspension;

pub use crate::options::{BLOCKS_PER_CU_ENV, DEFAULT_BLOCKS_PER_CU, KernelChoice};
pub use latency::{GpuLatency, GpuLatencyRequest};
pub use own_queue::OwnQueueStream;
pub use prepare::{CalibratedT, LpRequest, Prepare, Prepared, PreparedLp, prepare};
pub(crate) use streams::GpuBackend;
pub use suspension::GpuSuspension;

use crate::error::{Error, ErrorKind, Result};
use gpu_device::kernel::{self, DelayKernel};
use gpu_device::{Calibration, GfxTarget, Grid, HipLpQueue, discover, setup};
use hip_rt::{Device, Hip, Stream, StreamPriority};
use lv3::binding::QueueBinding;
use lv3::mechanism::{Preemptor, QueueTarget};
use std::sync::{Arc, Mutex};

/// The KFD gpu id of the GPU at PCI address `pci_bus_id` (`0000:c1:00.0`, as HIP writes it),
/// read from the KFD topology without opening anything: how a process that only needs to say
/// which GPU it is on (the HIP interposer's daemon client) learns it. `None` where no unique
/// topology node has that address.
pub fn kfd_gpu_id_at(pci_bus_id: &str) -> Option<u32> {
    discover::expected_gpu_id(&kfd::sysfs::SysRoot::default(), pci_bus_id)
}

/// Slots per stream when the options say 0.
pub const DEFAULT_SLOTS: usize = 1 << 16;

/// A low-priority queue as [`GpuDevice::lp_queue`] set it up.
pub struct LpQueue {
    /// The stream and its slots, as lv1's hardware queue.
    pub queue: Arc<HipLpQueue>,
    /// The KFD queue behind the stream (Lv3 set-ups), for reports: `binding`'s target.
    pub target: Option<QueueTarget>,
    /// The stream's binding to that queue (Lv3 set-ups): what [`GpuSuspension::suspend`] takes.
    pub binding: Option<QueueBinding>,
    /// How discovery went, for reports.
    pub notes: Vec<String>,
}

/// An open HIP device and its delay kernel. Thread-safe; share it with `Arc` (e.g. one per
/// `priority` run, a session per mode: [`crate::Session::on_gpu`]).
pub struct GpuDevice {
    hip: Hip,
    dev: Arc<Device>,
    arch: GfxTarget,
    choice: KernelChoice,
    kernel: Mutex<Option<Arc<DelayKernel>>>,
    cal: Mutex<Option<Calibration>>,
    /// Held while a stream is created: a discovery diffs the process's queues, so no other
    /// stream of this device may appear during it.
    creating: Mutex<()>,
}

use crate::lock;

/// `hip:N` cannot be opened: `NoDevice` where the device or HIP is missing, else the error's own
/// kind.
fn open_error(e: gpu_device::Error) -> Error {
    match &e {
        gpu_device::Error::Hip(h) if h.is_no_device() => Error::new(ErrorKind::NoDevice, e.to_string()),
        gpu_device::Error::NoSuchDevice { .. } => Error::new(ErrorKind::NoDevice, e.to_string()),
        _ => Error::from(e),
    }
}

impl GpuDevice {
    /// Loads HIP and opens device `index` with gpu-device's checks. Compiles nothing yet.
    pub fn open(index: u32, choice: KernelChoice) -> Result<GpuDevice> {
        let hip = Hip::load().map_err(|e| Error::new(ErrorKind::NoDevice, format!("HIP runtime: {e}")))?;
        let dev = gpu_device::open(&hip, index).map_err(open_error)?;
        let arch = gpu_device::gfx_target(&dev.info)?;
        Ok(GpuDevice {
            hip,
            dev: Arc::new(dev),
            arch,
            choice,
            kernel: Mutex::new(None),
            cal: Mutex::new(None),
            creating: Mutex::new(()),
        })
    }

    /// The KFD gpu id of this GPU (its topology node at the device's PCI address): the identity
    /// every process of the node agrees on, whatever `HIP_VISIBLE_DEVICES` makes of HIP's
    /// ordinals. `None` where no unique node has that address (a partition after the first).
    pub fn kfd_gpu_id(&self) -> Option<u32> {
        kfd_gpu_id_at(&self.dev.info.pci_bus_id)
    }

    /// The HIP runtime (its library path and version, for reports).
    pub fn hip(&self) -> &Hip {
        &self.hip
    }

    /// The HIP device.
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// The device's gfx target.
    pub fn arch(&self) -> &GfxTarget {
        &self.arch
    }

    /// The kernel choice the device was opened with.
    pub fn kernel_choice(&self) -> KernelChoice {
        self.choice
    }

    /// The grid of the chosen kernel on this device.
    pub fn grid(&self) -> Result<Grid> {
        let i = &self.dev.info;
        Ok(setup::lp_grid_for(
            self.choice.state,
            i.cu_count,
            i.wave_size,
            self.choice.blocks_per_cu,
        )?)
    }

    /// The delay kernel, compiled with hiprtc and loaded at the first call.
    pub fn kernel(&self) -> Result<Arc<DelayKernel>> {
        let mut k = lock(&self.kernel);
        if let Some(k) = &*k {
            return Ok(Arc::clone(k));
        }
        let code = kernel::compile(&self.hip, &self.arch)?;
        let loaded = Arc::new(DelayKernel::load(&self.dev, &code, self.choice.state, self.grid()?)?);
        *k = Some(Arc::clone(&loaded));
        Ok(loaded)
    }

    /// A stream of `priority` (not one with a queue of its own), created while no discovery runs.
    pub fn stream(&self, priority: StreamPriority) -> Result<Stream> {
        let _one_at_a_time = lock(&self.creating);
        Ok(self.dev.stream(priority)?)
    }

    /// The device's calibration at T around 1 ms (the first call runs it: a few hundred ms of
    /// GPU time on a stream of its own). Callers that need it at another T run
    /// `gpu_device::kernel::calibrate` themselves.
    pub fn calibration(&self) -> Result<Calibration> {
        let mut cal = lock(&self.cal);
        if let Some(c) = &*cal {
            return Ok(*c);
        }
        let k = self.kernel()?;
        let s = self.stream(StreamPriority::Normal)?;
        let c = kernel::calibrate(&k, &self.dev, &s, &setup::calibration_points(1.0), 3)?.calibration;
        *cal = Some(c);
        Ok(c)
    }

    /// Wall-clock ticks for a delay of `ns` (calibrating first if needed).
    pub fn ticks_for(&self, ns: u64) -> Result<u64> {
        #[allow(clippy::cast_precision_loss)] // a delay in ns: exact below 2^53 ns (104 days)
        let t_ms = ns as f64 / 1e6;
        Ok(self.calibration()?.ticks_for(t_ms))
    }

    /// THE low-priority queue set-up (see the module docs): a stream with a hardware queue of its
    /// own and `slots` command slots (0: [`DEFAULT_SLOTS`]). With `lv3`, its KFD queue is
    /// discovered, as that mechanism needs (dbg-trap: debugging is on already and ours).
    pub fn lp_queue(&self, lv3: Option<&Preemptor>, slots: usize) -> Result<LpQueue> {
        let k = self.kernel()?;
        let (stream, binding, notes) = self.queue_of_its_own(lv3)?;
        let n = if slots == 0 { DEFAULT_SLOTS } else { slots };
        let buf = kernel::slot_buffer(&self.dev, &stream, n)?;
        Ok(LpQueue {
            queue: Arc::new(HipLpQueue::new(Arc::clone(&self.dev), k, stream, buf)),
            target: binding.as_ref().map(|b| *b.target()),
            binding,
            notes,
        })
    }

    /// A stream with a hardware queue of its own, used once; with `lv3`, its KFD queue found by
    /// discovery as that mechanism needs it. What [`GpuDevice::lp_queue`] and
    /// [`GpuDevice::own_queue_stream`] both start from.
    fn queue_of_its_own(&self, lv3: Option<&Preemptor>) -> Result<(Stream, Option<QueueBinding>, Vec<String>)> {
        let _one_at_a_time = lock(&self.creating);
        // The first use creates the hardware queue (HIP creates it lazily) and must finish
        // before discovery's second look.
        let first_use = |s: &Stream| -> std::result::Result<(), gpu_device::Error> {
            let b = self.dev.alloc_device(4096)?;
            b.zero_async(s)?;
            Ok(s.synchronize()?)
        };
        match lv3 {
            Some(p) => {
                let d = discover::lp_stream_with_queue(&self.dev, first_use, p.kind())
                    .map_err(|e| Error::new(ErrorKind::Unavailable, e.to_string()))?;
                Ok((d.stream, Some(d.binding), d.notes))
            }
            None => {
                let s = self.dev.stream_own_queue()?;
                first_use(&s)?;
                Ok((s, None, Vec::new()))
            }
        }
    }

    /// A high-priority stream running the delay kernel directly, with `slots` command slots
    /// (0: [`DEFAULT_SLOTS`]).
    pub fn hp_queue(&self, slots: usize) -> Result<HipLpQueue> {
        let k = self.kernel()?;
        let stream = self.stream(StreamPriority::High)?;
        let n = if slots == 0 { DEFAULT_SLOTS } else { slots };
        let buf = kernel::slot_buffer(&self.dev, &stream, n)?;
        Ok(HipLpQueue::new(Arc::clone(&self.dev), k, stream, buf))
    }

    /// One line: name, PCI bus, CUs, HIP library.
    pub fn describe(&self) -> String {
        let i = &self.dev.info;
        format!(
            "{} ({}), {} CUs; HIP at {}",
            i.name,
            i.pci_bus_id,
            i.cu_count,
            self.hip.library_path()
        )
    }
}

/// The warning for Lv3 in a process that sees several GPUs (`None` with one GPU or when the
/// process is already restricted by `ROCR_VISIBLE_DEVICES`/`HIP_VISIBLE_DEVICES`): turning
/// debug mode on or off refreshes the runlists of every GPU the process has opened, so every
/// queue of every process on them is unmapped and mapped again (kfd_debug.c: each DBG_TRAP
/// ENABLE/DISABLE loops over the process's devices).
pub fn multi_gpu_note(gpus: usize, rocr_visible: Option<&str>, hip_visible: Option<&str>) -> Option<String> {
    if gpus <= 1 || rocr_visible.is_some_and(|v| !v.is_empty()) || hip_visible.is_some_and(|v| !v.is_empty()) {
        return None;
    }
    Some(format!(
        "this process sees {gpus} GPUs: turning debug mode on or off (dbg-trap; update-queue's ring lookup) \
         refreshes the runlists of all of them, unmapping every queue of every process there; restrict \
         preempt-lat to the measured GPU with ROCR_VISIBLE_DEVICES=<index> (it then appears as hip:0)"
    ))
}

/// [`multi_gpu_note`] for this process: `gpus` as it sees them, the two variables as its
/// environment has them.
pub fn multi_gpu_note_here(gpus: usize) -> Option<String> {
    let var = |k: &str| std::env::var(k).ok();
    multi_gpu_note(
        gpus,
        var("ROCR_VISIBLE_DEVICES").as_deref(),
        var("HIP_VISIBLE_DEVICES").as_deref(),
    )
}
