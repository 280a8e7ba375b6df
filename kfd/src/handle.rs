//! The safe KFD handle: typed calls over the private ioctl wrappers (`crate::ioctl`).
//!
//! [`KfdOps`] is the same API as a trait, so that preemption mechanisms can be tested against a
//! recording fake that models the kernel's errnos.
use crate::error::{DbgOp, KfdError, Op, Result};
use crate::ioctl;
use crate::probe::PreemptProbe;
use crate::types::*;

use kfd_sys as sys;

use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;

/// The KFD character device.
pub const KFD_DEVICE: &str = "/dev/kfd";
/// SUSPEND_QUEUES / RESUME_QUEUES take at most this many ids (the kernel's `get_queue_ids`
/// refuses more with EINVAL).
pub const MAX_QUEUE_IDS: usize = 1024;

/// The KFD calls the preemption mechanisms need, as a trait: [`Kfd`] is the real one.
pub trait KfdOps {
    fn version(&self) -> Result<KfdVersion>;
    fn update_queue(&self, queue: QueueId, update: &QueueUpdate) -> Result<()>;
    fn runtime_enable(&self, r_debug: u64) -> Result<u32>;
    fn runtime_disable(&self) -> Result<()>;
    fn dbg_enable(&self, exception_mask: u64, dbg_fd: BorrowedFd<'_>) -> Result<RuntimeInfo>;
    fn dbg_disable(&self) -> Result<()>;
    fn suspend_queues(&self, ids: &[QueueId], grace: GracePeriod, clear_mask: u64) -> Result<Vec<QueueStatus>>;
    fn resume_queues(&self, ids: &[QueueId]) -> Result<Vec<QueueStatus>>;
    fn queue_snapshot(&self, clear_mask: u64) -> Result<Vec<QueueSnapshot>>;
    fn query_debug_event(&self, mask: u64) -> Result<DebugEvent>;
    fn send_runtime_event(&self, mask: u64, gpu_id: u32, queue_id: QueueId) -> Result<()>;

    /// The patched kernel's PREEMPT_QUEUES (see [`Kfd::preempt_queues`]). The default answers
    /// ENOTTY, like a stock kernel, so fakes need not implement it.
    fn preempt_queues(&self, ids: &[QueueId], grace: GracePeriod, flags: u32) -> Result<PreemptOutcome> {
        let _ = (ids, grace, flags);
        Err(KfdError::new(Op::PreemptQueues, None, Errno::ENOTTY))
    }
    /// The patched kernel's RESUME_QUEUES (see [`Kfd::resume_queues_patched`]); default ENOTTY.
    fn resume_queues_patched(&self, ids: &[QueueId]) -> Result<PreemptOutcome> {
        let _ = ids;
        Err(KfdError::new(Op::ResumeQueues, None, Errno::ENOTTY))
    }
    /// The answer to the patched preempt ioctls' probe (see [`Kfd::preempt_probe`]); default
    /// absent with ENOTTY, like a stock upstream kernel.
    fn preempt_probe(&self) -> Result<PreemptProbe> {
        Ok(PreemptProbe::AbsentEnotty)
    }
    /// The patched preempt ioctls' ABI version, `None` if absent (either answer).
    fn preempt_abi_version(&self) -> Result<Option<u32>> {
        self.preempt_probe().map(PreemptProbe::version)
    }
}

/// An open `/dev/kfd`. KFD binds the fd to the process that opened it: do not use it after
/// `fork` (the child gets EBADF).
#[derive(Debug)]
pub struct Kfd {
    file: File,
    pid: u32,
    /// GET_QUEUE_SNAPSHOT's entry buffer, kept between calls at the last size the kernel
    /// reported: with the process's queue count unchanged, one ioctl fills it (a fresh empty
    /// buffer costs a sizing call first, and the kernel clears exception bits only for entries
    /// it copied out, so the sizing call cannot do the clearing).
    snapshot_buf: std::sync::Mutex<Vec<sys::kfd_queue_snapshot_entry>>,
}

impl Kfd {
    /// Opens `/dev/kfd` read-write, close-on-exec.
    pub fn open() -> Result<Self> {
        Self::open_path(Path::new(KFD_DEVICE))
    }

    /// Opens a KFD device node at `path`.
    pub fn open_path(path: &Path) -> Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| {
            let errno = e.raw_os_error().map(Errno::from_raw).unwrap_or(Errno::EIO);
            KfdError::new(Op::Open, None, errno)
        })?;
        Ok(Kfd {
            file,
            pid: std::process::id(),
            snapshot_buf: std::sync::Mutex::default(),
        })
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    fn dbg_err(op: DbgOp, queue: Option<QueueId>) -> impl FnOnce(Errno) -> KfdError {
        move |e| KfdError::new(Op::DbgTrap(op), queue, e)
    }

    /// Refuses to probe the numbers this header defines (`AMDKFD_COMMAND_START..END`): those are
    /// real ioctls, and a probe would run one with zeroed arguments.
    fn check_probe_nr(nr: u8) -> Result<()> {
        if (sys::AMDKFD_COMMAND_START..sys::AMDKFD_COMMAND_END).contains(&u32::from(nr)) {
            return Err(KfdError {
                partial: None,
                op: Op::Probe(nr),
                queue: None,
                errno: Errno::EINVAL,
                meaning: "refused: numbers from AMDKFD_COMMAND_START to AMDKFD_COMMAND_END are real ioctls of this header",
            });
        }
        Ok(())
    }

    /// The kernel's answer to ioctl number `nr` with a zeroed 64-byte argument (`None`: it
    /// succeeded). KFD's table is indexed by nr alone: ENOTTY means the number does not exist.
    /// Only numbers outside this header's own range may be probed (see `check_probe_nr`).
    pub fn probe_nr_errno(&self, nr: u8) -> Result<Option<Errno>> {
        Self::check_probe_nr(nr)?;
        let mut buf = [0u8; ioctl::PROBE_SIZE];
        Ok(ioctl::probe(self.fd(), nr, &mut buf).err())
    }

    /// Whether this kernel implements ioctl number `nr`: any answer but ENOTTY (upstream: past
    /// the table's end) or EINVAL (ROCm's DKMS driver: a hole in its table, see
    /// [`PreemptProbe`]). Same restriction as [`Kfd::probe_nr_errno`]; the numbers it allows are
    /// this project's own, whose handlers never answer a zeroed argument with EINVAL.
    pub fn probe_nr(&self, nr: u8) -> Result<bool> {
        Ok(!matches!(self.probe_nr_errno(nr)?, Some(Errno::ENOTTY | Errno::EINVAL)))
    }

    /// What a forked child gets when it uses this fd (KFD must say EBADF).
    pub fn errno_in_forked_child(&self) -> std::result::Result<Option<Errno>, Errno> {
        ioctl::get_version_from_forked_child(self.fd())
    }

    /// What a forked child gets when it issues the patched PREEMPT_QUEUES (no ids) on this fd:
    /// EBADF on a patched kernel (the fd belongs to the parent), ENOTTY on a stock one (the
    /// number is rejected before the owner check).
    pub fn preempt_errno_in_forked_child(&self) -> std::result::Result<Option<Errno>, Errno> {
        ioctl::preempt_probe_from_forked_child(self.fd())
    }

    /// The raw fd number (for logs).
    pub fn raw_fd(&self) -> i32 {
        self.file.as_raw_fd()
    }
}

impl KfdOps for Kfd {
    fn version(&self) -> Result<KfdVersion> {
        let mut a = sys::kfd_ioctl_get_version_args::default();
        ioctl::get_version_checked(self.fd(), &mut a).map_err(|e| KfdError::new(Op::GetVersion, None, e))?;
        Ok(KfdVersion {
            major: a.major_version,
            minor: a.minor_version,
        })
    }

    fn update_queue(&self, queue: QueueId, update: &QueueUpdate) -> Result<()> {
        let mut a = update.to_raw(queue);
        ioctl::update_queue_checked(self.fd(), &mut a).map_err(|e| KfdError::new(Op::UpdateQueue, Some(queue), e))?;
        Ok(())
    }

    /// RUNTIME_ENABLE with `mode_mask` = ENABLE; returns the capabilities mask. Blocks if the
    /// debug trap is already enabled, until a SEND_RUNTIME_EVENT(EC_PROCESS_RUNTIME): enable
    /// the runtime first.
    fn runtime_enable(&self, r_debug: u64) -> Result<u32> {
        let mut a = sys::kfd_ioctl_runtime_enable_args {
            r_debug,
            mode_mask: sys::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
            capabilities_mask: 0,
        };
        ioctl::runtime_enable_checked(self.fd(), &mut a).map_err(|e| KfdError::new(Op::RuntimeEnable, None, e))?;
        Ok(a.capabilities_mask)
    }

    fn runtime_disable(&self) -> Result<()> {
        let mut a = sys::kfd_ioctl_runtime_enable_args::default();
        ioctl::runtime_enable_checked(self.fd(), &mut a).map_err(|e| KfdError::new(Op::RuntimeEnable, None, e))?;
        Ok(())
    }

    fn dbg_enable(&self, exception_mask: u64, dbg_fd: BorrowedFd<'_>) -> Result<RuntimeInfo> {
        let mut rinfo = sys::kfd_runtime_info::default();
        ioctl::dbg_enable(self.fd(), self.pid, exception_mask, &mut rinfo, dbg_fd)
            .map_err(Self::dbg_err(DbgOp::Enable, None))?;
        Ok(RuntimeInfo {
            r_debug: rinfo.r_debug,
            runtime_state: rinfo.runtime_state,
            ttmp_setup: rinfo.ttmp_setup != 0,
        })
    }

    fn dbg_disable(&self) -> Result<()> {
        ioctl::dbg_plain(self.fd(), self.pid, sys::KFD_IOC_DBG_TRAP_DISABLE, |_| {})
            .map_err(Self::dbg_err(DbgOp::Disable, None))?;
        Ok(())
    }

    /// Suspends the given queues; an empty slice is a no-op.
    fn suspend_queues(&self, ids: &[QueueId], grace: GracePeriod, clear_mask: u64) -> Result<Vec<QueueStatus>> {
        self.queue_ids_op(true, ids, grace.raw(), clear_mask)
    }

    /// Resumes the given queues. An empty slice is a no-op: the kernel would read a NULL array
    /// as "every queue of the process".
    fn resume_queues(&self, ids: &[QueueId]) -> Result<Vec<QueueStatus>> {
        self.queue_ids_op(false, ids, 0, 0)
    }

    /// All of this process's queues. Asks for the count first, then retries with a larger
    /// buffer if queues appeared in between (the kernel reports the total, writes what fits).
    fn queue_snapshot(&self, clear_mask: u64) -> Result<Vec<QueueSnapshot>> {
        let mut buf = self.snapshot_buf.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let total = ioctl::dbg_queue_snapshot(self.fd(), self.pid, clear_mask, &mut buf)
                .map_err(Self::dbg_err(DbgOp::GetQueueSnapshot, None))? as usize;
            if total <= buf.len() {
                let out = buf[..total].iter().map(QueueSnapshot::from).collect();
                // Next time, the size the kernel just reported (queues may also have gone).
                buf.truncate(total);
                return Ok(out);
            }
            buf.resize(total, sys::kfd_queue_snapshot_entry::default());
        }
    }

    fn query_debug_event(&self, mask: u64) -> Result<DebugEvent> {
        let a = ioctl::dbg_plain(self.fd(), self.pid, sys::KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT, |u| {
            u.query_debug_event = sys::kfd_ioctl_dbg_trap_query_debug_event_args {
                exception_mask: mask,
                gpu_id: 0,
                queue_id: 0,
            };
        })
        .map_err(Self::dbg_err(DbgOp::QueryDebugEvent, None))?;
        let q = ioctl::query_debug_event_out(&a);
        Ok(DebugEvent {
            exception_mask: q.exception_mask,
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
        })
    }

    fn preempt_queues(&self, ids: &[QueueId], grace: GracePeriod, flags: u32) -> Result<PreemptOutcome> {
        Kfd::preempt_queues(self, ids, grace, flags)
    }

    fn resume_queues_patched(&self, ids: &[QueueId]) -> Result<PreemptOutcome> {
        Kfd::resume_queues_patched(self, ids)
    }

    fn preempt_probe(&self) -> Result<PreemptProbe> {
        Kfd::preempt_probe(self)
    }

    fn send_runtime_event(&self, mask: u64, gpu_id: u32, queue_id: QueueId) -> Result<()> {
        ioctl::dbg_plain(self.fd(), self.pid, sys::KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT, |u| {
            u.send_runtime_event = sys::kfd_ioctl_dbg_trap_send_runtime_event_args {
                exception_mask: mask,
                gpu_id,
                queue_id,
            };
        })
        .map_err(Self::dbg_err(
            DbgOp::SendRuntimeEvent,
            Some(queue_id).filter(|&q| q != 0),
        ))?;
        Ok(())
    }
}

/// The project's patched-kernel ioctls (`patches/`): PREEMPT_QUEUES / RESUME_QUEUES (nr
/// 0x40/0x41) on this process's own queues, no debug mode. A stock kernel answers ENOTTY.
impl Kfd {
    /// Probes for the patched preempt ioctls with a no-op PREEMPT_QUEUES (no ids): present with
    /// the ABI version the kernel wrote back, or absent with ENOTTY (upstream) or EINVAL (ROCm's
    /// DKMS driver); see [`PreemptProbe`].
    pub fn preempt_probe(&self) -> Result<PreemptProbe> {
        PreemptProbe::from_answer(
            ioctl::preempt_queue_ids(self.fd(), false, &mut [], 0, 0)
                .map(|a| a.version)
                .map_err(|(e, _)| e),
        )
    }

    /// The patched preempt ioctls' ABI version, `None` if absent (either answer).
    pub fn preempt_abi_version(&self) -> Result<Option<u32>> {
        self.preempt_probe().map(PreemptProbe::version)
    }

    /// Whether this kernel has the patched preempt ioctls.
    pub fn has_preempt_ioctl(&self) -> Result<bool> {
        self.preempt_abi_version().map(|v| v.is_some())
    }

    /// PREEMPT_QUEUES: CWSR-saves and unmaps the given queues of this process. `grace` becomes
    /// the grace-period flag and value; `flags` is ORed in raw (unknown bits: EINVAL, which the
    /// tests use). Already-preempted queues count as done. Up to 1024 ids; more is passed on
    /// and refused by the kernel (EINVAL). An empty slice asks nothing and returns no statuses.
    /// Only compute queues are accepted: an SDMA queue's id comes back INVALID, as does an id
    /// with bit 30 set; of duplicate ids only the first gets a status. A failure after queues
    /// may have changed (EIO, EFAULT on the write-back) carries what the kernel reported in
    /// [`KfdError::partial`].
    pub fn preempt_queues(&self, ids: &[QueueId], grace: GracePeriod, flags: u32) -> Result<PreemptOutcome> {
        let (gflag, gval) = grace.preempt_ioctl_raw();
        self.preempt_op(false, ids, flags | gflag, gval)
    }

    /// RESUME_QUEUES: maps back queues preempted by [`Kfd::preempt_queues`]. A queue that is not
    /// preempted counts as done; one that is inactive for another reason (debugger suspend,
    /// eviction, UPDATE_QUEUE disable) stays inactive.
    pub fn resume_queues_patched(&self, ids: &[QueueId]) -> Result<PreemptOutcome> {
        self.preempt_op(true, ids, 0, 0)
    }

    /// PREEMPT_QUEUES (`resume` false) or RESUME_QUEUES with raw flags and grace period, for
    /// tests of the kernel's argument checks.
    pub fn preempt_op_raw(
        &self,
        resume: bool,
        ids: &[QueueId],
        flags: u32,
        grace_period: u32,
    ) -> Result<PreemptOutcome> {
        self.preempt_op(resume, ids, flags, grace_period)
    }

    /// The kernel's answer to a NULL id array with `num_queues` ids (EINVAL when non-zero).
    pub fn preempt_null_array_errno(&self, resume: bool, num_queues: u32) -> Option<Errno> {
        ioctl::preempt_null_array(self.fd(), resume, num_queues).err()
    }

    fn preempt_op(&self, resume: bool, ids: &[QueueId], flags: u32, grace_period: u32) -> Result<PreemptOutcome> {
        let op = if resume { Op::ResumeQueues } else { Op::PreemptQueues };
        let mut arr = ids.to_vec();
        let answer = ioctl::preempt_queue_ids(self.fd(), resume, &mut arr, flags, grace_period);
        let outcome = |a: &kfd_sys::preempt::kfd_ioctl_preempt_queues_args, arr: Vec<u32>| PreemptOutcome {
            statuses: ids
                .iter()
                .zip(&arr)
                .map(|(&id, &raw)| QueueStatus::decode(id, raw))
                .collect(),
            kernel_ns: a.kernel_ns,
            num_done: a.num_done,
            abi_version: a.version,
            raw: arr,
        };
        match answer {
            Ok(a) => Ok(outcome(&a, arr)),
            Err((e, a)) => {
                let mut err = KfdError::new(op, ids.first().copied().filter(|_| ids.len() == 1), e);
                // Failures after queues may have changed: keep what the kernel wrote back.
                if matches!(e, Errno::EIO | Errno::EFAULT) && a.version >= 1 && !ids.is_empty() {
                    err.partial = Some(Box::new(outcome(&a, arr)));
                }
                Err(err)
            }
        }
    }
}

impl Kfd {
    fn queue_ids_op(&self, suspend: bool, ids: &[QueueId], grace: u32, clear_mask: u64) -> Result<Vec<QueueStatus>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let op = if suspend {
            DbgOp::SuspendQueues
        } else {
            DbgOp::ResumeQueues
        };
        let mut arr = ids.to_vec();
        ioctl::dbg_queue_ids(self.fd(), self.pid, suspend, &mut arr, grace, clear_mask)
            .map_err(Self::dbg_err(op, ids.first().copied().filter(|_| ids.len() == 1)))?;
        Ok(ids
            .iter()
            .zip(&arr)
            .map(|(&id, &raw)| QueueStatus::decode(id, raw))
            .collect())
    }
}
