//! Conformance probes: what amdkfd must answer, through this workspace's API, wherever
//! `/dev/kfd` opens (a GPU node, or the project's GPU-less QEMU guest). One list, run by
//! `preempt-lat validate` on a user's machine and by the real-kernel tests in the guest, so a
//! kernel fact is checked in one place.
//!
//! Every probe aims at a queue no process has ([`QueueTarget::NONEXISTENT`]) or at argument
//! checks, so it is safe on a production node: nothing is preempted, and the process's KFD state
//! (runtime enable, debug mode) is left as it was found. The facts come from
//! docs/kfd-facts.md; each probe's name says what it expects.
use crate::mechanism::{DbgTrap, MechError, Preemptor, QueueTarget, UpdateQueue};
use kfd::{GracePeriod, Kfd, KfdOps, PreemptOutcome, QueueState, QueueUpdate, SessionError};
use nix::errno::Errno;
use serde::Serialize;

/// What a probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// What this kernel offers (versions, the patched ioctl).
    Capability,
    /// An error the kernel must return for a bad request.
    ErrorPath,
    /// Preemption of real work (hardware only; added by callers with a GPU).
    Functional,
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that `{:<11}` aligns columns.
        f.pad(match self {
            Category::Capability => "capability",
            Category::ErrorPath => "error-path",
            Category::Functional => "functional",
        })
    }
}

/// A check's outcome. A skip always says why in its detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

/// One checked fact.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub category: Category,
    pub name: String,
    pub status: Status,
    /// What was observed, or why it failed or was skipped.
    pub detail: String,
}

impl Check {
    pub fn new(category: Category, name: impl Into<String>, status: Status, detail: impl Into<String>) -> Self {
        Check {
            category,
            name: name.into(),
            status,
            detail: detail.into(),
        }
    }

    /// Pass with the observation, or fail with what was wrong.
    pub fn from(category: Category, name: impl Into<String>, r: Result<String, String>) -> Self {
        match r {
            Ok(d) => Check::new(category, name, Status::Pass, d),
            Err(d) => Check::new(category, name, Status::Fail, d),
        }
    }
}

/// The name of the capability check of the patched ioctl (pass: present with this build's ABI;
/// skip: ENOTTY, a stock kernel).
pub const PATCHED_IOCTL: &str = "patched preempt ioctl";

const GHOST: QueueTarget = QueueTarget::NONEXISTENT;

/// Runs every probe. Without `/dev/kfd` the result is one skip that says so.
pub fn run() -> Vec<Check> {
    let kfd = match Kfd::open() {
        Ok(k) => k,
        Err(e) => {
            return vec![Check::new(
                Category::Capability,
                "open /dev/kfd",
                Status::Skip,
                format!("skipped: {e}; error-path checks need /dev/kfd"),
            )];
        }
    };
    let mut c = vec![
        Check::from(
            Category::Capability,
            "KFD ioctl version (debugger API >= 1.13)",
            kfd.version().map_err(|e| e.to_string()).and_then(|v| {
                if v.has_debugger_api() {
                    Ok(format!("KFD {v}"))
                } else {
                    Err(format!("KFD {v} has no debugger API"))
                }
            }),
        ),
        Check::from(
            Category::ErrorPath,
            "unknown ioctl number is refused (ENOTTY, or EINVAL on ROCm's DKMS driver)",
            match kfd.probe_nr_errno(0x7f) {
                Ok(Some(Errno::ENOTTY)) => Ok("nr 0x7f -> ENOTTY (past the end of upstream's table)".into()),
                Ok(Some(Errno::EINVAL)) => {
                    Ok("nr 0x7f -> EINVAL (a hole in a longer table: ROCm's DKMS driver)".into())
                }
                other => Err(format!("nr 0x7f -> {other:?}")),
            },
        ),
        Check::from(
            Category::ErrorPath,
            "fd used from a forked child is EBADF",
            match kfd.errno_in_forked_child() {
                Ok(Some(Errno::EBADF)) => Ok("EBADF".into()),
                other => Err(format!("{other:?}")),
            },
        ),
    ];
    c.extend(update_queue_limits(&kfd));
    c.push(Check::from(
        Category::ErrorPath,
        "update-queue on an unknown queue is EFAULT",
        expect_errno(
            Preemptor::new(UpdateQueue::new(kfd)).suspend(&GHOST).map(drop),
            Errno::EFAULT,
        ),
    ));
    c.push(dbg_trap_ghost());
    c.extend(preempt_ioctl());
    c
}

fn expect_errno(r: Result<(), MechError>, want: Errno) -> Result<String, String> {
    match r {
        Err(e) if e.errno() == Some(want) => Ok(format!("{want} as expected: {e}")),
        Err(e) => Err(format!("expected {want}, got: {e}")),
        Ok(()) => Err(format!("expected {want}, the call succeeded")),
    }
}

/// UPDATE_QUEUE's argument checks, which run before the queue lookup.
fn update_queue_limits(kfd: &Kfd) -> Vec<Check> {
    let ok = QueueUpdate {
        ring_base_address: GHOST.ring_base_address,
        ring_size: 4096,
        percentage: 100,
        pm4_target_xcc: 0,
        priority: 7,
    };
    let cases = [
        (
            "UPDATE_QUEUE percentage 101 is EINVAL",
            QueueUpdate { percentage: 101, ..ok },
        ),
        (
            "UPDATE_QUEUE ring size 3000 (not a power of two) is EINVAL",
            QueueUpdate { ring_size: 3000, ..ok },
        ),
        ("UPDATE_QUEUE priority 16 is EINVAL", QueueUpdate { priority: 16, ..ok }),
    ];
    cases
        .into_iter()
        .map(|(name, u)| {
            Check::from(
                Category::ErrorPath,
                name,
                match kfd.update_queue(GHOST.queue_id, &u) {
                    Err(e) if e.errno == Errno::EINVAL => Ok("EINVAL".into()),
                    other => Err(format!("{other:?}")),
                },
            )
        })
        .collect()
}

/// dbg-trap aimed at a queue that does not exist: INVALID, and debug mode off again afterwards.
fn dbg_trap_ghost() -> Check {
    let name = "dbg-trap on an unknown queue is INVALID, state restored";
    let r = (|| -> Result<String, String> {
        let kfd = Kfd::open().map_err(|e| e.to_string())?;
        let mech = DbgTrap::setup(kfd, GracePeriod::Default).map_err(|e| match e {
            MechError::Session(SessionError::DebuggerPresent(_)) => format!("EALREADY: {e}"),
            e => format!("setup: {e}"),
        })?;
        let p = Preemptor::new(mech);
        let got = p.suspend(&GHOST).map(drop);
        p.teardown().map_err(|e| format!("teardown: {e}"))?;
        match got {
            Err(MechError::QueueRefused {
                state: QueueState::Invalid,
                ..
            }) => {}
            other => return Err(format!("expected INVALID, got {other:?}")),
        }
        // Debug mode must be off again: a fresh session of ours opens and closes.
        let session = kfd::DebugSession::open(Kfd::open().map_err(|e| e.to_string())?)
            .map_err(|e| format!("debug still on after teardown: {e}"))?;
        session.close().map_err(|e| e.to_string())?;
        Ok("INVALID; debug mode off after teardown".into())
    })();
    match r {
        Err(e) if e.starts_with("EALREADY") => Check::new(
            Category::ErrorPath,
            name,
            Status::Skip,
            format!("skipped: another debugger owns this process: {e}"),
        ),
        r => Check::from(Category::ErrorPath, name, r),
    }
}

/// The patched kernel's per-queue preempt ioctl (`patches/`): its error paths where present, a
/// visible skip (ENOTTY) on a stock kernel.
fn preempt_ioctl() -> Vec<Check> {
    let kfd = match Kfd::open() {
        Ok(k) => k,
        Err(e) => {
            return vec![Check::new(
                Category::ErrorPath,
                PATCHED_IOCTL,
                Status::Fail,
                e.to_string(),
            )];
        }
    };
    let v = match kfd.preempt_probe().map(|p| (p, p.version())) {
        Ok((absent, None)) => {
            return vec![Check::new(
                Category::Capability,
                PATCHED_IOCTL,
                Status::Skip,
                format!("skipped: {}", absent.describe()),
            )];
        }
        Err(e) => {
            return vec![Check::new(
                Category::Capability,
                PATCHED_IOCTL,
                Status::Fail,
                e.to_string(),
            )];
        }
        Ok((_, Some(v))) => v,
    };
    let built = kfd::header::KFD_PREEMPT_QUEUES_VERSION;
    let abi = Check::from(
        Category::Capability,
        PATCHED_IOCTL,
        if v == built {
            Ok(format!("ABI version {v}"))
        } else {
            Err(format!("kernel speaks ABI version {v}, this build {built}"))
        },
    );
    let ghost = |r: kfd::Result<PreemptOutcome>| match r {
        Ok(o) if o.statuses.iter().all(|s| s.state == QueueState::Invalid) && o.num_done == 0 => {
            Ok(format!("all INVALID, kernel_ns {}", o.kernel_ns))
        }
        other => Err(format!("expected every id INVALID: {other:?}")),
    };
    let einval = |r: kfd::Result<PreemptOutcome>| match r {
        Err(e) if e.errno == Errno::EINVAL => Ok("EINVAL".to_string()),
        other => Err(format!("expected EINVAL: {other:?}")),
    };
    let too_many: Vec<u32> = (0..1025).collect();
    let e = Category::ErrorPath;
    vec![
        abi,
        Check::from(
            e,
            "preempt ioctl: unknown queue ids are INVALID",
            ghost(kfd.preempt_queues(&[0xdead, 7], GracePeriod::Default, 0)),
        ),
        Check::from(
            e,
            "preempt ioctl: resume of unknown ids is INVALID",
            ghost(kfd.resume_queues_patched(&[0xdead])),
        ),
        Check::from(
            e,
            "preempt ioctl: 1025 ids is EINVAL",
            einval(kfd.preempt_queues(&too_many, GracePeriod::Default, 0)),
        ),
        Check::from(
            e,
            "preempt ioctl: unknown flags are EINVAL",
            einval(kfd.preempt_queues(&[1], GracePeriod::Default, 1 << 31)),
        ),
        Check::from(
            e,
            "preempt ioctl: NULL id array is EINVAL",
            match kfd.preempt_null_array_errno(false, 1) {
                Some(Errno::EINVAL) => Ok("EINVAL".into()),
                other => Err(format!("{other:?}")),
            },
        ),
        Check::from(
            e,
            "preempt ioctl: fd used from a forked child is EBADF",
            match kfd.preempt_errno_in_forked_child() {
                Ok(Some(Errno::EBADF)) => Ok("EBADF".into()),
                other => Err(format!("{other:?}")),
            },
        ),
    ]
}
