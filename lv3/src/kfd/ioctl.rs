//! The only `unsafe` code of this crate: one thin function per KFD ioctl.
//!
//! Each function passes a pointer to an argument struct from `kfd-sys` to `ioctl(2)` and turns
//! the return value into `Result<c_int, Errno>`. The request numbers come from the header
//! (checked against ('K', nr, size) in `kfd-sys`). The safe layer (`super::Kfd`) owns the fd,
//! builds the argument structs and keeps the memory they point to alive.
//!
//! Kernel facts that hold for every function here (Linux 6.12, `kfd_ioctl()`):
//! - the kernel dispatches on `_IOC_NR` only and copies `_IOC_SIZE(cmd)` bytes in and out;
//! - an fd opened by another process gives `EBADF` (KFD binds the fd to the opener);
//! - a number outside the table gives `ENOTTY`; a NULL argument gives `EFAULT`.
use kfd_sys as sys;
use nix::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd};

type IoctlResult = Result<libc::c_int, Errno>;

/// # Safety
/// `arg` must point to memory valid for reads and writes of `_IOC_SIZE(req)` bytes for the
/// duration of the call, and every user pointer embedded in it must satisfy the ioctl's
/// documented requirements.
unsafe fn raw(fd: BorrowedFd<'_>, req: u32, arg: *mut libc::c_void) -> IoctlResult {
    // SAFETY: forwarded from the caller; `fd` is a live descriptor for the call's duration.
    Errno::result(unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) })
}

/// `AMDKFD_IOC_GET_VERSION`: fills `major_version`/`minor_version`. Never fails on a KFD fd of
/// this process.
///
/// # Safety
/// `args` must be valid for writes of `kfd_ioctl_get_version_args`.
pub unsafe fn get_version(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_get_version_args) -> IoctlResult {
    // SAFETY: the struct size matches the request's size (checked in kfd-sys).
    unsafe { raw(fd, sys::AMDKFD_IOC_GET_VERSION, args.cast()) }
}

/// `AMDKFD_IOC_UPDATE_QUEUE`: sets ring address/size, percentage (bits 0-7; bits 8-15 are the
/// PM4 target XCC) and priority of one of this process's queues. Address 0 with size 0 and
/// percentage 0 makes the queue inactive (CWSR-saved and unmapped); a restore must pass the
/// original ring address and exact size. Errnos: EINVAL (percentage > 100, priority > 15,
/// size not a power of two), EFAULT (unknown queue id, or ring not mapped at that address/size).
///
/// # Safety
/// `args` must be valid for reads of `kfd_ioctl_update_queue_args`. `ring_base_address` is
/// only checked by the kernel against this process's GPU VA mappings, never dereferenced here.
pub unsafe fn update_queue(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_update_queue_args) -> IoctlResult {
    // SAFETY: see the function's contract.
    unsafe { raw(fd, sys::AMDKFD_IOC_UPDATE_QUEUE, args.cast()) }
}

/// `AMDKFD_IOC_RUNTIME_ENABLE`: tells KFD the runtime (ROCr) is up (`mode_mask` bit 0) or going
/// down. Errnos: EBUSY (already enabled), EEXIST (queues already exist). If the debug trap is
/// already enabled it BLOCKS (interruptibly, EINTR) until the debugger acknowledges with
/// DBG_TRAP SEND_RUNTIME_EVENT(EC_PROCESS_RUNTIME).
///
/// # Safety
/// `args` must be valid for reads and writes of `kfd_ioctl_runtime_enable_args`; `r_debug` is
/// stored by the kernel and handed to a debugger, never dereferenced by it.
pub unsafe fn runtime_enable(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_runtime_enable_args) -> IoctlResult {
    // SAFETY: see the function's contract.
    unsafe { raw(fd, sys::AMDKFD_IOC_RUNTIME_ENABLE, args.cast()) }
}

/// `AMDKFD_IOC_DBG_TRAP`: the debugger API (KFD >= 1.13). `args.op` selects the operation and
/// the union member. Common errnos: ESRCH (no such pid), EPERM (target not ptraced, or
/// SUSPEND/RESUME without the runtime enabled), EINVAL (any op but ENABLE before ENABLE;
/// sched_policy=2), EALREADY (ENABLE twice). SUSPEND_QUEUES returns the number suspended and
/// rewrites the id array in place (bit 31 INVALID, bit 30 ERROR).
///
/// # Safety
/// `args` must be valid for reads and writes of `kfd_ioctl_dbg_trap_args`, and the pointers in
/// the selected union member must be valid: ENABLE `rinfo_ptr` writable for `rinfo_size` bytes
/// and `dbg_fd` an open fd; SUSPEND/RESUME `queue_array_ptr` readable and writable for
/// `num_queues` u32s; GET_QUEUE_SNAPSHOT `snapshot_buf_ptr` writable for
/// `num_queues * entry_size` bytes (or `num_queues == 0`).
pub unsafe fn dbg_trap(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_dbg_trap_args) -> IoctlResult {
    // SAFETY: see the function's contract.
    unsafe { raw(fd, sys::AMDKFD_IOC_DBG_TRAP, args.cast()) }
}

/// Size of the scratch buffer [`probe`] hands to the kernel.
pub const PROBE_SIZE: usize = 64;

/// Issues `_IOWR('K', nr, 64)` with a zeroed 64-byte buffer, to learn whether this kernel
/// implements ioctl number `nr` (ENOTTY: no). Safe for any `nr` because the buffer is ours and
/// large enough for whatever the kernel copies (`_IOC_SIZE` = 64), but a known `nr` would run
/// that ioctl with zeroed arguments: callers restrict `nr` (see `Kfd::probe_nr`).
pub fn probe(fd: BorrowedFd<'_>, nr: u8, buf: &mut [u8; PROBE_SIZE]) -> IoctlResult {
    let req = nix::request_code_readwrite!(sys::AMDKFD_IOCTL_BASE, nr, PROBE_SIZE) as u32;
    // SAFETY: `buf` is valid for reads and writes of PROBE_SIZE bytes, which is the size the
    // request encodes, so the kernel's copy_from_user/copy_to_user stay inside it.
    unsafe { raw(fd, req, buf.as_mut_ptr().cast()) }
}

/// Forks, calls GET_VERSION on `fd` in the child, and returns the child's errno (`None` if the
/// call succeeded). KFD must answer EBADF: the fd belongs to the parent process.
///
/// Used by tests and by `preempt-lat validate` to check that KFD refuses a foreign process.
pub fn get_version_from_forked_child(fd: BorrowedFd<'_>) -> Result<Option<Errno>, Errno> {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    // SAFETY: the child only calls ioctl(2) and _exit(2), both async-signal-safe, so forking a
    // multithreaded process is sound here; it touches no lock, allocator or Rust runtime state.
    match unsafe { fork() }? {
        ForkResult::Child => {
            let mut v = sys::kfd_ioctl_get_version_args::default();
            // SAFETY: `v` is a valid get_version struct on the child's stack.
            let r = unsafe { get_version(fd, &mut v) };
            let code = match r {
                Ok(_) => 0,
                Err(e) => (e as i32).clamp(1, 255),
            };
            // SAFETY: _exit is async-signal-safe and skips atexit handlers and stdio flushing
            // that must not run in a forked copy of a multithreaded process.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None)? {
            WaitStatus::Exited(_, 0) => Ok(None),
            WaitStatus::Exited(_, code) => Ok(Some(Errno::from_raw(code))),
            _ => Err(Errno::ECHILD),
        },
    }
}

/// The GET_QUEUE_SNAPSHOT member of DBG_TRAP's argument union, after the kernel wrote it.
pub fn snapshot_out(a: &sys::kfd_ioctl_dbg_trap_args) -> sys::kfd_ioctl_dbg_trap_queue_snapshot_args {
    // SAFETY: every union member is plain integers, so any bit pattern is a valid value; the
    // union is zero-initialised by `Default` before use.
    unsafe { a.__bindgen_anon_1.queue_snapshot }
}

/// The QUERY_DEBUG_EVENT member of DBG_TRAP's argument union, after the kernel wrote it.
pub fn query_debug_event_out(a: &sys::kfd_ioctl_dbg_trap_args) -> sys::kfd_ioctl_dbg_trap_query_debug_event_args {
    // SAFETY: as in `snapshot_out`.
    unsafe { a.__bindgen_anon_1.query_debug_event }
}
