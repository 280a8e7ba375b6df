//! The delay kernels (`kernels/delay.hip`): compiled by hiprtc for the device's gfx target,
//! launched on streams, calibrated against the GPU wall clock and events. Their slot ABI
//! ([`DelaySlot`], [`SLOT_BYTES`], [`DELAY_TAG_MAGIC`], [`DELAY_STATE_LOST`]) lives here, next to
//! the source it must match, and every launch checks that the slot or stamp it books lies inside
//! the buffer given. Two LP kernels share that ABI: the light and the heavy one
//! ([`crate::state::LpState`]).

use std::time::Instant;

use hip_rt::code_object::Resources;
use hip_rt::{Device, DeviceBuffer, Event, Function, Hip, HostBuffer, KernelArgs, LaunchConfig, Mem, Stream};

use crate::Error;
use crate::calib::{self, Achieved, CalSample, Calibration, ClockPair, GfxTarget, Grid};
use crate::num::command_id;
use crate::setup;
use crate::state::{self, LpState, WaveState};

/// The kernel source, embedded at build time; the same file is checked offline by
/// scripts/check-delay-kernel.sh.
pub const DELAY_SOURCE: &str = include_str!("../kernels/delay.hip");
/// `DELAY_TAG_MAGIC` of delay.hip: a completed slot holds `cmd_id ^ DELAY_TAG_MAGIC`.
pub const DELAY_TAG_MAGIC: u64 = 0x5052_454d_5054_4c41;
/// `DELAY_STATE_LOST` of delay.hip: or-ed into the tag by a heavy-kernel lane whose registers or
/// LDS did not read back what it wrote before the spin (bit 63: in no `cmd_id ^ DELAY_TAG_MAGIC`).
pub const DELAY_STATE_LOST: u64 = 1 << 63;
/// Bytes per command slot (`struct DelaySlot` of delay.hip).
pub const SLOT_BYTES: usize = 32;

/// One command's record, as the kernel leaves it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DelaySlot {
    /// GPU wall clock when the first block started (0: never started).
    pub start: u64,
    /// GPU wall clock when the last block finished.
    pub end: u64,
    /// Blocks that finished.
    pub blocks: u32,
    /// Times the command completed: exactly 1 when all is well.
    pub done: u32,
    pub tag: u64,
}

/// The verdict on one slot after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotStatus {
    Complete,
    NotRun,
    /// Some blocks finished, not all (still running, or lost).
    Partial {
        blocks: u32,
    },
    /// Completed more than once, or more blocks than launched: a duplicated execution.
    Duplicated {
        done: u32,
        blocks: u32,
    },
    /// Complete but the tag is not this command's.
    WrongTag,
    /// Complete with this command's tag, but some lane of the heavy kernel found its registers or
    /// LDS changed across the spin: wave state was lost or corrupted (by a save/restore).
    StateLost,
}

impl DelaySlot {
    pub fn from_bytes(b: &[u8]) -> Option<DelaySlot> {
        let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
        let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
        Some(DelaySlot {
            start: u64_at(0)?,
            end: u64_at(8)?,
            blocks: u32_at(16)?,
            done: u32_at(20)?,
            tag: u64_at(24)?,
        })
    }

    /// All whole slots in `bytes`.
    pub fn parse_all(bytes: &[u8]) -> Vec<DelaySlot> {
        bytes
            .chunks_exact(SLOT_BYTES)
            .filter_map(DelaySlot::from_bytes)
            .collect()
    }

    /// "Exactly once, with the right result" for command `cmd_id` launched with `nblocks` blocks.
    pub fn status(&self, cmd_id: u32, nblocks: u32) -> SlotStatus {
        match (self.done, self.blocks) {
            (0, 0) => SlotStatus::NotRun,
            (d, b) if d > 1 || b > nblocks => SlotStatus::Duplicated { done: d, blocks: b },
            (1, b) if b == nblocks => {
                let tag = u64::from(cmd_id) ^ DELAY_TAG_MAGIC;
                if self.tag == tag {
                    SlotStatus::Complete
                } else if self.tag == tag | DELAY_STATE_LOST {
                    SlotStatus::StateLost
                } else {
                    SlotStatus::WrongTag
                }
            }
            (_, b) => SlotStatus::Partial { blocks: b },
        }
    }

    /// Wall-clock ticks from first start to last end.
    pub fn wall_ticks(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// hiprtc options for `arch`: the full target id, so sramecc/xnack match the device.
pub fn compile_options(arch: &GfxTarget) -> Vec<String> {
    vec![format!("--offload-arch={}", arch.offload_arch()), "-O3".to_string()]
}

/// A compiled code object of delay.hip.
#[derive(Debug, Clone)]
pub struct CodeObject {
    pub image: Vec<u8>,
    pub log: String,
    pub arch: GfxTarget,
}

/// Compiles delay.hip with hiprtc for `arch` (no GPU needed for this step). Targets newer than
/// the loaded HIP are refused with an error (an old hiprtc crashes on them).
pub fn compile(hip: &Hip, arch: &GfxTarget) -> Result<CodeObject, Error> {
    let (major, minor, _) = hip_rt::decode_version(hip.runtime_version()?);
    if let Some(min) = calib::min_hip_for_target(&arch.processor).filter(|&m| (major, minor) < m) {
        return Err(Error::HipTooOld {
            have: (major, minor),
            need: min,
            processor: arch.processor.clone(),
        });
    }
    let code = hip.compile(DELAY_SOURCE, "delay.hip", &compile_options(arch))?;
    Ok(CodeObject {
        image: code.image,
        log: code.log,
        arch: arch.clone(),
    })
}

/// The LP delay kernel of one [`LpState`] and the HP probe, loaded on a device (the module stays
/// loaded while this lives), with the grid that fills it.
pub struct DelayKernel {
    delay: Function,
    probe: Function,
    grid: Grid,
    state: LpState,
}

impl DelayKernel {
    /// Compiles for the device's gcnArchName and loads the `state` kernel, on its LP grid
    /// ([`setup::lp_grid_for`], 2 blocks per CU for the light one).
    pub fn build(hip: &Hip, dev: &Device, state: LpState) -> Result<DelayKernel, Error> {
        let arch = crate::gfx_target(&dev.info)?;
        let code = compile(hip, &arch)?;
        let grid = setup::lp_grid_for(state, dev.info.cu_count, dev.info.wave_size, 2)?;
        DelayKernel::load(dev, &code, state, grid)
    }

    /// Loads the `state` LP kernel of a code object compiled from delay.hip (by [`compile`]),
    /// with the given grid. The heavy kernel is refused on targets delay.hip leaves it out for,
    /// and when the code object does not give it the state it is meant to hold
    /// ([`state::check_heavy`]: an older hiprtc could allocate differently).
    pub fn load(dev: &Device, code: &CodeObject, state: LpState, grid: Grid) -> Result<DelayKernel, Error> {
        state.check_target(&code.arch)?;
        let module = dev.load_module(&code.image)?;
        let delay = module.function(state.kernel_name())?;
        if state == LpState::Heavy {
            state::check_heavy(&delay.info().resources, grid)?;
        }
        Ok(DelayKernel {
            delay,
            probe: module.function("hp_probe")?,
            grid,
            state,
        })
    }

    pub fn grid(&self) -> Grid {
        self.grid
    }

    /// Whether the LP kernel needs scratch, from its own code-object metadata. ROCr's scratch
    /// handling (and its asynchronous reclaim, which toggles UPDATE_QUEUE) only acts on queues
    /// whose dispatches need scratch (docs/kfd-facts.md#scratch-reclaim-undoes-update_queue).
    pub fn lp_uses_scratch(&self) -> bool {
        self.delay.info().uses_scratch()
    }

    pub fn state(&self) -> LpState {
        self.state
    }

    /// The LP kernel's registers, LDS and scratch, from its code object's metadata.
    pub fn resources(&self) -> Resources {
        self.delay.info().resources
    }

    /// The wave state the LP grid keeps resident per CU (what a CWSR save of it moves).
    pub fn wave_state(&self, cu_count: u32, wave_size: u32) -> WaveState {
        state::wave_state(&self.resources(), self.grid, cu_count, wave_size)
    }

    /// Enqueues command `cmd_id`: spin `ticks` of the wall clock on every wave, then book slot
    /// `cmd_id` of `slots` (which must be zeroed before the command's first launch). A slot past
    /// the end of `slots` is refused.
    pub fn launch(&self, stream: &Stream, slots: Mem<'_>, cmd_id: u32, ticks: u64) -> Result<(), Error> {
        if (cmd_id as usize + 1) * SLOT_BYTES > slots.len() {
            return Err(Error::Invalid(format!(
                "delay launch: slot {cmd_id} of a {}-byte buffer",
                slots.len()
            )));
        }
        // delay_kernel[_heavy](DelaySlot* slots, u32 cmd_id, u64 ticks, u32 nblocks), nblocks = grid.
        let args = KernelArgs::new()
            .mem(slots)
            .u32(cmd_id)
            .u64(ticks)
            .u32(self.grid.blocks);
        self.delay
            .launch(stream, LaunchConfig::linear(self.grid.blocks, self.grid.threads), &args)?;
        Ok(())
    }

    /// Enqueues the HP probe (one wave), which stores its start wall clock into word `idx` of
    /// `stamps`. A word past the end of `stamps` is refused.
    pub fn launch_probe(&self, stream: &Stream, stamps: Mem<'_>, idx: u32) -> Result<(), Error> {
        if (idx as usize + 1) * 8 > stamps.len() {
            return Err(Error::Invalid(format!(
                "probe launch: stamp {idx} of a {}-byte buffer",
                stamps.len()
            )));
        }
        // hp_probe(u64* stamps, u32 idx)
        let args = KernelArgs::new().mem(stamps).u32(idx);
        self.probe.launch(stream, LaunchConfig::linear(1, 64), &args)?;
        Ok(())
    }
}

/// A zeroed slot buffer for `n` commands (device memory; read back with [`read_slots`]).
pub fn slot_buffer(dev: &Device, stream: &Stream, n: usize) -> Result<DeviceBuffer, Error> {
    let buf = dev.alloc_device(n.max(1) * SLOT_BYTES)?;
    buf.zero_async(stream)?;
    stream.synchronize()?;
    Ok(buf)
}

pub fn read_slots(buf: &DeviceBuffer, n: usize) -> Result<Vec<DelaySlot>, Error> {
    let mut bytes = vec![0u8; n * SLOT_BYTES];
    buf.copy_to_host(0, &mut bytes)?;
    Ok(DelaySlot::parse_all(&bytes))
}

/// The result of [`calibrate`].
#[derive(Debug, Clone)]
pub struct CalibrationReport {
    pub calibration: Calibration,
    pub samples: Vec<CalSample>,
    pub wall_clock_khz: u32,
}

/// Runs the kernel at each of `durations_ms` (ticks from the wall-clock rate), `reps` times each,
/// measuring every run by events and by its own wall-clock stamps, and fits the overhead and rate.
pub fn calibrate(
    k: &DelayKernel,
    dev: &Device,
    stream: &Stream,
    durations_ms: &[f64],
    reps: usize,
) -> Result<CalibrationReport, Error> {
    let nominal = f64::from(dev.info.wall_clock_khz.max(1)); // kHz = ticks per ms
    let plan: Vec<u64> = durations_ms
        .iter()
        .flat_map(|&d| std::iter::repeat_n(crate::num::round_u64(d * nominal), reps))
        .collect();
    let slots = slot_buffer(dev, stream, plan.len() + 1)?;
    let (e0, e1) = (dev.event(true)?, dev.event(true)?);
    k.launch(
        stream,
        Mem::Device(&slots),
        command_id(plan.len())?,
        plan.first().copied().unwrap_or(1000),
    )?; // warm-up
    stream.synchronize()?;
    let mut event_ms = Vec::with_capacity(plan.len());
    for (i, &ticks) in plan.iter().enumerate() {
        e0.record(stream)?;
        k.launch(stream, Mem::Device(&slots), command_id(i)?, ticks)?;
        e1.record(stream)?;
        e1.synchronize()?;
        event_ms.push(e1.elapsed_ms_since(&e0)? as f64);
    }
    let got = read_slots(&slots, plan.len())?;
    let mut samples = Vec::with_capacity(plan.len());
    for (i, (s, &ticks)) in got.iter().zip(&plan).enumerate() {
        let status = s.status(command_id(i)?, k.grid.blocks);
        if status != SlotStatus::Complete {
            return Err(Error::Invalid(format!("calibration run {i}: {status:?}")));
        }
        let wall_ms = calib::ticks_to_ms(s.wall_ticks(), dev.info.wall_clock_khz);
        samples.push(CalSample {
            ticks,
            event_ms: event_ms[i],
            wall_ms,
        });
    }
    Ok(CalibrationReport {
        calibration: Calibration::fit(&samples)?,
        samples,
        wall_clock_khz: dev.info.wall_clock_khz,
    })
}

/// Runs `reps` commands of `t_ms` (ticks from `cal`) and compares the median wall-clock
/// duration with the request (before a run; the run's own figure comes from its slots,
/// [`crate::verify::achieved_t`]).
pub fn check_t(
    k: &DelayKernel,
    dev: &Device,
    stream: &Stream,
    cal: &Calibration,
    t_ms: f64,
    reps: usize,
) -> Result<Achieved, Error> {
    let reps = reps.max(1);
    let slots = slot_buffer(dev, stream, reps)?;
    for i in 0..reps {
        k.launch(stream, Mem::Device(&slots), command_id(i)?, cal.ticks_for(t_ms))?;
    }
    stream.synchronize()?;
    let mut ms: Vec<f64> = read_slots(&slots, reps)?
        .iter()
        .map(|s| calib::ticks_to_ms(s.wall_ticks(), dev.info.wall_clock_khz))
        .collect();
    ms.sort_by(f64::total_cmp);
    Ok(calib::achieved(t_ms, ms[ms.len() / 2]))
}

/// `n` GPU-wall-clock/host-time pairs from the HP probe, for [`calib::ClockMap::fit`].
pub fn sample_clock(k: &DelayKernel, dev: &Device, stream: &Stream, n: usize) -> Result<Vec<ClockPair>, Error> {
    let stamps: HostBuffer = dev.alloc_host(n.max(1) * 8)?;
    let mut pairs = Vec::with_capacity(n);
    for i in 0..n {
        let before = calib::host_ns(Instant::now());
        k.launch_probe(stream, Mem::Host(&stamps), command_id(i)?)?;
        stream.synchronize()?;
        let after = calib::host_ns(Instant::now());
        let ticks = stamps.words()[i].load(std::sync::atomic::Ordering::Acquire);
        pairs.push(ClockPair {
            gpu_ticks: ticks,
            host_before_ns: before,
            host_after_ns: after,
        });
    }
    Ok(pairs)
}

/// Times one empty event pair, a floor for event-measured durations.
pub fn event_floor_ms(dev: &Device, stream: &Stream) -> Result<f32, Error> {
    let (a, b): (Event, Event) = (dev.event(true)?, dev.event(true)?);
    a.record(stream)?;
    b.record(stream)?;
    b.synchronize()?;
    Ok(b.elapsed_ms_since(&a)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_is_embedded_and_matches_rust_layout() {
        assert!(DELAY_SOURCE.contains("extern \"C\" __global__ void delay_kernel("));
        assert!(DELAY_SOURCE.contains("extern \"C\" __global__ void hp_probe("));
        assert!(DELAY_SOURCE.contains("0x5052454d50544c41ull"));
        assert!(DELAY_SOURCE.contains("#define DELAY_STATE_LOST 0x8000000000000000ull"));
        assert_eq!(DELAY_TAG_MAGIC, 0x5052454d50544c41);
        assert_eq!(DELAY_STATE_LOST, 0x8000_0000_0000_0000);
        assert_eq!(
            DELAY_TAG_MAGIC & DELAY_STATE_LOST,
            0,
            "a tag never has the state-lost bit"
        );
        assert_eq!(SLOT_BYTES, 32);
        for s in LpState::ALL {
            let signature = format!(
                "{}(DelaySlot* slots, pl_u32 cmd_id, pl_u64 ticks, pl_u32 nblocks)",
                s.kernel_name()
            );
            assert!(DELAY_SOURCE.contains(&signature), "{signature}");
        }
    }

    fn slot(blocks: u32, done: u32, tag: u64) -> DelaySlot {
        DelaySlot {
            start: 10,
            end: 30,
            blocks,
            done,
            tag,
        }
    }

    #[test]
    fn slot_parse_and_status() {
        let mut b = vec![0u8; 64];
        b[32..40].copy_from_slice(&5u64.to_le_bytes());
        b[40..48].copy_from_slice(&105u64.to_le_bytes());
        b[48..52].copy_from_slice(&304u32.to_le_bytes());
        b[52..56].copy_from_slice(&1u32.to_le_bytes());
        b[56..64].copy_from_slice(&(1u64 ^ DELAY_TAG_MAGIC).to_le_bytes());
        let s = DelaySlot::parse_all(&b);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].status(0, 304), SlotStatus::NotRun);
        assert_eq!(s[1].status(1, 304), SlotStatus::Complete);
        assert_eq!(s[1].wall_ticks(), 100);
        assert_eq!(s[1].status(2, 304), SlotStatus::WrongTag);
        assert_eq!(slot(100, 0, 0).status(0, 304), SlotStatus::Partial { blocks: 100 });
        let lost = slot(304, 1, 7 ^ DELAY_TAG_MAGIC ^ DELAY_STATE_LOST);
        assert_eq!(lost.status(7, 304), SlotStatus::StateLost);
        assert_eq!(lost.status(8, 304), SlotStatus::WrongTag);
        assert_eq!(
            slot(304, 2, 0).status(0, 304),
            SlotStatus::Duplicated { done: 2, blocks: 304 }
        );
        assert_eq!(
            slot(305, 1, 0).status(0, 304),
            SlotStatus::Duplicated { done: 1, blocks: 305 }
        );
        assert_eq!(DelaySlot::from_bytes(&[0u8; 31]), None);
    }

    #[test]
    fn options_carry_full_target_id() {
        let t = GfxTarget::parse("gfx942:sramecc+:xnack-").unwrap();
        assert_eq!(compile_options(&t)[0], "--offload-arch=gfx942:sramecc+:xnack-");
    }
}
