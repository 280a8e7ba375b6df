//! The host device behind the API: a low-priority stream is one [`HostQueue`] of worker
//! processes driven by lv1's launcher ([`XQueue`]); Lv3 is SIGSTOP/SIGCONT of its workers
//! (registered with lv3's signal registry like a GPU queue), Lv2 their hold ([`HostQueue::hold`]),
//! Lv1 the launcher's drain.
//!
//! Any thread may create a stream, and the stream may outlive it (host-device forks every
//! worker from one thread that lasts as long as the process). A worker that dies (killed, OOM,
//! exited) leaves its stream unable to run anything, so every later call on it fails with a
//! device error naming the worker, its pid and how it ended (`dead_worker`), and `check`
//! lists it as a problem; closing works as ever.
use crate::check::{Check, DeviceRecord, LpCompletion, Verified, WorkerSpan};
use crate::device::{Abandon, DeviceBackend, HpBody, Launcher, LpBody, Lv3Held};
use crate::error::{Error, ErrorKind, Result};
use crate::host_records::Seen;
use crate::mech::{Lv3Setup, MechanismInfo};
use crate::options::{Level, Options};
use crate::owner::Owner;
use host_device::{SharedHostHold, SharedHostSuspension, WorkerExe};
use lv1::{Completion, Config, HwQueue, Stats, SuspendMode, WaitIdleError, XQueue};
use lv3::MechanismChoice;
use lv3::mechanism::Preemptor;
use lv3::signals::{self, Refused, Registration};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use host_device::{WORKER_ENV, WORKER_NAME};
// The host device itself (its LP queue, commands, holds and records), for a measurement that
// drives its hardware queue directly behind a launcher of its own, as a GPU measurement drives
// `gpu::GpuDevice::lp_queue`'s.
pub use host_device::{HostCommand, HostDevice, HostError, HostHold, HostQueue, HostSuspension, KernelRecord};

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

/// The error of a call on an LP stream whose worker `e` says is dead (others pass unchanged).
fn dead_worker(e: HostError) -> Error {
    died(e, "the stream cannot run commands any more; close it")
}

/// [`dead_worker`] for the session's HP stream, which only closes with its session.
fn dead_hp_worker(e: HostError) -> Error {
    died(
        e,
        "the session's high-priority stream cannot run commands any more; close the session",
    )
}

fn died(e: HostError, then: &str) -> Error {
    let dead = matches!(e, HostError::WorkerDied { .. });
    let mut err = Error::from(e);
    if dead {
        err.message = format!("{}: {then}", err.message);
    }
    err
}

/// Workers per LP stream by default: every core but one, at least one.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .saturating_sub(1)
        .max(1)
}

/// Without `keep_records`, a host LP stream folds its workers' records into its check every this
/// many submissions.
const ABSORB_EVERY: u64 = 1024;

/// One host LP stream.
pub(crate) struct HostLp {
    pub queue: Arc<HostQueue>,
    pub xq: XQueue<HostQueue>,
    workers: usize,
    /// Worker records seen so far.
    seen: Mutex<Seen>,
    /// The launcher's completions, kept for [`HostLp::take_completions`] when asked.
    completions: Mutex<Option<Receiver<Completion<HostError>>>>,
    /// Measurements keep the workers' records for `verify`; an application does not, and its
    /// stream folds them into the bounded check as it goes ([`HostLp::absorb`]).
    keep: bool,
}

/// A worker's record as the API reports it.
fn device_record(r: &KernelRecord) -> DeviceRecord {
    DeviceRecord {
        id: r.id,
        correct: r.is_correct(),
        worker: Some(WorkerSpan {
            worker: r.worker,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
        }),
    }
}

impl HostLp {
    /// `keep`: keep the launcher's completions (otherwise they are only counted).
    pub fn spawn(exe: &WorkerExe, workers: usize, cfg: Config, keep: bool) -> Result<Self> {
        let queue = Arc::new(HostQueue::spawn(exe, workers)?);
        let xq = XQueue::new(Arc::clone(&queue), cfg)
            .map_err(|e| Error::new(ErrorKind::Device, format!("starting the launcher: {e}")))?;
        let rx = xq.take_completions();
        Ok(HostLp {
            queue,
            xq,
            workers: workers.max(1),
            seen: Mutex::new(Seen::default()),
            completions: Mutex::new(if keep { rx } else { None }),
            keep,
        })
    }

    /// Folds the workers' records so far into the bounded check (`Seen`), so that a stream whose
    /// owner never calls `check` keeps memory that does not grow with its length; `verify` then
    /// returns only the records since.
    fn absorb(&self) {
        let submitted = self.xq.stats().submitted;
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let taken: Vec<DeviceRecord> = self.queue.take_records().iter().map(device_record).collect();
        seen.add(&taken, submitted, self.workers);
    }

    /// SIGSTOP of every worker, registered so that SIGINT/SIGTERM handling resumes it.
    /// The registry is copied into a fork child, whose resume-all (its own signal handling)
    /// must not SIGCONT the parent's workers (docs/c-api.md#fork): the entry checks the process.
    fn stop_workers(&self, label: String) -> Result<HostHeld> {
        let queue = Arc::clone(&self.queue);
        let owner = Owner::here();
        // Every worker is continued even if one is gone, through its pidfd: one reaped (by the
        // application, too) is the error, and its pid's new owner gets nothing.
        let resume: signals::ResumeFn = Box::new(move || {
            owner.check().map_err(|e| e.message)?;
            queue
                .continue_workers()
                .map_err(|e| format!("SIGCONT of host workers: {e}"))
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

    /// `Ok` while every worker of the stream lives ([`dead_worker`] otherwise).
    fn health(&self) -> Result<()> {
        self.queue.health().map_err(dead_worker)
    }

    /// The exactly-once check over every worker record seen so far, with the records taken by
    /// this call; a dead worker is its first problem.
    fn check_records(&self) -> Verified {
        let stats = self.xq.stats();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let taken: Vec<DeviceRecord> = self.queue.take_records().iter().map(device_record).collect();
        seen.add(&taken, stats.submitted, self.workers);
        let mut v = Verified::new(&stats, self.workers);
        v.records = taken;
        seen.check(&mut v.check, stats.submitted, self.workers);
        if let Err(e) = self.queue.health() {
            v.check.problems.insert(0, e.to_string());
            v.check.problems.truncate(crate::check::MAX_PROBLEMS);
        }
        v
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
            Some(s) => s.resume().map_err(dead_worker),
            None => Ok(()),
        };
        if let Some(reg) = self.reg.take() {
            // Deregistered whatever the outcome: the entry holds the queue alive, and a late
            // SIGCONT would continue a later suspension. A failed SIGCONT is the error returned.
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

/// A host Lv2 hold (releases on drop). Not in lv3's signal registry, unlike [`HostHeld`]: held
/// workers wait for input, not stopped, and die with the process (`PR_SET_PDEATHSIG`).
impl Lv3Held for SharedHostHold {
    fn resume(self: Box<Self>) -> Result<()> {
        SharedHostHold::resume(*self).map_err(dead_worker)
    }
}

/// The host HP stream: one worker, commands launched directly (no launcher: nothing suspends it).
pub(crate) struct HostHp {
    queue: HostQueue,
    next: AtomicU64,
    /// The running check: one worker runs the commands in launch order, so each record must be
    /// the next id (constant memory however long the stream lives).
    tally: Mutex<HpTally>,
}

#[derive(Default)]
struct HpTally {
    expected: u64,
    check: Check,
}

impl HostHp {
    pub fn spawn(exe: &WorkerExe) -> Result<Self> {
        Ok(HostHp {
            queue: HostQueue::spawn(exe, 1)?,
            next: AtomicU64::new(0),
            tally: Mutex::new(HpTally::default()),
        })
    }

    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        self.queue.health().map_err(dead_hp_worker)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.queue
            .launch(id, HostCommand::delay_ns(ns))
            .map_err(dead_hp_worker)?;
        Ok(id)
    }

    /// Waits for everything submitted; returns the worker's records of what completed since the
    /// last call. A dead worker is an error, even when everything it was given had completed.
    pub fn synchronize(&self) -> Result<Vec<DeviceRecord>> {
        self.queue.synchronize().map_err(dead_hp_worker)?;
        Ok(self.tally_records())
    }

    /// Takes the worker's records into the running check; returns them.
    fn tally_records(&self) -> Vec<DeviceRecord> {
        let taken: Vec<DeviceRecord> = self.queue.take_records().iter().map(device_record).collect();
        let mut t = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        for r in &taken {
            if r.id == t.expected && r.correct {
                t.check.exactly_once += 1;
            } else {
                let want = t.expected;
                t.check.problem(format!(
                    "HP command {}: {} (expected command {want} next)",
                    r.id,
                    if r.correct { "out of order" } else { "wrong result" }
                ));
            }
            t.expected = r.id + 1;
        }
        drop(t);
        taken
    }

    /// Close: whether every command submitted completes within `limit` (the queue's own wait
    /// has no limit, so its records are polled).
    fn idle_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            self.tally_records();
            let expected = self.tally.lock().unwrap_or_else(PoisonError::into_inner).expected;
            if expected == self.next.load(Ordering::Relaxed) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Every command submitted so far ran exactly once with its own result (after synchronize).
    pub fn check(&self) -> Check {
        let n = self.next.load(Ordering::Relaxed);
        let t = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let mut c = t.check.clone();
        (c.submitted, c.completed, c.finished) = (n, t.expected, t.expected == n);
        if t.expected < n {
            c.problem(format!(
                "HP commands {}..{n}: not run yet (synchronize first)",
                t.expected
            ));
        }
        c
    }
}

/// The host device behind a session: where its worker program is and how many workers an LP
/// stream gets.
pub(crate) struct HostBackend {
    exe: WorkerExe,
    workers: usize,
}

impl HostBackend {
    /// The host device for `opts`, with its Lv3 (SIGSTOP/SIGCONT) described. Only the `auto`
    /// mechanism is accepted: KFD mechanisms apply to GPUs.
    pub fn open(opts: &Options) -> Result<(HostBackend, Lv3Setup)> {
        if opts.mechanism != MechanismChoice::Auto {
            return Err(Error::invalid(format!(
                "mechanism {}: the host device's Lv3 is SIGSTOP/SIGCONT of its worker processes; KFD mechanisms \
                 apply to hip:N and kfd sessions",
                opts.mechanism
            )));
        }
        let exe = match &opts.worker {
            Some(w) => w.clone(),
            None => default_worker()?,
        };
        let workers = if opts.host_workers == 0 {
            default_workers()
        } else {
            opts.host_workers
        };
        let info = MechanismInfo {
            name: Some(crate::Mechanism::Sigstop.name().into()),
            asked: "auto".into(),
            why: "host device: Lv3 is SIGSTOP/SIGCONT of the stream's worker processes (host figures, not GPU figures)"
                .into(),
            verdicts: Vec::new(),
        };
        let lv3 = Lv3Setup { preemptor: None, info };
        Ok((HostBackend { exe, workers }, lv3))
    }
}

impl DeviceBackend for HostBackend {
    fn lp_stream(&self, _level: Level, _lv3: Option<&Arc<Preemptor>>, opts: &Options) -> Result<Box<dyn LpBody>> {
        Ok(Box::new(HostLp::spawn(
            &self.exe,
            self.workers,
            opts.lv1,
            opts.keep_records,
        )?))
    }
    fn hp_stream(&self, _opts: &Options) -> Result<Box<dyn HpBody>> {
        Ok(Box::new(HostHp::spawn(&self.exe)?))
    }
    fn own_lv3(&self) -> bool {
        true
    }
    fn bind_refused(&self) -> Option<Error> {
        Some(Error::unsupported("the host device has no KFD queues to bind"))
    }
}

/// The stream's launcher, with the workers' health checked where a call can fail: an Lv1
/// suspend of a stream with a dead worker is an error like every other call.
impl Launcher for HostLp {
    fn stats(&self) -> Stats {
        self.xq.stats()
    }
    fn suspend(&self, mode: SuspendMode) -> Result<()> {
        self.health()?;
        Launcher::suspend(&self.xq, mode).map_err(|e| match self.health() {
            Err(dead) => dead,
            Ok(()) => e,
        })
    }
    fn resume(&self) {
        Launcher::resume(&self.xq);
    }
    fn resume_dropping_pending(&self) {
        Launcher::resume_dropping_pending(&self.xq);
    }
    fn wait_idle(&self) -> std::result::Result<(), WaitIdleError> {
        self.xq.wait_idle()
    }
    fn wait_idle_for(&self, limit: Duration) -> std::result::Result<(), WaitIdleError> {
        self.xq.wait_idle_for(limit)
    }
}

impl LpBody for HostLp {
    fn launcher(&self) -> Option<&dyn Launcher> {
        Some(self)
    }
    fn submit_delay(&self, ns: u64) -> Result<u64> {
        self.health()?;
        let id = self.xq.submit(HostCommand::delay_ns(ns));
        if !self.keep && id % ABSORB_EVERY == ABSORB_EVERY - 1 {
            self.absorb();
        }
        Ok(id)
    }
    fn suspend_lv3(&self, label: &str, _pre: Option<&Preemptor>) -> Result<Box<dyn Lv3Held>> {
        let pids = self.queue.pids();
        let label = format!("{label} (host workers {pids:?}, SIGSTOP)");
        Ok(Box::new(self.stop_workers(label).map_err(|e| match self.health() {
            Err(dead) => dead,
            Ok(()) => e,
        })?))
    }
    /// Lv2: each worker finishes its command and starts no new one (the launcher goes on: what it
    /// launches meanwhile waits in the workers' inboxes).
    fn suspend_lv2(&self, _label: &str) -> Result<Box<dyn Lv3Held>> {
        self.health()?;
        let dead_or = |e: HostError| self.health().err().unwrap_or_else(|| e.into());
        Ok(Box::new(self.queue.hold_shared().map_err(dead_or)?))
    }
    fn lv2_name(&self) -> String {
        crate::Mechanism::Lv2Hold.name().into()
    }
    /// After the launcher went idle: a dead worker fails the wait (its commands failed, or it
    /// died after them; either way the stream runs nothing more).
    fn synchronize_device(&self) -> Result<()> {
        if !self.keep {
            self.absorb();
        }
        self.health()
    }
    fn verify(&self, _idle: bool) -> Result<Verified> {
        Ok(self.check_records())
    }
    fn describe(&self, id: u64, how: &str) -> String {
        format!(
            "host LP stream {id} ({} worker process(es)), {how}",
            self.queue.pids().len()
        )
    }
    fn lv3_name(&self, _pre: Option<&Preemptor>) -> String {
        crate::Mechanism::Sigstop.name().into()
    }
    fn host_pids(&self) -> Vec<i32> {
        self.queue.pids()
    }
    fn take_completions(&self) -> Vec<LpCompletion> {
        crate::check::drain_completions(&self.completions)
    }
    fn abandon(&self) -> Abandon {
        // Through the workers' pidfds: one the application reaped is skipped, never its pid's
        // new owner; the readers then see EOF and the waits on them end.
        self.queue.kill_workers();
        Abandon::Stopped
    }
}

impl Lv3Held for HostHeld {
    fn resume(self: Box<Self>) -> Result<()> {
        HostHeld::resume(*self)
    }
}

impl HpBody for HostHp {
    fn submit_delay(&self, ns: u64) -> Result<u64> {
        HostHp::submit_delay(self, ns)
    }
    /// The host worker always finishes: no limit is needed.
    fn wait(&self, _limit: Option<Duration>) -> Result<Vec<DeviceRecord>> {
        self.synchronize()
    }
    fn check(&self) -> Check {
        HostHp::check(self)
    }
    fn idle_within(&self, limit: Duration) -> bool {
        HostHp::idle_within(self, limit)
    }
    fn abandon(&self) -> Abandon {
        // Through the workers' pidfds: one the application reaped is skipped, never its pid's
        // new owner; the readers then see EOF and the waits on them end.
        self.queue.kill_workers();
        Abandon::Stopped
    }
}
