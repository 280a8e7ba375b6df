//! A worker process as its queue signals it and asks the kernel about it: through a pidfd.
//!
//! A pid names whichever process has it now. An application that reaps our workers itself (a C or
//! Python program that ignores SIGCHLD, or waits for any child) frees a worker's pid, which the
//! kernel may give to an unrelated process; a `kill` by pid would then stop or kill that process,
//! and a `waitid` by pid would report on another child of ours. A pidfd, opened right after the
//! spawn, names the worker itself for as long as we hold it: once the worker is reaped, a signal
//! through it is `ESRCH` and a wait `ECHILD` (the worker has ended and was reaped by someone else,
//! [`Ended::Reaped`](super::Ended::Reaped)), whoever has the pid now.
//!
//! A kernel without pidfds gets the pid instead, as the crate docs' reaping discipline says.

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::process::Child;

/// One worker process of a queue.
pub(crate) struct WorkerProcess {
    pid: Pid,
    by: By,
}

/// How the worker is reached.
enum By {
    /// Its pidfd: this process and no other, reaped or not.
    PidFd(OwnedFd),
    /// Its pid: a kernel without pidfds (see the module docs).
    Pid,
    /// Nothing: it had been reaped by someone else before its pidfd was opened, so its pid may
    /// name another process already.
    Reaped,
}

impl WorkerProcess {
    /// The worker `child`, just spawned: opens its pidfd (falls back to the pid where the kernel
    /// has none). Fails only where the kernel cannot give this process a file descriptor.
    pub fn open(child: &Child) -> io::Result<Self> {
        let pid = Pid::from_raw(child.id().cast_signed());
        let raw = rustix::process::Pid::from_child(child);
        let by = match rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty()) {
            // Still our child (alive or a zombie), or reaped by someone else between the spawn and
            // the open, so that the pidfd may name a process that took the pid since: a wait
            // through it tells them apart. EINVAL: Linux 5.3 has pidfds but cannot wait on one.
            Ok(fd) => match waitid(Id::PIDFd(fd.as_fd()), WaitPidFlag::WEXITED | NOWAIT) {
                Ok(_) => By::PidFd(fd),
                Err(Errno::ECHILD) => By::Reaped,
                Err(Errno::EINVAL) => By::Pid,
                Err(e) => return Err(context(pid, "waitid(P_PIDFD)", e)),
            },
            // ESRCH: no process has the pid any more, so the worker was reaped.
            Err(rustix::io::Errno::SRCH) => By::Reaped,
            // ENOSYS: Linux before 5.3; EPERM: a seccomp filter (pidfd_open never refuses a
            // child of the caller otherwise).
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => By::Pid,
            Err(e) => return Err(context(pid, "pidfd_open", Errno::from_raw(e.raw_os_error()))),
        };
        Ok(Self { pid, by })
    }

    /// Its process id.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Whether it is reached through its pidfd (or had been reaped before it could be); false
    /// where the kernel has no pidfds and its pid is used.
    pub fn through_pidfd(&self) -> bool {
        !matches!(self.by, By::Pid)
    }

    /// The system call that [`WorkerProcess::signal`] makes, for error messages.
    pub fn signal_call(&self) -> &'static str {
        match self.by {
            By::Pid => "kill",
            By::PidFd(_) | By::Reaped => "pidfd_send_signal",
        }
    }

    /// Send `sig`. `ESRCH`: the worker has been reaped (by us or by someone else), and nobody
    /// received the signal.
    pub fn signal(&self, sig: Signal) -> nix::Result<()> {
        match &self.by {
            By::PidFd(fd) => {
                let sig = rustix::process::Signal::from_named_raw(sig as i32).ok_or(Errno::EINVAL)?;
                rustix::process::pidfd_send_signal(fd, sig).map_err(|e| Errno::from_raw(e.raw_os_error()))
            }
            By::Pid => kill(self.pid, sig),
            By::Reaped => Err(Errno::ESRCH),
        }
    }

    /// `waitid` on the worker with `flags`. `ECHILD`: it is not our child any more (reaped by
    /// someone else, or by us).
    pub fn wait(&self, flags: WaitPidFlag) -> nix::Result<WaitStatus> {
        match &self.by {
            By::PidFd(fd) => waitid(Id::PIDFd(fd.as_fd()), flags),
            By::Pid => waitid(Id::Pid(self.pid), flags),
            By::Reaped => Err(Errno::ECHILD),
        }
    }

    /// Continue, kill and reap it (the only wait in this crate that reaps: see the crate docs'
    /// reaping discipline). One reaped by someone else is left alone.
    pub fn kill_and_reap(&self) {
        // Never leave one stopped, even should the kill fail.
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.signal(Signal::SIGKILL);
        while let Err(Errno::EINTR) = self.wait(WaitPidFlag::WEXITED) {}
    }
}

/// Does not block, does not reap.
const NOWAIT: WaitPidFlag = WaitPidFlag::WNOHANG.union(WaitPidFlag::WNOWAIT);

/// `call` on worker `pid` failed with `e`, as an I/O error that says so.
fn context(pid: Pid, call: &str, e: Errno) -> io::Error {
    io::Error::new(io::Error::from(e).kind(), format!("{call} of host worker {pid}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn sleeper() -> Child {
        Command::new("sleep").arg("30").spawn().unwrap()
    }

    /// Stop, continue, kill and reap `p`, each event seen through `p` itself.
    fn drive(p: &WorkerProcess) {
        p.signal(Signal::SIGSTOP).unwrap();
        assert!(matches!(
            p.wait(WaitPidFlag::WSTOPPED),
            Ok(WaitStatus::Stopped(_, Signal::SIGSTOP))
        ));
        p.signal(Signal::SIGCONT).unwrap();
        assert!(matches!(p.wait(WaitPidFlag::WCONTINUED), Ok(WaitStatus::Continued(_))));
        p.kill_and_reap();
        assert_eq!(p.signal(Signal::SIGCONT), Err(Errno::ESRCH), "reaped");
        assert!(!std::path::Path::new(&format!("/proc/{}", p.pid())).exists(), "reaped");
    }

    #[test]
    // Each child is reaped by `drive` (`kill_and_reap`), which clippy cannot see.
    #[allow(clippy::zombie_processes)]
    fn a_child_is_driven_through_its_pidfd_and_by_pid_where_the_kernel_has_none() {
        let child = sleeper();
        let p = WorkerProcess::open(&child).unwrap();
        match p.by {
            By::PidFd(_) => assert_eq!(p.signal_call(), "pidfd_send_signal"),
            By::Pid => println!("SKIPPED the pidfd half: this kernel has no pidfds (the pid is used)"),
            By::Reaped => panic!("a living child opened as reaped"),
        }
        drive(&p);
        // The fallback of a kernel without pidfds, forced.
        let child = sleeper();
        let p = WorkerProcess {
            pid: Pid::from_raw(child.id().cast_signed()),
            by: By::Pid,
        };
        assert!(!p.through_pidfd());
        assert_eq!(p.signal_call(), "kill");
        drive(&p);
    }

    #[test]
    fn a_child_reaped_before_its_pidfd_is_opened_is_never_signalled() {
        let mut child = sleeper();
        child.kill().unwrap();
        child.wait().unwrap();
        let p = WorkerProcess::open(&child).unwrap();
        if matches!(p.by, By::Pid) {
            println!("SKIPPED a_child_reaped_before_its_pidfd_is_opened_is_never_signalled: this kernel has no pidfds");
            return;
        }
        assert!(matches!(p.by, By::Reaped));
        assert_eq!(p.signal(Signal::SIGKILL), Err(Errno::ESRCH));
        assert_eq!(p.wait(WaitPidFlag::WEXITED | NOWAIT), Err(Errno::ECHILD));
        p.kill_and_reap();
    }
}
