//! Compile-time cross-check: every `AMDKFD_IOC_*` number bindgen evaluated from the header equals
//! the number computed from ('K', nr, direction, size of the argument struct as bindgen laid it
//! out). A mismatch — a header whose structs and ioctl numbers disagree, or a bindgen that
//! evaluated a macro wrongly — stops the build here rather than sending a wrong size to the kernel.
use super::*;
use core::mem::size_of;

macro_rules! check {
    ($($name:ident = $dir:ident($nr:expr, $ty:ty);)*) => {$(
        const _: () = assert!(
            $name as u64 == nix::$dir!(AMDKFD_IOCTL_BASE as u8, $nr, size_of::<$ty>()) as u64,
            concat!(stringify!($name), " from the header disagrees with ('K', nr, sizeof)")
        );
    )*};
}

check! {
    AMDKFD_IOC_GET_VERSION = request_code_read(0x01, kfd_ioctl_get_version_args);
    AMDKFD_IOC_CREATE_QUEUE = request_code_readwrite(0x02, kfd_ioctl_create_queue_args);
    AMDKFD_IOC_DESTROY_QUEUE = request_code_readwrite(0x03, kfd_ioctl_destroy_queue_args);
    AMDKFD_IOC_UPDATE_QUEUE = request_code_write(0x07, kfd_ioctl_update_queue_args);
    AMDKFD_IOC_GET_PROCESS_APERTURES_NEW = request_code_readwrite(0x14, kfd_ioctl_get_process_apertures_new_args);
    AMDKFD_IOC_SET_CU_MASK = request_code_write(0x1A, kfd_ioctl_set_cu_mask_args);
    AMDKFD_IOC_RUNTIME_ENABLE = request_code_readwrite(0x25, kfd_ioctl_runtime_enable_args);
    AMDKFD_IOC_DBG_TRAP = request_code_readwrite(0x26, kfd_ioctl_dbg_trap_args);
}

// The values docs/kfd-facts.md#header-and-bindings records from the 6.12 header: any header of the 1.13+ era must agree.
const _: () = assert!(AMDKFD_IOC_GET_VERSION == 0x8008_4b01);
const _: () = assert!(AMDKFD_IOC_UPDATE_QUEUE == 0x4018_4b07);
const _: () = assert!(AMDKFD_IOC_RUNTIME_ENABLE == 0xc010_4b25);
const _: () = assert!(AMDKFD_IOC_DBG_TRAP == 0xc020_4b26);
// GET_QUEUE_SNAPSHOT entries are 64 bytes in every released header (entry_size lets it grow).
const _: () = assert!(size_of::<kfd_queue_snapshot_entry>() == 64);
