//! Host Lv3: stopping and continuing a queue's worker processes.

use super::{HostError, HostQueue};
use lv1::clock::now_ns;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a worker may take to report stopped/continued before we give up.
const STATE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to busy-poll for the state change before yielding the core between polls.
const SPIN: Duration = Duration::from_micros(200);

/// The scheduler state letter of process `pid` from `/proc/<pid>/stat` ('R' running,
/// 'S' sleeping, 'T' stopped, 'Z' zombie, ...).
pub fn proc_state(pid: i32) -> std::io::Result<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may contain anything, so look
    // after the last ')'.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad stat: {stat:?}")))
}

/// Wait until the kernel reports a stop (`WSTOPPED`) or continue (`WCONTINUED`) event of
/// `pid`, consuming it. Never asks for `WEXITED`, so it never reaps (see the module docs).
/// It polls with `WNOHANG` because a blocking `waitid` would hang forever on a worker that
/// died instead of stopping.
fn wait_event(pid: Pid, flag: WaitPidFlag, what: &'static str) -> Result<(), HostError> {
    let deadline = Instant::now() + STATE_TIMEOUT;
    let spin_until = Instant::now() + SPIN;
    loop {
        match waitid(Id::Pid(pid), flag | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Stopped(..)) if flag == WaitPidFlag::WSTOPPED => return Ok(()),
            Ok(WaitStatus::Continued(_)) if flag == WaitPidFlag::WCONTINUED => return Ok(()),
            // Busy-poll first: the stop normally lands within microseconds, and yielding the
            // core to the launcher's threads (busy at short T) made the tail depend on T.
            Ok(_) if Instant::now() < spin_until => std::hint::spin_loop(),
            Ok(_) if Instant::now() < deadline => std::thread::yield_now(),
            Ok(_) => return Err(HostError::Timeout(what)),
            Err(e) => return Err(HostError::Sys("waitid", e)),
        }
    }
}

fn signal_all(pids: &[Pid], sig: Signal) -> Result<(), HostError> {
    pids.iter()
        .try_for_each(|&pid| kill(pid, sig).map_err(|e| HostError::Sys("kill", e)))
}

impl HostQueue {
    /// Host Lv3 suspend: `SIGSTOP` every worker, then wait until the kernel reports each
    /// one stopped. When this returns the queue holds no running work; the interrupted
    /// commands keep their state and continue where they stopped after resume. The cost is
    /// a signal delivery and a context switch per worker, independent of T.
    ///
    /// The returned guard resumes the queue when dropped (also while unwinding from a
    /// panic); [`HostSuspension::resume`] resumes and reports errors. A second suspend
    /// while a guard is alive fails with [`HostError::AlreadySuspended`]. If waiting for
    /// the stop fails, the workers are continued before the error is returned.
    pub fn suspend(&self) -> Result<HostSuspension<'_>, HostError> {
        let stopped_ns = self.stop()?;
        Ok(HostSuspension {
            queue: self,
            stopped_ns,
            active: true,
        })
    }

    /// [`HostQueue::suspend`] for a queue held in an `Arc`: the guard owns a reference, so it
    /// can be kept in a long-lived object (a session of an application API). Same semantics: it
    /// resumes on drop, and a second suspend while it is alive fails.
    pub fn suspend_shared(self: &Arc<Self>) -> Result<SharedHostSuspension, HostError> {
        let stopped_ns = self.stop()?;
        Ok(SharedHostSuspension {
            queue: Arc::clone(self),
            stopped_ns,
            active: true,
        })
    }

    /// SIGSTOP every worker and wait for each stop; marks the queue suspended. Returns when.
    fn stop(&self) -> Result<u64, HostError> {
        let mut suspended = self.suspended.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *suspended {
            return Err(HostError::AlreadySuspended);
        }
        let stop = signal_all(&self.pids, Signal::SIGSTOP).and_then(|()| {
            self.pids
                .iter()
                .try_for_each(|&p| wait_event(p, WaitPidFlag::WSTOPPED, "stop"))
        });
        if let Err(e) = stop {
            let _ = self.continue_all();
            return Err(e);
        }
        *suspended = true;
        Ok(now_ns())
    }

    /// Resume after a suspension: SIGCONT every worker, then mark the queue running.
    fn release(&self) -> Result<(), HostError> {
        let r = self.continue_all();
        *self.suspended.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = false;
        r
    }

    /// `SIGCONT` every worker and consume each continue event.
    fn continue_all(&self) -> Result<(), HostError> {
        let sent = signal_all(&self.pids, Signal::SIGCONT);
        // The kernel posts the continue event while sending SIGCONT, so this does not wait
        // for the workers to be scheduled; it keeps stale events from piling up.
        sent.and_then(|()| {
            self.pids
                .iter()
                .try_for_each(|&p| wait_event(p, WaitPidFlag::WCONTINUED, "continue"))
        })
    }
}

/// A suspended host queue (host Lv3). Resumes it on drop: a queue is never left stopped.
#[must_use = "dropping the guard resumes the queue at once"]
pub struct HostSuspension<'a> {
    queue: &'a HostQueue,
    stopped_ns: u64,
    active: bool,
}

impl HostSuspension<'_> {
    /// When every worker had been reported stopped (`CLOCK_MONOTONIC` ns).
    pub fn stopped_ns(&self) -> u64 {
        self.stopped_ns
    }

    /// Resume the queue, reporting errors (dropping the guard resumes and ignores them).
    pub fn resume(mut self) -> Result<(), HostError> {
        self.active = false;
        self.release()
    }

    fn release(&self) -> Result<(), HostError> {
        self.queue.release()
    }
}

impl Drop for HostSuspension<'_> {
    fn drop(&mut self) {
        if self.active {
            let _ = self.release();
        }
    }
}

/// A suspended host queue held through an `Arc` ([`HostQueue::suspend_shared`]). Resumes it on
/// drop, like [`HostSuspension`].
#[must_use = "dropping the guard resumes the queue at once"]
pub struct SharedHostSuspension {
    queue: Arc<HostQueue>,
    stopped_ns: u64,
    active: bool,
}

impl SharedHostSuspension {
    /// When every worker had been reported stopped (`CLOCK_MONOTONIC` ns).
    pub fn stopped_ns(&self) -> u64 {
        self.stopped_ns
    }

    /// The suspended queue.
    pub fn queue(&self) -> &Arc<HostQueue> {
        &self.queue
    }

    /// Resume the queue, reporting errors (dropping the guard resumes and ignores them).
    pub fn resume(mut self) -> Result<(), HostError> {
        self.active = false;
        self.queue.release()
    }
}

impl Drop for SharedHostSuspension {
    fn drop(&mut self) {
        if self.active {
            let _ = self.queue.release();
        }
    }
}
