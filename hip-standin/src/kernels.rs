//! The kernels the stand-in knows, by the names and argument lists of the project's delay
//! kernels (gpu-device's `kernels/delay.hip`): what a program loads with `hipModuleGetFunction`
//! runs here as host work on the stream's workers, with the same side effects on its slot. Two
//! more, a GEMM and a convolution, stand for a library's kernels and compute their results for
//! real ([`crate::library`]).
//!
//! The stand-in's wall clock ticks at 100 MHz (10 ns a tick, as MI300's `s_memrealtime`) on
//! `CLOCK_MONOTONIC`, so `ticks` means the same time here as on the GPU.
use crate::code::{self, Code};
use crate::library::{ConvDims, LibCall};
use crate::memory::Memory;
use host_device::KernelRecord;

/// Nanoseconds per wall-clock tick.
pub const NS_PER_TICK: u64 = 10;
/// `DELAY_TAG_MAGIC` of delay.hip: a slot's tag is `cmd_id ^ MAGIC` once its command completed.
pub const DELAY_TAG_MAGIC: u64 = 0x5052_454d_5054_4c41;
/// `struct DelaySlot` of delay.hip: start, end (u64), blocks, done (u32), tag (u64).
pub const SLOT_BYTES: usize = 32;
/// The host work of an HP probe: as short as a worker round trip allows.
const PROBE_NS: u64 = 1_000;

/// A kernel by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// `delay_kernel(DelaySlot* slots, u32 cmd_id, u64 ticks, u32 nblocks)`.
    Delay,
    /// `delay_kernel_heavy`, same arguments (its register load has no host meaning).
    DelayHeavy,
    /// `hp_probe(u64* stamps, u32 idx)`: stores its start stamp into `stamps[idx]`.
    HpProbe,
    /// `sgemm_f32(const float* A, const float* B, float* C, u32 M, u32 N, u32 K)`.
    Sgemm,
    /// `conv2d_f32_nchw(const float* x, const float* w, float* y, u32 N, u32 C, u32 H, u32 W,
    /// u32 K, u32 R, u32 S, u32 stride, u32 pad)`.
    Conv2d,
}

impl Kernel {
    pub const ALL: [Kernel; 5] = [
        Kernel::Delay,
        Kernel::DelayHeavy,
        Kernel::HpProbe,
        Kernel::Sgemm,
        Kernel::Conv2d,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Delay => "delay_kernel",
            Kernel::DelayHeavy => "delay_kernel_heavy",
            Kernel::HpProbe => "hp_probe",
            Kernel::Sgemm => "sgemm_f32",
            Kernel::Conv2d => "conv2d_f32_nchw",
        }
    }

    pub fn by_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The size of each argument, in order (what `kernelParams[i]` points to).
    pub fn arg_sizes(self) -> &'static [usize] {
        match self {
            Kernel::Delay | Kernel::DelayHeavy => &[8, 4, 8, 4],
            Kernel::HpProbe => &[8, 4],
            Kernel::Sgemm => &[8, 8, 8, 4, 4, 4],
            Kernel::Conv2d => &[8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4],
        }
    }

    /// Reads the arguments (`args[i]` holds `arg_sizes()[i]` bytes) and checks that what the
    /// kernel will write lies in device memory.
    pub fn call(self, args: &[Vec<u8>], mem: &Memory) -> Result<Call, Code> {
        let sizes = self.arg_sizes();
        if args.len() != sizes.len() || args.iter().zip(sizes).any(|(a, n)| a.len() != *n) {
            return Err(code::INVALID_VALUE);
        }
        let u64_at = |i: usize| u64::from_le_bytes(args[i][..8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(args[i][..4].try_into().unwrap_or([0; 4]));
        let ptr = |i: usize| usize::try_from(u64_at(i)).map_err(|_| code::INVALID_VALUE);
        let dim = |i: usize| u32_at(i) as usize;
        let call = match self {
            Kernel::Sgemm => {
                return Ok(Call::Library(LibCall::sgemm(
                    ptr(0)?,
                    ptr(1)?,
                    ptr(2)?,
                    dim(3),
                    dim(4),
                    dim(5),
                    mem,
                )?));
            }
            Kernel::Conv2d => {
                let d = ConvDims {
                    n: dim(3),
                    c: dim(4),
                    h: dim(5),
                    w: dim(6),
                    k: dim(7),
                    r: dim(8),
                    s: dim(9),
                    stride: dim(10),
                    pad: dim(11),
                };
                return Ok(Call::Library(LibCall::conv2d(ptr(0)?, ptr(1)?, ptr(2)?, d, mem)?));
            }
            Kernel::Delay | Kernel::DelayHeavy => Call::Delay {
                slot: slot_addr(u64_at(0), u64::from(u32_at(1)), SLOT_BYTES)?,
                cmd_id: u32_at(1),
                ticks: u64_at(2),
                nblocks: u32_at(3),
            },
            Kernel::HpProbe => Call::Probe {
                stamp: slot_addr(u64_at(0), u64::from(u32_at(1)), 8)?,
            },
        };
        if !mem.contains(call.target(), call.target_len()) {
            return Err(code::INVALID_VALUE);
        }
        Ok(call)
    }
}

fn slot_addr(base: u64, index: u64, size: usize) -> Result<usize, Code> {
    let off = index.checked_mul(size as u64).ok_or(code::INVALID_VALUE)?;
    let addr = base.checked_add(off).ok_or(code::INVALID_VALUE)?;
    usize::try_from(addr).map_err(|_| code::INVALID_VALUE)
}

/// One launch, its arguments read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Delay {
        slot: usize,
        cmd_id: u32,
        ticks: u64,
        nblocks: u32,
    },
    Probe {
        stamp: usize,
    },
    /// A library kernel: run tile by tile ([`LibCall::run`]), its results written as it goes.
    Library(LibCall),
}

impl Call {
    fn target(&self) -> usize {
        match *self {
            Call::Delay { slot, .. } => slot,
            Call::Probe { stamp } => stamp,
            // Checked, every buffer, when it was made.
            Call::Library(_) => 0,
        }
    }

    fn target_len(&self) -> usize {
        match self {
            Call::Delay { .. } => SLOT_BYTES,
            Call::Probe { .. } => 8,
            Call::Library(_) => 0,
        }
    }

    /// The host work each worker does for it.
    pub fn work_ns(&self) -> u64 {
        match *self {
            Call::Delay { ticks, .. } => ticks.saturating_mul(NS_PER_TICK),
            Call::Probe { .. } => PROBE_NS,
            Call::Library(l) => l.work_ns(),
        }
    }

    /// Writes what the GPU kernel would have left once it completed on every worker: the
    /// earliest start and latest end (in ticks), `nblocks` blocks and one completion (booked
    /// once per launch, so a command run twice or lost shows in `done`), the tag.
    pub fn complete(&self, mem: &Memory, records: &[KernelRecord]) -> Result<(), Code> {
        let start = records.iter().map(|r| r.start_ns).min().unwrap_or(0) / NS_PER_TICK;
        let end = records.iter().map(|r| r.end_ns).max().unwrap_or(0) / NS_PER_TICK;
        match *self {
            Call::Delay {
                slot, cmd_id, nblocks, ..
            } => mem.update(slot, SLOT_BYTES, |s| {
                let get64 = |s: &[u8], o: usize| u64::from_le_bytes(s[o..o + 8].try_into().unwrap_or([0; 8]));
                let get32 = |s: &[u8], o: usize| u32::from_le_bytes(s[o..o + 4].try_into().unwrap_or([0; 4]));
                if get64(s, 0) == 0 {
                    s[0..8].copy_from_slice(&start.to_le_bytes());
                }
                let end = end.max(get64(s, 8));
                s[8..16].copy_from_slice(&end.to_le_bytes());
                let blocks = get32(s, 16).wrapping_add(nblocks);
                s[16..20].copy_from_slice(&blocks.to_le_bytes());
                let done = get32(s, 20).wrapping_add(1);
                s[20..24].copy_from_slice(&done.to_le_bytes());
                let tag = get64(s, 24) ^ u64::from(cmd_id) ^ DELAY_TAG_MAGIC;
                s[24..32].copy_from_slice(&tag.to_le_bytes());
            }),
            Call::Probe { stamp } => mem.write(stamp, &start.to_le_bytes()),
            // Its results are written tile by tile as it runs.
            Call::Library(_) => Ok(()),
        }
    }
}
