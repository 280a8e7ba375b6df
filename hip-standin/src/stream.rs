//! Streams and events. A stream is one host queue (worker processes: host-device's
//! [`HostQueue`], started at the stream's first use, so that a program may create many streams
//! and use a few) fed by one dispatcher thread that takes the stream's operations in order: a
//! kernel is launched on the queue and awaited, then its side effects are written; an event
//! record marks the event complete; an event wait blocks the stream until that event completes
//! (as a GPU stream waits, so a wait on a stopped stream's event stops this one too).
use crate::code::{self, Code};
use crate::cus::Cus;
use crate::kernels::Call;
use crate::memory::Memory;
use host_device::{HostCommand, HostQueue, SharedHostSuspension, WorkerExe};
use lv1::HwQueue;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An event: a generation count of records and of completions.
#[derive(Default)]
pub struct Event {
    state: Mutex<EventState>,
    cv: Condvar,
}

#[derive(Default)]
struct EventState {
    recorded: u64,
    completed: u64,
    /// When the latest completion happened, on the process's monotonic clock.
    at: Option<Instant>,
}

impl Event {
    /// A new record: the generation its completion must reach.
    fn record(&self) -> u64 {
        let mut s = lock(&self.state);
        s.recorded += 1;
        s.recorded
    }

    fn complete(&self, generation: u64) {
        let mut s = lock(&self.state);
        if generation > s.completed {
            s.completed = generation;
            s.at = Some(Instant::now());
        }
        self.cv.notify_all();
    }

    /// Whether every record so far has completed (`hipEventQuery`).
    pub fn is_complete(&self) -> bool {
        let s = lock(&self.state);
        s.completed >= s.recorded
    }

    /// Blocks until every record made before the call has completed.
    pub fn synchronize(&self) {
        let mut s = lock(&self.state);
        let target = s.recorded;
        while s.completed < target {
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn wait_for(&self, generation: u64) {
        let mut s = lock(&self.state);
        while s.completed < generation {
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Milliseconds from `start`'s completion to this one's (`hipEventElapsedTime`).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32, Code> {
        let (a, b) = (lock(&start.state), lock(&self.state));
        if a.recorded == 0 || b.recorded == 0 {
            return Err(code::INVALID_HANDLE);
        }
        match (a.at, b.at) {
            (Some(a0), Some(b0)) if a.completed >= a.recorded && b.completed >= b.recorded => {
                let ms = if b0 >= a0 {
                    (b0 - a0).as_secs_f64() * 1e3
                } else {
                    -((a0 - b0).as_secs_f64() * 1e3)
                };
                #[allow(clippy::cast_possible_truncation)] // hipEventElapsedTime's result is a float
                Ok(ms as f32)
            }
            _ => Err(code::NOT_READY),
        }
    }
}

enum Op {
    Kernel(Call),
    Record(Arc<Event>, u64),
    Wait(Arc<Event>, u64),
}

#[derive(Default)]
struct Progress {
    submitted: u64,
    done: u64,
    /// The first error a kernel met (reported by the next synchronize, as a GPU fault would be).
    error: Option<Code>,
}

/// One stream.
pub struct Stream {
    /// The stream's number for the device's CUs.
    id: u64,
    /// The device's CUs, when kernels fill them (`crate::cus`).
    cus: Option<Arc<Cus>>,
    exe: WorkerExe,
    workers: usize,
    mem: Arc<Memory>,
    /// The queue and the sender to its dispatcher, from the first use on.
    started: OnceLock<Result<Started, Code>>,
    progress: Arc<(Mutex<Progress>, Condvar)>,
    suspension: Mutex<Suspension>,
    /// A resumed stream's stop, kept until its preempted kernel has the CUs back (then the
    /// workers continue); a suspend that comes first takes it back instead.
    pending: Arc<Mutex<Option<SharedHostSuspension>>>,
    /// Whether a kernel has started and not completed (set by the dispatcher).
    running: Arc<AtomicBool>,
    /// Suspensions in all, and those that found a kernel running: what tells a test that its
    /// suspends stopped kernels mid-way rather than an idle stream.
    suspends: AtomicU64,
    mid_kernel: AtomicU64,
    /// The priority given at creation (kept for `hipStreamGetPriority`).
    pub priority: i32,
    /// The flags given at creation.
    pub flags: u32,
}

/// A stream's suspension: none, asked for before the stream's first use (its workers are
/// stopped as soon as they exist, before any work reaches them), or its workers stopped.
enum Suspension {
    None,
    BeforeStart,
    Held(SharedHostSuspension),
}

struct Started {
    queue: Arc<HostQueue>,
    tx: Mutex<Sender<Op>>,
}

impl Stream {
    /// A stream of `workers` worker processes, started at its first use; its kernels take the
    /// device's `cus` when given.
    #[allow(clippy::too_many_arguments)] // one per property of the stream
    pub fn new(
        id: u64,
        cus: Option<Arc<Cus>>,
        exe: &WorkerExe,
        workers: usize,
        mem: Arc<Memory>,
        flags: u32,
        priority: i32,
    ) -> Stream {
        Stream {
            id,
            cus,
            exe: exe.clone(),
            workers,
            mem,
            started: OnceLock::new(),
            progress: Arc::new((Mutex::new(Progress::default()), Condvar::new())),
            suspension: Mutex::new(Suspension::None),
            pending: Arc::new(Mutex::new(None)),
            running: Arc::new(AtomicBool::new(false)),
            suspends: AtomicU64::new(0),
            mid_kernel: AtomicU64::new(0),
            priority,
            flags,
        }
    }

    fn started(&self) -> Result<&Started, Code> {
        self.started
            .get_or_init(|| {
                let queue = Arc::new(HostQueue::spawn(&self.exe, self.workers).map_err(|e| {
                    crate::warn(&format!("starting a stream's workers: {e}"));
                    code::OUT_OF_MEMORY
                })?);
                let (tx, rx) = channel();
                let (q, p, mem) = (Arc::clone(&queue), Arc::clone(&self.progress), Arc::clone(&self.mem));
                let cus = self.cus.clone().map(|c| (c, self.id));
                let running = Arc::clone(&self.running);
                std::thread::Builder::new()
                    .name("hip-standin stream".into())
                    .spawn(move || dispatch(&q, &rx, &p, &mem, cus.as_ref(), &running))
                    .map_err(|_| code::OUT_OF_MEMORY)?;
                Ok(Started {
                    queue,
                    tx: Mutex::new(tx),
                })
            })
            .as_ref()
            .map_err(|c| *c)
    }

    fn push(&self, op: Op) -> Result<(), Code> {
        let started = self.started()?;
        {
            let mut s = lock(&self.suspension);
            if matches!(*s, Suspension::BeforeStart) {
                *s = Suspension::Held(stop(&started.queue)?);
            }
        }
        lock(&self.progress.0).submitted += 1;
        lock(&started.tx).send(op).map_err(|_| code::LAUNCH_FAILURE)
    }

    pub fn launch(&self, call: Call) -> Result<(), Code> {
        self.push(Op::Kernel(call))
    }

    pub fn record(&self, ev: &Arc<Event>) -> Result<(), Code> {
        let g = ev.record();
        self.push(Op::Record(Arc::clone(ev), g))
    }

    /// Makes later work on this stream wait for `ev`'s latest record.
    pub fn wait_event(&self, ev: &Arc<Event>) -> Result<(), Code> {
        let g = lock(&ev.state).recorded;
        self.push(Op::Wait(Arc::clone(ev), g))
    }

    /// Whether everything submitted has completed (`hipStreamQuery`).
    pub fn is_idle(&self) -> bool {
        let p = lock(&self.progress.0);
        p.done >= p.submitted
    }

    /// Blocks until everything submitted before the call has completed; reports the first
    /// kernel error once.
    pub fn synchronize(&self) -> Result<(), Code> {
        let (m, cv) = &*self.progress;
        let mut p = lock(m);
        let target = p.submitted;
        while p.done < target {
            p = cv.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
        p.error.take().map_or(Ok(()), Err)
    }

    /// Stops the stream's workers (host Lv3: SIGSTOP, waited for; a stream not used yet is
    /// stopped as its workers start); idempotent. A kernel it was running gives the device's CUs
    /// up.
    pub fn suspend(&self) -> Result<(), Code> {
        let mut s = lock(&self.suspension);
        if matches!(*s, Suspension::None) {
            // Still stopped from before, waiting for the CUs: it stays stopped.
            let waiting = lock(&self.pending).take();
            *s = match (waiting, self.started.get()) {
                (Some(h), _) => Suspension::Held(h),
                (None, Some(Ok(started))) => Suspension::Held(stop(&started.queue)?),
                (None, _) => Suspension::BeforeStart,
            };
            if let Some(c) = &self.cus {
                c.suspended(self.id);
            }
            self.suspends.fetch_add(1, Ordering::Relaxed);
            if self.running.load(Ordering::SeqCst) {
                self.mid_kernel.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Whether a kernel has started and not completed.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    /// Suspensions so far (a suspend of a suspended stream is not one), and how many of them
    /// found a kernel running: started and not completed.
    pub fn suspend_counts(&self) -> (u64, u64) {
        (
            self.suspends.load(Ordering::Relaxed),
            self.mid_kernel.load(Ordering::Relaxed),
        )
    }

    /// Continues the stream's workers; idempotent. A kernel that gave the CUs up continues once it
    /// has them back (a thread waits for them, so that the resume itself never blocks).
    pub fn resume(&self) -> Result<(), Code> {
        let mut guard = lock(&self.suspension);
        let held = std::mem::replace(&mut *guard, Suspension::None);
        let at_once = self.cus.as_ref().is_none_or(|c| c.resumed(self.id));
        match held {
            Suspension::Held(h) if at_once => h.resume().map_err(|e| {
                crate::warn(&format!("resuming a stream: {e}"));
                code::LAUNCH_FAILURE
            }),
            Suspension::Held(h) => {
                *lock(&self.pending) = Some(h);
                let (cus, id, pending) = (self.cus.clone(), self.id, Arc::clone(&self.pending));
                std::thread::Builder::new()
                    .name("hip-standin resume".into())
                    .spawn(move || {
                        if let Some(c) = cus {
                            c.reacquire(id);
                        }
                        // Gone if a suspend took it back meanwhile: then the workers stay stopped.
                        if let Some(h) = lock(&pending).take()
                            && let Err(e) = h.resume()
                        {
                            crate::warn(&format!("resuming a stream: {e}"));
                        }
                    })
                    .map(drop)
                    .map_err(|_| code::OUT_OF_MEMORY)
            }
            Suspension::BeforeStart | Suspension::None => Ok(()),
        }
    }

    /// Whether the stream is suspended.
    pub fn is_suspended(&self) -> bool {
        !matches!(*lock(&self.suspension), Suspension::None)
    }

    /// The worker processes' pids (none before the stream's first use).
    pub fn pids(&self) -> Vec<i32> {
        match self.started.get() {
            Some(Ok(s)) => s.queue.pids(),
            _ => Vec::new(),
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // A destroyed stream never leaves its workers stopped.
        let _ = self.resume();
    }
}

fn stop(q: &Arc<HostQueue>) -> Result<SharedHostSuspension, Code> {
    q.suspend_shared().map_err(|e| {
        crate::warn(&format!("suspending a stream: {e}"));
        code::LAUNCH_FAILURE
    })
}

fn dispatch(
    q: &HostQueue,
    rx: &Receiver<Op>,
    progress: &(Mutex<Progress>, Condvar),
    mem: &Memory,
    cus: Option<&(Arc<Cus>, u64)>,
    running: &AtomicBool,
) {
    let mut next_id = 0u64;
    while let Ok(op) = rx.recv() {
        let res = match op {
            Op::Kernel(call) => {
                if let Some((c, id)) = cus {
                    c.acquire(*id);
                }
                running.store(true, Ordering::SeqCst);
                let mut run = |work_ns: u64| {
                    next_id += 1;
                    q.run(next_id, HostCommand::delay_ns(work_ns)).map_err(|e| {
                        crate::warn(&format!("a kernel on the host queue failed: {e}"));
                        code::LAUNCH_FAILURE
                    })
                };
                let ran = match call {
                    Call::Library(lib) => lib.run(mem, |ns| run(ns).map(drop)),
                    _ => run(call.work_ns()).and_then(|records| call.complete(mem, &records)),
                };
                running.store(false, Ordering::SeqCst);
                if let Some((c, id)) = cus {
                    c.done(*id);
                }
                ran
            }
            Op::Record(ev, g) => {
                ev.complete(g);
                Ok(())
            }
            Op::Wait(ev, g) => {
                ev.wait_for(g);
                Ok(())
            }
        };
        let (m, cv) = progress;
        let mut p = lock(m);
        p.done += 1;
        if let Err(c) = res {
            p.error.get_or_insert(c);
        }
        cv.notify_all();
    }
    // The sender is gone (the stream was destroyed): the workers go with the queue.
    let _ = q.synchronize();
}
