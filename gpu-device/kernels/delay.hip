// Delay kernel and HP probe for preempt-lat.
//
// One source for two compilers:
//   * hiprtc at run time (HIP's device headers are already in scope, __global__ is a macro), and
//   * offline: clang-19 -x hip --offload-arch=gfx942 -nogpulib -nogpuinc --cuda-device-only
//     (no headers at all), see scripts/check-delay-kernel.sh.
// So: no #include, clang builtins only, and the one macro we need is guarded.
//
// Clocks (gfx9): __builtin_readcyclecounter()      = s_memtime     = clock64(), shader cycles (DVFS!)
//                __builtin_amdgcn_s_memrealtime() = s_memrealtime = wall_clock64(), constant 100 MHz
//
// Slot layout, one per command id, 32 bytes; must match DelaySlot in gpu-device/src/kernel.rs:
//   0  u64 start   wall clock of the first block to start (set once, by compare-and-swap from 0)
//   8  u64 end     wall clock of the last block to finish (atomic max)
//   16 u32 blocks  blocks that finished (atomic add); == grid size when the command completed
//   20 u32 done    incremented once by the block that finished last: "exactly once" means 1
//   24 u64 tag     cmd_id ^ DELAY_TAG_MAGIC, written by that last block
// The host zeroes the slots before use.

#ifndef __global__
#define __global__ __attribute__((global))
#endif

#define DELAY_TAG_MAGIC 0x5052454d50544c41ull  /* "PREMPTLA" */

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

// Spins every wave of the grid for `cycles` shader-clock cycles (s_memtime), then books the command.
// Launch with `nblocks` blocks (sized by the host to occupy every CU) of any block size.
extern "C" __global__ void delay_kernel(DelaySlot* slots, pl_u32 cmd_id, pl_u64 cycles, pl_u32 nblocks) {
  DelaySlot* s = &slots[cmd_id];
  const bool leader = __builtin_amdgcn_workitem_id_x() == 0;
  if (leader) {
    pl_u64 zero = 0;
    pl_u64 now = wall_clock();
    __atomic_compare_exchange_n(&s->start, &zero, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
  const pl_u64 t0 = __builtin_readcyclecounter();
  while (__builtin_readcyclecounter() - t0 < cycles) {
  }
  if (leader) {
    __atomic_fetch_max(&s->end, wall_clock(), __ATOMIC_RELAXED);
    pl_u32 before = __atomic_fetch_add(&s->blocks, 1u, __ATOMIC_ACQ_REL);
    if (before + 1 == nblocks) {
      __atomic_store_n(&s->tag, (pl_u64)cmd_id ^ DELAY_TAG_MAGIC, __ATOMIC_RELAXED);
      __atomic_fetch_add(&s->done, 1u, __ATOMIC_RELEASE);
    }
  }
}

// High-priority probe: records the wall clock at which its (single) first wave started.
extern "C" __global__ void hp_probe(pl_u64* stamps, pl_u32 idx) {
  if (__builtin_amdgcn_workitem_id_x() == 0 && __builtin_amdgcn_workgroup_id_x() == 0) {
    __atomic_store_n(&stamps[idx], wall_clock(), __ATOMIC_RELAXED);
  }
}
