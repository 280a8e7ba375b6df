//! The host device behind the API: a low-priority stream is one [`HostQueue`] of worker
//! processes driven by lv1's launcher ([`XQueue`]); Lv3 is SIGSTOP/SIGCONT of its workers
//! (registered with lv3's signal registry like a GPU queue), Lv1 the launcher's drain.
use crate::check::Check;
use crate::error::{Error, ErrorKind, Result};
use host_device::{HostCommand, HostQueue, SharedHostSuspension, WorkerExe};
use lv1::{Config, HwQueue, XQueue};
use lv3::signals::{self, Refused, Registration};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

pub use host_device::{WORKER_ENV, WORKER_NAME};

/// The default host worker: `$PREEMPT_HOST_WORKER`, else host-device's `preempt-host-worker`
/// beside the running executable (where cargo puts the workspace's binaries): see
/// [`WorkerExe::find_beside_current_exe`].
pub fn default_worker() -> Result<WorkerExe> {
    WorkerExe::find_beside_current_exe().ok_or_else(|| {
        Error::invalid(format!(
            "no host worker program: no {WORKER_NAME} beside the executable; set {WORKER_ENV} to host-device's \
             {WORKER_NAME} (`cargo build --release -p host-device`), or give one when opening"
        ))
    })
}

/// Workers per LP stream by default: every core but one, at least one.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .saturating_sub(1)
        .max(1)
}

/// One host LP stream.
pub(crate) struct HostLp {
    pub queue: Arc<HostQueue>,
    pub xq: XQueue<HostQueue>,
    workers: usize,
    /// Worker records seen so far: id -> (records, all correct).
    seen: Mutex<BTreeMap<u64, (usize, bool)>>,
}

impl HostLp {
    pub fn spawn(exe: &WorkerExe, workers: usize, cfg: Config) -> Result<Self> {
        let queue = Arc::new(HostQueue::spawn(exe, workers)?);
        let xq = XQueue::new(Arc::clone(&queue), cfg)
            .map_err(|e| Error::new(ErrorKind::Device, format!("starting the launcher: {e}")))?;
        drop(xq.take_completions()); // only counted from here on
        Ok(HostLp {
            queue,
            xq,
            workers: workers.max(1),
            seen: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn submit_delay(&self, ns: u64) -> u64 {
        self.xq.submit(HostCommand::delay_ns(ns))
    }

    /// SIGSTOP of every worker, registered so that SIGINT/SIGTERM handling resumes it.
    pub fn suspend_lv3(&self, label: String) -> Result<HostHeld> {
        let pids = self.queue.pids();
        let resume: signals::ResumeFn = Box::new(move || {
            pids.iter().try_for_each(|&p| {
                kill(Pid::from_raw(p), Signal::SIGCONT).map_err(|e| format!("SIGCONT of host worker {p}: {e}"))
            })
        });
        match signals::register_around(label, resume, || self.queue.suspend_shared()) {
            Ok((susp, reg)) => Ok(HostHeld {
                susp: Some(susp),
                reg: Some(reg),
            }),
            Err(Refused::ShuttingDown) => Err(Error::new(
                ErrorKind::ShuttingDown,
                "host queue not suspended: the process is exiting on a signal",
            )),
            Err(Refused::Failed(e)) => Err(e.into()),
        }
    }

    pub fn check(&self) -> Check {
        let stats = self.xq.stats();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for r in self.queue.take_records() {
            let e = seen.entry(r.id).or_insert((0, true));
            e.0 += 1;
            e.1 &= r.is_correct();
        }
        let mut c = Check {
            submitted: stats.submitted,
            completed: stats.completed,
            finished: stats.pending == 0 && stats.in_flight == 0,
            ..Check::default()
        };
        if stats.errors > 0 {
            c.problem(format!("{} command(s) failed to launch or complete", stats.errors));
        }
        for id in 0..stats.submitted {
            match seen.get(&id) {
                Some(&(n, true)) if n == self.workers => c.exactly_once += 1,
                Some(&(n, correct)) if n > self.workers || !correct => c.problem(format!(
                    "command {id}: {n} worker record(s) for {} worker(s){}",
                    self.workers,
                    if correct { "" } else { ", wrong result" }
                )),
                Some(&(n, _)) if c.finished => {
                    c.problem(format!("command {id}: ran on {n} of {} workers", self.workers))
                }
                None if c.finished => c.problem(format!("command {id}: never ran")),
                _ => {}
            }
        }
        if let Some((&id, _)) = seen.range(stats.submitted..).next() {
            c.problem(format!("a record for command {id}, which was never submitted"));
        }
        c
    }
}

/// A host Lv3 suspension: resumes on drop, and leaves the signal registry when resumed.
pub(crate) struct HostHeld {
    susp: Option<SharedHostSuspension>,
    reg: Option<Registration>,
}

impl HostHeld {
    pub fn resume(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        let r = match self.susp.take() {
            Some(s) => s.resume().map_err(Error::from),
            None => Ok(()),
        };
        if let Some(reg) = self.reg.take() {
            // Deregistered whatever the outcome: the workers' pids are reaped with the queue and
            // a late SIGCONT could reach a stranger. A failed SIGCONT is the error returned.
            reg.deregister();
        }
        r
    }
}

impl Drop for HostHeld {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// The host HP stream: one worker, commands launched directly (no launcher: nothing suspends it).
pub(crate) struct HostHp {
    queue: HostQueue,
    next: AtomicU64,
}

impl HostHp {
    pub fn spawn(exe: &WorkerExe) -> Result<Self> {
        Ok(HostHp {
            queue: HostQueue::spawn(exe, 1)?,
            next: AtomicU64::new(0),
        })
    }

    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.queue.launch(id, HostCommand::delay_ns(ns))?;
        Ok(id)
    }

    pub fn synchronize(&self) -> Result<()> {
        self.queue.synchronize()?;
        drop(self.queue.take_records());
        Ok(())
    }
}
