//! The only `unsafe` code of this crate (a private module): one safe function per KFD ioctl.
//!
//! Each function builds or borrows an argument struct from `kfd-sys`, hands a pointer to it to
//! `ioctl(2)` inside one `unsafe` block whose `SAFETY` comment says why the pointers are valid
//! for exactly the sizes the request encodes, and turns the return value into
//! `Result<c_int, Errno>`. The request numbers come from the header (checked against
//! ('K', nr, size) in `kfd-sys`). Nothing here is public outside the crate: [`crate::Kfd`] is
//! the API.
//!
//! Kernel facts that hold for every function here (Linux 6.12, `kfd_ioctl()`):
//! - the kernel dispatches on `_IOC_NR` only and copies `_IOC_SIZE(cmd)` bytes in and out;
//! - an fd opened by another process gives `EBADF` (KFD binds the fd to the opener);
//! - a number outside the table gives `ENOTTY`; a NULL argument gives `EFAULT`.
#![allow(unsafe_code)]

use kfd_sys as sys;
use kfd_sys::preempt as P;
use nix::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd};

type IoctlResult = Result<libc::c_int, Errno>;

// The uapi structs are a few dozen bytes: their sizes fit the u32 fields that carry them.
#[allow(clippy::cast_possible_truncation)]
const SIZE_OF_RUNTIME_INFO: u32 = size_of::<sys::kfd_runtime_info>() as u32;
#[allow(clippy::cast_possible_truncation)]
const SIZE_OF_SNAPSHOT_ENTRY: u32 = size_of::<sys::kfd_queue_snapshot_entry>() as u32;

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
unsafe fn get_version(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_get_version_args) -> IoctlResult {
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
unsafe fn update_queue(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_update_queue_args) -> IoctlResult {
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
unsafe fn runtime_enable(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_runtime_enable_args) -> IoctlResult {
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
unsafe fn dbg_trap(fd: BorrowedFd<'_>, args: *mut sys::kfd_ioctl_dbg_trap_args) -> IoctlResult {
    // SAFETY: see the function's contract.
    unsafe { raw(fd, sys::AMDKFD_IOC_DBG_TRAP, args.cast()) }
}

/// `AMDKFD_IOC_PREEMPT_QUEUES` (`resume` false) or `AMDKFD_IOC_RESUME_QUEUES` (`resume` true):
/// the project's patched-kernel ioctls (nr 0x40/0x41, `patches/`), on this process's own queues,
/// without debug mode. A stock kernel answers ENOTTY. The kernel writes `version` back even on
/// failure, rewrites the id array with status bits (31 INVALID, 30 ERROR) and fills `kernel_ns`
/// and `num_done`. Errnos: EINVAL (more than 1024 ids, NULL array with a count, unknown flag,
/// grace period above 0xff, non-zero pad), EFAULT (id array), EIO (a GPU in reset or its
/// scheduler stopped), EBADF (fd of another process).
///
/// # Safety
/// `args` must be valid for reads and writes of `kfd_ioctl_preempt_queues_args`, and
/// `queue_array_ptr` must be readable and writable for `num_queues` u32s for the duration of the
/// call (or be 0: the kernel refuses a NULL array with a count before touching it).
unsafe fn preempt_queues(fd: BorrowedFd<'_>, resume: bool, args: *mut P::kfd_ioctl_preempt_queues_args) -> IoctlResult {
    let req = if resume {
        P::AMDKFD_IOC_RESUME_QUEUES
    } else {
        P::AMDKFD_IOC_PREEMPT_QUEUES
    };
    // SAFETY: the struct size matches the request's size (asserted in kfd-sys::preempt).
    unsafe { raw(fd, req, args.cast()) }
}

/// PREEMPT_QUEUES / RESUME_QUEUES over `ids`, which the kernel rewrites in place with status
/// bits. Returns the struct the kernel wrote back: with the errno on failure too (kfd_ioctl copies
/// an `_IOWR` struct back whatever the handler returned, and the patched handler fills `version`,
/// `num_done` and `kernel_ns` in every case). An empty `ids` is passed as a NULL array with count
/// 0, which the kernel answers without touching any queue: the probe.
pub(crate) fn preempt_queue_ids(
    fd: BorrowedFd<'_>,
    resume: bool,
    ids: &mut [u32],
    flags: u32,
    grace_period: u32,
) -> Result<P::kfd_ioctl_preempt_queues_args, (Errno, P::kfd_ioctl_preempt_queues_args)> {
    let mut a = P::kfd_ioctl_preempt_queues_args {
        queue_array_ptr: if ids.is_empty() { 0 } else { ids.as_mut_ptr() as u64 },
        num_queues: u32::try_from(ids.len()).map_err(|_| (Errno::EINVAL, P::kfd_ioctl_preempt_queues_args::ZERO))?,
        flags,
        grace_period,
        ..P::kfd_ioctl_preempt_queues_args::ZERO
    };
    // SAFETY: `ids` is readable and writable for `num_queues` u32s for the whole call.
    match unsafe { preempt_queues(fd, resume, &mut a) } {
        Ok(_) => Ok(a),
        // kfd_ioctl copies the struct back whatever the handler returned.
        Err(e) => Err((e, a)),
    }
}

/// PREEMPT_QUEUES / RESUME_QUEUES with a NULL id array and `num_queues` ids: for tests of the
/// kernel's argument checks (a conforming kernel answers EINVAL when `num_queues > 0`). Safe: no
/// Rust object lives at address 0 (and `vm.mmap_min_addr` keeps it unmapped), so even a kernel
/// that wrongly wrote there could not touch this process's memory.
pub(crate) fn preempt_null_array(fd: BorrowedFd<'_>, resume: bool, num_queues: u32) -> IoctlResult {
    let mut a = P::kfd_ioctl_preempt_queues_args {
        num_queues,
        ..P::kfd_ioctl_preempt_queues_args::ZERO
    };
    // SAFETY: the struct is ours and of the request's size; the array pointer is NULL (see above).
    unsafe { preempt_queues(fd, resume, &mut a) }
}

/// Size of the scratch buffer [`probe`] hands to the kernel.
pub(crate) const PROBE_SIZE: usize = 64;

/// Issues `_IOWR('K', nr, 64)` with a zeroed 64-byte buffer, to learn whether this kernel
/// implements ioctl number `nr` (ENOTTY: no). Safe for any `nr` because the buffer is ours and
/// large enough for whatever the kernel copies (`_IOC_SIZE` = 64), but a known `nr` would run
/// that ioctl with zeroed arguments: callers restrict `nr` (see `Kfd::probe_nr`).
pub(crate) fn probe(fd: BorrowedFd<'_>, nr: u8, buf: &mut [u8; PROBE_SIZE]) -> IoctlResult {
    // Request codes are 32 bits by construction (dir 2 + size 14 + type 8 + nr 8).
    #[allow(clippy::cast_possible_truncation)]
    let req = nix::request_code_readwrite!(sys::AMDKFD_IOCTL_BASE, nr, PROBE_SIZE) as u32;
    // SAFETY: `buf` is valid for reads and writes of PROBE_SIZE bytes, which is the size the
    // request encodes, so the kernel's copy_from_user/copy_to_user stay inside it.
    unsafe { raw(fd, req, buf.as_mut_ptr().cast()) }
}

/// Ends the process with `code` through `_exit(2)`: no atexit handlers, no destructors. The
/// kernel then releases `/dev/kfd` itself (debug mode off, queues destroyed), which a runtime's
/// atexit teardown cannot do while this process holds debug mode on (see `kfd::exit_now`).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions; it never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// Forks, runs `call` on `fd` in the child, and returns the child's errno (`None` if the call
/// succeeded). `call` must be async-signal-safe: build its arguments on the stack and issue
/// one ioctl, nothing else (no allocation, no lock, no printing).
fn errno_in_forked_child(fd: BorrowedFd<'_>, call: fn(BorrowedFd<'_>) -> IoctlResult) -> Result<Option<Errno>, Errno> {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    // SAFETY: the child only runs `call` (an ioctl(2) on stack data, by the contract above) and
    // _exit(2), all async-signal-safe, so forking a multithreaded process is sound here; it
    // touches no lock, allocator or Rust runtime state.
    match unsafe { fork() }? {
        ForkResult::Child => {
            let code = match call(fd) {
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

/// Forks, calls GET_VERSION on `fd` in the child, and returns the child's errno (`None` if the
/// call succeeded). KFD must answer EBADF: the fd belongs to the parent process.
///
/// Used by tests and by `preempt-lat validate` to check that KFD refuses a foreign process.
pub(crate) fn get_version_from_forked_child(fd: BorrowedFd<'_>) -> Result<Option<Errno>, Errno> {
    errno_in_forked_child(fd, |fd| {
        let mut v = sys::kfd_ioctl_get_version_args::default();
        // SAFETY: `v` is a valid get_version struct on the child's stack.
        unsafe { get_version(fd, &mut v) }
    })
}

/// Forks, issues a no-op PREEMPT_QUEUES (no ids) on `fd` in the child, and returns the child's
/// errno (`None` if the call succeeded). A patched KFD must answer EBADF (the fd belongs to the
/// parent); a stock one ENOTTY (unknown numbers are refused before the owner check).
pub(crate) fn preempt_probe_from_forked_child(fd: BorrowedFd<'_>) -> Result<Option<Errno>, Errno> {
    errno_in_forked_child(fd, |fd| {
        preempt_queue_ids(fd, false, &mut [], 0, 0)
            .map(|_| 0)
            .map_err(|(e, _)| e)
    })
}

// ---- Safe entry points: each builds its argument struct from borrowed Rust memory, so the
// ---- pointers handed to the kernel are valid for exactly the sizes they claim.

/// GET_VERSION into `args`.
pub(crate) fn get_version_checked(fd: BorrowedFd<'_>, args: &mut sys::kfd_ioctl_get_version_args) -> IoctlResult {
    // SAFETY: `args` is a live, exclusively borrowed struct of the request's size.
    unsafe { get_version(fd, args) }
}

/// UPDATE_QUEUE with `args` (no pointer in it is dereferenced by the kernel).
pub(crate) fn update_queue_checked(fd: BorrowedFd<'_>, args: &mut sys::kfd_ioctl_update_queue_args) -> IoctlResult {
    // SAFETY: as above; `ring_base_address` is only validated against GPU VA mappings.
    unsafe { update_queue(fd, args) }
}

/// RUNTIME_ENABLE with `args` (`r_debug` is stored, never dereferenced, by the kernel).
pub(crate) fn runtime_enable_checked(fd: BorrowedFd<'_>, args: &mut sys::kfd_ioctl_runtime_enable_args) -> IoctlResult {
    // SAFETY: as above.
    unsafe { runtime_enable(fd, args) }
}

fn dbg_args(pid: u32, op: sys::kfd_dbg_trap_operations) -> sys::kfd_ioctl_dbg_trap_args {
    sys::kfd_ioctl_dbg_trap_args {
        pid,
        op,
        ..Default::default()
    }
}

/// DBG_TRAP ops without pointers in their arguments (DISABLE, SEND_RUNTIME_EVENT,
/// QUERY_DEBUG_EVENT): `fill` sets the union member, the kernel's answer is returned in place.
pub(crate) fn dbg_plain(
    fd: BorrowedFd<'_>,
    pid: u32,
    op: sys::kfd_dbg_trap_operations,
    fill: impl FnOnce(&mut sys::kfd_ioctl_dbg_trap_args__bindgen_ty_1),
) -> Result<sys::kfd_ioctl_dbg_trap_args, Errno> {
    assert!(
        matches!(
            op,
            sys::KFD_IOC_DBG_TRAP_DISABLE
                | sys::KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT
                | sys::KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT
        ),
        "dbg_plain is only for pointer-free ops"
    );
    let mut a = dbg_args(pid, op);
    fill(&mut a.__bindgen_anon_1);
    // SAFETY: these ops' union members hold integers only; nothing is dereferenced.
    unsafe { dbg_trap(fd, &mut a) }?;
    Ok(a)
}

/// DBG_TRAP ENABLE: `rinfo` receives `struct kfd_runtime_info`, `dbg_fd` is the event fd.
pub(crate) fn dbg_enable(
    fd: BorrowedFd<'_>,
    pid: u32,
    exception_mask: u64,
    rinfo: &mut sys::kfd_runtime_info,
    dbg_fd: BorrowedFd<'_>,
) -> IoctlResult {
    let mut a = dbg_args(pid, sys::KFD_IOC_DBG_TRAP_ENABLE);
    a.__bindgen_anon_1.enable = sys::kfd_ioctl_dbg_trap_enable_args {
        exception_mask,
        rinfo_ptr: rinfo as *mut _ as u64,
        rinfo_size: SIZE_OF_RUNTIME_INFO,
        // An open fd is never negative.
        dbg_fd: dbg_fd.as_raw_fd().unsigned_abs(),
    };
    // SAFETY: `rinfo` is writable for exactly `rinfo_size` bytes and `dbg_fd` is open, both
    // borrowed for the whole call.
    unsafe { dbg_trap(fd, &mut a) }
}

/// DBG_TRAP SUSPEND_QUEUES (`suspend` true) or RESUME_QUEUES over `ids`, which the kernel
/// rewrites in place with status bits. Returns the ioctl's value (the number of queues done).
pub(crate) fn dbg_queue_ids(
    fd: BorrowedFd<'_>,
    pid: u32,
    suspend: bool,
    ids: &mut [u32],
    grace: u32,
    clear_mask: u64,
) -> IoctlResult {
    let ptr = ids.as_mut_ptr() as u64;
    let n = u32::try_from(ids.len()).map_err(|_| Errno::EINVAL)?;
    let mut a;
    if suspend {
        a = dbg_args(pid, sys::KFD_IOC_DBG_TRAP_SUSPEND_QUEUES);
        a.__bindgen_anon_1.suspend_queues = sys::kfd_ioctl_dbg_trap_suspend_queues_args {
            exception_mask: clear_mask,
            queue_array_ptr: ptr,
            num_queues: n,
            grace_period: grace,
        };
    } else {
        a = dbg_args(pid, sys::KFD_IOC_DBG_TRAP_RESUME_QUEUES);
        a.__bindgen_anon_1.resume_queues = sys::kfd_ioctl_dbg_trap_resume_queues_args {
            queue_array_ptr: ptr,
            num_queues: n,
            pad: 0,
        };
    }
    // SAFETY: `ids` is readable and writable for `num_queues` u32s for the whole call.
    unsafe { dbg_trap(fd, &mut a) }
}

/// DBG_TRAP GET_QUEUE_SNAPSHOT into `buf` (may be empty: then only the count is returned).
/// Returns the total number of queues, which may exceed `buf.len()`.
pub(crate) fn dbg_queue_snapshot(
    fd: BorrowedFd<'_>,
    pid: u32,
    clear_mask: u64,
    buf: &mut [sys::kfd_queue_snapshot_entry],
) -> Result<u32, Errno> {
    let mut a = dbg_args(pid, sys::KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT);
    a.__bindgen_anon_1.queue_snapshot = sys::kfd_ioctl_dbg_trap_queue_snapshot_args {
        exception_mask: clear_mask,
        snapshot_buf_ptr: if buf.is_empty() { 0 } else { buf.as_mut_ptr() as u64 },
        num_queues: u32::try_from(buf.len()).map_err(|_| Errno::EINVAL)?,
        entry_size: SIZE_OF_SNAPSHOT_ENTRY,
    };
    // SAFETY: `buf` is writable for `num_queues * entry_size` bytes for the whole call.
    unsafe { dbg_trap(fd, &mut a) }?;
    // SAFETY: the union member is integers only, any bit pattern is valid.
    Ok(unsafe { a.__bindgen_anon_1.queue_snapshot }.num_queues)
}

/// The QUERY_DEBUG_EVENT member of an answered DBG_TRAP.
pub(crate) fn query_debug_event_out(
    a: &sys::kfd_ioctl_dbg_trap_args,
) -> sys::kfd_ioctl_dbg_trap_query_debug_event_args {
    // SAFETY: every union member is plain integers, so any bit pattern is a valid value.
    unsafe { a.__bindgen_anon_1.query_debug_event }
}
