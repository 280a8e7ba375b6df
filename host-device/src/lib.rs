//! The host device: CPU worker processes standing in for a GPU, as lv1 hardware queues.
//! Every figure measured on it is a host figure, never a GPU figure.
//!
//! A [`HostQueue`] is one hardware queue backed by `n` worker *processes* (its "compute
//! units"). Every command is a delay kernel of T of CPU work ([`worker::spin_cpu`]); like a
//! kernel sized to occupy every CU, it runs on all workers of the queue and a sync point
//! completes when every worker has finished everything launched before it. Commands are
//! sent to the workers' stdin (a socket, so that a dead worker is an error and never SIGPIPE)
//! and their `start`/`done` reports come back on stdout, read by one thread per worker. The
//! workers are forked by one thread that lasts as long as the process, each in a process group
//! of its own (the `spawn` module says why); a worker that dies makes every later call on its
//! queue fail with [`HostError::WorkerDied`], which says how it ended.
//!
//! **Lv3 on the host** is [`HostQueue::suspend`]: `SIGSTOP` to every worker, then wait
//! until the kernel reports each one stopped (a `waitid` stop event) — from then on the
//! queue holds no running work. The OS keeps the workers' state, and after `SIGCONT` the
//! interrupted command continues where it stopped, so the latency is flat in T, like CWSR.
//! Processes rather than threads, because stopping a thread asynchronously would need a
//! signal handler, i.e. `unsafe`, which this crate does not have.
//!
//! **Lv2 on the host** is [`HostQueue::hold`]: every worker finishes the command it runs and
//! takes no new one (a `hold` line it reads before starting each command; the `hold` module), so
//! the latency is the rest of the running command, at most T, like XSched's Lv2 (deactivate).
//! The commands launched and not yet started run after resume, in order, each once.
//!
//! **HP path**: a [`HostDevice`] has a separate one-worker HP queue; a tiny probe command
//! on it reports when it started running ([`HostDevice::probe_hp`]).
//!
//! **Reaping discipline**: each worker is reached through a pidfd opened right after its spawn
//! (the `process` module): it is signalled with `pidfd_send_signal` and the kernel is asked about
//! it with `waitid(P_PIDFD)`, never by its pid. Only `HostQueue`'s `Drop` reaps a worker
//! (`SIGCONT`, `SIGKILL`, `waitid(WEXITED)`); the crate's other `waitid` calls ask for
//! stop/continue events (`WSTOPPED`/`WCONTINUED`) and for exits only with `WNOWAIT` (to tell a
//! worker that died), none of which reaps. An application may reap our workers itself (a C or
//! Python program that ignores SIGCHLD or waits for any child): such a worker is reported as
//! ended ([`Ended::Reaped`], `ESRCH` to a signal and `ECHILD` to a wait through its pidfd), and
//! its pid, which the kernel may have given to an unrelated process since, is never signalled.
//! On a kernel without pidfds (`pidfd_open` came in Linux 5.3, `waitid(P_PIDFD)` in 5.4; a
//! seccomp filter that refuses `pidfd_open` counts too; [`HostQueue::uses_pidfds`] says which)
//! the workers are signalled and waited for by pid instead: the discipline above then keeps a
//! worker's pid reserved (at worst as a zombie) for as long as it can be signalled only while
//! the application reaps none of them.

//!
//! ```no_run
//! use host_device::{HostCommand, HostDevice, WorkerExe};
//! use std::time::Duration;
//! // Two LP workers running this crate's `preempt-host-worker` binary.
//! let dev = HostDevice::spawn(&WorkerExe::new("target/release/preempt-host-worker"), 2)?;
//! dev.lp().run(0, HostCommand::delay(Duration::from_millis(5)))?; // one command, awaited
//! let stopped = dev.lp().suspend()?; // SIGSTOP: the queue runs nothing from here on
//! let probe = dev.probe_hp(1)?; // the HP probe runs while the LP workers are stopped
//! stopped.resume()?;
//! println!("HP probe started at {} ns", probe.start_ns);
//! let held = dev.lp().hold()?; // Lv2: the running command finishes, no new one starts
//! held.resume()?;
//! # Ok::<(), host_device::HostError>(())
//! ```
#![forbid(unsafe_code)]

mod ended;
mod hold;
mod inbox;
mod process;
mod proto;
mod queue;
mod spawn;
mod stop;
#[cfg(feature = "test-util")]
pub mod testing;
mod worker;

pub use ended::Ended;
pub use hold::{HostHold, SharedHostHold};
pub use proto::{PROTOCOL_VERSION, expected_result};
pub use queue::{HostCommand, HostQueue, HostSync, KernelRecord};
pub use stop::{HostSuspension, SharedHostSuspension, proc_state};
pub use worker::{spin_cpu, worker_main};

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The worker program's name: this crate's binary (`src/bin/preempt-host-worker.rs`), the one
/// worker every user of the host device spawns. Cargo puts it beside the workspace's other
/// binaries (`cargo build -p host-device`); `scripts/install-capi.sh` installs it for libpreempt_kfd.
pub const WORKER_NAME: &str = "preempt-host-worker";

/// The variable that names the worker program; set and not empty, it wins over any search
/// ([`WorkerExe::find`]).
pub const WORKER_ENV: &str = "PREEMPT_HOST_WORKER";

/// How to start a worker process: a program and its arguments. For this crate's
/// [`WORKER_NAME`] binary, just its path ([`WorkerExe::find`] looks for it); a program that
/// serves as its own worker passes the argument on which it calls [`worker_main`].
#[derive(Clone, Debug)]
pub struct WorkerExe {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before which nothing else is passed.
    pub args: Vec<OsString>,
}

impl WorkerExe {
    /// `program` without arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// Add an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// The worker for a caller that does not name one: `$PREEMPT_HOST_WORKER` ([`WORKER_ENV`])
    /// if it is set and not empty, else the first `dir/preempt-host-worker` ([`WORKER_NAME`])
    /// of `dirs` that is a file; `None` if neither.
    ///
    /// ```no_run
    /// // libpreempt_kfd's search: beside the library, then where an install puts the worker.
    /// let lib = std::path::Path::new("/usr/local/lib");
    /// let worker = host_device::WorkerExe::find([lib.to_path_buf(), lib.join("../libexec/preempt-kfd")]);
    /// ```
    pub fn find(dirs: impl IntoIterator<Item = PathBuf>) -> Option<Self> {
        if let Some(p) = std::env::var_os(WORKER_ENV).filter(|p| !p.is_empty()) {
            return Some(Self::new(p));
        }
        dirs.into_iter()
            .map(|d| d.join(WORKER_NAME))
            .find(|p| p.is_file())
            .map(Self::new)
    }

    /// [`WorkerExe::find`] beside the running executable: where cargo puts the workspace's
    /// binaries, so `target/release/preempt-lat` finds `target/release/preempt-host-worker`.
    ///
    /// ```no_run
    /// let worker = host_device::WorkerExe::find_beside_current_exe().expect("preempt-host-worker is built");
    /// ```
    pub fn find_beside_current_exe() -> Option<Self> {
        let exe = std::env::current_exe().ok();
        Self::find(exe.as_deref().and_then(Path::parent).map(Path::to_path_buf))
    }
}

/// Errors of the host device.
#[derive(Debug)]
pub enum HostError {
    /// A worker could not be started.
    Spawn(std::io::Error),
    /// Writing to worker `worker` failed otherwise than by its death.
    Io {
        /// Worker index within its queue.
        worker: usize,
        /// The write error.
        source: std::io::Error,
    },
    /// Worker `worker` is gone (it exited, was killed, or closed its pipes): the queue cannot
    /// run commands any more.
    WorkerDied {
        /// Worker index within its queue.
        worker: usize,
        /// Its process id.
        pid: i32,
        /// How it ended.
        ended: Ended,
    },
    /// A worker said something that is not the protocol (wrong executable or version).
    Protocol(String),
    /// A system call on a worker failed.
    Sys(&'static str, nix::Error),
    /// A worker did not reach the expected state within the time limit.
    Timeout(&'static str),
    /// [`HostQueue::suspend`] was called on a queue that is already suspended.
    AlreadySuspended,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spawn(e) => write!(f, "cannot start host worker: {e}"),
            Self::Io { worker, source } => write!(f, "host worker {worker}: {source}"),
            Self::WorkerDied { worker, pid, ended } => write!(f, "host worker {worker} (pid {pid}) {ended}"),
            Self::Protocol(m) => write!(f, "host worker protocol error: {m}"),
            Self::Sys(what, e) => write!(f, "{what}: {e}"),
            Self::Timeout(what) => write!(f, "host worker timed out: {what}"),
            Self::AlreadySuspended => write!(f, "host queue is already suspended"),
        }
    }
}

impl std::error::Error for HostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn(e) | Self::Io { source: e, .. } => Some(e),
            Self::Sys(_, e) => Some(e),
            _ => None,
        }
    }
}

/// The host device: an LP queue of `lp_workers` workers, which the Lv1 launcher drives
/// and host Lv3 suspends, and a one-worker HP queue for probes.
///
/// Dropping the device drops its handles to the queues; a queue's workers are killed and
/// reaped when its last handle (e.g. one held by an [`XQueue`](lv1::XQueue)) goes.
pub struct HostDevice {
    lp: Arc<HostQueue>,
    hp: Arc<HostQueue>,
}

impl HostDevice {
    /// Start the workers (they are ready when this returns). On a machine with `c` cores,
    /// `lp_workers <= c - 1` leaves a core for the HP worker.
    pub fn spawn(exe: &WorkerExe, lp_workers: usize) -> Result<Self, HostError> {
        Ok(Self {
            lp: Arc::new(HostQueue::spawn(exe, lp_workers)?),
            hp: Arc::new(HostQueue::spawn(exe, 1)?),
        })
    }

    /// The low-priority queue.
    pub fn lp(&self) -> &Arc<HostQueue> {
        &self.lp
    }

    /// The high-priority queue.
    pub fn hp(&self) -> &Arc<HostQueue> {
        &self.hp
    }

    /// Run a zero-work probe with id `id` on the HP queue and return its record; its
    /// `start_ns` is when the probe began running, so "HP start latency" is
    /// `start_ns - request_ns` for a request stamped with [`lv1::clock::now_ns`].
    pub fn probe_hp(&self, id: lv1::CommandId) -> Result<KernelRecord, HostError> {
        let mut recs = self.hp.run(id, HostCommand::delay_ns(0))?;
        recs.pop()
            .ok_or(HostError::Protocol(format!("no record for probe {id}")))
    }
}
