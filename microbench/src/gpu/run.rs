//! The GPU measurement: the same samples as the host device (suspend, HP probe, resume per HP
//! request) through the same loop ([`crate::measure::samples`]), on an AMD GPU through HIP, over
//! the [`GpuBackend`] this module sets up.
//!
//! Set-up order matters for queue discovery (see [`gpu_device::discover`]):
//! load HIP, open the device, compile and load the delay kernel, create the warm-up stream and the
//! HP stream and run work on both (ROCr's utility queue, blit kernels, the HP queue all exist
//! afterwards), calibrate T, fit the clock map, build the Lv3 mechanism (dbg-trap enables the
//! debug trap now), then create the LP stream while diffing the queue sets.
//!
//! Lv1: the LP stream behind the loop's [`lv1::XQueue`]; suspend = `XQueue::suspend(Drain)`.
//! Lv3: the LP stream behind the XQueue too (commands keep flowing to the hardware queue), and
//! suspend = the chosen mechanism on the discovered queue through a [`Preemptor`] guard.
//!
//! A Ctrl-C while the LP queue is suspended must resume it: main's signal thread
//! (`measure::control`) raises the stop flag on the first signal, the loop stops at the next
//! sample boundary and the guards resume; on a second signal it resumes everything in lv3's
//! registry (the guards register there). Nothing stays suspended.
use std::sync::Arc;

use kfd::sysfs::SysRoot;
use kfd::{GracePeriod, Kfd};
use lv3::MechanismChoice;
use lv3::mechanism::{self, MechanismKind, Preempt, Preemptor, ProbeFacts};

use gpu_device::{Calibration, ClockMap, DelayCmd, DelayKernel, HipLpQueue, HpProbe, discover, kernel};
use hip_rt::{Hip, StreamPriority};

use super::backend::{GpuBackend, Lv3, Report};
use super::setup::*;
use crate::measure::samples::{self, keep_ahead};
use crate::measure::{LpKernel, Params, RunResult};
use crate::options::Level;

fn note(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("preempt-lat: {msg}");
    }
}

/// Whether `hip:device_index` can run a measurement here; the reason if not (for main.rs, before
/// it starts anything). Does not compile the kernel or touch KFD queues.
pub fn usable(device_index: u32) -> Result<(), String> {
    gpu_device::usable(device_index).map_err(|e| e.to_string())
}

/// Why `kind` cannot run on this machine (doctor's probe, e.g. the patched ioctl on a stock
/// kernel), or None when it can. `validate`'s per-mechanism checks turn this into a skip: a
/// mechanism the kernel does not offer is not a failure of the mechanism.
pub fn unusable_reason(kind: MechanismKind) -> Option<String> {
    mechanism::probe_order(&ProbeFacts::gather(&SysRoot::default()))
        .into_iter()
        .find(|v| v.kind == kind && !v.usable())
        .map(|v| format!("skipped: {v}"))
}

/// Runs one measurement on `hip:device_index`. `mechanism` applies to Lv3; Lv1 is progressive
/// launching and ignores it.
pub fn run(p: &Params, device_index: u32, mechanism: MechanismChoice, quiet: bool) -> Result<RunResult, String> {
    let b = set_up(p, device_index, mechanism, quiet)?;
    samples::run(p, b, &format!("hip:{device_index}"), quiet)
}

/// Everything before the samples: device, kernel, calibration, HP probe, clock pairs, HP floor,
/// the Lv3 mechanism, the LP stream (and its KFD queue) and the co-run check.
fn set_up(p: &Params, device_index: u32, choice: MechanismChoice, quiet: bool) -> Result<GpuBackend, String> {
    let hip = Hip::load().map_err(|e| e.to_string())?;
    let dev = Arc::new(gpu_device::open(&hip, device_index).map_err(|e| e.to_string())?);
    let arch = gpu_device::gfx_target(&dev.info).map_err(|e| e.to_string())?;
    let hip_version = hip_rt::decode_version(hip.runtime_version().map_err(|e| e.to_string())?);

    // Kernel, warm-up and HP streams: every queue but the LP one exists after this block.
    let state = p.lp_state.unwrap_or_default();
    let code = kernel::compile(&hip, &arch).map_err(h("compiling delay.hip with hiprtc"))?;
    let grid =
        lp_grid_for(state, dev.info.cu_count, dev.info.wave_size, lp_blocks_per_cu()).map_err(|e| e.to_string())?;
    let k = Arc::new(DelayKernel::load(&dev, &code, state, grid).map_err(h("loading the delay kernel"))?);
    let wave_state = k.wave_state(dev.info.cu_count, dev.info.wave_size);
    let resources = k.resources();
    let lp_kernel = LpKernel {
        name: state.kernel_name().to_string(),
        grid_blocks: grid.blocks,
        block_threads: grid.threads,
        waves_per_cu: wave_state.waves_per_cu,
        vgprs_per_lane: wave_state.vgprs_per_lane,
        agprs_per_lane: resources.agpr_count,
        lds_bytes_per_block: wave_state.lds_bytes_per_block,
        state_bytes_per_cu: wave_state.bytes_per_cu,
    };
    let lp_note = format!(
        "LP state {state}: {} ({}{})",
        state.kernel_name(),
        wave_state.describe(),
        if resources.vgpr_spill_count + resources.sgpr_spill_count > 0 {
            format!(
                "; {} VGPR / {} SGPR spills to scratch",
                resources.vgpr_spill_count, resources.sgpr_spill_count
            )
        } else {
            String::new()
        }
    );
    note(quiet, &lp_note);
    let wall_note = format!(
        "wall clock {} kHz ({})",
        dev.info.wall_clock_khz,
        if dev.info.wall_clock_reported {
            "reported by HIP".to_string()
        } else {
            format!("not reported by HIP: the {} fallback", arch.processor)
        }
    );
    let warm = dev.stream(StreamPriority::Normal).map_err(h("warm-up stream"))?;
    let hp_stream = dev.stream(StreamPriority::High).map_err(h("HP stream"))?;
    let cal: Calibration = kernel::calibrate(&k, &dev, &warm, &calibration_points(p.t_ms), 3)
        .map_err(h("calibrating T"))?
        .calibration;
    let achieved = kernel::check_t(&k, &dev, &warm, &cal, p.t_ms, 5).map_err(h("checking T"))?;
    let t_note = format!(
        "T requested {} ms, achieved {:.4} ms ({:+.1}%)",
        p.t_ms,
        achieved.achieved_ms,
        achieved.error * 100.0
    );
    if achieved.off {
        eprintln!("preempt-lat: WARNING: {t_note}: more than 5% off; every figure below is for the achieved T");
    } else {
        note(quiet, &t_note);
    }
    if cal.rates_disagree {
        eprintln!(
            "preempt-lat: WARNING: the delay kernel's wall-clock stamps and the events disagree by > 5% on the tick \
             rate ({:.0} vs {:.0} ticks/ms): the {wall_note} is not the clock's real rate",
            cal.ticks_per_ms, cal.event_ticks_per_ms
        );
    }
    let budget = command_budget(p, keep_ahead(p));
    let total = p.warmup + p.samples;
    let lp_slots = kernel::slot_buffer(&dev, &warm, budget_usize(budget)).map_err(h("LP slot buffer"))?;
    let check_slots = kernel::slot_buffer(&dev, &warm, 1).map_err(h("co-run check slot"))?;
    // Probe stamps: samples, then the floor probes, the co-run check, the LP stream's first
    // launch, and the clock pairs before and after the run.
    let (floor_idx, corun_idx, first_use_idx) = (total, total + FLOOR_PROBES, total + FLOOR_PROBES + 1);
    let pairs_pre_idx = first_use_idx + 1;
    let pairs_post_idx = pairs_pre_idx + CLOCK_PAIRS;
    let n_probes = (pairs_post_idx + CLOCK_PAIRS) as usize;
    let probe = HpProbe::new(Arc::clone(&dev), Arc::clone(&k), hp_stream, n_probes).map_err(h("HP probe"))?;
    let pairs = clock_pairs(&probe, pairs_pre_idx, CLOCK_PAIRS)?;
    let map0 = ClockMap::fit(&pairs, dev.info.wall_clock_khz).map_err(|e| e.to_string())?;
    let floor = hp_floor(&probe, &map0, floor_idx)?;
    warm.synchronize().map_err(h("warm-up"))?;

    if p.level == Level::Lv3 {
        let count = hip.device_count().map_or(1, |n| n as usize);
        let env = |k: &str| std::env::var(k).ok();
        if let Some(n) = crate::doctor::verdict::multi_gpu_note(
            count,
            env("ROCR_VISIBLE_DEVICES").as_deref(),
            env("HIP_VISIBLE_DEVICES").as_deref(),
        ) {
            eprintln!("preempt-lat: WARNING: {n}");
        }
    }

    // Lv3: the mechanism (dbg-trap turns the debug trap on now, before the LP queue exists).
    let preemptor = match p.level {
        Level::Lv1 => None,
        Level::Lv3 | Level::Auto => Some(build_mechanism(choice, p.grace, quiet)?),
    };
    if preemptor
        .as_ref()
        .is_some_and(|m| m.kind() == MechanismKind::UpdateQueue)
    {
        match scratch_reclaim_risk(
            k.lp_uses_scratch(),
            std::env::var("HSA_ENABLE_SCRATCH_ASYNC_RECLAIM").ok(),
        ) {
            Some(w) => eprintln!("preempt-lat: WARNING: {w}"),
            None => note(
                quiet,
                "update-queue: the LP kernel uses no scratch, so ROCr's scratch reclaim leaves its queue alone",
            ),
        }
    }
    if hip_version >= (6, 5, 0) {
        note(
            quiet,
            "HIP >= 6.5 may hand an idle stream's queue to another (dynamic queues); the LP stream is kept busy",
        );
    }

    // The LP stream and (Lv3) the queue behind it.
    let first_use = |s: &hip_rt::Stream| -> Result<(), gpu_device::Error> {
        k.launch_probe(s, hip_rt::Mem::Host(probe.stamps()), first_use_idx)?;
        Ok(s.synchronize()?)
    };
    let (lp_stream, lv3) = match preemptor {
        None => {
            let s = dev.stream_own_queue().map_err(h("LP stream"))?;
            first_use(&s).map_err(h("first launch on the LP stream"))?;
            (s, None)
        }
        Some(preemptor) => {
            let d = discover::lp_stream_with_queue(&dev, first_use, preemptor.kind() == MechanismKind::DbgTrap)
                .map_err(|e| e.to_string())?;
            let t = d.target;
            note(
                quiet,
                &format!(
                    "LP stream -> KFD queue {} on gpu 0x{:x}, ring 0x{:x} ({} bytes), priority {}",
                    t.queue_id, t.gpu_id, t.ring_base_address, t.ring_size, t.priority
                ),
            );
            for n in &d.notes {
                note(quiet, n);
            }
            (d.stream, Some(Lv3 { preemptor, target: t }))
        }
    };
    let lpq = Arc::new(HipLpQueue::new(Arc::clone(&dev), Arc::clone(&k), lp_stream, lp_slots));
    let corun = co_run_check(&lpq, &k, &check_slots, &probe, &cal, corun_idx, dev.info.wall_clock_khz)?;
    if let Some(w) = &corun {
        eprintln!("preempt-lat: WARNING: {w}");
    }
    let report = Report {
        device_index,
        gfx: arch.offload_arch(),
        head: format!(
            "{} ({}), {} CUs, wave{}; HIP {}.{}.{} ({}); {wall_note}; LP grid {}x{} ({} per CU); {lp_note}; {t_note}",
            dev.info.name,
            dev.info.pci_bus_id,
            dev.info.cu_count,
            dev.info.wave_size,
            hip_version.0,
            hip_version.1,
            hip_version.2,
            hip.library_path(),
            grid.blocks,
            grid.threads,
            wave_state.blocks_per_cu,
        ),
        tail: format!(
            "HP floor on an idle GPU p50 {:.1} us{}{}",
            ns_to_us(floor),
            lv3.as_ref().map_or(String::new(), |l| format!(
                "; LP queue {} gpu 0x{:x}",
                l.target.queue_id, l.target.gpu_id
            )),
            corun.map_or(String::new(), |w| format!("; WARNING: {w}")),
        ),
    };
    Ok(GpuBackend {
        dev,
        lpq,
        probe,
        cmd: DelayCmd {
            ticks: cal.ticks_for(p.t_ms),
        },
        t_ns: achieved.achieved_ms * 1e6,
        t_ms: p.t_ms,
        lp_kernel,
        budget,
        level: p.level,
        lv3,
        grace: p.grace,
        pairs,
        pairs_post_idx,
        quiet,
        report,
    })
}

/// The LP slot count as an allocation size: the budget is capped at 4 Mi commands.
fn budget_usize(budget: u64) -> usize {
    usize::try_from(budget).unwrap_or(usize::MAX)
}

/// ns as us for a report line (a latency: far below 2^53 ns, exact in an f64).
#[allow(clippy::cast_precision_loss)]
fn ns_to_us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// The warning for update-queue, if ROCr's asynchronous scratch reclaim can re-enable the LP
/// queue behind our back: only when the LP kernel needs scratch (ROCr acts only on queues whose
/// dispatches do) and the reclaim is not turned off (`HSA_ENABLE_SCRATCH_ASYNC_RECLAIM=0`).
fn scratch_reclaim_risk(lp_uses_scratch: bool, reclaim_env: Option<String>) -> Option<&'static str> {
    (lp_uses_scratch && reclaim_env.as_deref() != Some("0")).then_some(
        "update-queue with an LP kernel that uses scratch and ROCr's async scratch reclaim on: ROCr may re-enable \
         the LP queue behind our back (set HSA_ENABLE_SCRATCH_ASYNC_RECLAIM=0); the correctness check would catch it",
    )
}

/// Builds the Lv3 mechanism: `auto` in lv3's robustness order, or the one asked for.
pub(crate) fn build_mechanism(choice: MechanismChoice, grace: GracePeriod, quiet: bool) -> Result<Preemptor, String> {
    let facts = ProbeFacts::gather(&SysRoot::default());
    let m: Arc<dyn Preempt> = match choice {
        MechanismChoice::Auto => {
            let (m, skipped) = mechanism::build_auto(&facts, Kfd::open, grace)
                .map_err(|why| format!("no Lv3 mechanism works here:\n  {}", why.join("\n  ")))?;
            for s in skipped {
                note(quiet, &format!("--mechanism auto: skipped {s}"));
            }
            m
        }
        MechanismChoice::Only(kind) => {
            if let Some(v) = mechanism::probe_order(&facts)
                .into_iter()
                .find(|v| v.kind == kind && !v.usable())
            {
                return Err(format!("--mechanism {kind}: {v}"));
            }
            let kfd = Kfd::open().map_err(|e| e.to_string())?;
            mechanism::build(kind, kfd, grace).map_err(|e| e.to_string())?
        }
    };
    note(
        quiet,
        &format!(
            "Lv3 mechanism: {}, grace period {}",
            m.kind(),
            crate::env::gpu_grace(Some(m.kind()), grace)
        ),
    );
    Ok(Preemptor::from_arc(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(t_ms: f64, samples: u32) -> Params {
        Params {
            level: Level::Lv3,
            t_ms,
            lp_state: Some(gpu_device::LpState::Light),
            samples,
            warmup: 10,
            threshold: 8,
            batch: 4,
            seed: 1,
            workers: 1,
            gap_t: Params::GAP_T,
            grace: kfd::GracePeriod::SHORTEST,
        }
    }

    #[test]
    fn scratch_reclaim_warning_only_for_scratch_kernels_with_reclaim_on() {
        assert!(scratch_reclaim_risk(true, None).is_some());
        assert!(scratch_reclaim_risk(true, Some("1".into())).is_some());
        assert!(scratch_reclaim_risk(true, Some("0".into())).is_none());
        assert!(
            scratch_reclaim_risk(false, None).is_none(),
            "no scratch: ROCr never touches the queue"
        );
    }

    #[test]
    fn budget_covers_samples_and_is_capped() {
        let b = command_budget(&params(0.5, 1000), 18);
        // 1010 samples x (3 + 8 + 2 + 4) x 2 + 72 + 1024
        assert_eq!(b, 2 * 1010 * 17 + 72 + 1024);
        assert_eq!(command_budget(&params(0.001, 100_000), 18), 1 << 22);
    }

    #[test]
    fn functional_without_a_gpu_is_a_skip() {
        if Hip::load().is_err() {
            return;
        }
        if let Err((skip, why)) = crate::gpu::functional(0, MechanismChoice::Auto, 0.5, 3) {
            assert!(skip, "no GPU must be a skip, not a failure: {why}");
        }
    }

    #[test]
    fn usable_without_a_gpu_says_why() {
        let Ok(hip) = Hip::load() else {
            eprintln!("SKIPPED: HIP is not installed here");
            return;
        };
        match usable(0) {
            Ok(()) => eprintln!("a GPU is usable here: {:?}", hip.device_count()),
            Err(e) => {
                eprintln!("usable(0): {e}");
                if hip.device_count().is_err_and(|d| d.is_no_device()) {
                    assert!(e.contains("hipGetDeviceCount failed: hipErrorNoDevice (100)"), "{e}");
                    assert!(e.contains("/dev/kfd"), "{e}");
                }
            }
        }
    }
}
