//! The project's patched-kernel ioctls (`patches/` in the repository): `AMDKFD_IOC_PREEMPT_QUEUES`
//! (nr 0x40) and `AMDKFD_IOC_RESUME_QUEUES` (nr 0x41), which preempt and resume the caller's own
//! queues without the debugger API.
//!
//! One source of truth: the `kfd_ioctl.h` hunk of
//! `patches/0004-drm-amdkfd-add-AMDKFD_IOC_PREEMPT_QUEUES-and-AMDKFD_.patch`. This is a
//! hand-written `#[repr(C)]` copy, so that the crate builds against stock headers (where the
//! ioctls are absent and a stock kernel answers ENOTTY). When the header bindgen bound defines
//! `AMDKFD_IOC_PREEMPT_QUEUES` (the `bindgen` feature with a patched tree, e.g. `KFD_IOCTL_H=<patched
//! tree>/include/uapi/linux/kfd_ioctl.h`), `build/generate.rs` sets `cfg(kfd_has_preempt)` and the
//! assertions at the bottom prove, at compile time, that this copy equals the header: size,
//! every field's offset and size, every constant and both request numbers.
//!
//! Layout (40 bytes, no implicit padding, 8-byte aligned):
//!
//! | offset | field             | dir    |
//! |--------|-------------------|--------|
//! | 0      | `queue_array_ptr` | in/out (the ids, rewritten with status bits 31 INVALID / 30 ERROR) |
//! | 8      | `num_queues`      | in (<= 1024; 0 = just report `version`) |
//! | 12     | `flags`           | in (`KFD_PREEMPT_QUEUES_FLAG_*`; unknown -> EINVAL) |
//! | 16     | `grace_period`    | in (with `FLAG_GRACE_PERIOD`, 0..=0xff, ~1K GPU clocks) |
//! | 20     | `version`         | out (`KFD_PREEMPT_QUEUES_VERSION`, written even on failure) |
//! | 24     | `kernel_ns`       | out (unmap/map + fence wait, ns) |
//! | 32     | `num_done`        | out (queues now in the requested state) |
//! | 36     | `pad`             | in (must be 0) |

/// The ABI version the kernel writes back in `version` (this copy's version).
pub const KFD_PREEMPT_QUEUES_VERSION: u32 = 1;
/// At most this many queue ids per call (more: EINVAL).
pub const KFD_PREEMPT_QUEUES_MAX_QUEUES: u32 = 1024;
/// The largest grace period (the CP's field is 8 bits wide; more: EINVAL).
pub const KFD_PREEMPT_QUEUES_MAX_GRACE_PERIOD: u32 = 0xff;
/// `grace_period` is valid; without it the firmware default grace period is used.
pub const KFD_PREEMPT_QUEUES_FLAG_GRACE_PERIOD: u32 = 1 << 0;
/// Every flag PREEMPT knows in ABI version 1 (RESUME knows none).
pub const KFD_PREEMPT_QUEUES_FLAGS_KNOWN: u32 = KFD_PREEMPT_QUEUES_FLAG_GRACE_PERIOD;

/// The patch's own ioctl range, away from upstream's (0x01..`AMDKFD_COMMAND_END`, growing) and
/// from ROCm DKMS's (0x80 and up). `AMDKFD_COMMAND_END` is left alone by the patch, so
/// `kfd::Kfd::probe_nr` (which refuses only the header's own `AMDKFD_COMMAND_START..END`) may
/// probe these numbers with stock and patched headers alike. Whether a kernel has the ioctls is
/// asked by `kfd::Kfd::has_preempt_ioctl` (PREEMPT_QUEUES with no queue ids: `kfd::PreemptProbe`).
pub const AMDKFD_PREEMPT_COMMAND_START: u32 = 0x40;
pub const AMDKFD_PREEMPT_COMMAND_END: u32 = 0x42;
/// `_IOC_NR` of `AMDKFD_IOC_PREEMPT_QUEUES`.
pub const AMDKFD_IOC_PREEMPT_QUEUES_NR: u8 = 0x40;
/// `_IOC_NR` of `AMDKFD_IOC_RESUME_QUEUES`.
pub const AMDKFD_IOC_RESUME_QUEUES_NR: u8 = 0x41;

/// `struct kfd_ioctl_preempt_queues_args` (both ioctls).
#[repr(C)]
#[derive(Debug, Default, Copy, Clone, PartialEq, Eq)]
pub struct kfd_ioctl_preempt_queues_args {
    pub queue_array_ptr: u64,
    pub num_queues: u32,
    pub flags: u32,
    pub grace_period: u32,
    pub version: u32,
    pub kernel_ns: u64,
    pub num_done: u32,
    pub pad: u32,
}

/// `AMDKFD_IOWR(0x40, struct kfd_ioctl_preempt_queues_args)`.
pub const AMDKFD_IOC_PREEMPT_QUEUES: u32 = nix::request_code_readwrite!(
    crate::AMDKFD_IOCTL_BASE as u8,
    AMDKFD_IOC_PREEMPT_QUEUES_NR,
    core::mem::size_of::<kfd_ioctl_preempt_queues_args>()
) as u32;
/// `AMDKFD_IOWR(0x41, struct kfd_ioctl_preempt_queues_args)`.
pub const AMDKFD_IOC_RESUME_QUEUES: u32 = nix::request_code_readwrite!(
    crate::AMDKFD_IOCTL_BASE as u8,
    AMDKFD_IOC_RESUME_QUEUES_NR,
    core::mem::size_of::<kfd_ioctl_preempt_queues_args>()
) as u32;

/// Whether the header these bindings were generated from defines the ioctls (a patched tree).
pub const HEADER_HAS_PREEMPT: bool = cfg!(kfd_has_preempt);

// ---- Always: the layout documented above, and numbers outside the stock ranges.
const _: () = {
    use core::mem::{offset_of, size_of};
    type A = kfd_ioctl_preempt_queues_args;
    assert!(size_of::<A>() == 40 && core::mem::align_of::<A>() == 8);
    assert!(offset_of!(A, queue_array_ptr) == 0 && offset_of!(A, num_queues) == 8);
    assert!(offset_of!(A, flags) == 12 && offset_of!(A, grace_period) == 16);
    assert!(offset_of!(A, version) == 20 && offset_of!(A, kernel_ns) == 24);
    assert!(offset_of!(A, num_done) == 32 && offset_of!(A, pad) == 36);
    assert!(AMDKFD_IOC_PREEMPT_QUEUES == 0xc028_4b40 && AMDKFD_IOC_RESUME_QUEUES == 0xc028_4b41);
    // Upstream's table ends below us; ROCm DKMS starts above us.
    assert!(crate::AMDKFD_COMMAND_END <= AMDKFD_PREEMPT_COMMAND_START && AMDKFD_PREEMPT_COMMAND_END <= 0x80);
};

// ---- With a patched header: this copy equals the patch's definitions exactly.
#[cfg(kfd_has_preempt)]
const _: () = {
    use core::mem::{offset_of, size_of};
    type Mine = kfd_ioctl_preempt_queues_args;
    type Theirs = crate::kfd_ioctl_preempt_queues_args;
    assert!(
        size_of::<Mine>() == size_of::<Theirs>(),
        "struct size differs from the patched header"
    );
    assert!(core::mem::align_of::<Mine>() == core::mem::align_of::<Theirs>());
    macro_rules! same_field {
        ($($f:ident),*) => {$(
            assert!(offset_of!(Mine, $f) == offset_of!(Theirs, $f), concat!("offset of ", stringify!($f), " differs from the patched header"));
            // Field sizes: read through a zeroed value of each struct.
            assert!(
                size_of_field(&Mine::ZERO.$f) == size_of_field(&ZERO_THEIRS.$f),
                concat!("size of ", stringify!($f), " differs from the patched header")
            );
        )*};
    }
    const fn size_of_field<T>(_: &T) -> usize {
        size_of::<T>()
    }
    const ZERO_THEIRS: Theirs = Theirs {
        queue_array_ptr: 0,
        num_queues: 0,
        flags: 0,
        grace_period: 0,
        version: 0,
        kernel_ns: 0,
        num_done: 0,
        pad: 0,
    };
    same_field!(
        queue_array_ptr,
        num_queues,
        flags,
        grace_period,
        version,
        kernel_ns,
        num_done,
        pad
    );
    // `as u64` on both sides: bindgen picks the integer type of each macro.
    macro_rules! same_const {
        ($($c:ident),*) => {$(
            assert!($c as u64 == crate::$c as u64, concat!(stringify!($c), " differs from the patched header"));
        )*};
    }
    same_const!(
        AMDKFD_IOC_PREEMPT_QUEUES,
        AMDKFD_IOC_RESUME_QUEUES,
        KFD_PREEMPT_QUEUES_VERSION,
        KFD_PREEMPT_QUEUES_MAX_QUEUES,
        KFD_PREEMPT_QUEUES_MAX_GRACE_PERIOD,
        KFD_PREEMPT_QUEUES_FLAG_GRACE_PERIOD,
        AMDKFD_PREEMPT_COMMAND_START,
        AMDKFD_PREEMPT_COMMAND_END
    );
};

impl kfd_ioctl_preempt_queues_args {
    /// All fields zero (a `const` `Default`).
    pub const ZERO: Self = Self {
        queue_array_ptr: 0,
        num_queues: 0,
        flags: 0,
        grace_period: 0,
        version: 0,
        kernel_ns: 0,
        num_done: 0,
        pad: 0,
    };
}
