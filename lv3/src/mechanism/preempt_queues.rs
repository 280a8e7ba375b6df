//! `preempt-queues`: the project's patched kernel (`patches/`): AMDKFD_IOC_PREEMPT_QUEUES /
//! AMDKFD_IOC_RESUME_QUEUES (nr 0x40/0x41) on this process's own queues.
//!
//! Preferred by `auto` when present: no debug mode, no runtime enable, no process-wide setup
//! (nothing to tear down), and its state is a flag of its own (`is_user_preempted`, folded into
//! the kernel's `QUEUE_IS_ACTIVE`), so neither the debugger's resume, nor ROCr's scratch reclaim
//! toggling UPDATE_QUEUE, nor a restore after eviction can make the queue active behind our back.
//! It also reports the kernel's share of the latency (`kernel_ns`: the unmap and fence wait).
//!
//! Present only where the probe answers: [`PreemptQueues::new`] refuses a kernel that says ENOTTY
//! (every stock kernel). [`availability`] is the same probe for reports (doctor).
use super::{MechError, MechanismKind, Preempt, QueueTarget, SuspendReport};
use kfd::events::{self, Severity};
use kfd::{GracePeriod, Kfd, KfdOps, Op, PreemptOutcome, PreemptProbe, QueueState};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const KIND: MechanismKind = MechanismKind::PreemptQueues;

/// The preempt-queues mechanism (the patched-kernel ioctl) over any [`KfdOps`].
#[derive(Debug)]
pub struct PreemptQueues<K: KfdOps> {
    kfd: K,
    grace: GracePeriod,
    abi_version: u32,
    /// `kernel_ns` of the last successful preempt (for reports without downcasting).
    last_kernel_ns: AtomicU64,
}

impl<K: KfdOps> PreemptQueues<K> {
    /// Probes the kernel (a no-op PREEMPT_QUEUES): [`MechError::Unavailable`] on ENOTTY (a stock
    /// kernel) or on a number taken by something else. `grace` is the CP's grace period
    /// (~1K GPU clocks per unit; [`GracePeriod::Default`] = the firmware's).
    pub fn new(kfd: K, grace: GracePeriod) -> Result<Self, MechError> {
        match kfd.preempt_abi_version() {
            Ok(Some(abi_version)) => Ok(PreemptQueues {
                kfd,
                grace,
                abi_version,
                last_kernel_ns: AtomicU64::new(0),
            }),
            Ok(None) => Err(MechError::Unavailable {
                mechanism: KIND,
                // ENOTTY (upstream) or EINVAL (a DKMS table hole), and what it means.
                why: kfd.preempt_probe().map_or_else(|e| e.to_string(), |p| p.describe()),
            }),
            Err(e) => Err(MechError::Unavailable {
                mechanism: KIND,
                why: e.to_string(),
            }),
        }
    }

    /// The ABI version the kernel reported (`KFD_PREEMPT_QUEUES_VERSION`).
    pub fn abi_version(&self) -> u32 {
        self.abi_version
    }

    pub fn grace(&self) -> GracePeriod {
        self.grace
    }

    /// The KFD handle.
    pub fn kfd(&self) -> &K {
        &self.kfd
    }

    /// The kernel time of the last successful suspend, in ns.
    pub fn last_kernel_ns(&self) -> u64 {
        self.last_kernel_ns.load(Ordering::Relaxed)
    }

    fn one(out: &PreemptOutcome) -> QueueState {
        out.statuses.first().map(|s| s.state).unwrap_or(QueueState::Invalid)
    }
}

impl<K: KfdOps + Send + Sync> Preempt for PreemptQueues<K> {
    fn kind(&self) -> MechanismKind {
        KIND
    }

    /// PREEMPT_QUEUES on this queue. On an ERROR status the queue may be half-way (HWS: flagged
    /// but the runlist update failed), so a RESUME is tried before the error is returned.
    fn suspend(&self, q: &QueueTarget) -> Result<SuspendReport, MechError> {
        let t0 = Instant::now();
        let out = self
            .kfd
            .preempt_queues(&[q.queue_id], self.grace, 0)
            .map_err(MechError::kfd(KIND))?;
        let total = t0.elapsed();
        match Self::one(&out) {
            QueueState::Ok => {
                self.last_kernel_ns.store(out.kernel_ns, Ordering::Relaxed);
                Ok(SuspendReport {
                    mechanism: KIND,
                    queue_id: q.queue_id,
                    total,
                    preempt_call: total,
                    cleared_queue_new: false,
                    kernel: Some(Duration::from_nanos(out.kernel_ns)),
                })
            }
            state => {
                let undo = (state == QueueState::Error).then(|| self.kfd.resume_queues_patched(&[q.queue_id]));
                if let Some(Err(e)) = undo {
                    events::emit(
                        Severity::Warning,
                        KIND.name(),
                        format!("queue {} may stay preempted after a failed preempt: {e}", q.queue_id),
                    );
                }
                Err(MechError::PreemptRefused {
                    op: Op::PreemptQueues,
                    queue: q.queue_id,
                    state,
                })
            }
        }
    }

    /// RESUME_QUEUES on this queue (one that is not preempted comes back Ok: no-op).
    fn resume(&self, q: &QueueTarget) -> Result<(), MechError> {
        let out = self
            .kfd
            .resume_queues_patched(&[q.queue_id])
            .map_err(MechError::kfd(KIND))?;
        match Self::one(&out) {
            QueueState::Ok => Ok(()),
            state => Err(MechError::PreemptRefused {
                op: Op::ResumeQueues,
                queue: q.queue_id,
                state,
            }),
        }
    }
}

/// Whether the patched preempt ioctls can be used here, for reports (`preempt-lat doctor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IoctlAvailability {
    /// The kernel answered the probe with a version.
    pub available: bool,
    /// The probe's answer (absent: ENOTTY upstream, EINVAL on ROCm's DKMS driver); `None` if
    /// /dev/kfd could not be asked.
    pub probe: Option<PreemptProbe>,
    /// `KFD_PREEMPT_QUEUES_VERSION` the kernel reported.
    pub abi_version: Option<u32>,
    /// The version this build speaks (`kfd::header::KFD_PREEMPT_QUEUES_VERSION`).
    pub built_abi_version: u32,
    /// The bindings were generated from a patched header (`cfg(kfd_has_preempt)`), so the
    /// hand-written ABI was checked against it at compile time.
    pub header_has_preempt: bool,
    /// One line: how it was found, or why not.
    pub detail: String,
}

/// Probes `/dev/kfd` for the patched preempt ioctls (a no-op PREEMPT_QUEUES with no ids).
pub fn availability() -> IoctlAvailability {
    availability_of(Kfd::open().and_then(|k| k.preempt_probe()))
}

/// [`availability`] from a probe's answer (pure, for tests and for callers with a handle).
pub fn availability_of(probe: kfd::Result<PreemptProbe>) -> IoctlAvailability {
    let built = kfd::header::KFD_PREEMPT_QUEUES_VERSION;
    let (answer, detail) = match probe {
        Ok(p @ PreemptProbe::Present { .. }) => (Some(p), format!("{} (this build: {built})", p.describe())),
        Ok(p) => (Some(p), p.describe()),
        Err(e) => (None, e.to_string()),
    };
    let abi_version = answer.and_then(PreemptProbe::version);
    IoctlAvailability {
        available: abi_version.is_some(),
        probe: answer,
        abi_version,
        built_abi_version: built,
        header_has_preempt: kfd::header::HEADER_HAS_PREEMPT,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd::KfdError;
    use nix::errno::Errno;

    #[test]
    fn availability_lines() {
        let a = availability_of(Ok(PreemptProbe::Present { version: 1 }));
        assert!(
            a.available && a.abi_version == Some(1) && a.detail.contains("ABI version 1"),
            "{a:?}"
        );
        let a = availability_of(Ok(PreemptProbe::AbsentEnotty));
        assert!(!a.available && a.detail.starts_with("ENOTTY"), "{a:?}");
        // ROCm's DKMS driver: the zero-count probe lands in a hole of its table.
        let a = availability_of(Ok(PreemptProbe::AbsentEinval));
        assert!(!a.available && a.abi_version.is_none(), "{a:?}");
        assert!(a.detail.starts_with("EINVAL") && a.detail.contains("DKMS"), "{a:?}");
        let a = availability_of(Err(KfdError::new(Op::Open, None, Errno::ENOENT)));
        assert!(!a.available && a.detail.contains("no /dev/kfd"), "{a:?}");
        assert_eq!(a.built_abi_version, 1);
    }
}
