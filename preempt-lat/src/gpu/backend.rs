//! The GPU device as a [`Backend`] of the one measurement loop ([`crate::measure::samples`]).
//!
//! Times: request, suspend and resume are host ns ([`calib::host_ns`]); the HP probe's start is
//! the GPU wall clock, known only after the run: [`Backend::finish`] maps every stamp to host ns
//! with a [`ClockMap`] fitted from probe round trips taken before and after the run (so the rate
//! is fitted over the whole run, not assumed), then checks every LP command's slot (exactly once,
//! no end inside a suspension window).
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_device::verify::{self, Window};
use gpu_device::{ClockMap, ClockPair, DelayCmd, HipLpQueue, HpProbe, calib};
use lv3::binding::QueueBinding;
use preempt_api::Preemptor;
use preempt_api::gpu::{GpuDevice, GpuSuspension};

use super::setup::{CLOCK_PAIRS, PROBE_TIMEOUT, clock_pairs, h};
use crate::env::Environment;
use crate::error::{Error, failed};
use crate::measure::backend::{Backend, Finished, HpStart, RawSample, Settled, Suspended};
use crate::measure::{AchievedT, Correctness, LpKernel};
use crate::options::Level;

/// Lv3 on a GPU: the guard (resumes on drop) and the queue it acts on, checked before every
/// suspend.
pub(super) struct Lv3 {
    pub preemptor: Arc<Preemptor>,
    pub binding: QueueBinding,
}

/// Everything the environment record says about the device, gathered during set-up; the clock
/// map's bias bound joins it in [`Backend::finish`].
pub(super) struct Report {
    pub device_index: u32,
    pub gfx: String,
    /// Device, HIP, grid and the achieved T.
    pub head: String,
    /// HP floor, LP queue and co-run warning.
    pub tail: String,
}

/// A GPU set up for one run by [`super::run()`].
pub(super) struct GpuBackend {
    pub gpu: Arc<GpuDevice>,
    pub lpq: Arc<HipLpQueue>,
    pub probe: HpProbe,
    pub cmd: DelayCmd,
    /// T as achieved before the run (`kernel::check_t`), in ns: the unit of the random gaps.
    pub t_ns: f64,
    /// T as requested, in ms.
    pub t_ms: f64,
    /// The LP kernel and its wave state, for the result.
    pub lp_kernel: LpKernel,
    /// LP slots allocated: the run may submit no more commands.
    pub budget: u64,
    pub level: Level,
    pub lv3: Option<Lv3>,
    /// The grace period asked for (applies where the mechanism `sets_grace_period`).
    pub grace: preempt_api::GracePeriod,
    /// Clock pairs taken before the run; the ones after it are taken at probe index `pairs_post_idx`.
    pub pairs: Vec<ClockPair>,
    pub pairs_post_idx: u32,
    pub quiet: bool,
    pub report: Report,
}

/// The API's GPU guard as the loop's [`Suspended`].
impl Suspended for GpuSuspension {
    fn resume(self: Box<Self>) -> Result<(), Error> {
        Ok(GpuSuspension::resume(*self)?)
    }
    fn preempt_call_ns(&self) -> Option<u64> {
        Some(u64::try_from(self.report().preempt_call.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl Backend for GpuBackend {
    type Queue = HipLpQueue;

    fn now_ns(&self) -> u64 {
        calib::host_ns(Instant::now())
    }
    fn monotonic_offset_ns(&self) -> i64 {
        // host_ns counts from a process epoch; CLOCK_MONOTONIC from boot: the midpoint of two
        // monotonic reads around one host_ns read (off by at most half their gap, ~tens of ns).
        let a = i128::from(preempt_api::now_ns());
        let h = i128::from(self.now_ns());
        let b = i128::from(preempt_api::now_ns());
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
    fn wait_first_start(&self, launched: &dyn Fn() -> u64) -> Result<(), Error> {
        let t0 = Instant::now();
        while launched() == 0 {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(failed!("the launcher launched no LP command within 30 s"));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }
    fn suspend(&self) -> Result<Box<dyn Suspended + '_>, Error> {
        let lv3 = self
            .lv3
            .as_ref()
            .ok_or_else(|| failed!("Lv3 suspend without a mechanism (an Lv1 run)"))?;
        Ok(Box::new(GpuSuspension::suspend(&lv3.preemptor, &lv3.binding)?))
    }
    fn hp_launch(&self, index: u32) -> Result<(), Error> {
        self.probe.launch(index).map_err(h("HP probe"))
    }
    fn hp_wait(&self, _index: u32) -> Result<HpStart, Error> {
        if !self.probe.wait(PROBE_TIMEOUT).map_err(h("HP probe"))? {
            let while_ = if self.level == Level::Lv3 {
                " with the LP queue suspended"
            } else {
                ""
            };
            return Err(failed!("the HP probe did not finish within {PROBE_TIMEOUT:?}{while_}"));
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
    fn finish(&mut self, raw: &[RawSample], settled: Settled, completions: &[(u64, bool)]) -> Result<Finished, Error> {
        let mech = self.mechanism_name();
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
                .ok_or_else(|| failed!("HP probe {} completed without its start stamp", r.index))?;
            hp_start_ns.push(verify::hp_start_ns(&map, tick, r.t_req).unwrap_or_else(|_| {
                negative += 1;
                0
            }));
        }
        if negative > 0 {
            eprintln!(
                "preempt-lat: WARNING: {negative} HP start(s) mapped before their request (clock map off by more than \
                 the latency; mapped times are late by at most {:.0} ns, never early): recorded as 0",
                map.late_bias_max_ns
            );
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
        let check = verify::check_slots(
            &slots,
            self.lpq.nblocks(),
            &windows,
            &map,
            margin,
            self.level == Level::Lv1,
        );
        // Commands a stop abandoned are still running: their slots are not a verdict.
        if !check.problems.is_empty() && settled.abandoned == 0 {
            eprintln!(
                "preempt-lat: LP commands FAILED verification ({}):",
                check.problems.len()
            );
            for l in check.describe(20) {
                eprintln!("  {l}");
            }
        }
        if check.unchecked_windows > 0 && !self.quiet {
            eprintln!(
                "preempt-lat: {} of {} suspension windows were narrower than 2 x {margin:.0} ns and not checked",
                check.unchecked_windows,
                windows.len()
            );
        }
        let r = &self.report;
        Ok(Finished {
            device_spans: Vec::new(),
            hp_start_ns,
            correctness: Correctness::check(settled.ran, completions, &check.records, 1)
                .unless_abandoned(settled.abandoned),
            lp_kernel: Some(self.lp_kernel.clone()),
            achieved_t,
            env: Environment::new(
                format!("hip:{}", r.device_index),
                format!(
                    "{}; clock map: mapped GPU times late by <= {:.0} ns (a bias, never early); {}",
                    r.head, map.late_bias_max_ns, r.tail
                ),
                Some(r.gfx.clone()),
                mech,
                self.grace_applied(),
            ),
        })
    }
}

impl GpuBackend {
    fn grace_applied(&self) -> String {
        crate::env::gpu_grace(self.lv3.as_ref().map(|l| l.preemptor.kind()), self.grace)
    }

    /// The run's achieved T from its own slots ([`verify::achieved_t`]), with a warning on stderr
    /// when it is more than 5% off the request or no command could be counted.
    fn achieved_t(
        &self,
        slots: &[gpu_device::DelaySlot],
        windows: &[Window],
        map: &ClockMap,
        margin: f64,
    ) -> Option<AchievedT> {
        let Some(t) = verify::achieved_t(slots, self.lpq.nblocks(), windows, map, margin) else {
            eprintln!(
                "preempt-lat: WARNING: no LP command ran untouched by a suspension: the run's achieved T is unknown"
            );
            return None;
        };
        let a = calib::achieved(self.t_ms, t.median_ns / 1e6);
        if a.off {
            eprintln!(
                "preempt-lat: WARNING: the run's commands took {:.4} ms (median of {}), {:+.1}% off T = {} ms: every \
                 figure is for the achieved T",
                a.achieved_ms,
                t.commands,
                a.error * 100.0,
                self.t_ms
            );
        }
        Some(AchievedT {
            ms: a.achieved_ms,
            error: a.error,
            commands: t.commands,
            excluded: t.excluded,
        })
    }

    fn mechanism_name(&self) -> &'static str {
        self.lv3
            .as_ref()
            .map_or(preempt_api::Mechanism::Launcher, |l| {
                preempt_api::Mechanism::Kfd(l.preemptor.kind())
            })
            .name()
    }

    /// Undoes the mechanism's process-wide set-up (dbg-trap: debug mode off). Idempotent; runs
    /// in `finish` and, for the error paths that never reach it, on drop.
    fn teardown(&self) {
        if let Some(l) = &self.lv3
            && let Err(e) = l.preemptor.teardown()
        {
            eprintln!("preempt-lat: WARNING: {}: teardown failed: {e}", l.preemptor.kind());
        }
    }
}

impl Drop for GpuBackend {
    fn drop(&mut self) {
        self.teardown();
    }
}
