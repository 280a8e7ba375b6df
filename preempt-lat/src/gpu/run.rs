//! The GPU measurement: the same samples as the host device (suspend, HP probe, resume per HP
//! request) through the same loop ([`crate::measure::samples`]), on an AMD GPU through HIP, over
//! the [`GpuBackend`] this module sets up.
//!
//! The device, the LP queue (a stream with a queue of its own, its KFD queue discovered), the Lv3
//! mechanism and its guard come from the application API's device layer
//! ([`preempt_api::gpu`], [`preempt_api::Lv3Setup`]): the same code a C or Python program runs.
//! What only a latency run needs comes from gpu-device: T calibrated at the requested T, the HP
//! probe and its stamps, the clock map, the HP floor and the co-run check.
//!
//! Set-up order matters for queue discovery (see [`gpu_device::discover`]): every other queue
//! (ROCr's utility queue, blit kernels, the warm-up and HP queues) exists before the LP stream is
//! created while the queue sets are diffed, and the mechanism is built before it (dbg-trap
//! enables the debug trap then). [`set_up`] runs the steps in that order, one function each.
//!
//! Lv1: the LP stream behind the loop's [`lv1::XQueue`]; suspend = `XQueue::suspend(Drain)`.
//! Lv3: the LP stream behind the XQueue too (commands keep flowing to the hardware queue), and
//! suspend = the chosen mechanism on the discovered queue through the API's
//! [`preempt_api::gpu::GpuSuspension`] guard.
//!
//! A Ctrl-C while the LP queue is suspended must resume it: main's signal thread
//! (`measure::control`) raises the stop flag on the first signal, the loop stops at the next
//! sample boundary and the guards resume; on a second signal it resumes everything in lv3's
//! registry (the guards register there). Nothing stays suspended.
use std::sync::Arc;

use kfd::sysfs::SysRoot;
use lv3::mechanism::{self, Preemptor, ProbeFacts};
use preempt_api::gpu::{self, CalibratedT, GpuDevice, KernelChoice, LpRequest, Prepare};
use preempt_api::{GracePeriod, Lv3Request, Mechanism, MechanismChoice, MechanismKind};

use gpu_device::{ClockMap, DelayCmd, DelayKernel, HpProbe, kernel};

use super::backend::{GpuBackend, Lv3, Report};
use super::setup::*;
use crate::error::{Error, failed};
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
pub fn usable(device_index: u32) -> Result<(), gpu_device::Error> {
    gpu_device::usable(device_index)
}

/// Why `hip:N` cannot run a measurement here.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// Doctor's facts: no GPU path (no KFD, no GPU node, no HIP device).
    #[error(transparent)]
    Path(#[from] crate::doctor::verdict::NoGpuPath),
    /// The device itself (it does not exist, its target is unknown to this HIP, ...).
    #[error(transparent)]
    Device(#[from] gpu_device::Error),
}

/// Whether `hip:device_index` can run a measurement here, doctor's `facts` first (the first
/// reason if not).
pub fn runnable(facts: &crate::doctor::facts::Facts, device_index: u32) -> Result<(), Unusable> {
    crate::doctor::verdict::gpu_path(facts)?;
    Ok(usable(device_index)?)
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
pub fn run(p: &Params, device_index: u32, mechanism: MechanismChoice, quiet: bool) -> Result<RunResult, Error> {
    let b = set_up(p, device_index, mechanism, quiet)?;
    samples::run(p, b, &format!("hip:{device_index}"), quiet)
}

/// The run's kernel: `--lp-state`, and `PREEMPT_LP_BLOCKS_PER_CU` for the light one.
pub(crate) fn kernel_choice(state: gpu_device::LpState) -> KernelChoice {
    KernelChoice {
        state,
        blocks_per_cu: lp_blocks_per_cu(),
    }
}

/// The LP kernel as the result records it, and its report line.
fn describe_kernel(gpu: &GpuDevice, k: &DelayKernel) -> (LpKernel, String) {
    let info = &gpu.device().info;
    let state = gpu.kernel_choice().state;
    let grid = k.grid();
    let wave_state = k.wave_state(info.cu_count, info.wave_size);
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
    let spills = resources.vgpr_spill_count + resources.sgpr_spill_count;
    let note = format!(
        "LP state {state}: {} ({}{})",
        state.kernel_name(),
        wave_state.describe(),
        if spills > 0 {
            format!(
                "; {} VGPR / {} SGPR spills to scratch",
                resources.vgpr_spill_count, resources.sgpr_spill_count
            )
        } else {
            String::new()
        }
    );
    (lp_kernel, note)
}

/// T as prepared, reported: a warning when the achieved T is > 5% off or the two clocks
/// disagree on the tick rate. Returns the report line.
fn report_t(gpu: &GpuDevice, t: &CalibratedT, t_ms: f64, quiet: bool) -> String {
    let (cal, achieved) = (&t.calibration, &t.achieved);
    let t_note = format!(
        "T requested {t_ms} ms, achieved {:.4} ms ({:+.1}%)",
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
             rate ({:.0} vs {:.0} ticks/ms): the {} is not the clock's real rate",
            cal.ticks_per_ms,
            cal.event_ticks_per_ms,
            wall_clock_note(gpu)
        );
    }
    t_note
}

fn wall_clock_note(gpu: &GpuDevice) -> String {
    let info = &gpu.device().info;
    format!(
        "wall clock {} kHz ({})",
        info.wall_clock_khz,
        if info.wall_clock_reported {
            "reported by HIP".to_string()
        } else {
            format!("not reported by HIP: the {} fallback", gpu.arch().processor)
        }
    )
}

/// Lv3 on a process that sees several GPUs: the warning doctor gives.
fn warn_multi_gpu(gpu: &GpuDevice) {
    let count = gpu.hip().device_count().map_or(1, |n| n as usize);
    let env = |k: &str| std::env::var(k).ok();
    if let Some(n) = crate::doctor::verdict::multi_gpu_note(
        count,
        env("ROCR_VISIBLE_DEVICES").as_deref(),
        env("HIP_VISIBLE_DEVICES").as_deref(),
    ) {
        eprintln!("preempt-lat: WARNING: {n}");
    }
}

/// The Lv3 mechanism the API built for the LP queue ([`preempt_api::gpu::Prepared::lp`]), said.
pub(crate) fn note_mechanism(setup: &preempt_api::Lv3Setup, choice: MechanismChoice, grace: GracePeriod, quiet: bool) {
    note(quiet, &format!("--mechanism {choice}: {}", setup.info.why));
    if let Some(pre) = &setup.preemptor {
        note(
            quiet,
            &format!(
                "Lv3 mechanism: {}, grace period {}",
                pre.kind(),
                Mechanism::Kfd(pre.kind()).grace_applied(grace)
            ),
        );
    }
}

/// A mechanism that ROCr's scratch reclaim can undo (update-queue) with an LP kernel that uses
/// scratch: the warning, or the note that it is safe.
fn warn_scratch_reclaim(pre: &Preemptor, k: &DelayKernel, quiet: bool) {
    let kind = pre.kind();
    if !kind.undone_by_scratch_reclaim() {
        return;
    }
    match scratch_reclaim_risk(
        kind,
        k.lp_uses_scratch(),
        std::env::var("HSA_ENABLE_SCRATCH_ASYNC_RECLAIM").ok(),
    ) {
        Some(w) => eprintln!("preempt-lat: WARNING: {w}"),
        None => note(
            quiet,
            &format!("{kind}: the LP kernel uses no scratch, so ROCr's scratch reclaim leaves its queue alone"),
        ),
    }
}

/// Probe stamp indices of a run: the samples, then the floor probes, the co-run check, and the
/// clock pairs before and after the run.
struct ProbeIndex {
    floor: u32,
    corun: u32,
    pairs_pre: u32,
    pairs_post: u32,
    count: usize,
}

impl ProbeIndex {
    fn new(p: &Params) -> Self {
        let total = p.warmup + p.samples;
        let (floor, corun) = (total, total + FLOOR_PROBES);
        let pairs_pre = corun + 1;
        let pairs_post = pairs_pre + CLOCK_PAIRS;
        ProbeIndex {
            floor,
            corun,
            pairs_pre,
            pairs_post,
            count: (pairs_post + CLOCK_PAIRS) as usize,
        }
    }
}

/// Everything before the samples, in discovery's order (see the module docs): device, kernel,
/// warm-up and HP streams, T, the HP probe with its clock pairs and floor, the Lv3 mechanism,
/// the LP queue (and its KFD queue), the co-run check.
fn set_up(p: &Params, device_index: u32, choice: MechanismChoice, quiet: bool) -> Result<GpuBackend, Error> {
    // The options refuse Lv2 on a GPU before anything runs; the refusal again for any other way in.
    let no_lv2 = || {
        failed!(
            "{}",
            preempt_api::lv2_unavailable(preempt_api::DeviceSpec::Hip(device_index)).message
        )
    };
    if p.level == Level::Lv2 {
        return Err(no_lv2());
    }
    // Every queue but the LP one exists after this call: the API's preparation, step 1.
    let mut prepared = gpu::prepare(&Prepare {
        device: device_index,
        kernel: kernel_choice(p.lp_state.unwrap_or_default()),
        t_ms: Some(p.t_ms),
        hp_stream: true,
    })?;
    let gpu = Arc::clone(&prepared.gpu);
    let k = &Arc::clone(&prepared.kernel);
    let dev = Arc::clone(gpu.device());
    let hip_version = gpu_device::hip_rt::decode_version(gpu.hip().runtime_version().map_err(gpu_device::Error::from)?);
    let (lp_kernel, lp_note) = describe_kernel(&gpu, k);
    note(quiet, &lp_note);
    let calibrated = prepared.t.ok_or_else(|| failed!("the GPU was prepared without T"))?;
    let t_note = report_t(&gpu, &calibrated, p.t_ms, quiet);
    let cal = calibrated.calibration;
    let budget = command_budget(p, keep_ahead(p));
    let check_slots = kernel::slot_buffer(&dev, &prepared.warm, 1).map_err(h("co-run check slot"))?;
    let idx = ProbeIndex::new(p);
    let hp_stream = prepared
        .hp
        .take()
        .ok_or_else(|| failed!("the GPU was prepared without its HP stream"))?;
    let probe = HpProbe::new(Arc::clone(&dev), Arc::clone(k), hp_stream, idx.count).map_err(h("HP probe"))?;
    let pairs = clock_pairs(&probe, idx.pairs_pre, CLOCK_PAIRS)?;
    let map0 = ClockMap::fit(&pairs, dev.info.wall_clock_khz)?;
    let floor = hp_floor(&probe, &map0, idx.floor)?;
    prepared.warm.synchronize().map_err(h("warm-up"))?;

    // Lv3: the mechanism (dbg-trap turns the debug trap on now, before the LP queue exists),
    // then the LP queue and at Lv3 the KFD queue behind it: the API's preparation, step 2.
    let lv3_request = match p.level {
        Level::Lv1 => None,
        Level::Lv2 => return Err(no_lv2()),
        Level::Lv3 | Level::Auto => {
            warn_multi_gpu(&gpu);
            Some(Lv3Request::required(choice, p.grace))
        }
    };
    if hip_version >= (7, 0, 0) {
        // docs/kfd-facts.md#dynamic-queues: clr may move idle streams between pooled queues;
        // a CU-mask stream (the LP stream) is exempt, and its binding is checked anyway.
        note(
            quiet,
            "HIP >= 7 may move idle streams between pooled hardware queues (dynamic queues); the LP stream has a \
             queue of its own, which it keeps, and its KFD queue is checked before every suspend",
        );
    }
    let lp = prepared.lp(LpRequest {
        lv3: lv3_request,
        slots: budget_usize(budget),
    })?;
    let lv3 = match (lp.lv3, lp.queue.binding) {
        (Some(setup), Some(binding)) => {
            note_mechanism(&setup, choice, p.grace, quiet);
            let preemptor = setup
                .preemptor
                .ok_or_else(|| failed!("no Lv3 mechanism was built for an Lv3 run"))?;
            warn_scratch_reclaim(&preemptor, k, quiet);
            let target = *binding.target();
            note(
                quiet,
                &format!(
                    "LP stream -> KFD queue {} on gpu 0x{:x}, ring 0x{:x} ({} bytes), priority {}",
                    target.queue_id, target.gpu_id, target.ring_base_address, target.ring_size, target.priority
                ),
            );
            for n in &lp.queue.notes {
                note(quiet, n);
            }
            Some(Lv3 { preemptor, binding })
        }
        (Some(_), None) => return Err(failed!("the LP queue was set up without its KFD queue at Lv3")),
        (None, _) => None,
    };
    let lpq = lp.queue.queue;
    let corun = co_run_check(&lpq, k, &check_slots, &probe, &cal, idx.corun, dev.info.wall_clock_khz)?;
    if let Some(w) = &corun {
        eprintln!("preempt-lat: WARNING: {w}");
    }
    let grid = k.grid();
    let report = Report {
        device_index,
        gfx: gpu.arch().offload_arch(),
        head: format!(
            "{} ({}), {} CUs, wave{}; HIP {}.{}.{} ({}); {}; LP grid {}x{} ({} per CU); {lp_note}; {t_note}",
            dev.info.name,
            dev.info.pci_bus_id,
            dev.info.cu_count,
            dev.info.wave_size,
            hip_version.0,
            hip_version.1,
            hip_version.2,
            gpu.hip().library_path(),
            wall_clock_note(&gpu),
            grid.blocks,
            grid.threads,
            k.wave_state(dev.info.cu_count, dev.info.wave_size).blocks_per_cu,
        ),
        tail: format!(
            "HP floor on an idle GPU p50 {:.1} us{}{}",
            crate::num::us(floor),
            lv3.as_ref().map_or(String::new(), |l| format!(
                "; LP queue {} gpu 0x{:x}",
                l.binding.target().queue_id,
                l.binding.target().gpu_id
            )),
            corun.map_or(String::new(), |w| format!("; WARNING: {w}")),
        ),
    };
    Ok(GpuBackend {
        gpu,
        lpq,
        probe,
        cmd: DelayCmd {
            ticks: cal.ticks_for(p.t_ms),
        },
        t_ns: calibrated.achieved.achieved_ms * 1e6,
        t_ms: p.t_ms,
        lp_kernel,
        budget,
        level: p.level,
        lv3,
        grace: p.grace,
        pairs,
        pairs_post_idx: idx.pairs_post,
        quiet,
        report,
    })
}

/// The LP slot count as an allocation size: the budget is capped at 4 Mi commands.
fn budget_usize(budget: u64) -> usize {
    usize::try_from(budget).unwrap_or(usize::MAX)
}

/// The warning for a mechanism the reclaim can undo (`kind`, update-queue), if ROCr's
/// asynchronous scratch reclaim can re-enable the LP queue behind our back: only when the LP
/// kernel needs scratch (ROCr acts only on queues whose dispatches do) and the reclaim is not
/// turned off (`HSA_ENABLE_SCRATCH_ASYNC_RECLAIM=0`).
fn scratch_reclaim_risk(kind: MechanismKind, lp_uses_scratch: bool, reclaim_env: Option<String>) -> Option<String> {
    (lp_uses_scratch && reclaim_env.as_deref() != Some("0")).then(|| {
        format!(
            "{kind} with an LP kernel that uses scratch and ROCr's async scratch reclaim on: ROCr may re-enable the \
             LP queue behind our back (set HSA_ENABLE_SCRATCH_ASYNC_RECLAIM=0); the correctness check would catch it"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_device::hip_rt::Hip;

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
            grace: GracePeriod::SHORTEST,
        }
    }

    #[test]
    fn scratch_reclaim_warning_only_for_scratch_kernels_with_reclaim_on() {
        for kind in MechanismKind::AUTO_ORDER
            .into_iter()
            .filter(|k| k.undone_by_scratch_reclaim())
        {
            let w = scratch_reclaim_risk(kind, true, None).unwrap();
            assert!(
                w.starts_with(&format!("{kind} with an LP kernel that uses scratch")),
                "{w}"
            );
            assert!(scratch_reclaim_risk(kind, true, Some("1".into())).is_some());
            assert!(scratch_reclaim_risk(kind, true, Some("0".into())).is_none());
            assert!(
                scratch_reclaim_risk(kind, false, None).is_none(),
                "no scratch: ROCr never touches the queue"
            );
        }
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
                let e = e.to_string();
                eprintln!("usable(0): {e}");
                if hip.device_count().is_err_and(|d| d.is_no_device()) {
                    assert!(e.contains("hipGetDeviceCount failed: hipErrorNoDevice (100)"), "{e}");
                    assert!(e.contains("/dev/kfd"), "{e}");
                }
            }
        }
    }
}
