//! Error-path checks: what the kernel must answer, through our API, wherever /dev/kfd opens.
//! They need no GPU (the QEMU guest runs them) and leave the process's KFD state as found.
use super::{Check, Status};
use lv3::kfd::{Kfd, KfdOps, QueueUpdate};
use lv3::mechanism::{DbgTrap, MechError, Preemptor, QueueTarget, UpdateQueue};
use nix::errno::Errno;

const GHOST: QueueTarget = QueueTarget::NONEXISTENT;

fn expect_errno(r: Result<(), MechError>, want: Errno) -> Result<String, String> {
    match r {
        Err(e) if e.errno() == Some(want) => Ok(format!("{want} as expected: {e}")),
        Err(e) => Err(format!("expected {want}, got: {e}")),
        Ok(()) => Err(format!("expected {want}, the call succeeded")),
    }
}

pub fn all() -> Vec<Check> {
    let kfd = match Kfd::open() {
        Ok(k) => k,
        Err(e) => {
            return vec![Check::new("capability", "open /dev/kfd", Status::Skip, format!("skipped: {e}; error-path checks need /dev/kfd"))];
        }
    };
    let mut c = Vec::new();
    c.push(Check::from(
        "capability",
        "KFD ioctl version (debugger API >= 1.13)",
        kfd.version().map_err(|e| e.to_string()).and_then(|v| {
            if v.has_debugger_api() { Ok(format!("KFD {v}")) } else { Err(format!("KFD {v} has no debugger API")) }
        }),
    ));
    c.push(Check::from(
        "error-path",
        "unknown ioctl number is ENOTTY",
        match kfd.probe_nr_errno(0x7f) {
            Ok(Some(Errno::ENOTTY)) => Ok("nr 0x7f -> ENOTTY".into()),
            other => Err(format!("nr 0x7f -> {other:?}")),
        },
    ));
    c.push(Check::from(
        "error-path",
        "fd used from a forked child is EBADF",
        match kfd.errno_in_forked_child() {
            Ok(Some(Errno::EBADF)) => Ok("EBADF".into()),
            other => Err(format!("{other:?}")),
        },
    ));
    c.push(Check::from(
        "error-path",
        "UPDATE_QUEUE percentage 101 is EINVAL",
        match kfd.update_queue(GHOST.queue_id, &QueueUpdate { ring_base_address: GHOST.ring_base_address, ring_size: 4096, percentage: 101, pm4_target_xcc: 0, priority: 7 }) {
            Err(e) if e.errno == Errno::EINVAL => Ok("EINVAL".into()),
            other => Err(format!("{other:?}")),
        },
    ));
    c.push(Check::from(
        "error-path",
        "update-queue on an unknown queue is EFAULT",
        expect_errno(Preemptor::new(UpdateQueue::new(kfd)).suspend(&GHOST).map(drop), Errno::EFAULT),
    ));
    c.push(dbg_trap_ghost());
    c.extend(preempt_ioctl());
    c
}

/// The patched kernel's per-queue preempt ioctl (patches/): error paths when present, a visible
/// skip (ENOTTY) on a stock kernel.
fn preempt_ioctl() -> Vec<Check> {
    let name = "patched preempt ioctl";
    let kfd = match Kfd::open() {
        Ok(k) => k,
        Err(e) => return vec![Check::new("error-path", name, Status::Fail, e.to_string())],
    };
    let v = match kfd.preempt_abi_version() {
        Ok(None) => return vec![Check::new("capability", name, Status::Skip, "skipped: ENOTTY, not the project's patched kernel")],
        Err(e) => return vec![Check::new("capability", name, Status::Fail, e.to_string())],
        Ok(Some(v)) => v,
    };
    let built = kfd_abi_version();
    let abi = Check::from(
        "capability",
        name,
        if v == built { Ok(format!("ABI version {v}")) } else { Err(format!("kernel speaks ABI version {v}, this build {built}")) },
    );
    let ghost = |r: lv3::kfd::Result<lv3::kfd::PreemptOutcome>| match r {
        Ok(o) if o.statuses.iter().all(|s| s.state == lv3::kfd::QueueState::Invalid) && o.num_done == 0 => {
            Ok(format!("all INVALID, kernel_ns {}", o.kernel_ns))
        }
        other => Err(format!("expected every id INVALID: {other:?}")),
    };
    let einval = |r: lv3::kfd::Result<lv3::kfd::PreemptOutcome>| match r {
        Err(e) if e.errno == Errno::EINVAL => Ok("EINVAL".to_string()),
        other => Err(format!("expected EINVAL: {other:?}")),
    };
    let too_many: Vec<u32> = (0..1025).collect();
    vec![
        abi,
        Check::from("error-path", "preempt ioctl: unknown queue ids are INVALID", ghost(kfd.preempt_queues(&[0xdead, 7], Default::default(), 0))),
        Check::from("error-path", "preempt ioctl: resume of unknown ids is INVALID", ghost(kfd.resume_queues_patched(&[0xdead]))),
        Check::from("error-path", "preempt ioctl: 1025 ids is EINVAL", einval(kfd.preempt_queues(&too_many, Default::default(), 0))),
        Check::from("error-path", "preempt ioctl: unknown flags are EINVAL", einval(kfd.preempt_queues(&[1], Default::default(), 1 << 31))),
        Check::from(
            "error-path",
            "preempt ioctl: NULL id array is EINVAL",
            match kfd.preempt_null_array_errno(false, 1) {
                Some(Errno::EINVAL) => Ok("EINVAL".into()),
                other => Err(format!("{other:?}")),
            },
        ),
    ]
}

fn dbg_trap_ghost() -> Check {
    let name = "dbg-trap on an unknown queue is INVALID, state restored";
    let r = (|| -> Result<String, String> {
        let kfd = Kfd::open().map_err(|e| e.to_string())?;
        let mech = DbgTrap::setup(kfd, Default::default()).map_err(|e| format!("setup: {e}"))?;
        let p = Preemptor::new(mech);
        let got = p.suspend(&GHOST).map(drop);
        p.teardown().map_err(|e| format!("teardown: {e}"))?;
        match got {
            Err(MechError::QueueRefused { state: lv3::kfd::QueueState::Invalid, .. }) => {}
            other => return Err(format!("expected INVALID, got {other:?}")),
        }
        // Debug mode must be off again: a fresh ENABLE by us succeeds.
        let k = Kfd::open().map_err(|e| e.to_string())?;
        let (_rd, wr) = nix::unistd::pipe().map_err(|e| e.to_string())?;
        k.dbg_enable(0, std::os::fd::AsFd::as_fd(&wr)).map_err(|e| format!("debug still on after teardown: {e}"))?;
        k.dbg_disable().map_err(|e| e.to_string())?;
        Ok("INVALID; debug mode off after teardown".into())
    })();
    if let Some(e) = r.as_ref().err().filter(|e| e.contains("EALREADY")) {
        return Check::new("error-path", name, Status::Skip, format!("skipped: another debugger owns this process: {e}"));
    }
    Check::from("error-path", name, r)
}

fn kfd_abi_version() -> u32 {
    lv3::mechanism::ioctl::availability_of(Ok(None)).built_abi_version
}
