//! `hip:N` as a [`LatencyDevice`]: the LP queue of [`crate::gpu::prepare`] fed by the caller's
//! launcher, Lv3 through the API's [`GpuSuspension`] guard, the HP probe of gpu-device.
//!
//! Times: request, suspend and resume are host ns ([`calib::host_ns`]); the HP probe's start is
//! the GPU wall clock, known only after the run: [`LatencyDevice::finish`] maps every stamp to
//! host ns with a [`ClockMap`] fitted from probe round trips taken before and after the run (so
//! the rate is fitted over the whole run, not assumed), then checks every LP command's slot
//! (exactly once, no end inside a suspension window). [`GpuLatency::open`] sets the device up
//! (`open.rs`); the probes around the samples are `probes.rs`.
mod open;
mod probes;

use self::probes::{CLOCK_PAIRS, PROBE_TIMEOUT, clock_pairs, failed};
use super::{GpuDevice, GpuSuspension};
use crate::error::{Error, Result};
use crate::latency::{
    AchievedT, Finished, GpuFacts, HpStart, LatencyDevice, LpKernel, RawSample, Reporter, RunFacts, Settled, Suspended,
};
use crate::{GracePeriod, Mechanism, Preemptor};
use gpu_device::verify::{self, Window};
use gpu_device::{ClockMap, ClockPair, DelayCmd, HipLpQueue, HpProbe, calib};
use lv3::binding::QueueBinding;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use open::GpuLatencyRequest;

/// Context for a HIP (or GPU device) error: `hip: <what>: <error>`.
fn h<E: Into<Error>>(what: &'static str) -> impl Fn(E) -> Error {
    move |e| e.into().context(&format!("hip: {what}"))
}

/// Lv3 on a GPU: the mechanism and the queue it acts on, checked before every suspend.
struct Lv3 {
    preemptor: Arc<Preemptor>,
    binding: QueueBinding,
}

/// Everything the run's record says about the device, gathered during set-up; the clock map's
/// bias bound joins it in [`LatencyDevice::finish`].
struct Report {
    device_index: u32,
    gfx: String,
    /// Device, HIP, grid and the achieved T.
    head: String,
    /// HP floor, LP queue and co-run warning.
    tail: String,
}

/// A GPU set up for one latency run by [`GpuLatency::open`].
pub struct GpuLatency {
    /// The LP queue, the probe and the kernel live on it; its wall clock's rate maps the stamps.
    gpu: Arc<GpuDevice>,
    lpq: Arc<HipLpQueue>,
    probe: HpProbe,
    cmd: DelayCmd,
    /// T as achieved before the run (`kernel::check_t`), in ns: the unit of the random gaps.
    t_ns: f64,
    /// T as requested, in ms.
    t_ms: f64,
    /// The LP kernel and its wave state, for the result.
    lp_kernel: LpKernel,
    /// LP slots allocated: the run may submit no more commands.
    budget: u64,
    /// At Lv1 no mechanism: the caller's launcher suspends.
    lv3: Option<Lv3>,
    /// The grace period asked for (applies where the mechanism `sets_grace_period`).
    grace: GracePeriod,
    /// Clock pairs taken before the run; the ones after it are taken at probe index `pairs_post_idx`.
    pairs: Vec<ClockPair>,
    pairs_post_idx: u32,
    say: Arc<dyn Reporter>,
    report: Report,
}

/// The API's GPU guard as a latency run's [`Suspended`].
impl Suspended for GpuSuspension {
    fn resume(self: Box<Self>) -> Result<()> {
        GpuSuspension::resume(*self)
    }
    fn preempt_call_ns(&self) -> Option<u64> {
        Some(u64::try_from(self.report().preempt_call.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl LatencyDevice for GpuLatency {
    type Queue = HipLpQueue;

    fn now_ns(&self) -> u64 {
        calib::host_ns(Instant::now())
    }
    fn monotonic_offset_ns(&self) -> i64 {
        // host_ns counts from a process epoch; CLOCK_MONOTONIC from boot: the midpoint of two
        // monotonic reads around one host_ns read (off by at most half their gap, ~tens of ns).
        let a = i128::from(crate::now_ns());
        let h = i128::from(self.now_ns());
        let b = i128::from(crate::now_ns());
        i64::try_from((a + b) / 2 - h).unwrap_or(0)
    }
    fn lp_queue(&self) -> Arc<HipLpQueue> {
        Arc::clone(&self.lpq)
    }
    fn command(&self) -> DelayCmd {
        self.cmd
    }
    fn t_ns(&self) -> f64 {
        self.t_ns
    }
    fn budget(&self) -> Option<u64> {
        Some(self.budget)
    }
    fn wait_first_start(&self, launched: &dyn Fn() -> u64) -> Result<()> {
        let t0 = Instant::now();
        while launched() == 0 {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(failed("the launcher launched no LP command within 30 s"));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }
    fn suspend(&self) -> Result<Box<dyn Suspended + '_>> {
        let lv3 = self
            .lv3
            .as_ref()
            .ok_or_else(|| failed("Lv3 suspend without a mechanism (an Lv1 run)"))?;
        Ok(Box::new(GpuSuspension::suspend(&lv3.preemptor, &lv3.binding)?))
    }
    fn hp_launch(&self, index: u32) -> Result<()> {
        self.probe.launch(index).map_err(h("HP probe"))
    }
    fn hp_wait(&self, _index: u32) -> Result<HpStart> {
        if !self.probe.wait(PROBE_TIMEOUT).map_err(h("HP probe"))? {
            let while_ = if self.lv3.is_some() {
                " with the LP queue suspended"
            } else {
                ""
            };
            return Err(failed(format!(
                "the HP probe did not finish within {PROBE_TIMEOUT:?}{while_}"
            )));
        }
        Ok(HpStart::Later)
    }
    fn drain_hint(&self) -> String {
        format!(
            "; check dmesg and /sys/class/kfd/kfd/proc/{}/queues (the LP queue may be left disabled)",
            std::process::id()
        )
    }
    // `abandon` is the default: a running kernel cannot be stopped (docs/c-api.md#close).
    fn finish(&mut self, raw: &[RawSample], settled: Settled) -> Result<Finished> {
        let mechanism = self.mechanism();
        self.teardown();
        // The clock map over the whole run, then the HP start of every sample.
        let post = clock_pairs(&self.probe, self.pairs_post_idx, CLOCK_PAIRS)?;
        self.pairs.extend(post);
        let map = ClockMap::fit(&self.pairs, self.gpu.device().info.wall_clock_khz)?;
        let mut negative = 0usize;
        let mut hp_start_ns = Vec::with_capacity(raw.len());
        for r in raw {
            let tick = self
                .probe
                .stamp(r.index)
                .ok_or_else(|| failed(format!("HP probe {} completed without its start stamp", r.index)))?;
            hp_start_ns.push(verify::hp_start_ns(&map, tick, r.t_req).unwrap_or_else(|_| {
                negative += 1;
                0
            }));
        }
        if negative > 0 {
            self.say.warn(&format!(
                "{negative} HP start(s) mapped before their request (clock map off by more than the latency; mapped \
                 times are late by at most {:.0} ns, never early): recorded as 0",
                map.late_bias_max_ns
            ));
        }
        // Every LP command's slot: exactly once, and none ended inside a suspension window.
        let windows: Vec<Window> = raw
            .iter()
            .map(|r| Window {
                sample: r.index as usize,
                from_ns: r.window.0,
                to_ns: r.window.1,
            })
            .collect();
        let slots = self.lpq.read_slots(settled.ran).map_err(h("reading the LP slots"))?;
        let margin = map.late_bias_max_ns + 2_000.0;
        let achieved_t = self.achieved_t(&slots, &windows, &map, margin);
        let check = verify::check_slots(&slots, self.lpq.nblocks(), &windows, &map, margin, self.lv3.is_none());
        // Commands a stop abandoned are still running: their slots are not a verdict.
        if !check.problems.is_empty() && settled.abandoned == 0 {
            let mut msg = format!("LP commands FAILED verification ({}):", check.problems.len());
            for l in check.describe(20) {
                msg.push_str("\n  ");
                msg.push_str(&l);
            }
            self.say.warn(&msg);
        }
        if check.unchecked_windows > 0 {
            self.say.note(&format!(
                "{} of {} suspension windows were narrower than 2 x {margin:.0} ns and not checked",
                check.unchecked_windows,
                windows.len()
            ));
        }
        let r = &self.report;
        Ok(Finished {
            device_spans: Vec::new(),
            hp_start_ns,
            records: check.records,
            copies: 1,
            lp_kernel: Some(self.lp_kernel.clone()),
            achieved_t,
            facts: RunFacts {
                mechanism,
                grace_applied: mechanism.grace_applied(self.grace),
                gpu: Some(GpuFacts {
                    device: format!("hip:{}", r.device_index),
                    detail: format!(
                        "{}; clock map: mapped GPU times late by <= {:.0} ns (a bias, never early); {}",
                        r.head, map.late_bias_max_ns, r.tail
                    ),
                    gfx_target: r.gfx.clone(),
                }),
            },
        })
    }
}

impl GpuLatency {
    /// The run's achieved T from its own slots ([`verify::achieved_t`]), with a warning when it
    /// is more than 5% off the request or no command could be counted.
    fn achieved_t(
        &self,
        slots: &[gpu_device::DelaySlot],
        windows: &[Window],
        map: &ClockMap,
        margin: f64,
    ) -> Option<AchievedT> {
        let Some(t) = verify::achieved_t(slots, self.lpq.nblocks(), windows, map, margin) else {
            self.say
                .warn("no LP command ran untouched by a suspension: the run's achieved T is unknown");
            return None;
        };
        let a = calib::achieved(self.t_ms, t.median_ns / 1e6);
        if a.off {
            self.say.warn(&format!(
                "the run's commands took {:.4} ms (median of {}), {:+.1}% off T = {} ms: every figure is for the \
                 achieved T",
                a.achieved_ms,
                t.commands,
                a.error * 100.0,
                self.t_ms
            ));
        }
        Some(AchievedT {
            ms: a.achieved_ms,
            error: a.error,
            commands: t.commands,
            excluded: t.excluded,
        })
    }

    /// What suspended the LP queue: the KFD mechanism at Lv3, the launcher at Lv1.
    fn mechanism(&self) -> Mechanism {
        self.lv3
            .as_ref()
            .map_or(Mechanism::Launcher, |l| Mechanism::Kfd(l.preemptor.kind()))
    }

    /// Undoes the mechanism's process-wide set-up (dbg-trap: debug mode off). Idempotent; runs
    /// in `finish` and, for the error paths that never reach it, on drop.
    fn teardown(&self) {
        if let Some(l) = &self.lv3
            && let Err(e) = l.preemptor.teardown()
        {
            self.say.warn(&format!("{}: teardown failed: {e}", l.preemptor.kind()));
        }
    }
}

impl Drop for GpuLatency {
    fn drop(&mut self) {
        self.teardown();
    }
}
