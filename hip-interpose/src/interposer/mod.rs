//! The interposer's state: the rule ([`crate::sched`]) over the process's streams, the device
//! that carries its actions out, the marks in flight ([`crate::watch`]) and which stream each
//! program event was last recorded on. The hooks (`ffi/`) call in here with plain numbers.
use crate::config::{API_GREATEST, API_LEAST, Config, GREATEST, Granularity, LEAST};
use crate::daemon::{Daemon, Orders};
use crate::device::{self, Created, Device, NON_BLOCKING};
use crate::ffi::next;
use crate::lv1::Lv1;
use crate::sched::{Action, Key, Scheduler};
use crate::watch::{Done, Pending, Watch};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Set once a preemptible stream exists: until then every hook is a plain pass-through (one
/// relaxed load on the launch path).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set in a fork child: the parent's streams, threads and queues are not the child's.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Counters for the exit line.
#[derive(Default)]
pub struct Counters {
    pub own_queues: AtomicUsize,
    pub suspends: AtomicU64,
    pub resumes: AtomicU64,
    pub failures: AtomicU64,
    pub marks: AtomicU64,
}

pub struct Interposer {
    pub cfg: Config,
    device: Box<dyn Device>,
    /// Decided at the first preemptible stream: `Some` when this process's streams are
    /// suspended at Lv1 ([`crate::lv1`]), `None` at the device's Lv3.
    lv1: OnceLock<Option<Lv1>>,
    /// The stream the null stream's work goes to under `PREEMPT_NULL_STREAM=own`, made at its first
    /// submission (`None`: it stays on the null stream).
    null_sub: OnceLock<Option<Key>>,
    done: OnceLock<&'static (dyn Fn(Vec<Done>) + Sync)>,
    sched: Mutex<Scheduler>,
    watch: Watch,
    /// Program event -> the stream it was last recorded on.
    events: Mutex<HashMap<usize, Key>>,
    /// The interposer's own events, free for reuse.
    pool: Mutex<Vec<usize>>,
    high_exists: AtomicBool,
    /// The scheduler daemon's client (`PREEMPT_SCHEDULER`).
    daemon: Option<Daemon>,
    pub counters: Counters,
}

/// The process's interposer; `None` when it is off (`PREEMPT_INTERPOSE=0`, a bad setting, a
/// fork child): every hook then passes its call on untouched.
pub fn get() -> Option<&'static Interposer> {
    static IP: OnceLock<Option<Interposer>> = OnceLock::new();
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    IP.get_or_init(|| {
        let cfg = match Config::from_env() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("preempt-hip: {e}; the interposer is off for this process");
                return None;
            }
        };
        if !cfg.enabled {
            return None;
        }
        crate::ffi::at_fork_and_exit(exit::child_after_fork, exit::at_exit);
        let ip = Interposer::new(cfg, device::open());
        if ip.cfg.log {
            let daemon = match &ip.daemon {
                Some(d) => format!(
                    "; scheduler daemon at {} as {:?} {}",
                    ip.cfg
                        .scheduler
                        .as_ref()
                        .map_or(String::new(), |p| p.display().to_string()),
                    d.device().kind,
                    d.device().id
                ),
                None => String::new(),
            };
            eprintln!(
                "preempt-hip: pid {} on {}; granularity {:?}{daemon}",
                std::process::id(),
                ip.device.describe(),
                ip.cfg.granularity
            );
        }
        Some(ip)
    })
    .as_ref()
}

/// Whether hooks must look at a launch at all.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// In a fork child: off from now on.
pub fn forked() {
    FORKED.store(true, Ordering::Relaxed);
    ACTIVE.store(false, Ordering::Relaxed);
}

/// The interposer's part of a call never unwinds into C: a panic there is reported and the
/// program's call goes on as if the interposer were not there.
pub(crate) fn quietly<T>(f: impl FnOnce() -> Option<T>) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        eprintln!("preempt-hip: internal error (a panic); this call passes through unscheduled");
        None
    })
}

/// The path of every submission hook: `call` (the runtime's function with the program's
/// arguments) runs exactly once; before it, the streams it outranks are suspended, and after it
/// a mark follows its work, when the stream can outrank anything. On an Lv1 stream the call
/// first waits at the stream's gate. Until a preemptible stream exists it costs one relaxed
/// load (examples/hook_cost.rs measures it).
pub fn submission(key: Key, call: impl FnOnce() -> i32) -> i32 {
    if !active() {
        return call();
    }
    match get() {
        Some(ip) => ip.submit(key, call),
        None => call(),
    }
}

/// What a submission's hook carries from before the call to after it.
pub struct Ticket {
    key: Key,
    mark: u64,
}

impl Interposer {
    /// The interposer over `device`; with [`Config::scheduler`], also the daemon's client (a
    /// daemon that cannot be reached is retried in the background; a device that cannot say
    /// who it is leaves the process scheduled within itself, with one line saying why).
    pub fn new(cfg: Config, device: Box<dyn Device>) -> Interposer {
        let daemon = cfg.scheduler.as_ref().and_then(|socket| {
            let orders = Orders {
                hold: |key| get().ok_or("the interposer is off")?.daemon_hold(key),
                release: |key| get().ok_or("the interposer is off")?.daemon_release(key),
            };
            let started = device.sched_device().and_then(|d| Daemon::start(socket, d, orders));
            started
                .inspect_err(|e| {
                    eprintln!("preempt-hip: no scheduler daemon for this process ({e}); scheduled within itself")
                })
                .ok()
        });
        let mut sched = Scheduler::new(cfg.granularity == Granularity::Stream);
        // The null stream: normal priority, blocking (legacy semantics), never suspended.
        sched.add(0, 0, false, true);
        Interposer {
            cfg,
            device,
            lv1: OnceLock::new(),
            null_sub: OnceLock::new(),
            done: OnceLock::new(),
            sched: Mutex::new(sched),
            watch: Watch::default(),
            events: Mutex::new(HashMap::new()),
            pool: Mutex::new(Vec::new()),
            high_exists: AtomicBool::new(false),
            daemon,
            counters: Counters::default(),
        }
    }

    /// Creates a stream the interposer takes over: `Some` when it gets a queue of its own (the
    /// handle, or the device's failure: the hook then creates a plain stream), `None` when it
    /// does not.
    pub fn create_own(&self, flags: u32, priority: i32) -> Option<Result<usize, String>> {
        let p = priority.clamp(GREATEST, LEAST);
        if !self.cfg.wants_own_queue(p, self.high_exists.load(Ordering::Relaxed)) {
            return None;
        }
        self.take_over(flags, priority)
    }

    /// Makes a preemptible stream at `priority` (within the limit on their number): `None` past
    /// the limit.
    fn take_over(&self, flags: u32, priority: i32) -> Option<Result<usize, String>> {
        let p = priority.clamp(GREATEST, LEAST);
        let n = &self.counters.own_queues;
        if n.load(Ordering::Relaxed) >= self.cfg.max_own_queues {
            return None;
        }
        let made = self.new_streams().create(flags, priority);
        match &made {
            Ok(Created { key, blocking }) => {
                n.fetch_add(1, Ordering::Relaxed);
                let actions = lock(&self.sched).add(*key, p, true, *blocking);
                self.carry_out_unlocked(actions);
                if let Some(d) = &self.daemon {
                    d.register(*key, p);
                }
                ACTIVE.store(true, Ordering::Relaxed);
                if self.cfg.log {
                    let how = match self.lv1() {
                        Some(l) => format!("is preemptible at Lv1 (at most {} commands on the device)", l.threshold),
                        None => "has a queue of its own".into(),
                    };
                    eprintln!("preempt-hip: stream {key:#x} (priority {priority}) {how}");
                }
            }
            Err(e) => eprintln!(
                "preempt-hip: a queue of its own for a priority-{priority} stream failed ({e}); created as asked, never suspended"
            ),
        }
        Some(made.map(|c| c.key))
    }

    /// A stream the runtime created as asked: known to the rule, never suspended.
    pub fn register_plain(&self, key: Key, flags: u32, priority: i32) {
        let p = priority.clamp(GREATEST, LEAST);
        if p <= GREATEST {
            self.high_exists.store(true, Ordering::Relaxed);
        }
        let actions = lock(&self.sched).add(key, p, false, flags & NON_BLOCKING == 0);
        self.carry_out_unlocked(actions);
        if self.daemon.is_some() && p < LEAST {
            // Its work is a block for the daemon: the hooks must see it.
            ACTIVE.store(true, Ordering::Relaxed);
        }
    }

    /// The program destroys `key`: resumed first if suspended; `Some` when the device made it
    /// (and destroyed it now), `None` when the runtime must.
    pub fn destroy(&self, key: Key) -> Option<Result<(), String>> {
        let (mine, actions) = {
            let mut s = lock(&self.sched);
            let mine = s.is_preemptible(key);
            (mine, s.remove(key))
        };
        self.carry_out_unlocked(actions);
        let r = mine.then(|| {
            if let Some(d) = &self.daemon {
                d.unregister(key);
            }
            self.counters.own_queues.fetch_sub(1, Ordering::Relaxed);
            self.streams().destroy(key)
        });
        self.sync_daemon();
        r
    }

    /// A submission on `key` once a preemptible stream exists ([`submission`]'s slow path).
    pub fn submit(&'static self, key: Key, call: impl FnOnce() -> i32) -> i32 {
        let gate = quietly(|| self.lv1_enter(key));
        let ticket = quietly(|| self.before_submit(key));
        let c = call();
        quietly(|| {
            if let Some(t) = ticket {
                self.after_submit(t);
            }
            if let Some(g) = gate {
                self.lv1_launched(key, g, c);
            }
            Some(())
        });
        c
    }

    /// Before a submission on `key`: when it can suspend others (in this process, or, through
    /// the daemon, in others), they are suspended now (before the work reaches the device) and a
    /// ticket says to mark it afterwards.
    pub fn before_submit(&self, key: Key) -> Option<Ticket> {
        let (ticket, report) = {
            let mut s = lock(&self.sched);
            let report = self.daemon.is_some() && s.priority(key).is_some_and(|p| p < LEAST);
            if !s.needs_mark(key) && !report {
                return None;
            }
            let (mark, actions) = s.submit(key)?;
            self.carry_out(&mut s, actions);
            (Ticket { key, mark }, report)
        };
        if report {
            self.sync_daemon();
        }
        Some(ticket)
    }

    /// Tells the daemon which levels are busy now (never with the rule's lock held: the daemon's
    /// client calls [`Interposer::daemon_hold`] with its own lock held).
    fn sync_daemon(&self) {
        if let Some(d) = &self.daemon {
            d.sync(|| lock(&self.sched).busy_priorities());
        }
    }

    /// A new priority for `key` (an API over the interposer, e.g. XSched's `XHintPriority`,
    /// re-prioritises a stream the program already made), on HIP's sense with more levels
    /// ([`API_GREATEST`]..=[`API_LEAST`]). Whether it can be suspended was decided when it was
    /// created.
    pub fn set_priority(&self, key: Key, priority: i32) -> Result<(), String> {
        let p = priority.clamp(API_GREATEST, API_LEAST);
        let preemptible = {
            let mut s = lock(&self.sched);
            let actions = s
                .set_priority(key, p)
                .ok_or_else(|| format!("stream {key:#x} is not known to the interposer"))?;
            self.carry_out(&mut s, actions);
            s.is_preemptible(key)
        };
        if p <= GREATEST {
            self.high_exists.store(true, Ordering::Relaxed);
        }
        if let Some(d) = &self.daemon {
            if preemptible {
                d.unregister(key);
                d.register(key, p);
            }
            if p < LEAST {
                ACTIVE.store(true, Ordering::Relaxed);
            }
        }
        self.sync_daemon();
        Ok(())
    }

    /// The daemon holds `key` (another process's more urgent work runs).
    pub fn daemon_hold(&self, key: Key) -> Result<(), String> {
        let mut s = lock(&self.sched);
        let actions = s
            .hold(key)
            .ok_or_else(|| format!("stream {key:#x} cannot be held (unknown, or left running after a failure)"))?;
        self.carry_out(&mut s, actions);
        if s.is_suspended(key) {
            Ok(())
        } else {
            Err(format!("suspending stream {key:#x} failed"))
        }
    }

    /// The daemon releases `key`.
    pub fn daemon_release(&self, key: Key) -> Result<(), String> {
        let mut s = lock(&self.sched);
        let actions = s.release(key);
        self.carry_out(&mut s, actions);
        Ok(())
    }

    /// After the submission: an event of ours recorded behind it, watched until it completes.
    pub fn after_submit(&'static self, t: Ticket) {
        self.counters.marks.fetch_add(1, Ordering::Relaxed);
        let ev = lock(&self.pool).pop().map_or_else(next::create_event, Ok);
        let recorded = ev.and_then(|e| {
            next::record_event(e, t.key)
                .map(|()| e)
                .inspect_err(|_| self.recycle(e))
        });
        match recorded {
            Ok(e) => self.watch.add(
                e,
                Pending::Mark {
                    key: t.key,
                    mark: t.mark,
                },
                true,
                self.on_done(),
            ),
            Err(c) => {
                // Without an event the work cannot be followed: taken as completed, so that
                // nothing stays suspended on its account.
                eprintln!(
                    "preempt-hip: a mark on stream {:#x} failed ({}); taken as complete",
                    t.key,
                    next::error_name(c)
                );
                let actions = lock(&self.sched).completed(t.key, t.mark);
                self.carry_out_unlocked(actions);
            }
        }
    }

    fn recycle(&self, e: usize) {
        lock(&self.pool).push(e);
    }

    /// The program recorded `event` on `key`.
    pub fn event_recorded(&self, event: usize, key: Key) {
        lock(&self.events).insert(event, key);
    }

    /// `waiter` is about to wait on `event`: if that event's stream is less urgent than the
    /// waiter, it is pinned (and resumed) until the event completes.
    pub fn before_wait(&'static self, waiter: Key, event: usize) {
        let Some(producer) = lock(&self.events).get(&event).copied() else {
            return;
        };
        {
            let mut s = lock(&self.sched);
            let (Some(w), Some(p)) = (s.priority(waiter), s.priority(producer)) else {
                return;
            };
            if !s.is_preemptible(producer) || p <= w {
                return;
            }
            let actions = s.pin(producer);
            self.carry_out(&mut s, actions);
        }
        self.watch
            .add(event, Pending::Pin { key: producer }, false, self.on_done());
    }

    /// The program destroys `event`: pins on it end.
    pub fn event_destroyed(&self, event: usize) {
        lock(&self.events).remove(&event);
        let gone = self.watch.forget_event(event);
        self.completed(gone);
    }

    fn completed(&self, done: Vec<Done>) {
        {
            let mut s = lock(&self.sched);
            for d in done {
                let actions = match d.what {
                    Pending::Mark { key, mark } => s.completed(key, mark),
                    Pending::Pin { key } => s.unpin(key),
                    Pending::Flight { key, n } => {
                        if let Some(g) = self.lv1().and_then(|l| l.gate(key)) {
                            g.left(n);
                        }
                        Vec::new()
                    }
                };
                self.carry_out(&mut s, actions);
                if d.owned {
                    self.recycle(d.event);
                }
            }
        }
        self.sync_daemon();
    }

    fn carry_out_unlocked(&self, actions: Vec<Action>) {
        if !actions.is_empty() {
            let mut s = lock(&self.sched);
            self.carry_out(&mut s, actions);
        }
    }

    /// Carries actions out in order, under the rule's lock (so that a suspend decided before a
    /// resume is never carried out after it); a failure leaves the stream running for good.
    fn carry_out(&self, s: &mut Scheduler, actions: Vec<Action>) {
        for a in actions {
            let (key, r, n) = match a {
                Action::Suspend(k) => (k, self.streams().suspend(k), &self.counters.suspends),
                Action::Resume(k) => (k, self.streams().resume(k), &self.counters.resumes),
            };
            match r {
                Ok(()) => {
                    n.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    self.counters.failures.fetch_add(1, Ordering::Relaxed);
                    eprintln!("preempt-hip: {a:?} failed ({e}); stream {key:#x} is left running from now on");
                    if matches!(a, Action::Suspend(_)) {
                        // Whatever state the failed suspend left, try to have it running.
                        let _ = self.streams().resume(key);
                    }
                    s.failed(key);
                }
            }
        }
    }
}

mod exit;
mod levels;
mod null_stream;
pub use null_stream::route;
#[cfg(test)]
mod tests;
