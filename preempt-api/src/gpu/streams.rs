//! A session's GPU streams: the low-priority one ([`GpuLp`]: an [`super::LpQueue`] behind lv1's
//! launcher) and the high-priority one ([`GpuHp`]: delay commands launched directly).
use super::{GpuDevice, GpuSuspension, LpQueue};
use crate::check::{Check, DeviceRecord, LpCompletion, Verified};
use crate::device::{DeviceBackend, HpBody, Launcher, LpBody, Lv3Held};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{Level, Options};
use gpu_device::verify::{self, Window};
use gpu_device::{ClockMap, ClockPair, DelayCmd, HipLpQueue, SlotStatus, calib, kernel};
use lv1::{Completion, Config, HwQueue, XQueue};
use lv3::binding::QueueBinding;
use lv3::mechanism::{Preemptor, QueueTarget};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Clock pairs taken when an Lv3 stream is created and again at its check: the map from the GPU
/// wall clock to host time that places each command's end against the suspension windows.
const CLOCK_PAIRS: usize = 16;

/// A GPU low-priority stream.
pub(crate) struct GpuLp {
    gpu: Arc<GpuDevice>,
    pub lpq: Arc<HipLpQueue>,
    pub xq: XQueue<HipLpQueue>,
    /// The discovered KFD queue (Lv3 streams): `binding`'s target.
    pub target: Option<QueueTarget>,
    /// The stream's binding to it, checked before every suspend.
    pub binding: Option<QueueBinding>,
    /// How discovery went (for the stream's description).
    pub notes: Vec<String>,
    completions: Mutex<Option<Receiver<Completion<gpu_device::Error>>>>,
    /// Lv3 streams: clock pairs from creation, and each suspension window on `calib::host_ns`.
    pairs: Vec<ClockPair>,
    windows: Arc<Mutex<Vec<Window>>>,
}

/// An Lv3 suspension of a GPU stream, with the moment its suspend returned; its resume records
/// the window for the stream's check.
pub(crate) struct GpuHeld {
    susp: GpuSuspension,
    from_ns: u64,
    windows: Arc<Mutex<Vec<Window>>>,
}

impl Lv3Held for GpuHeld {
    fn resume(self: Box<Self>) -> Result<()> {
        let to_ns = host_now();
        let GpuHeld { susp, from_ns, windows } = *self;
        let r = susp.resume();
        let mut w = windows.lock().unwrap_or_else(PoisonError::into_inner);
        let sample = w.len();
        w.push(Window { sample, from_ns, to_ns });
        r
    }
}

fn host_now() -> u64 {
    calib::host_ns(Instant::now())
}

impl GpuLp {
    /// The stream on `gpu`: [`GpuDevice::lp_queue`] behind a launcher of `cfg`; `keep`: keep the
    /// launcher's completions for [`GpuLp::take_completions`].
    pub fn new(gpu: &Arc<GpuDevice>, lv3: Option<&Preemptor>, slots: usize, cfg: Config, keep: bool) -> Result<Self> {
        let LpQueue {
            queue,
            target,
            binding,
            notes,
        } = gpu.lp_queue(lv3, slots)?;
        // Lv3: the clock map's first half, while the stream is idle and nothing is suspended.
        let pairs = if target.is_some() {
            kernel::sample_clock(&*gpu.kernel()?, gpu.device(), queue.stream(), CLOCK_PAIRS)?
        } else {
            Vec::new()
        };
        let xq = XQueue::new(Arc::clone(&queue), cfg)
            .map_err(|e| Error::new(ErrorKind::Device, format!("starting the launcher: {e}")))?;
        let rx = xq.take_completions();
        Ok(GpuLp {
            gpu: Arc::clone(gpu),
            lpq: queue,
            xq,
            target,
            binding,
            notes,
            completions: Mutex::new(if keep { rx } else { None }),
            pairs,
            windows: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Exactly-once from the slots and, at Lv3, no command ended inside a suspension window
    /// (call when idle and not suspended; a partial check otherwise). `idle`: the caller knows
    /// nothing is suspended, so the stream may run the clock probes.
    fn check_slots(&self, idle: bool) -> Verified {
        let stats = self.xq.stats();
        let mut v = Verified::new(&stats, 1);
        if !v.check.finished {
            return v;
        }
        let slots = match self.lpq.read_slots(stats.submitted) {
            Ok(s) => s,
            Err(e) => {
                v.check.problem(format!("reading the slots: {e}"));
                return v;
            }
        };
        let windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let map = if windows.is_empty() || !idle {
            None
        } else {
            match self.clock_map() {
                Ok(m) => Some(m),
                Err(e) => {
                    v.check
                        .problem(format!("the clock map for the suspension windows: {e}"));
                    None
                }
            }
        };
        match map {
            Some(map) => {
                let margin = map.late_bias_max_ns + 2_000.0;
                let c = verify::check_slots(&slots, self.lpq.nblocks(), &windows, &map, margin, false);
                for l in c.describe(crate::check::MAX_PROBLEMS) {
                    v.check.problem(l);
                }
                v.add_records(
                    c.records
                        .into_iter()
                        .map(|(id, correct)| DeviceRecord::plain(id, correct)),
                );
            }
            None => {
                let nblocks = self.lpq.nblocks();
                let mut records = Vec::with_capacity(slots.len());
                for (id, s) in (0u32..).zip(&slots) {
                    match s.status(id, nblocks) {
                        SlotStatus::NotRun => v.check.problem(format!("command {id}: never ran")),
                        SlotStatus::Complete if s.start < s.end => {
                            records.push(DeviceRecord::plain(u64::from(id), true))
                        }
                        st => {
                            v.check.problem(format!("command {id}: {st:?}"));
                            records.push(DeviceRecord::plain(u64::from(id), false));
                        }
                    }
                }
                v.add_records(records);
            }
        }
        v
    }

    /// The map over the stream's life: the pairs from creation and a new set now.
    fn clock_map(&self) -> Result<ClockMap> {
        let mut pairs = self.pairs.clone();
        pairs.extend(kernel::sample_clock(
            &*self.gpu.kernel()?,
            self.gpu.device(),
            self.lpq.stream(),
            CLOCK_PAIRS,
        )?);
        Ok(ClockMap::fit(&pairs, self.gpu.device().info.wall_clock_khz)?)
    }
}

/// The GPU HP stream: delay commands on a high-priority stream, launched directly.
pub(crate) struct GpuHp {
    gpu: Arc<GpuDevice>,
    q: HipLpQueue,
    next: AtomicU64,
    /// Recorded behind the submitted work by a bounded wait: made once, not per HP request
    /// (creating one is a HIP call inside the latency the caller measures).
    done: Mutex<hip_rt::Event>,
}

impl GpuHp {
    pub fn new(gpu: &Arc<GpuDevice>, slots: usize) -> Result<Self> {
        Ok(GpuHp {
            gpu: Arc::clone(gpu),
            q: gpu.hp_queue(slots)?,
            next: AtomicU64::new(0),
            done: Mutex::new(gpu.device().event(false)?),
        })
    }

    /// Waits for everything submitted so far, at most `timeout` (`None`: without limit).
    fn synchronize(&self, timeout: Option<Duration>) -> Result<()> {
        let Some(limit) = timeout else {
            return Ok(self.q.synchronize()?);
        };
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        done.record(self.q.stream())?;
        if done.wait_timeout(limit)? {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Device,
                format!("the HP stream did not finish within {limit:?} (is the GPU stuck?)"),
            ))
        }
    }

    /// Every command submitted completed exactly once (call after synchronizing).
    fn check_slots(&self) -> Check {
        let n = self.next.load(Ordering::Relaxed);
        let mut c = Check {
            submitted: n,
            completed: n,
            finished: true,
            ..Check::default()
        };
        match self.q.read_slots(n) {
            Ok(slots) => {
                for (id, s) in (0u32..).zip(&slots) {
                    match s.status(id, self.q.nblocks()) {
                        SlotStatus::Complete => c.exactly_once += 1,
                        st => c.problem(format!("HP command {id}: {st:?}")),
                    }
                }
            }
            Err(e) => c.problem(format!("reading the HP slots: {e}")),
        }
        c
    }
}

/// A GPU behind a session.
pub(crate) struct GpuBackend(pub Arc<GpuDevice>);

impl DeviceBackend for GpuBackend {
    fn lp_stream(&self, level: Level, lv3: Option<&Arc<Preemptor>>, opts: &Options) -> Result<Box<dyn LpBody>> {
        let lv3 = lv3.map(AsRef::as_ref).filter(|_| level == Level::Lv3);
        Ok(Box::new(GpuLp::new(
            &self.0,
            lv3,
            opts.gpu_slots,
            opts.lv1,
            opts.keep_records,
        )?))
    }
    fn hp_stream(&self, opts: &Options) -> Result<Box<dyn HpBody>> {
        Ok(Box::new(GpuHp::new(&self.0, opts.gpu_slots)?))
    }
}

impl LpBody for GpuLp {
    fn launcher(&self) -> Option<&dyn Launcher> {
        Some(&self.xq)
    }
    fn submit_delay(&self, ns: u64) -> Result<u64> {
        let ticks = self.gpu.ticks_for(ns)?;
        Ok(self.xq.submit(DelayCmd { ticks }))
    }
    /// Lv3 through `pre` on the discovered queue, once its binding is checked, behind the
    /// null-stream fence.
    fn suspend_lv3(&self, _label: &str, pre: Option<&Preemptor>) -> Result<Box<dyn Lv3Held>> {
        let (Some(pre), Some(binding)) = (pre, self.binding.as_ref()) else {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "no Lv3 mechanism or no known KFD queue",
            ));
        };
        let susp = GpuSuspension::suspend(pre, binding)?;
        Ok(Box::new(GpuHeld {
            susp,
            from_ns: host_now(),
            windows: Arc::clone(&self.windows),
        }))
    }
    fn verify(&self, idle: bool) -> Result<Verified> {
        Ok(self.check_slots(idle))
    }
    fn describe(&self, id: u64, how: &str) -> String {
        let q = self.target.map_or(String::new(), |t| {
            format!(", KFD queue {} on gpu 0x{:x}", t.queue_id, t.gpu_id)
        });
        let notes = if self.notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.notes.join("; "))
        };
        // Which HIP runtime made the handle: PyTorch's, already in the process, or one opened here.
        let hip = self.gpu.hip();
        format!(
            "GPU LP stream {id} (hipStream_t 0x{:x}{q}; HIP {}, {}), {how}{notes}",
            self.lpq.stream().handle(),
            hip.library_path(),
            hip.library_origin().short()
        )
    }
    /// Also whatever else runs on the stream (work launched by other libraries).
    fn synchronize_device(&self) -> Result<()> {
        Ok(self.lpq.stream().synchronize()?)
    }
    fn handle(&self) -> Option<usize> {
        Some(self.lpq.stream().handle())
    }
    fn queue(&self) -> Option<QueueTarget> {
        self.target
    }
    /// Slots booked so far are the command ids; past the buffer a launch fails.
    fn capacity(&self) -> Option<u64> {
        Some(self.lpq.capacity())
    }
    fn take_completions(&self) -> Vec<LpCompletion> {
        crate::check::drain_completions(&self.completions)
    }
}

impl HpBody for GpuHp {
    fn submit_delay(&self, ns: u64) -> Result<u64> {
        let ticks = self.gpu.ticks_for(ns)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.q.launch(id, DelayCmd { ticks })?;
        Ok(id)
    }
    fn wait(&self, limit: Option<Duration>) -> Result<Vec<DeviceRecord>> {
        self.synchronize(limit).map(|()| Vec::new())
    }
    fn check(&self) -> Check {
        self.check_slots()
    }
    fn handle(&self) -> Option<usize> {
        Some(self.q.stream().handle())
    }
    /// A bounded wait on the stream's completion event (a running kernel cannot be stopped:
    /// the default [`crate::device::Abandon::Left`] follows a timeout).
    fn idle_within(&self, limit: Duration) -> bool {
        self.synchronize(Some(limit)).is_ok()
    }
}
