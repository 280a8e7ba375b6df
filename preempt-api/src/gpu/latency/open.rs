//! [`GpuLatency::open`]: everything before a latency run's samples, in discovery's order
//! (docs/kfd-facts.md#stream-to-kfd-queue-id): the API's preparation step 1 (device, kernel,
//! warm-up and HP streams, T), the HP probe with its clock pairs and floor, step 2 (the Lv3
//! mechanism, then the LP queue and its KFD queue), the co-run check. Every other queue of the
//! process exists before the LP stream is created while the queue sets are diffed, and the
//! mechanism is built before it (dbg-trap enables the debug trap then).
use super::probes::{CLOCK_PAIRS, FLOOR_PROBES, clock_pairs, co_run_check, failed, hp_floor};
use super::{GpuLatency, Lv3, Report, h};
use crate::error::Result;
use crate::gpu::{self, CalibratedT, GpuDevice, KernelChoice, LpRequest, Prepare};
use crate::latency::{LpKernel, Reporter};
use crate::options::Level;
use crate::{GracePeriod, Lv3Request, Mechanism, MechanismChoice, MechanismKind, Preemptor};
use gpu_device::LpState;
use gpu_device::{ClockMap, DelayCmd, DelayKernel, HpProbe, kernel};
use std::sync::Arc;

/// What a latency run on `hip:N` asks of the device, by name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuLatencyRequest {
    /// `hip:N`.
    pub device: u32,
    /// Lv1 (the caller's launcher suspends) or Lv3 (the mechanism); Lv2 is refused on a GPU.
    pub level: Level,
    /// T, in ms: the kernel is calibrated at it.
    pub t_ms: f64,
    /// The LP kernel's state (and `PREEMPT_LP_BLOCKS_PER_CU` for the light one).
    pub lp_state: LpState,
    /// The Lv3 mechanism asked for, and its grace period.
    pub mechanism: MechanismChoice,
    pub grace: GracePeriod,
    /// HP probes the run takes (warm-up included): the probe's stamps are sized for them.
    pub probes: u32,
    /// LP commands the run may submit in all: the slots allocated.
    pub budget: u64,
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
    fn new(probes: u32) -> Self {
        let (floor, corun) = (probes, probes + FLOOR_PROBES);
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

impl GpuLatency {
    /// Sets `hip:N` up for one latency run (see the module docs); what it notes and warns of on
    /// the way goes to `say`.
    pub fn open(r: &GpuLatencyRequest, say: Arc<dyn Reporter>) -> Result<GpuLatency> {
        // Lv1: the caller's launcher suspends, nothing is built; Lv2 is refused before the device
        // opens.
        let lv3_request = match r.level {
            Level::Lv1 => None,
            Level::Lv2 => return Err(failed(crate::lv2_unavailable(crate::DeviceSpec::Hip(r.device)).message)),
            Level::Lv3 | Level::Auto => Some(Lv3Request::required(r.mechanism, r.grace)),
        };
        // Every queue but the LP one exists after this call: the API's preparation, step 1.
        let mut prepared = gpu::prepare(&Prepare {
            device: r.device,
            kernel: KernelChoice::for_state(r.lp_state),
            t_ms: Some(r.t_ms),
            hp_stream: true,
        })?;
        let gpu = Arc::clone(&prepared.gpu);
        let k = &Arc::clone(&prepared.kernel);
        let dev = Arc::clone(gpu.device());
        let hip_version =
            gpu_device::hip_rt::decode_version(gpu.hip().runtime_version().map_err(gpu_device::Error::from)?);
        let (lp_kernel, lp_note) = describe_kernel(&gpu, k);
        say.note(&lp_note);
        let calibrated = prepared.t.ok_or_else(|| failed("the GPU was prepared without T"))?;
        let t_note = report_t(&gpu, &calibrated, r.t_ms, &*say);
        let cal = calibrated.calibration;
        let check_slots = kernel::slot_buffer(&dev, &prepared.warm, 1).map_err(h("co-run check slot"))?;
        let idx = ProbeIndex::new(r.probes);
        let hp_stream = prepared
            .hp
            .take()
            .ok_or_else(|| failed("the GPU was prepared without its HP stream"))?;
        let probe = HpProbe::new(Arc::clone(&dev), Arc::clone(k), hp_stream, idx.count).map_err(h("HP probe"))?;
        let pairs = clock_pairs(&probe, idx.pairs_pre, CLOCK_PAIRS)?;
        let map0 = ClockMap::fit(&pairs, dev.info.wall_clock_khz)?;
        let floor = hp_floor(&probe, &map0, idx.floor)?;
        prepared.warm.synchronize().map_err(h("warm-up"))?;

        // Lv3: the mechanism (dbg-trap turns the debug trap on now, before the LP queue exists),
        // then the LP queue and at Lv3 the KFD queue behind it: the API's preparation, step 2.
        if lv3_request.is_some() {
            warn_multi_gpu(&gpu, &*say);
        }
        if hip_version >= (7, 0, 0) {
            // docs/kfd-facts.md#dynamic-queues: clr may move idle streams between pooled queues;
            // a CU-mask stream (the LP stream) is exempt, and its binding is checked anyway.
            say.note(
                "HIP >= 7 may move idle streams between pooled hardware queues (dynamic queues); the LP stream has \
                 a queue of its own, which it keeps, and its KFD queue is checked before every suspend",
            );
        }
        let lp = prepared.lp(LpRequest {
            lv3: lv3_request,
            slots: usize::try_from(r.budget).unwrap_or(usize::MAX),
        })?;
        let lv3 = match (lp.lv3, lp.queue.binding) {
            (Some(setup), Some(binding)) => {
                note_mechanism(&setup, r.mechanism, r.grace, &*say);
                let preemptor = setup
                    .preemptor
                    .ok_or_else(|| failed("no Lv3 mechanism was built for an Lv3 run"))?;
                warn_scratch_reclaim(&preemptor, k, &*say);
                let target = *binding.target();
                say.note(&format!(
                    "LP stream -> KFD queue {} on gpu 0x{:x}, ring 0x{:x} ({} bytes), priority {}",
                    target.queue_id, target.gpu_id, target.ring_base_address, target.ring_size, target.priority
                ));
                for n in &lp.queue.notes {
                    say.note(n);
                }
                Some(Lv3 { preemptor, binding })
            }
            (Some(_), None) => return Err(failed("the LP queue was set up without its KFD queue at Lv3")),
            (None, _) => None,
        };
        let lpq = lp.queue.queue;
        let corun = co_run_check(&lpq, k, &check_slots, &probe, &cal, idx.corun, dev.info.wall_clock_khz)?;
        if let Some(w) = &corun {
            say.warn(w);
        }
        let grid = k.grid();
        let report = Report {
            device_index: r.device,
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
                us(floor),
                lv3.as_ref().map_or(String::new(), |l| format!(
                    "; LP queue {} gpu 0x{:x}",
                    l.binding.target().queue_id,
                    l.binding.target().gpu_id
                )),
                corun.map_or(String::new(), |w| format!("; WARNING: {w}")),
            ),
        };
        Ok(GpuLatency {
            gpu,
            lpq,
            probe,
            cmd: DelayCmd {
                ticks: cal.ticks_for(r.t_ms),
            },
            t_ns: calibrated.achieved.achieved_ms * 1e6,
            t_ms: r.t_ms,
            lp_kernel,
            budget: r.budget,
            lv3,
            grace: r.grace,
            pairs,
            pairs_post_idx: idx.pairs_post,
            say,
            report,
        })
    }
}

/// ns as µs, for a report line.
#[allow(clippy::cast_precision_loss)] // an HP floor: far below 2^53 ns
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
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
fn report_t(gpu: &GpuDevice, t: &CalibratedT, t_ms: f64, say: &dyn Reporter) -> String {
    let (cal, achieved) = (&t.calibration, &t.achieved);
    let t_note = format!(
        "T requested {t_ms} ms, achieved {:.4} ms ({:+.1}%)",
        achieved.achieved_ms,
        achieved.error * 100.0
    );
    if achieved.off {
        say.warn(&format!(
            "{t_note}: more than 5% off; every figure below is for the achieved T"
        ));
    } else {
        say.note(&t_note);
    }
    if cal.rates_disagree {
        say.warn(&format!(
            "the delay kernel's wall-clock stamps and the events disagree by > 5% on the tick rate ({:.0} vs {:.0} \
             ticks/ms): the {} is not the clock's real rate",
            cal.ticks_per_ms,
            cal.event_ticks_per_ms,
            wall_clock_note(gpu)
        ));
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
fn warn_multi_gpu(gpu: &GpuDevice, say: &dyn Reporter) {
    let count = gpu.hip().device_count().map_or(1, |n| n as usize);
    if let Some(n) = gpu::multi_gpu_note_here(count) {
        say.warn(&n);
    }
}

/// The Lv3 mechanism the API built for the LP queue ([`crate::gpu::Prepared::lp`]), said.
fn note_mechanism(setup: &crate::Lv3Setup, choice: MechanismChoice, grace: GracePeriod, say: &dyn Reporter) {
    say.note(&format!("--mechanism {choice}: {}", setup.info.why));
    if let Some(pre) = &setup.preemptor {
        say.note(&format!(
            "Lv3 mechanism: {}, grace period {}",
            pre.kind(),
            Mechanism::Kfd(pre.kind()).grace_applied(grace)
        ));
    }
}

/// A mechanism that ROCr's scratch reclaim can undo (update-queue) with an LP kernel that uses
/// scratch: the warning, or the note that it is safe.
fn warn_scratch_reclaim(pre: &Preemptor, k: &DelayKernel, say: &dyn Reporter) {
    let kind = pre.kind();
    if !kind.undone_by_scratch_reclaim() {
        return;
    }
    match scratch_reclaim_risk(
        kind,
        k.lp_uses_scratch(),
        std::env::var("HSA_ENABLE_SCRATCH_ASYNC_RECLAIM").ok(),
    ) {
        Some(w) => say.warn(&w),
        None => say.note(&format!(
            "{kind}: the LP kernel uses no scratch, so ROCr's scratch reclaim leaves its queue alone"
        )),
    }
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
    fn probe_indices_follow_the_samples_without_overlap() {
        let i = ProbeIndex::new(1010);
        assert_eq!((i.floor, i.corun), (1010, 1010 + FLOOR_PROBES));
        assert_eq!(i.pairs_pre, i.corun + 1);
        assert_eq!(i.pairs_post, i.pairs_pre + CLOCK_PAIRS);
        assert_eq!(i.count, (i.pairs_post + CLOCK_PAIRS) as usize);
    }
}
