//! The GPU stages that no subcommand runs alone, each prepared by the one device layer
//! (preempt-api's `gpu::prepare` and `Prepared::lp`) as the latency run is, with gpu-device's
//! kernel calls: the HIP smoke test, the calibration at T, LP queue discovery, and one
//! mechanism's bystander cost (validate's check, `crate::gpu::bystander`).
//!
//! Written for hardware and NOT yet run on a GPU (no machine here has one): on this machine the
//! environment stage fails first and these stages are skipped. docs/hardware-validation.md says
//! what each should print.
use super::StageResult;
use crate::acceptance::summary::Status;
use crate::error::{Context, Error, failed};
use gpu_device::hip_rt::Mem;
use gpu_device::{LpState, SlotStatus, calib, kernel};
use preempt_api::gpu::{self, CalibratedT, KernelChoice, LpRequest, Prepare, Prepared, PreparedLp};
use preempt_api::{GracePeriod, Lv3Request, MechanismChoice, MechanismKind};
use serde_json::json;

fn result(r: Result<(String, serde_json::Value), Error>) -> StageResult {
    match r {
        Ok((reason, facts)) => StageResult {
            status: Status::Pass,
            reason,
            facts,
        },
        Err(why) => StageResult {
            status: Status::Fail,
            reason: why.to_string(),
            facts: serde_json::Value::Null,
        },
    }
}

/// `hip:index` prepared with the `state` kernel, and T calibrated where asked.
fn prepared(index: u32, state: LpState, t_ms: Option<f64>) -> Result<Prepared, Error> {
    gpu::prepare(&Prepare {
        device: index,
        kernel: KernelChoice {
            state,
            ..KernelChoice::default()
        },
        t_ms,
        hp_stream: false,
    })
    .with_context(|| format!("preparing hip:{index}"))
}

/// HIP loads and opens the device, the light and (where the target has one) heavy delay kernels
/// compile with hiprtc and load, one light command runs to completion, and the clock rates.
pub fn smoke(index: u32) -> StageResult {
    result((|| {
        let p = prepared(index, LpState::Light, None)?;
        let (gpu, k, s) = (&p.gpu, &p.kernel, &p.warm);
        let info = gpu.device().info.clone();
        let version = gpu.hip().runtime_version().context("hipRuntimeGetVersion")?;
        let (a, b, c) = gpu_device::hip_rt::decode_version(version);
        let slots = kernel::slot_buffer(gpu.device(), s, 1).context("a slot")?;
        let ticks = u64::from(info.wall_clock_khz); // 1 ms on the nominal wall clock
        k.launch(s, Mem::Device(&slots), 0, ticks)
            .context("launching one delay kernel")?;
        s.synchronize().context("waiting for it")?;
        let slot = kernel::read_slots(&slots, 1).context("reading its slot")?[0];
        let status = slot.status(0, k.grid().blocks);
        if status != SlotStatus::Complete {
            return Err(failed!("the delay kernel ran but its slot says {status:?}"));
        }
        let ran_ms = calib::ticks_to_ms(slot.wall_ticks(), info.wall_clock_khz);
        let floor = kernel::event_floor_ms(gpu.device(), s).context("event floor")?;
        let heavy = match LpState::Heavy.check_target(gpu.arch()) {
            Err(why) => format!("heavy kernel n/a here: {why}"),
            Ok(()) => {
                let r = prepared(index, LpState::Heavy, None)?.kernel.resources();
                format!(
                    "heavy kernel: {} VGPRs ({} AGPRs) per lane, {} B LDS per block",
                    r.vgpr_count, r.agpr_count, r.group_segment_fixed_size
                )
            }
        };
        let facts = json!({
            "name": info.name,
            "pci_bus_id": info.pci_bus_id,
            "gfx": gpu.arch().offload_arch(),
            "cu_count": info.cu_count,
            "wave_size": info.wave_size,
            "clock_khz": info.clock_khz,
            "wall_clock_khz": info.wall_clock_khz,
            "wall_clock_reported": info.wall_clock_reported,
            "hip_version": format!("{a}.{b}.{c}"),
            "hip_library": gpu.hip().library_path(),
            "one_command_ms": ran_ms,
            "event_floor_ms": floor,
            "heavy": heavy,
        });
        Ok((
            format!(
                "{} ({}, {}, {} CUs), HIP {a}.{b}.{c}; a 1 ms command ran {ran_ms:.3} ms; wall clock {} kHz ({}), shader \
                 clock {} kHz; {heavy}",
                info.name,
                info.pci_bus_id,
                gpu.arch().offload_arch(),
                info.cu_count,
                info.wall_clock_khz,
                if info.wall_clock_reported {
                    "reported by HIP"
                } else {
                    "the target's fallback"
                },
                info.clock_khz
            ),
            facts,
        ))
    })())
}

/// T calibrated at `t_ms` as a latency run does, then checked: FAIL when the achieved T is more
/// than 5 % off (every latency would be for another T).
pub fn calibration(index: u32, t_ms: f64) -> StageResult {
    result((|| {
        let CalibratedT {
            calibration: cal,
            achieved,
        } = prepared(index, LpState::Light, Some(t_ms))?
            .t
            .ok_or_else(|| failed!("the GPU was prepared without T"))?;
        let facts = json!({
            "t_ms": t_ms,
            "ticks_per_ms": cal.ticks_per_ms,
            "wall_overhead_ms": cal.wall_overhead_ms,
            "event_ticks_per_ms": cal.event_ticks_per_ms,
            "event_overhead_ms": cal.event_overhead_ms,
            "rates_disagree": cal.rates_disagree,
            "achieved_ms": achieved.achieved_ms,
            "error": achieved.error,
        });
        let line = format!(
            "T {t_ms} ms achieved {:.4} ms ({:+.1}%); {:.0} wall ticks/ms, events {:.0}{}",
            achieved.achieved_ms,
            achieved.error * 100.0,
            cal.ticks_per_ms,
            cal.event_ticks_per_ms,
            if cal.rates_disagree {
                " (the two rates disagree by > 5 %: the wall clock does not run at its stated rate)"
            } else {
                ""
            }
        );
        if achieved.off {
            return Err(failed!("{line}: more than 5 % off"));
        }
        Ok((line, facts))
    })())
}

/// The LP stream's KFD queue found the way every Lv3 run finds it (`auto` mechanism).
pub fn discovery(index: u32) -> StageResult {
    result((|| {
        let PreparedLp { lv3, queue: lp } = prepared(index, LpState::Light, None)?
            .lp(LpRequest {
                lv3: Some(Lv3Request::required(MechanismChoice::Auto, GracePeriod::SHORTEST)),
                slots: 16,
            })
            .context("the Lv3 mechanism and the LP stream's KFD queue")?;
        let setup = lv3.ok_or_else(|| failed!("no Lv3 mechanism was built"))?;
        let pre = setup
            .preemptor
            .ok_or_else(|| failed!("no Lv3 mechanism works here: {}", setup.info.why))?;
        let t = lp
            .target
            .ok_or_else(|| failed!("the LP queue was set up without its KFD queue"))?;
        let facts = json!({
            "mechanism": pre.kind().name(),
            "why": setup.info.why,
            "verdicts": setup.info.verdicts,
            "queue_id": t.queue_id,
            "gpu_id": t.gpu_id,
            "ring_base_address": t.ring_base_address,
            "ring_size": t.ring_size,
            "priority": t.priority,
            "notes": lp.notes,
        });
        Ok((
            format!(
                "{}: LP stream -> KFD queue {} on gpu 0x{:x}, ring 0x{:x} ({} bytes)",
                pre.kind(),
                t.queue_id,
                t.gpu_id,
                t.ring_base_address,
                t.ring_size
            ),
            facts,
        ))
    })())
}

/// One mechanism's bystander cost (validate's plan), the bystander being this executable.
pub fn bystander(index: u32, kind: MechanismKind) -> StageResult {
    let program = match std::env::current_exe().context("cannot find this executable to start the bystander") {
        Ok(p) => p,
        Err(e) => return result(Err(e)),
    };
    match crate::gpu::bystander(index, kind, &crate::bystander::Plan::VALIDATE, &program) {
        Ok(m) => StageResult {
            status: Status::Pass,
            reason: m.summary(),
            facts: serde_json::to_value(&m).unwrap_or_default(),
        },
        Err((true, why)) => StageResult {
            status: Status::Skip,
            reason: why,
            facts: serde_json::Value::Null,
        },
        Err((false, why)) => result(Err(Error::msg(why))),
    }
}
