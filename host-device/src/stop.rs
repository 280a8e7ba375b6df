//! Host Lv3: stopping and continuing a queue's worker processes.

use super::process::WorkerProcess;
use super::{HostError, HostQueue};
use lv1::clock::now_ns;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a continued worker may take to report it before we give up.
const CONTINUE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to busy-poll for a stop before blocking until it comes. A worker running on
/// another core takes the signal and stops within this in the common case (a median of 12-25 us
/// on the 2-core VM of docs/benchmarks.md), and a waiter blocked meanwhile would pay for the
/// wake-up of an idle core (tens of microseconds in a VM); a worker waiting for *this* core
/// cannot stop until we let go of it, so polling longer only delays it (the 200 us this spun
/// before made a second mode at ~206 us in the tail).
const SPIN: Duration = Duration::from_micros(25);

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

/// What a wait on one worker found, when it did not find what it waited for.
enum Failed {
    /// The worker is dead: the queue says how it ended ([`HostQueue::died`]).
    Died,
    Other(HostError),
}

/// Wait until the kernel reports that `process` (worker `worker`) stopped, consuming the event.
///
/// Busy-polls for [`SPIN`], then blocks in `waitid(WSTOPPED | WEXITED | WNOWAIT)`: the kernel
/// wakes this thread when the worker stops, and meanwhile the thread holds no core that the
/// worker may need to take the signal. `WEXITED` returns at once for a worker that died instead
/// (an error, not a hang); `WNOWAIT` leaves its exit status to the queue's drop (see the crate
/// docs' reaping discipline), and also leaves the stop event, which a `WNOHANG` call then
/// consumes. There is no time limit: after `SIGSTOP` a live worker stops or dies, unless a
/// debugger holds it or another waiter in this process takes its events.
fn wait_stopped(process: &WorkerProcess, worker: usize) -> Result<(), Failed> {
    let sys = |e| Failed::Other(HostError::Sys("waitid", e));
    let stopped = WaitPidFlag::WSTOPPED;
    let spin_until = Instant::now() + SPIN;
    loop {
        match process.wait(stopped | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Stopped(..)) => return Ok(()),
            Ok(_) if Instant::now() < spin_until => std::hint::spin_loop(),
            // A dead (zombie) worker answers only `WEXITED`: the wait below says it died.
            Ok(_) | Err(Errno::ECHILD) => break,
            Err(e) => return Err(sys(e)),
        }
    }
    loop {
        match process.wait(stopped | WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(WaitStatus::Stopped(..)) => break,
            // ECHILD: reaped by someone else, so dead too.
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => return Err(Failed::Died),
            Ok(other) => {
                // Nothing else answers these flags for a child we do not trace; and with
                // `WNOWAIT` the same answer would come again, so do not loop on it.
                return Err(Failed::Other(HostError::Protocol(format!(
                    "worker {worker}: wait status {other:?} while stopping"
                ))));
            }
            Err(Errno::EINTR) => {}
            Err(e) => return Err(sys(e)),
        }
    }
    // Consume the stop event. Should someone have continued the worker in between, its event
    // is gone and the continue event waits instead, to be consumed by our own continue.
    process.wait(stopped | WaitPidFlag::WNOHANG).map(drop).map_err(sys)
}

/// Wait until the kernel reports that `process` continued, consuming the event.
/// The kernel posts it while sending `SIGCONT`, so the first poll normally finds it: this keeps
/// stale events from piling up. A worker that died meanwhile is an error at once. Never asks for
/// `WEXITED` without `WNOWAIT`, so it never reaps (see the module docs).
fn wait_continued(process: &WorkerProcess) -> Result<(), Failed> {
    let deadline = Instant::now() + CONTINUE_TIMEOUT;
    loop {
        match process.wait(WaitPidFlag::WCONTINUED | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Continued(_)) => return Ok(()),
            // ECHILD: a zombie answers only `WEXITED`, asked next.
            Ok(_) | Err(Errno::ECHILD) => {}
            Err(e) => return Err(Failed::Other(HostError::Sys("waitid", e))),
        }
        let dead = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
        match process.wait(dead) {
            // ECHILD: reaped by someone else, so dead too.
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => return Err(Failed::Died),
            Ok(_) if Instant::now() < deadline => std::thread::yield_now(),
            Ok(_) => return Err(Failed::Other(HostError::Timeout("continue"))),
            Err(e) => return Err(Failed::Other(HostError::Sys("waitid", e))),
        }
    }
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

    /// `sig` to every worker through its pidfd, each one tried even when another fails (a worker
    /// reaped by someone else is `ESRCH`: dead, and whoever has its pid now gets nothing); the
    /// first failure is returned.
    fn signal_all(&self, sig: Signal) -> Result<(), HostError> {
        let mut first = Ok(());
        for (worker, process) in self.workers.iter().enumerate() {
            let sent = match process.signal(sig) {
                Err(Errno::ESRCH) => Err(self.died(worker)),
                r => r.map_err(|e| HostError::Sys(process.signal_call(), e)),
            };
            first = first.and(sent);
        }
        first
    }

    /// `SIGCONT` to every worker now, without waiting for the continue events and without the
    /// queue's locks: for a resume that must not block, such as the one a thread handling SIGINT
    /// makes while the suspension's owner may be stuck. The suspension (if any) stays the queue's
    /// to release. Through the workers' pidfds like every signal: a worker reaped by someone else
    /// is the error returned ([`HostError::WorkerDied`]), after the others were continued.
    pub fn continue_workers(&self) -> Result<(), HostError> {
        self.signal_all(Signal::SIGCONT)
    }

    /// A wait's failure as the queue's error.
    fn failed(&self, worker: usize, f: Failed) -> HostError {
        match f {
            Failed::Died => self.died(worker),
            Failed::Other(e) => e,
        }
    }

    /// SIGSTOP every worker and wait for each stop; marks the queue suspended. Returns when.
    fn stop(&self) -> Result<u64, HostError> {
        let mut suspended = self.suspended.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *suspended {
            return Err(HostError::AlreadySuspended);
        }
        // Every living worker is waited for even when another one failed, so that the continue
        // below finds each one stopped (a continue of a worker that had not stopped yet would
        // post no event to wait for).
        let mut stop = self.signal_all(Signal::SIGSTOP);
        for (worker, process) in self.workers.iter().enumerate() {
            stop = stop.and(wait_stopped(process, worker).map_err(|f| self.failed(worker, f)));
        }
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

    /// `SIGCONT` every worker and consume each continue event. Every worker is continued and
    /// waited for even when one is dead or fails; the first failure is returned.
    fn continue_all(&self) -> Result<(), HostError> {
        let mut first = self.signal_all(Signal::SIGCONT);
        for (worker, process) in self.workers.iter().enumerate() {
            first = first.and(wait_continued(process).map_err(|f| self.failed(worker, f)));
        }
        first
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
