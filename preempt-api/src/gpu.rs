//! `hip:N` behind the API. Written from the kernel and ROCm sources and gpu-device's tested
//! pieces; it has not run on a GPU yet (see `docs/c-api.md#on-a-gpu` for what to expect).
//!
//! - A low-priority stream is a HIP stream with a hardware queue of its own
//!   (`hipExtStreamCreateWithCUMask`). At Lv3 its KFD queue is found by gpu-device's discovery
//!   (sysfs and snapshot sets before and after its first use: a `hipMemsetAsync`); its raw
//!   `hipStream_t` is handed out for any library to launch on.
//! - Delay commands submitted through the library go through lv1's launcher over the same
//!   stream ([`HipLpQueue`], one 32-byte slot per command, checked exactly-once afterwards); the
//!   delay kernel is compiled with hiprtc at the session's first stream and calibrated (wall-clock ticks
//!   per ms) at the first delay submitted.
//! - The HP stream is a high-priority HIP stream running the same delay kernel.
use crate::check::Check;
use crate::error::{Error, ErrorKind, Result};
use gpu_device::kernel::{self, DelayKernel};
use gpu_device::{Calibration, DelayCmd, HipLpQueue, SlotStatus, discover, setup};
use hip_rt::{Device, Hip, StreamPriority};
use lv1::{Config, HwQueue, XQueue};
use lv3::mechanism::QueueTarget;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// LP blocks per CU of the delay kernel's grid (as `preempt-lat`: 2 blocks of 1024 threads per
/// CU fill every wave slot of a gfx942 CU).
const BLOCKS_PER_CU: u32 = 2;
/// Slots per delay stream when the options say 0.
const DEFAULT_SLOTS: usize = 1 << 16;

/// An open HIP device and what the delay commands need, built lazily.
pub(crate) struct Gpu {
    hip: Hip,
    pub dev: Arc<Device>,
    kernel: Mutex<Option<Arc<DelayKernel>>>,
    cal: Mutex<Option<Calibration>>,
    /// Held while this session creates a HIP stream: a discovery diffs the process's queues, so
    /// no other stream of the session may appear during it.
    creating: Mutex<()>,
    slots: usize,
}

fn open_error(e: gpu_device::Error) -> Error {
    match &e {
        gpu_device::Error::Hip(h) if h.is_no_device() => Error::new(ErrorKind::NoDevice, e.to_string()),
        gpu_device::Error::NoSuchDevice { .. } => Error::new(ErrorKind::NoDevice, e.to_string()),
        _ => Error::from(e),
    }
}

impl Gpu {
    /// Loads HIP and opens device `index` with gpu-device's checks (gfx target, hiprtc, streams
    /// with queues of their own, /dev/kfd).
    pub fn open(index: u32, slots: usize) -> Result<Gpu> {
        let hip = Hip::load().map_err(|e| Error::new(ErrorKind::NoDevice, format!("HIP runtime: {e}")))?;
        let dev = gpu_device::open(&hip, index).map_err(open_error)?;
        Ok(Gpu {
            hip,
            dev: Arc::new(dev),
            kernel: Mutex::new(None),
            cal: Mutex::new(None),
            creating: Mutex::new(()),
            slots: if slots == 0 { DEFAULT_SLOTS } else { slots },
        })
    }

    fn kernel(&self) -> Result<Arc<DelayKernel>> {
        let mut k = self.kernel.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = &*k {
            return Ok(Arc::clone(k));
        }
        let arch = gpu_device::gfx_target(&self.dev.info)?;
        let code = kernel::compile(&self.hip, &arch)?;
        let grid = setup::lp_grid(self.dev.info.cu_count, self.dev.info.wave_size, BLOCKS_PER_CU)?;
        let loaded = Arc::new(DelayKernel::load(&self.dev, &code, gpu_device::LpState::Light, grid)?);
        *k = Some(Arc::clone(&loaded));
        Ok(loaded)
    }

    /// Wall-clock ticks for a delay of `ns` (the first call calibrates: a few hundred ms of GPU
    /// time).
    fn ticks_for(&self, ns: u64) -> Result<u64> {
        let mut cal = self.cal.lock().unwrap_or_else(PoisonError::into_inner);
        if cal.is_none() {
            let k = self.kernel()?;
            let warm = {
                let _one_at_a_time = self.creating.lock().unwrap_or_else(PoisonError::into_inner);
                self.dev.stream(StreamPriority::Normal)?
            };
            let report = kernel::calibrate(&k, &self.dev, &warm, &setup::calibration_points(1.0), 3)?;
            *cal = Some(report.calibration);
        }
        #[allow(clippy::cast_precision_loss)] // a delay in ns: exact below 2^53 ns (104 days)
        let t_ms = ns as f64 / 1e6;
        Ok(cal.as_ref().map_or(0, |c| c.ticks_for(t_ms)))
    }

    /// A low-priority stream: with `discover` (Lv3) its KFD queue is found; `debug_is_ours`:
    /// the session's mechanism is dbg-trap (debugging is on already).
    pub fn lp_stream(self: &Arc<Self>, discover_queue: bool, debug_is_ours: bool, cfg: Config) -> Result<GpuLp> {
        let k = self.kernel()?;
        let _one_at_a_time = self.creating.lock().unwrap_or_else(PoisonError::into_inner);
        let first_use = |s: &hip_rt::Stream| -> std::result::Result<(), gpu_device::Error> {
            let b = self.dev.alloc_device(4096)?;
            b.zero_async(s)?;
            Ok(s.synchronize()?)
        };
        let (stream, target, notes) = if discover_queue {
            let d = discover::lp_stream_with_queue(&self.dev, first_use, debug_is_ours)
                .map_err(|e| Error::new(ErrorKind::Unavailable, e.to_string()))?;
            (d.stream, Some(d.target), d.notes)
        } else {
            let s = self.dev.stream_own_queue()?;
            first_use(&s)?;
            (s, None, Vec::new())
        };
        let slots = kernel::slot_buffer(&self.dev, &stream, self.slots)?;
        let lpq = Arc::new(HipLpQueue::new(Arc::clone(&self.dev), k, stream, slots));
        let xq = XQueue::new(Arc::clone(&lpq), cfg)
            .map_err(|e| Error::new(ErrorKind::Device, format!("starting the launcher: {e}")))?;
        drop(xq.take_completions());
        Ok(GpuLp {
            gpu: Arc::clone(self),
            lpq,
            xq,
            target,
            notes,
        })
    }

    pub fn hp_stream(self: &Arc<Self>) -> Result<GpuHp> {
        let k = self.kernel()?;
        let _one_at_a_time = self.creating.lock().unwrap_or_else(PoisonError::into_inner);
        let stream = self.dev.stream(StreamPriority::High)?;
        let slots = kernel::slot_buffer(&self.dev, &stream, self.slots)?;
        Ok(GpuHp {
            gpu: Arc::clone(self),
            q: HipLpQueue::new(Arc::clone(&self.dev), k, stream, slots),
            next: AtomicU64::new(0),
        })
    }
}

/// A GPU low-priority stream.
pub(crate) struct GpuLp {
    gpu: Arc<Gpu>,
    pub lpq: Arc<HipLpQueue>,
    pub xq: XQueue<HipLpQueue>,
    /// The discovered KFD queue (Lv3 streams).
    pub target: Option<QueueTarget>,
    /// How discovery went (for the stream's description).
    pub notes: Vec<String>,
}

impl GpuLp {
    pub fn handle(&self) -> usize {
        self.lpq.stream().handle()
    }

    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        let ticks = self.gpu.ticks_for(ns)?;
        Ok(self.xq.submit(DelayCmd { ticks }))
    }

    /// Exactly-once from the slots (call when idle; a partial check otherwise).
    pub fn check(&self) -> Check {
        let stats = self.xq.stats();
        let mut c = Check {
            submitted: stats.submitted,
            completed: stats.completed,
            finished: stats.pending == 0 && stats.in_flight == 0,
            ..Check::default()
        };
        if stats.errors > 0 {
            c.problem(format!("{} command(s) failed to launch or complete", stats.errors));
        }
        if !c.finished {
            return c;
        }
        match self.lpq.read_slots(stats.submitted) {
            Ok(slots) => {
                for (id, s) in slots.iter().enumerate() {
                    let Ok(id32) = u32::try_from(id) else { break };
                    match s.status(id32, self.lpq.nblocks()) {
                        SlotStatus::Complete if s.start < s.end => c.exactly_once += 1,
                        st => c.problem(format!("command {id}: {st:?}")),
                    }
                }
            }
            Err(e) => c.problem(format!("reading the slots: {e}")),
        }
        c
    }
}

/// The GPU HP stream: delay commands on a high-priority stream, launched directly.
pub(crate) struct GpuHp {
    gpu: Arc<Gpu>,
    q: HipLpQueue,
    next: AtomicU64,
}

impl GpuHp {
    pub fn handle(&self) -> usize {
        self.q.stream().handle()
    }

    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        let ticks = self.gpu.ticks_for(ns)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.q.launch(id, DelayCmd { ticks })?;
        Ok(id)
    }

    pub fn synchronize(&self) -> Result<()> {
        Ok(self.q.synchronize()?)
    }
}
