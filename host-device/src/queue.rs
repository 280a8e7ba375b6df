//! [`HostQueue`]: worker processes behind the [`HwQueue`] trait.

use super::ended::{self, Ended};
use super::process::WorkerProcess;
use super::proto::{FromWorker, PROTOCOL_VERSION, ToWorker, expected_result};
use super::spawn::{self, Input};
use super::{HostError, WorkerExe};
use lv1::{CommandId, HwQueue};
use nix::errno::Errno;
use std::io::{BufRead, BufReader};
use std::process::ChildStdout;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker may take to say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// "Forever" for waits that legitimately last as long as a suspension (~136 years).
const NO_LIMIT: Duration = Duration::from_secs(1 << 32);

/// A host delay kernel: `work_ns` of CPU work on every worker of the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostCommand {
    /// Work per worker, in nanoseconds of CPU time (T).
    pub work_ns: u64,
}

impl HostCommand {
    /// A delay kernel of `t` of work.
    pub fn delay(t: Duration) -> Self {
        Self {
            work_ns: u64::try_from(t.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// A delay kernel of `work_ns` nanoseconds of work.
    pub fn delay_ns(work_ns: u64) -> Self {
        Self { work_ns }
    }
}

/// A host sync point: "the first `n` commands launched on this queue".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostSync(pub u64);

/// What one worker reported for one command. Stamps are `CLOCK_MONOTONIC` ns taken in the
/// worker: `end_ns - start_ns` is >= `work_ns` plus any time the worker was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelRecord {
    /// The id given to [`HwQueue::launch`].
    pub id: CommandId,
    /// Index of the worker within its queue.
    pub worker: usize,
    /// When the worker began the command.
    pub start_ns: u64,
    /// When it finished.
    pub end_ns: u64,
    /// Work the worker was asked to do.
    pub work_ns: u64,
    /// The worker's checksum; see [`KernelRecord::is_correct`].
    pub result: u64,
}

impl KernelRecord {
    /// Whether `result` is the checksum of this command ([`super::expected_result`]).
    pub fn is_correct(&self) -> bool {
        self.result == expected_result(self.id, self.work_ns)
    }
}

pub(super) struct Launch {
    launched: u64,
    inputs: Vec<Input>,
    /// `hold` lines sent to each worker (host Lv2); each is answered by one `held`.
    pub(super) holds: Vec<u64>,
}

impl Launch {
    /// Workers that can be sent commands (none once the queue is being dropped).
    pub(super) fn inputs_len(&self) -> usize {
        self.inputs.len()
    }
}

#[derive(Default)]
pub(super) struct Progress {
    ready: Vec<bool>,
    started: Vec<u64>,
    done: Vec<u64>,
    /// `held` answers from each worker (host Lv2).
    pub(super) held: Vec<u64>,
    dead: Vec<bool>,
    protocol_error: Option<String>,
    records: Vec<KernelRecord>,
}

pub(super) struct Inner {
    progress: Mutex<Progress>,
    cv: Condvar,
}

/// One host hardware queue: `n` worker processes fed the same in-order command stream.
/// See the [module documentation](super).
pub struct HostQueue {
    /// The workers, each reached through its pidfd (the process module).
    pub(super) workers: Vec<WorkerProcess>,
    /// How each worker ended, once it was found dead (asked once: see [`HostQueue::died`]).
    ended: Vec<OnceLock<Ended>>,
    pub(super) suspended: Mutex<bool>,
    pub(super) launch: Mutex<Launch>,
    inner: Arc<Inner>,
    readers: Vec<JoinHandle<()>>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HostQueue {
    /// Start `workers` (at least 1) worker processes and wait until each says `ready`. Any
    /// thread may call it, and the queue may outlive that thread: the workers are forked by one
    /// thread that lasts as long as the process, each in a process group of its own, so that
    /// terminal job control cannot continue one that host Lv3 stopped (see the spawn module).
    pub fn spawn(exe: &WorkerExe, workers: usize) -> Result<Self, HostError> {
        let n = workers.max(1);
        let inner = Arc::new(Inner {
            progress: Mutex::new(Progress::default()),
            cv: Condvar::new(),
        });
        {
            let mut p = lock(&inner.progress);
            (p.ready, p.started, p.done, p.held, p.dead) =
                (vec![false; n], vec![0; n], vec![0; n], vec![0; n], vec![false; n]);
        }
        // From here on, `q`'s Drop cleans up whatever was started if a later step fails.
        let mut q = Self {
            workers: Vec::new(),
            ended: Vec::new(),
            suspended: Mutex::new(false),
            launch: Mutex::new(Launch {
                launched: 0,
                inputs: Vec::new(),
                holds: vec![0; n],
            }),
            inner,
            readers: Vec::new(),
        };
        for w in 0..n {
            let started = spawn::start(exe).map_err(HostError::Spawn)?;
            lock(&q.launch).inputs.push(started.input);
            q.workers.push(started.process);
            q.ended.push(OnceLock::new());
            let (inner, stdout) = (Arc::clone(&q.inner), started.output);
            let reader = std::thread::Builder::new()
                .name(format!("lv1-host-reader-{w}"))
                .spawn(move || inner.read_worker(w, stdout))
                .map_err(HostError::Spawn)?;
            q.readers.push(reader);
        }
        q.wait_progress("worker ready", READY_TIMEOUT, |p| p.ready.iter().all(|&r| r))?;
        Ok(q)
    }

    /// Process ids of the workers (for `/proc` inspection and tests).
    pub fn pids(&self) -> Vec<i32> {
        self.workers.iter().map(|w| w.pid().as_raw()).collect()
    }

    /// Whether the workers are signalled and waited for through pidfds, so that one reaped by
    /// someone else is reported as ended and its pid, given to another process meanwhile, is never
    /// signalled. False on a kernel without pidfds (before Linux 5.4), where the pids are used:
    /// see the crate docs' reaping discipline.
    pub fn uses_pidfds(&self) -> bool {
        self.workers.iter().all(WorkerProcess::through_pidfd)
    }

    /// Number of commands launched so far; [`HostSync`] and [`wait_started`] count in it.
    ///
    /// [`wait_started`]: Self::wait_started
    pub fn launched_count(&self) -> u64 {
        lock(&self.launch).launched
    }

    /// Wait until every worker has *started* the first `n` launched commands; false on
    /// timeout (e.g. because the queue is suspended).
    pub fn wait_started(&self, n: u64, timeout: Duration) -> Result<bool, HostError> {
        match self.wait_progress("start", timeout, |p| p.started.iter().all(|&s| s >= n)) {
            Err(HostError::Timeout(_)) => Ok(false),
            r => r.map(|()| true),
        }
    }

    /// Take (and forget) every record reported so far, in arrival order.
    pub fn take_records(&self) -> Vec<KernelRecord> {
        std::mem::take(&mut lock(&self.inner.progress).records)
    }

    /// Take the records of command `id` (one per worker once it has completed).
    pub fn take_records_for(&self, id: CommandId) -> Vec<KernelRecord> {
        let mut p = lock(&self.inner.progress);
        let (mine, rest) = std::mem::take(&mut p.records).into_iter().partition(|r| r.id == id);
        p.records = rest;
        mine
    }

    /// Launch `cmd` as `id`, wait for everything launched so far, return `id`'s records.
    pub fn run(&self, id: CommandId, cmd: HostCommand) -> Result<Vec<KernelRecord>, HostError> {
        self.launch(id, cmd)?;
        self.synchronize()?;
        Ok(self.take_records_for(id))
    }

    /// `Ok` while every worker is alive; otherwise [`HostError::WorkerDied`] for the first one
    /// found dead (it closed its pipes, a write found it gone, or the kernel reports its exit),
    /// saying how it ended. A queue with a dead worker cannot run a command any more: everything
    /// launched runs on every worker.
    pub fn health(&self) -> Result<(), HostError> {
        let closed = lock(&self.inner.progress).dead.iter().position(|&d| d);
        let dead = closed
            .or_else(|| self.ended.iter().position(|e| e.get().is_some()))
            .or_else(|| self.workers.iter().position(|w| ended::now(w).is_some()));
        dead.map_or(Ok(()), |w| Err(self.died(w)))
    }

    /// `SIGKILL` to every worker, e.g. to abandon what they run (a stream closed with commands in
    /// flight). Through the workers' pidfds: one already ended or reaped by someone else is
    /// skipped, and whoever has its pid now gets nothing. Only the queue's drop reaps them; their
    /// reader threads then see EOF, so waits on the queue end with [`HostError::WorkerDied`].
    pub fn kill_workers(&self) {
        for w in &self.workers {
            let _ = w.signal(nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// The error for worker `worker`, found dead: its pid and how it ended (asked of the kernel
    /// once, waiting briefly for the exit status of a worker whose pipes just closed).
    pub(crate) fn died(&self, worker: usize) -> HostError {
        let process = &self.workers[worker];
        HostError::WorkerDied {
            worker,
            pid: process.pid().as_raw(),
            ended: *self.ended[worker].get_or_init(|| ended::ending(process)),
        }
    }

    /// Send `line` to worker `worker` through `l` (the launch lock, kept across a whole message to
    /// every worker so that each worker's stream stays in the order the queue sent). A worker
    /// found gone is [`HostError::WorkerDied`] (the lock is let go first), and no signal is raised.
    pub(super) fn send_line<'a>(
        &'a self,
        l: MutexGuard<'a, Launch>,
        worker: usize,
        line: &str,
    ) -> Result<MutexGuard<'a, Launch>, HostError> {
        match l.inputs[worker].send_all(line.as_bytes()) {
            Ok(()) => Ok(l),
            // The worker closed its end: it ended (or is ending).
            Err(e)
                if matches!(
                    Errno::from_raw(e.raw_os_error().unwrap_or(0)),
                    Errno::EPIPE | Errno::ECONNRESET
                ) =>
            {
                drop(l);
                Err(self.died(worker))
            }
            Err(source) => Err(HostError::Io { worker, source }),
        }
    }

    /// Wait for `pred` on the progress, failing on a dead worker, a protocol error or timeout.
    pub(super) fn wait_progress(
        &self,
        what: &'static str,
        timeout: Duration,
        mut pred: impl FnMut(&Progress) -> bool,
    ) -> Result<(), HostError> {
        let deadline = Instant::now() + timeout;
        let mut p = lock(&self.inner.progress);
        loop {
            if pred(&p) {
                return Ok(());
            }
            if let Some(m) = &p.protocol_error {
                return Err(HostError::Protocol(m.clone()));
            }
            if let Some(worker) = p.dead.iter().position(|&d| d) {
                drop(p);
                return Err(self.died(worker));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HostError::Timeout(what));
            }
            p = self
                .inner
                .cv
                .wait_timeout(p, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Inner {
    /// Reader thread of worker `w`: apply its reports until EOF, then mark it dead.
    fn read_worker(&self, w: usize, stdout: ChildStdout) {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let mut p = lock(&self.progress);
            match FromWorker::parse(&line) {
                Some(FromWorker::Ready {
                    version: PROTOCOL_VERSION,
                    ..
                }) => p.ready[w] = true,
                Some(FromWorker::Start { .. }) => p.started[w] += 1,
                Some(FromWorker::Done {
                    id,
                    start_ns,
                    end_ns,
                    work_ns,
                    result,
                }) => {
                    p.done[w] += 1;
                    p.records.push(KernelRecord {
                        id,
                        worker: w,
                        start_ns,
                        end_ns,
                        work_ns,
                        result,
                    });
                }
                Some(FromWorker::Held { .. }) => p.held[w] += 1,
                _ => p.protocol_error = Some(format!("worker {w} said {line:?}")),
            }
            drop(p);
            self.cv.notify_all();
        }
        lock(&self.progress).dead[w] = true;
        self.cv.notify_all();
    }
}

impl HwQueue for HostQueue {
    type Command = HostCommand;
    type SyncPoint = HostSync;
    type Error = HostError;

    /// Send the command to every worker's socket (buffered, so this does not wait for the
    /// workers unless hundreds of commands are already queued on a stopped one: see the spawn
    /// module). A worker found gone is [`HostError::WorkerDied`], and no signal is raised.
    fn launch(&self, id: CommandId, cmd: HostCommand) -> Result<(), HostError> {
        let line = ToWorker::Run {
            id,
            work_ns: cmd.work_ns,
        }
        .encode();
        let mut l = lock(&self.launch);
        for worker in 0..l.inputs.len() {
            l = self.send_line(l, worker, &line)?;
        }
        l.launched += 1;
        Ok(())
    }

    fn record(&self) -> Result<HostSync, HostError> {
        Ok(HostSync(self.launched_count()))
    }

    fn wait(&self, sp: &HostSync) -> Result<(), HostError> {
        // No time limit: a sync point legitimately waits out a suspension of any length.
        self.wait_progress("sync point", NO_LIMIT, |p| p.done.iter().all(|&d| d >= sp.0))
    }

    /// Waits for everything launched, then fails if a worker is dead: whatever it ran, the queue
    /// cannot run anything more ([`HostQueue::health`]).
    fn synchronize(&self) -> Result<(), HostError> {
        self.wait(&self.record()?)?;
        self.health()
    }
}

impl Drop for HostQueue {
    /// Close the workers' command sockets, then `SIGCONT` (never leave one stopped), `SIGKILL`
    /// and reap each one (through its pidfd: one reaped by someone else is left alone, and so is
    /// whoever has its pid now), then join the reader threads (their pipes close with the workers).
    fn drop(&mut self) {
        lock(&self.launch).inputs.clear();
        for w in &self.workers {
            w.kill_and_reap();
        }
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}
