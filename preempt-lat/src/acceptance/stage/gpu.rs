//! The GPU stages that no subcommand runs alone, each on the one device layer (preempt-api's
//! `GpuDevice`, `Lv3Setup`, `GpuDevice::lp_queue`) and gpu-device's kernel calls, as the latency
//! run uses them: the HIP smoke test, the calibration at T, LP queue discovery, and one
//! mechanism's bystander cost (validate's check, `crate::gpu::bystander`).
//!
//! Written for hardware and NOT yet run on a GPU (no machine here has one): on this machine the
//! environment stage fails first and these stages are skipped. docs/hardware-validation.md says
//! what each should print.
use super::StageResult;
use crate::acceptance::summary::Status;
use gpu_device::{LpState, SlotStatus, calib, kernel, setup};
use hip_rt::{Mem, StreamPriority};
use kfd::GracePeriod;
use lv3::{MechanismChoice, MechanismKind};
use preempt_api::gpu::{GpuDevice, KernelChoice};
use serde_json::json;

fn result(r: Result<(String, serde_json::Value), String>) -> StageResult {
    match r {
        Ok((reason, facts)) => StageResult {
            status: Status::Pass,
            reason,
            facts,
        },
        Err(why) => StageResult {
            status: Status::Fail,
            reason: why,
            facts: serde_json::Value::Null,
        },
    }
}

fn open(index: u32, state: LpState) -> Result<GpuDevice, String> {
    GpuDevice::open(
        index,
        KernelChoice {
            state,
            ..KernelChoice::default()
        },
    )
    .map_err(|e| format!("opening hip:{index}: {e}"))
}

/// HIP loads and opens the device, the light and (where the target has one) heavy delay kernels
/// compile with hiprtc and load, one light command runs to completion, and the clock rates.
pub fn smoke(index: u32) -> StageResult {
    result((|| {
        let gpu = open(index, LpState::Light)?;
        let info = gpu.device().info.clone();
        let version = gpu
            .hip()
            .runtime_version()
            .map_err(|e| format!("hipRuntimeGetVersion: {e}"))?;
        let (a, b, c) = hip_rt::decode_version(version);
        let k = gpu
            .kernel()
            .map_err(|e| format!("compiling the light delay kernel: {e}"))?;
        let s = gpu
            .stream(StreamPriority::Normal)
            .map_err(|e| format!("a stream: {e}"))?;
        let slots = kernel::slot_buffer(gpu.device(), &s, 1).map_err(|e| format!("a slot: {e}"))?;
        let ticks = u64::from(info.wall_clock_khz); // 1 ms on the nominal wall clock
        k.launch(&s, Mem::Device(&slots), 0, ticks)
            .map_err(|e| format!("launching one delay kernel: {e}"))?;
        s.synchronize().map_err(|e| format!("waiting for it: {e}"))?;
        let slot = kernel::read_slots(&slots, 1).map_err(|e| format!("reading its slot: {e}"))?[0];
        let status = slot.status(0, k.grid().blocks);
        if status != SlotStatus::Complete {
            return Err(format!("the delay kernel ran but its slot says {status:?}"));
        }
        let ran_ms = calib::ticks_to_ms(slot.wall_ticks(), info.wall_clock_khz);
        let floor = kernel::event_floor_ms(gpu.device(), &s).map_err(|e| format!("event floor: {e}"))?;
        let heavy = match LpState::Heavy.check_target(gpu.arch()) {
            Err(why) => format!("heavy kernel n/a here: {why}"),
            Ok(()) => {
                let h = open(index, LpState::Heavy)?;
                let hk = h
                    .kernel()
                    .map_err(|e| format!("compiling the heavy delay kernel: {e}"))?;
                let r = hk.resources();
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
        let gpu = open(index, LpState::Light)?;
        let k = gpu.kernel().map_err(|e| format!("the delay kernel: {e}"))?;
        let s = gpu
            .stream(StreamPriority::Normal)
            .map_err(|e| format!("a stream: {e}"))?;
        let r = kernel::calibrate(&k, gpu.device(), &s, &setup::calibration_points(t_ms), 3)
            .map_err(|e| format!("calibrating: {e}"))?;
        let cal = r.calibration;
        let achieved = kernel::check_t(&k, gpu.device(), &s, &cal, t_ms, 5).map_err(|e| format!("checking T: {e}"))?;
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
            return Err(format!("{line}: more than 5 % off"));
        }
        Ok((line, facts))
    })())
}

/// The LP stream's KFD queue found the way every Lv3 run finds it (`auto` mechanism).
pub fn discovery(index: u32) -> StageResult {
    result((|| {
        let gpu = open(index, LpState::Light)?;
        let setup = preempt_api::Lv3Setup::build(MechanismChoice::Auto, GracePeriod::SHORTEST, false, true)
            .map_err(|e| format!("the Lv3 mechanism: {e}"))?;
        let pre = setup
            .preemptor
            .ok_or_else(|| format!("no Lv3 mechanism works here: {}", setup.info.why))?;
        let lp = gpu
            .lp_queue(Some(&pre), 16)
            .map_err(|e| format!("discovering the LP stream's KFD queue: {e}"))?;
        let t = lp.target.ok_or("the LP queue was set up without its KFD queue")?;
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
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            return result(Err(format!("cannot find this executable to start the bystander: {e}")));
        }
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
        Err((false, why)) => result(Err(why)),
    }
}
