//! How a worker process ended, asked of the kernel without reaping it (see the crate docs'
//! reaping discipline): `waitid(WEXITED | WNOWAIT)` through the worker's pidfd reads the exit
//! status and leaves it to the queue's drop.

use super::process::WorkerProcess;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus};
use std::fmt;
use std::time::{Duration, Instant};

/// How long to wait for a worker that closed its pipes to be reported as ended. A process closes
/// its files before the kernel posts its exit status, so a write or read that found the worker
/// gone can come a little before the status; under load, at most a few scheduler periods.
const STATUS_WAIT: Duration = Duration::from_secs(1);

/// How a worker process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it (SIGKILL also when the kernel's OOM killer chose it).
    Killed(Signal),
    /// It is no longer this process's child: something else reaped it (e.g. an application that
    /// ignores SIGCHLD or waits for any child), so how it ended is unknown.
    Reaped,
    /// It closed its end of the pipes but had not exited when we looked.
    ClosedPipes,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited(code) => write!(f, "exited with status {code}"),
            Self::Killed(sig) => write!(f, "was killed by {sig}"),
            Self::Reaped => write!(f, "has ended and was reaped by someone else (how it ended is unknown)"),
            Self::ClosedPipes => write!(f, "closed its pipes without exiting"),
        }
    }
}

/// The exit of `worker` if the kernel reports one now (never blocks, never reaps).
pub(crate) fn now(worker: &WorkerProcess) -> Option<Ended> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match worker.wait(flags) {
        Ok(WaitStatus::Exited(_, code)) => Some(Ended::Exited(code)),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(Ended::Killed(sig)),
        // Not our child any more: through a pidfd, whoever has its pid now.
        Err(Errno::ECHILD) => Some(Ended::Reaped),
        // Still running (or stopped), or a transient error: not known to have ended.
        _ => None,
    }
}

/// How `worker`, found gone (its pipes closed, or a signal to it `ESRCH`), ended: its exit
/// status, waited for at most [`STATUS_WAIT`].
pub(crate) fn ending(worker: &WorkerProcess) -> Ended {
    let deadline = Instant::now() + STATUS_WAIT;
    loop {
        if let Some(e) = now(worker) {
            return e;
        }
        if Instant::now() >= deadline {
            return Ended::ClosedPipes;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
