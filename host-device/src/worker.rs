//! The worker process: one host "compute unit" running delay kernels in order.

use super::proto::{FromWorker, PARENT_ENV, PROTOCOL_VERSION, ToWorker, expected_result};
use lv1::clock::{now_ns, thread_cpu_ns};
use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::unistd::{getpid, getppid};
use std::io::{self, BufRead, BufWriter, Write};

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
/// serves as its own worker, as libpreempt_kfd's and Python's callers may). Reads `run` commands from stdin until EOF, runs them
/// in order and reports `start`/`done` on stdout (see the protocol module).
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
    for line in io::stdin().lock().lines() {
        let line = line?;
        let Some(ToWorker::Run { id, work_ns }) = ToWorker::parse(&line) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad command: {line:?}"),
            ));
        };
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
    Ok(())
}
