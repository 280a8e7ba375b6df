//! The worker process: one host "compute unit" running delay kernels in order.

use super::inbox::Inbox;
use super::proto::{FromWorker, PARENT_ENV, PROTOCOL_VERSION, expected_result};
use lv1::clock::{now_ns, thread_cpu_ns};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::unistd::{getpid, getppid};
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsFd, BorrowedFd};

/// Spin until the calling thread has done `work_ns` of CPU work.
///
/// This is the host delay kernel. It measures *work* on `CLOCK_THREAD_CPUTIME_ID`, not a
/// wall deadline: while the process is stopped (host Lv3) or descheduled, its CPU clock
/// stands still, so after a resume the command continues where it stopped and still does
/// its full T of work, like waves restored by CWSR. Its wall duration is therefore >= T
/// plus any time it was stopped.
pub fn spin_cpu(work_ns: u64) {
    let c0 = thread_cpu_ns();
    while thread_cpu_ns().saturating_sub(c0) < work_ns {
        std::hint::spin_loop();
    }
}

/// Entry point of a host worker process (the `preempt-host-worker` binary, or a program that
/// serves as its own worker, as libpreempt_kfd's and Python's callers may). Reads commands from
/// stdin until EOF, runs the `run` commands in order and reports `start`/`done` on stdout (see the
/// protocol module); a `hold` (host Lv2) lets the running command finish and starts nothing more
/// until `release`.
///
/// Before starting each command the worker takes in everything that has arrived, without
/// waiting (the `inbox` module): a `hold` sent while the last command ran is seen now, ahead of the
/// `run` lines queued behind it, and answered with `held` before anything else starts. With
/// nothing to run (idle, or held) it blocks reading. At EOF it runs what it has read, unless held
/// (no `release` can come any more), and exits.
///
/// The worker asks the kernel to SIGKILL it when its parent dies
/// (`PR_SET_PDEATHSIG`), so that a crashed parent cannot leave it stopped forever.
/// Linux fires that signal when the parent *thread* that forked the worker exits; a host queue
/// forks its workers from one thread that lasts as long as the process, so the signal comes
/// when the process ends. If the parent is already gone, the worker exits at once.
pub fn worker_main() -> io::Result<()> {
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
    if let Ok(parent) = std::env::var(PARENT_ENV)
        && parent != getppid().as_raw().to_string()
    {
        return Ok(());
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let mut send = |m: FromWorker| -> io::Result<()> {
        out.write_all(m.encode().as_bytes())?;
        out.flush()
    };
    send(FromWorker::Ready {
        version: PROTOCOL_VERSION,
        pid: getpid().as_raw(),
    })?;
    let stdin = io::stdin();
    let input = stdin.as_fd();
    let mut inbox = Inbox::default();
    let mut eof = false;
    loop {
        while !eof && readable_now(input)? {
            eof = !read_some(input, &mut inbox)?;
        }
        for _ in 0..inbox.take_owed() {
            send(FromWorker::Held { held_ns: now_ns() })?;
        }
        match inbox.next() {
            Some((id, work_ns)) => {
                let start_ns = now_ns();
                send(FromWorker::Start { id, start_ns })?;
                spin_cpu(work_ns);
                let end_ns = now_ns();
                send(FromWorker::Done {
                    id,
                    start_ns,
                    end_ns,
                    work_ns,
                    result: expected_result(id, work_ns),
                })?;
            }
            None if eof => return Ok(()),
            // Idle or held: wait for the next line.
            None => eof = !read_some(input, &mut inbox)?,
        }
    }
}

/// Whether `fd` has input (or its end) to read now, without waiting.
fn readable_now(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(n) => Ok(n > 0),
        // A signal (e.g. SIGCONT after host Lv3) interrupted the poll: look again next time.
        Err(Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// One read of `fd` into the inbox (blocking until something arrives); false at EOF.
fn read_some(fd: BorrowedFd<'_>, inbox: &mut Inbox) -> io::Result<bool> {
    let mut buf = [0u8; 4096];
    loop {
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) => {
                inbox.end()?;
                return Ok(false);
            }
            Ok(n) => {
                inbox.take(&buf[..n])?;
                return Ok(true);
            }
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
