//! Errors of the KFD layer: which ioctl (and op), which queue, the errno, and what that errno
//! means for that ioctl on Linux 6.12's amdkfd.
use nix::errno::Errno;
use std::fmt;

/// The KFD operation that failed. `DbgTrap` carries the op name (ENABLE, SUSPEND_QUEUES, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `open("/dev/kfd")`.
    Open,
    GetVersion,
    UpdateQueue,
    RuntimeEnable,
    DbgTrap(DbgOp),
    /// An ioctl number probed on purpose (unknown or private numbers).
    Probe(u8),
    /// `AMDKFD_IOC_PREEMPT_QUEUES` (the project's patched kernel, nr 0x40).
    PreemptQueues,
    /// `AMDKFD_IOC_RESUME_QUEUES` (the project's patched kernel, nr 0x41).
    ResumeQueues,
}

/// The DBG_TRAP ops this crate issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbgOp {
    Enable,
    Disable,
    SendRuntimeEvent,
    SuspendQueues,
    ResumeQueues,
    QueryDebugEvent,
    GetQueueSnapshot,
}

impl DbgOp {
    /// The op's name as in `enum kfd_dbg_trap_operations`, without the `KFD_IOC_DBG_TRAP_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            DbgOp::Enable => "ENABLE",
            DbgOp::Disable => "DISABLE",
            DbgOp::SendRuntimeEvent => "SEND_RUNTIME_EVENT",
            DbgOp::SuspendQueues => "SUSPEND_QUEUES",
            DbgOp::ResumeQueues => "RESUME_QUEUES",
            DbgOp::QueryDebugEvent => "QUERY_DEBUG_EVENT",
            DbgOp::GetQueueSnapshot => "GET_QUEUE_SNAPSHOT",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Open => f.write_str("open(/dev/kfd)"),
            Op::GetVersion => f.write_str("AMDKFD_IOC_GET_VERSION"),
            Op::UpdateQueue => f.write_str("AMDKFD_IOC_UPDATE_QUEUE"),
            Op::RuntimeEnable => f.write_str("AMDKFD_IOC_RUNTIME_ENABLE"),
            Op::DbgTrap(op) => write!(f, "AMDKFD_IOC_DBG_TRAP({})", op.name()),
            Op::Probe(nr) => write!(f, "ioctl probe nr 0x{nr:02x}"),
            Op::PreemptQueues => f.write_str("AMDKFD_IOC_PREEMPT_QUEUES"),
            Op::ResumeQueues => f.write_str("AMDKFD_IOC_RESUME_QUEUES"),
        }
    }
}

/// A failed KFD call. `Display` gives one line a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KfdError {
    pub op: Op,
    /// The KFD queue id the call was about, where there is one.
    pub queue: Option<u32>,
    pub errno: Errno,
    /// What this errno means for this call (from the 6.12 kernel source).
    pub meaning: &'static str,
    /// PREEMPT_QUEUES / RESUME_QUEUES only: what the kernel reported although the call failed
    /// after queues may have changed (EIO: a device that owns a requested queue failed, its
    /// queues carry ERROR; EFAULT on the id write-back: `num_done` is valid, the statuses may be
    /// partly stale). The patched kernel writes `num_done` and `kernel_ns` in every case.
    pub partial: Option<Box<crate::PreemptOutcome>>,
}

impl KfdError {
    pub fn new(op: Op, queue: Option<u32>, errno: Errno) -> Self {
        KfdError {
            partial: None,
            op,
            queue,
            errno,
            meaning: meaning(op, errno),
        }
    }
}

impl fmt::Display for KfdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.op)?;
        if let Some(q) = self.queue {
            write!(f, " on queue {q}")?;
        }
        // nix prints an Errno as "ENAME: description".
        write!(f, ": {}: {}", self.errno, self.meaning)?;
        if let Some(p) = &self.partial {
            let errors = p
                .statuses
                .iter()
                .filter(|s| s.state == crate::QueueState::Error)
                .count();
            write!(
                f,
                " (the kernel reports {} queue(s) done, {errors} with ERROR)",
                p.num_done
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for KfdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.errno)
    }
}

/// What `errno` means for `op`, as read from amdkfd in Linux 6.12 (kfd_chardev.c,
/// kfd_debug.c, kfd_device_queue_manager.c). Specific cases first, then the generic ones.
pub fn meaning(op: Op, errno: Errno) -> &'static str {
    use DbgOp::*;
    use Errno::*;
    match (op, errno) {
        (Op::Open, ENOENT | ENODEV | ENXIO) => {
            "no /dev/kfd: amdgpu with HSA/KFD support is not loaded, or there is no AMD GPU here"
        }
        (Op::Open, EACCES | EPERM) => {
            "permission denied: add the user to the 'render' group (and 'video' on older distributions)"
        }
        (Op::UpdateQueue, EFAULT) => {
            "unknown queue id, or the ring is not mapped at that address with that exact size \
             (6.12 validates the ring's GPU VA mapping)"
        }
        (Op::UpdateQueue, EINVAL) => {
            "bad arguments: percentage above 100, priority above 15, or a ring size that is not a \
             power of two"
        }
        (Op::RuntimeEnable, EBUSY) => "the runtime is already enabled for this process",
        (Op::RuntimeEnable, EEXIST) => {
            "queues already exist: the runtime must be enabled before the first queue is created"
        }
        (Op::RuntimeEnable, EINTR) => {
            "interrupted while waiting for the debugger to acknowledge the runtime enable \
             (SEND_RUNTIME_EVENT with EC_PROCESS_RUNTIME)"
        }
        (Op::DbgTrap(Enable), EALREADY) => {
            "debugging is already on for this process (rocgdb, ROCr's GPU core dump, or an earlier \
             ENABLE got there first)"
        }
        (Op::DbgTrap(Enable), EPERM) => "the target process is not ptraced by the caller",
        (Op::DbgTrap(SuspendQueues | ResumeQueues), EPERM) => {
            "the runtime is not enabled for this process (AMDKFD_IOC_RUNTIME_ENABLE first; ROCr \
             does it at init)"
        }
        (Op::DbgTrap(SuspendQueues | ResumeQueues), EINVAL) => {
            "debug trap not enabled for this process, more than 1024 queue ids, a NULL id array, \
             or sched_policy=2 (no HWS)"
        }
        (Op::DbgTrap(GetQueueSnapshot), EINVAL) => {
            "debug trap not enabled for this process, entry_size 0, or sched_policy=2 (no HWS)"
        }
        (Op::DbgTrap(_), EINVAL) => {
            "debug trap not enabled for this process (ENABLE first), or sched_policy=2 (no HWS), \
             where the debugger API is refused"
        }
        (Op::DbgTrap(_), ESRCH) => "no KFD process with that pid",
        (Op::DbgTrap(QueryDebugEvent), EAGAIN) => "no pending debug event matches the mask",
        (Op::PreemptQueues | Op::ResumeQueues, ENOTTY) => {
            "this kernel lacks the project's preempt ioctls (nr 0x40/0x41 from patches/): a stock \
             kernel answers ENOTTY"
        }
        (Op::PreemptQueues | Op::ResumeQueues, EINVAL) => {
            "bad arguments: more than 1024 queue ids, a NULL id array with a count, an unknown flag \
             (RESUME takes none), a grace period above 255, or a non-zero pad"
        }
        (Op::PreemptQueues | Op::ResumeQueues, EIO) => {
            "a GPU that owns a requested queue is in reset or failed the runlist update: its requested \
             queues come back with ERROR (HWS: all of them rolled back); queues on other GPUs may be done"
        }
        (Op::PreemptQueues | Op::ResumeQueues, ENOMEM) => "the kernel could not allocate the id copy: nothing changed",
        (Op::PreemptQueues | Op::ResumeQueues, EFAULT) => "the kernel could not read or write the queue id array",
        (_, ENOTTY) => {
            "this kernel's KFD does not implement this ioctl number (too old a kernel, or a \
             patched-kernel ioctl this kernel lacks)"
        }
        (_, EBADF) => {
            "the KFD fd belongs to another process (opened before fork?): KFD binds an fd to the \
             process that opened it"
        }
        (_, EFAULT) => "the kernel could not read or write the argument memory",
        (_, EIO) => "the GPU is in reset",
        (_, EINVAL) => "the kernel rejected the arguments",
        _ => "unexpected errno for this call",
    }
}

/// A result of a KFD call.
pub type Result<T> = std::result::Result<T, KfdError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The patch series' PREEMPT/RESUME_QUEUES fail with EIO only for a device that owns a
    /// requested queue, and still report num_done and per-queue ERROR bits; the error says so.
    #[test]
    fn a_preempt_failure_carries_what_the_kernel_reported() {
        let statuses = vec![
            crate::QueueStatus::decode(3, 3),
            crate::QueueStatus::decode(9, 9 | kfd_sys::KFD_DBG_QUEUE_ERROR_MASK),
        ];
        let mut e = KfdError::new(Op::PreemptQueues, None, Errno::EIO);
        assert!(
            e.meaning.contains("ERROR") && e.meaning.contains("other GPUs"),
            "{}",
            e.meaning
        );
        e.partial = Some(Box::new(crate::PreemptOutcome {
            statuses,
            kernel_ns: 0,
            num_done: 1,
            abi_version: 1,
            raw: vec![3, 9 | kfd_sys::KFD_DBG_QUEUE_ERROR_MASK],
        }));
        let line = e.to_string();
        assert!(line.contains("1 queue(s) done, 1 with ERROR"), "{line}");
        assert_eq!(
            meaning(Op::ResumeQueues, Errno::ENOMEM),
            "the kernel could not allocate the id copy: nothing changed"
        );
    }

    #[test]
    fn update_queue_errnos_say_what_they_mean_for_that_call() {
        let e = KfdError::new(Op::UpdateQueue, Some(0xdead), Errno::EFAULT);
        assert!(
            e.to_string()
                .starts_with("AMDKFD_IOC_UPDATE_QUEUE on queue 57005: EFAULT"),
            "{e}"
        );
        assert!(e.to_string().contains("unknown queue id"), "{e}");
        assert!(meaning(Op::UpdateQueue, Errno::EINVAL).contains("percentage above 100"));
        assert_eq!(
            std::error::Error::source(&e).map(|s| s.to_string()),
            Some(Errno::EFAULT.to_string())
        );
    }
}
