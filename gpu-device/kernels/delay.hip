// Delay kernels and HP probe for preempt-lat.
//
// One source for two compilers:
//   * hiprtc at run time (HIP's device headers are already in scope, __global__ is a macro), and
//   * offline: clang-19 -x hip --offload-arch=gfx942 -nogpulib -nogpuinc --cuda-device-only
//     (no headers at all), see scripts/check-delay-kernel.sh.
// So: no #include, clang builtins and attributes only, and the one macro we need is guarded.
//
// Clocks (gfx9): __builtin_readcyclecounter()      = s_memtime     = clock64(), shader cycles (DVFS!)
//                __builtin_amdgcn_s_memrealtime() = s_memrealtime = wall_clock64(), constant rate:
//                100 MHz on gfx940/941/942, 25 MHz on gfx90a (hipDeviceAttributeWallClockRate says
//                which; docs/kfd-facts.md#clocks-on-gfx942)
// Both delay kernels spin on the wall clock, so a command is `ticks` of a constant clock and its
// length does not follow the shader clock under DVFS.
//
// Two LP kernels with the same arguments and slot protocol (`--lp-state light|heavy`):
//   delay_kernel        light: a few VGPRs per wave and no LDS; CWSR saves little per wave.
//   delay_kernel_heavy  heavy (gfx90a/gfx94x only): every wave keeps all 512 VGPRs per lane
//                       (256 ArchVGPRs + 256 AccVGPRs, the unified register file at 1 wave per
//                       SIMD) holding data, and each 256-thread block fills 64 KiB of LDS (the
//                       gfx9 per-workgroup limit = a CU's whole LDS). Launch one block per CU:
//                       with that LDS and 512 registers per lane a CU holds exactly one block
//                       (4 waves, one per SIMD). After the spin every lane checks that its
//                       registers and another wave's LDS words still hold what was written; a
//                       difference (state lost in a save/restore) sets DELAY_STATE_LOST in the tag.
//
// Slot layout, one per command id, 32 bytes; must match DelaySlot in gpu-device/src/kernel.rs:
//   0  u64 start   wall clock of the first block to start (set once, by compare-and-swap from 0)
//   8  u64 end     wall clock of the last block to finish (atomic max)
//   16 u32 blocks  blocks that finished (atomic add); == grid size when the command completed
//   20 u32 done    incremented once by the block that finished last: "exactly once" means 1
//   24 u64 tag     cmd_id ^ DELAY_TAG_MAGIC, xor-ed in by that last block; bit 63
//                  (DELAY_STATE_LOST) or-ed in by any heavy lane whose state read back wrong
// The host zeroes the slots before use.

#ifndef __global__
#define __global__ __attribute__((global))
#endif

#define DELAY_TAG_MAGIC 0x5052454d50544c41ull  /* "PREMPTLA" */
#define DELAY_STATE_LOST 0x8000000000000000ull /* bit 63: not in any cmd_id ^ DELAY_TAG_MAGIC */

typedef unsigned long long pl_u64;
typedef unsigned int pl_u32;

struct DelaySlot {
  pl_u64 start;
  pl_u64 end;
  pl_u32 blocks;
  pl_u32 done;
  pl_u64 tag;
};

static __attribute__((device)) inline pl_u64 wall_clock() {
  return __builtin_amdgcn_s_memrealtime();
}

// The first block to start stamps the slot's start (called by one lane per block).
static __attribute__((device)) inline void stamp_start(DelaySlot* s) {
  pl_u64 zero = 0;
  pl_u64 now = wall_clock();
  __atomic_compare_exchange_n(&s->start, &zero, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// A block finished (called by one lane per block): end stamp, block count, and the last block
// books the command.
static __attribute__((device)) inline void book(DelaySlot* s, pl_u32 cmd_id, pl_u32 nblocks) {
  __atomic_fetch_max(&s->end, wall_clock(), __ATOMIC_RELAXED);
  pl_u32 before = __atomic_fetch_add(&s->blocks, 1u, __ATOMIC_ACQ_REL);
  if (before + 1 == nblocks) {
    __atomic_fetch_xor(&s->tag, (pl_u64)cmd_id ^ DELAY_TAG_MAGIC, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->done, 1u, __ATOMIC_RELEASE);
  }
}

// Spins every wave of the grid for `ticks` of the wall clock (s_memrealtime), then books the command.
// Launch with `nblocks` blocks (sized by the host to occupy every CU) of any block size.
extern "C" __global__ void delay_kernel(DelaySlot* slots, pl_u32 cmd_id, pl_u64 ticks, pl_u32 nblocks) {
  DelaySlot* s = &slots[cmd_id];
  const bool leader = __builtin_amdgcn_workitem_id_x() == 0;
  if (leader) {
    stamp_start(s);
  }
  const pl_u64 t0 = wall_clock();
  while (wall_clock() - t0 < ticks) {
  }
  if (leader) {
    book(s, cmd_id, nblocks);
  }
}

// The heavy kernel exists where its register and LDS budget is the hardware's: gfx90a and gfx94x
// (unified 512-entry VGPR+AGPR file per lane in wave64, 64 KiB LDS per CU). Elsewhere it is left
// out and the host refuses `--lp-state heavy` (the light kernel still compiles everywhere).
#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define HEAVY_THREADS 256     /* 4 waves of 64: one per SIMD */
#define HEAVY_AGPRS 256       /* a0..a255 */
/* VGPR values held through the spin; the compiler's temporaries and v255 (clobbered) take the
   rest. 232 is spill-free with clang-19 and with HIP 5.2's hiprtc (240 spilled 5 there). */
#define HEAVY_VGPRS 232
#define HEAVY_LDS_WORDS 16384 /* 64 KiB */
#define HEAVY_A_STEP 0x01000193u
#define HEAVY_V_STEP 0x85ebca6bu

// Block-wide barrier with LDS visibility (what HIP's __syncthreads() does).
static __attribute__((device)) inline void block_barrier() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

static __attribute__((device)) inline pl_u32 heavy_seed(pl_u32 cmd_id, pl_u32 tid) {
  return (cmd_id * 0x9e3779b9u) ^ (__builtin_amdgcn_workgroup_id_x() << 9) ^ tid;
}

// Like delay_kernel, with all of a wave's vector registers and a block's 64 KiB of LDS holding
// data through the spin. The empty asm statements are the point: "+a"/"+v" make each value an
// opaque register operand, before the spin (so it cannot be recomputed afterwards), on every spin
// iteration (so it must sit in a register throughout), and the check after the spin uses them all.
// The expected values are derived from a seed passed through another opaque asm, so that the
// compiler cannot keep them from before the spin (it would spill them to scratch).
// Launch with blockDim = 256 exactly and one block per CU.
extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(HEAVY_THREADS, HEAVY_THREADS),
                                     amdgpu_waves_per_eu(1, 1))) void
delay_kernel_heavy(DelaySlot* slots, pl_u32 cmd_id, pl_u64 ticks, pl_u32 nblocks) {
  __attribute__((shared)) pl_u32 lds[HEAVY_LDS_WORDS];
  DelaySlot* s = &slots[cmd_id];
  const pl_u32 tid = __builtin_amdgcn_workitem_id_x();
  const bool leader = tid == 0;
  if (leader) {
    stamp_start(s);
  }
  const pl_u32 seed = heavy_seed(cmd_id, tid);
  pl_u32 a[HEAVY_AGPRS];
  pl_u32 v[HEAVY_VGPRS];
#pragma unroll
  for (int i = 0; i < HEAVY_AGPRS; i++) {
    a[i] = seed + HEAVY_A_STEP * (pl_u32)i;
    asm volatile("" : "+a"(a[i]));
  }
#pragma unroll
  for (int i = 0; i < HEAVY_VGPRS; i++) {
    v[i] = seed ^ (HEAVY_V_STEP * (pl_u32)(i + 1));
    asm volatile("" : "+v"(v[i]));
  }
  for (pl_u32 i = tid; i < HEAVY_LDS_WORDS; i += HEAVY_THREADS) {
    lds[i] = seed ^ i;
  }
  block_barrier();

  const pl_u64 t0 = wall_clock();
  do {
#pragma unroll
    for (int i = 0; i < HEAVY_AGPRS; i++) {
      asm volatile("" : "+a"(a[i]));
    }
#pragma unroll
    for (int i = 0; i < HEAVY_VGPRS; i++) {
      asm volatile("" : "+v"(v[i]));
    }
    asm volatile("" ::: "v255"); // the top of the VGPR file is allocated too: 256 + 256 = 512
  } while (wall_clock() - t0 < ticks);

  pl_u32 seed2 = seed;
  asm volatile("" : "+v"(seed2));
  pl_u32 got = 0, want = 0;
#pragma unroll
  for (int i = 0; i < HEAVY_AGPRS; i++) {
    got ^= a[i];
    want ^= seed2 + HEAVY_A_STEP * (pl_u32)i;
  }
#pragma unroll
  for (int i = 0; i < HEAVY_VGPRS; i++) {
    got ^= v[i];
    want ^= seed2 ^ (HEAVY_V_STEP * (pl_u32)(i + 1));
  }
  bool lost = got != want;
  const pl_u32 other = (tid + 64) % HEAVY_THREADS; // the next wave's words
  const pl_u32 other_seed = heavy_seed(cmd_id, other);
  for (pl_u32 i = other; i < HEAVY_LDS_WORDS; i += HEAVY_THREADS) {
    lost |= lds[i] != (other_seed ^ i);
  }
  if (lost) {
    __atomic_fetch_or(&s->tag, DELAY_STATE_LOST, __ATOMIC_RELAXED);
  }
  block_barrier(); // the block's end is its last wave's end
  if (leader) {
    book(s, cmd_id, nblocks);
  }
}
#endif

// High-priority probe: records the wall clock at which its (single) first wave started.
extern "C" __global__ void hp_probe(pl_u64* stamps, pl_u32 idx) {
  if (__builtin_amdgcn_workitem_id_x() == 0 && __builtin_amdgcn_workgroup_id_x() == 0) {
    __atomic_store_n(&stamps[idx], wall_clock(), __ATOMIC_RELAXED);
  }
}
