//! One mode of `preempt-lat priority` on an AMD GPU: an LP stream with a hardware queue of its own
//! fed a saturating stream of delay commands through the Lv1 launcher, a high-priority HIP stream
//! taking the HP requests (each `hp_cmds` delay commands of `hp_t_ms`, the whole grid), and the
//! same policy as on the host device deciding when the LP queue is suspended: Lv3 through lv3's
//! mechanism on the LP stream's KFD queue (found by discovery, as `preempt-lat` runs do), Lv1 by
//! stopping the launcher. Native: both streams, no scheduling (HIP stream priorities only).
//!
//! Written for hardware from the same pieces as the latency run (gpu/run.rs); it has NOT run on a
//! GPU. What it checks after every mode: every LP command completed exactly once (slot stamps),
//! and for Lv3 that none ended inside a window in which its queue was suspended (the clock map
//! from probe round trips before and after the mode); every HP command completed once.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpu_device::verify::{self, Window};
use gpu_device::{
    Calibration, ClockMap, DelayCmd, DelayKernel, HipLpQueue, LpState, SlotStatus, calib, discover, kernel,
};
use hip_rt::{Device, Hip, StreamPriority};
use kfd::GracePeriod;
use lv1::clock::{now_ns, sleep_until};
use lv1::{Config, SuspendMode, XQueue};
use lv3::MechanismChoice;
use lv3::mechanism::{Preemptor, QueueTarget};
use serde_json::json;

use super::policy::{Action, Event, HighestPriorityFirst, NoScheduling, Policy};
use super::{Measured, PriorityParams};
use crate::gpu::backend::FencedSuspension;
use crate::gpu::setup::{calibration_points, h};
use crate::measure::Correctness;
use crate::options::Mode;
use crate::trace::{Trace, Track};

const RUN: u32 = 0;
const SCHEDULER: u32 = 2;
const SUSPENDED: u32 = 3;
const HP_REQUESTS: u32 = 4;
/// An HP request that has not completed after this long fails the mode (the GPU is stuck).
const HP_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock pairs before and after each mode, for the Lv3 window check.
const CLOCK_PAIRS: usize = 16;

/// The GPU set up once for every mode: device, delay kernel (light), calibration.
pub struct Gpu {
    hip: Hip,
    dev: Arc<Device>,
    k: Arc<DelayKernel>,
    cal: Calibration,
    index: u32,
    choice: MechanismChoice,
    grace: GracePeriod,
    quiet: bool,
}

impl Gpu {
    pub fn open(index: u32, choice: MechanismChoice, grace: GracePeriod, quiet: bool) -> Result<Gpu, String> {
        let hip = Hip::load().map_err(|e| e.to_string())?;
        let dev = Arc::new(gpu_device::open(&hip, index).map_err(|e| e.to_string())?);
        let arch = gpu_device::gfx_target(&dev.info).map_err(|e| e.to_string())?;
        let code = kernel::compile(&hip, &arch).map_err(h("compiling delay.hip with hiprtc"))?;
        let grid = gpu_device::setup::lp_grid(dev.info.cu_count, dev.info.wave_size, 2).map_err(|e| e.to_string())?;
        let k = Arc::new(DelayKernel::load(&dev, &code, LpState::Light, grid).map_err(h("loading the delay kernel"))?);
        let warm = dev.stream(StreamPriority::Normal).map_err(h("warm-up stream"))?;
        let cal = kernel::calibrate(&k, &dev, &warm, &calibration_points(1.0), 3)
            .map_err(h("calibrating T"))?
            .calibration;
        Ok(Gpu {
            hip,
            dev,
            k,
            cal,
            index,
            choice,
            grace,
            quiet,
        })
    }

    pub fn device_label(&self) -> String {
        format!(
            "hip:{} ({}, {} CUs)",
            self.index, self.dev.info.name, self.dev.info.cu_count
        )
    }

    /// The environment record of a priority run on this GPU.
    pub fn environment(&self) -> crate::env::Environment {
        let gfx = gpu_device::gfx_target(&self.dev.info).map(|a| a.offload_arch()).ok();
        crate::env::Environment::new(
            format!("hip:{}", self.index),
            format!(
                "{} ({}), {} CUs; HIP at {}; LP and HP commands are the light delay kernel over the whole grid",
                self.dev.info.name,
                self.dev.info.pci_bus_id,
                self.dev.info.cu_count,
                self.hip.library_path()
            ),
            gfx,
            &format!(
                "per mode: lv3 {} (mechanism per mode row), lv1 stop-launching",
                self.choice
            ),
            match self.choice {
                MechanismChoice::Only(k) => crate::env::gpu_grace(Some(k), self.grace),
                // auto: the mode rows say which mechanism ran.
                MechanismChoice::Auto => crate::env::gpu_grace_auto(self.grace),
            },
        )
    }
}

struct Scheduler<'a> {
    mode: Mode,
    policy: Box<dyn Policy>,
    xq: Option<&'a XQueue<HipLpQueue>>,
    lv3: Option<(&'a Preemptor, QueueTarget)>,
    held: Option<FencedSuspension>,
    /// Suspension windows on `calib::host_ns` (the clock map's host clock), for the slot check.
    windows: Vec<Window>,
    suspended_at: Option<(u64, u64)>,
    preemptions: u64,
    track: u32,
}

impl Scheduler<'_> {
    fn on(&mut self, e: Event, trace: &mut Trace) -> Result<(), String> {
        let action = self.policy.on_event(e).map_err(|e| format!("policy: {e}"))?;
        let Some(xq) = self.xq else {
            return Ok(());
        };
        let t = |tid| Track { pid: self.track, tid };
        match action {
            Action::Nothing => {}
            Action::SuspendLp => {
                let t0 = now_ns();
                let name = match self.lv3 {
                    Some((pre, target)) if self.mode == Mode::Lv3 => {
                        let held = FencedSuspension::suspend(pre, &target).map_err(|e| format!("Lv3 suspend: {e}"))?;
                        self.held = Some(held);
                        "suspend (Lv3)"
                    }
                    _ => {
                        xq.suspend(SuspendMode::Stop)
                            .map_err(|e| format!("Lv1 suspend (stop launching): {e}"))?;
                        "suspend (stop launching)"
                    }
                };
                let t1 = now_ns();
                trace.span(
                    t(SCHEDULER),
                    "scheduler",
                    name,
                    t0,
                    t1,
                    json!({ "preemption": self.preemptions }),
                );
                self.suspended_at = Some((t1, calib::host_ns(Instant::now())));
                self.preemptions += 1;
            }
            Action::ResumeLp => {
                let t0 = now_ns();
                let host0 = calib::host_ns(Instant::now());
                if let Some(held) = self.held.take() {
                    held.resume().map_err(|e| format!("Lv3 resume: {e}"))?;
                } else {
                    xq.resume();
                }
                let t1 = now_ns();
                trace.span(t(SCHEDULER), "scheduler", "resume", t0, t1, json!({}));
                if let Some((s, s_host)) = self.suspended_at.take() {
                    trace.span(t(SUSPENDED), "suspended", "LP suspended", s, t0, json!({}));
                    self.windows.push(Window {
                        sample: self.windows.len(),
                        from_ns: s_host,
                        to_ns: host0,
                    });
                }
            }
        }
        Ok(())
    }

    /// Leaves the LP queue running whatever the policy last decided (end of a mode, an error).
    fn release(&mut self) {
        if let Some(held) = self.held.take() {
            let _ = held.resume(); // the mode's error, if any, is already on its way
        }
        if let Some(xq) = self.xq {
            xq.resume();
        }
    }
}

/// LP slots for a mode: twice the commands its duration can hold, plus the launcher's depth,
/// capped at 4 Mi commands.
fn lp_budget(p: &PriorityParams) -> u64 {
    let per_s = 1000.0 / p.t_ms.max(1e-3);
    (crate::num::round_u64(2.0 * p.duration_s * per_s) + 8 * u64::from(p.threshold) + 1024).min(1 << 22)
}

/// Runs one mode on the GPU; see the module docs. `arrivals` are offsets from the measured
/// window's start.
pub fn run_mode(
    g: &Gpu,
    p: &PriorityParams,
    mode: Mode,
    arrivals: &[u64],
    trace: &mut Trace,
    pid: u32,
) -> Result<Measured, String> {
    let t = |tid| Track { pid, tid };
    trace.name_process(pid, format!("{} ({})", mode.name(), g.device_label()));
    let dev = &g.dev;
    let warm = dev.stream(StreamPriority::Normal).map_err(h("warm-up stream"))?;
    // Lv3: the mechanism first (dbg-trap turns debugging on before the LP queue exists).
    let preemptor = match mode {
        Mode::Lv3 => Some(crate::gpu::run::build_mechanism(g.choice, g.grace, g.quiet)?),
        _ => None,
    };
    let stamps = dev.alloc_host(8).map_err(h("first-use stamp"))?;
    let first_use = |s: &hip_rt::Stream| -> Result<(), gpu_device::Error> {
        g.k.launch_probe(s, hip_rt::Mem::Host(&stamps), 0)?;
        Ok(s.synchronize()?)
    };
    let budget = lp_budget(p);
    let lp = if mode.has_lp() {
        let (stream, target) = match &preemptor {
            Some(pre) => {
                let d = discover::lp_stream_with_queue(dev, first_use, pre.kind().turns_debug_mode_on())
                    .map_err(|e| e.to_string())?;
                (d.stream, Some(d.target))
            }
            None => {
                let s = dev.stream_own_queue().map_err(h("LP stream"))?;
                first_use(&s).map_err(h("first launch on the LP stream"))?;
                (s, None)
            }
        };
        let slots = kernel::slot_buffer(dev, &warm, usize::try_from(budget).unwrap_or(usize::MAX))
            .map_err(h("LP slot buffer"))?;
        Some((
            Arc::new(HipLpQueue::new(Arc::clone(dev), Arc::clone(&g.k), stream, slots)),
            target,
        ))
    } else {
        None
    };
    let hp_stream = dev.stream(StreamPriority::High).map_err(h("HP stream"))?;
    let n_hp = arrivals.len() * p.hp_cmds as usize;
    let hp_slots = kernel::slot_buffer(dev, &warm, n_hp.max(1)).map_err(h("HP slot buffer"))?;
    let hp_done = dev.event(false).map_err(h("HP event"))?;
    let lp_ticks = g.cal.ticks_for(p.t_ms);
    let hp_ticks = g.cal.ticks_for(p.hp_t_ms);
    let mut pairs = kernel::sample_clock(&g.k, dev, &warm, CLOCK_PAIRS).map_err(h("clock pairs"))?;

    let cfg = Config::new(p.threshold as usize, p.batch as usize).map_err(|e| e.to_string())?;
    let xq = match &lp {
        Some((q, _)) => Some(XQueue::new(Arc::clone(q), cfg).map_err(|e| format!("starting the launcher: {e}"))?),
        None => None,
    };
    let completions = xq.as_ref().and_then(|x| x.take_completions());
    let keep_ahead = 2 * p.threshold as usize + 2;
    let stop = AtomicBool::new(false);
    let t_run0 = now_ns();
    let measured = std::thread::scope(|s| -> Result<(Measured, Vec<Window>), String> {
        let feeder = xq.as_ref().map(|xq| {
            let stop = &stop;
            s.spawn(move || {
                let nap = Duration::from_micros(50);
                while !stop.load(Ordering::Relaxed) {
                    let st = xq.stats();
                    if st.pending < keep_ahead && st.submitted < budget {
                        xq.submit(DelayCmd { ticks: lp_ticks });
                    } else {
                        std::thread::sleep(nap);
                    }
                }
            })
        });
        let mut sched = Scheduler {
            mode,
            policy: match mode {
                Mode::Lv1 | Mode::Lv3 => Box::new(HighestPriorityFirst::default()),
                _ => Box::new(NoScheduling::default()),
            },
            xq: xq.as_ref(),
            lv3: preemptor.as_ref().zip(lp.as_ref().and_then(|(_, t)| *t)),
            held: None,
            windows: Vec::new(),
            suspended_at: None,
            preemptions: 0,
            track: pid,
        };
        let result = (|| -> Result<(u64, u64, Vec<u64>, bool), String> {
            if let Some(xq) = &xq {
                let t0 = Instant::now();
                while xq.stats().launched == 0 {
                    if t0.elapsed() > Duration::from_secs(30) {
                        return Err("the launcher launched no LP command within 30 s".into());
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            let t0 = now_ns();
            let lp_c0 = xq.as_ref().map_or(0, |x| x.stats().completed);
            let duration_ns = crate::num::round_u64(p.duration_s * 1e9);
            let mut latencies = Vec::new();
            let interrupted;
            if mode.has_hp() {
                (latencies, interrupted) = super::requests::drive(
                    arrivals,
                    t0,
                    t(HP_REQUESTS),
                    trace,
                    &mut |e, trace| sched.on(e, trace),
                    &mut |i, _| {
                        for j in 0..p.hp_cmds {
                            let id = hp_id(i, p.hp_cmds, j)?;
                            g.k.launch(&hp_stream, hip_rt::Mem::Device(&hp_slots), id, hp_ticks)
                                .map_err(h("HP launch"))?;
                        }
                        hp_done.record(&hp_stream).map_err(h("HP event"))?;
                        if !hp_done.wait_timeout(HP_TIMEOUT).map_err(h("HP event"))? {
                            return Err(format!("HP request {i} did not complete within {HP_TIMEOUT:?}"));
                        }
                        Ok(now_ns())
                    },
                )?;
                if !interrupted && sched.policy.lp_suspended() {
                    return Err("the policy holds the LP queue suspended with no HP request pending".into());
                }
                sleep_until(t0 + duration_ns);
            } else {
                interrupted = super::requests::idle_until(t0 + duration_ns);
            }
            let t_end = now_ns();
            let lp_done = xq.as_ref().map_or(0, |x| x.stats().completed) - lp_c0;
            trace.span(
                t(RUN),
                "run",
                "measured window",
                t0,
                t_end,
                json!({ "mode": mode.name() }),
            );
            Ok((t_end - t0, lp_done, latencies, interrupted))
        })();
        sched.release();
        stop.store(true, Ordering::Relaxed);
        if let Some(f) = feeder {
            f.join().map_err(|_| "the LP feeder thread panicked".to_string())?;
        }
        let (window_ns, lp_completed, hp_latency_ns, interrupted) = result?;
        let measured = Measured {
            policy: sched.policy.name(),
            mechanism: match (mode, sched.lv3) {
                (Mode::Lv3, Some((pre, _))) => pre.kind().name(),
                (Mode::Lv1, _) => "stop-launching",
                _ => "-",
            },
            hp_latency_ns,
            lp_completed,
            window_ns,
            preemptions: sched.preemptions,
            correctness: None,
            interrupted,
        };
        Ok((measured, sched.windows))
    });
    let (mut measured, suspended) = measured?;
    // Drain, then the checks: the queues run again and the fence is gone.
    let mut submitted = 0;
    if let Some(xq) = xq {
        let limit = Duration::from_secs(60);
        xq.wait_idle_for(limit)
            .map_err(|e| format!("draining the LP queue: {e} after {limit:?}"))?;
        submitted = xq.stats().submitted;
    }
    drop(preemptor); // tears the mechanism down (dbg-trap: debug mode off)
    hp_stream.synchronize().map_err(h("HP stream"))?;
    let hp_slots = kernel::read_slots(&hp_slots, measured.hp_latency_ns.len() * p.hp_cmds as usize)
        .map_err(h("reading the HP slots"))?;
    let nblocks = g.k.grid().blocks;
    if let Some(bad) = (0u32..)
        .zip(&hp_slots)
        .find(|(i, s)| s.status(*i, nblocks) != SlotStatus::Complete)
    {
        return Err(format!(
            "HP command {} did not complete exactly once: {:?}",
            bad.0,
            bad.1.status(bad.0, nblocks)
        ));
    }
    if let Some((q, _)) = &lp {
        pairs.extend(kernel::sample_clock(&g.k, dev, &warm, CLOCK_PAIRS).map_err(h("clock pairs"))?);
        let map = ClockMap::fit(&pairs, dev.info.wall_clock_khz).map_err(|e| e.to_string())?;
        let slots = q.read_slots(submitted).map_err(h("reading the LP slots"))?;
        // Lv3 only: with Lv1 (stop launching) the commands in flight rightly run on.
        let windows: &[Window] = if mode == Mode::Lv3 { &suspended } else { &[] };
        let check = verify::check_slots(
            &slots,
            q.nblocks(),
            windows,
            &map,
            map.late_bias_max_ns + 2_000.0,
            false,
        );
        if !check.problems.is_empty() {
            eprintln!("preempt-lat: {}: LP commands FAILED verification:", mode.name());
            for l in check.describe(10) {
                eprintln!("  {l}");
            }
        }
        let done: Vec<(u64, bool)> = completions
            .map(|c| c.try_iter().map(|c| (c.id, c.outcome.is_ok())).collect())
            .unwrap_or_default();
        measured.correctness = Some(Correctness::check(submitted, &done, &check.records, 1));
    }
    trace.span(t(RUN), "run", "run", t_run0, now_ns(), json!({ "mode": mode.name() }));
    Ok(measured)
}

/// The HP slot of command `j` of request `i`.
fn hp_id(i: usize, per_request: u32, j: u32) -> Result<u32, String> {
    u32::try_from(i)
        .ok()
        .and_then(|i| i.checked_mul(per_request))
        .and_then(|x| x.checked_add(j))
        .ok_or_else(|| format!("HP request {i}: more HP commands than 32-bit slot ids"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hp_slots_follow_requests_and_never_wrap() {
        assert_eq!(hp_id(0, 3, 0), Ok(0));
        assert_eq!(hp_id(2, 3, 1), Ok(7));
        assert!(hp_id(usize::MAX, 3, 0).is_err());
    }
}
