//! Error-path checks: what the kernel must answer, through our API, wherever /dev/kfd opens.
//! They need no GPU (the QEMU guest runs them) and leave the process's KFD state as found.
use super::{Check, Status};
use lv3::kfd::{Kfd, KfdOps, QueueUpdate};
use lv3::mechanism::{DbgTrap, MechError, Preemptor, QueueTarget, UpdateQueue};
use nix::errno::Errno;

/// A queue id no process has, with a restorable-looking ring.
const GHOST: QueueTarget =
    QueueTarget { queue_id: 0xdead, gpu_id: 0, ring_base_address: 0x7f00_0000_0000, ring_size: 4096, priority: 7, percentage: 100 };

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
            Some(Errno::ENOTTY) => Ok("nr 0x7f -> ENOTTY".into()),
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
    c
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
