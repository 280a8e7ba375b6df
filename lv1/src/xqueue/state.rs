//! The launcher's shared state and its two threads.
//!
//! **Who waits on sync points.** The launcher thread itself, while it has work: at the
//! threshold it waits on the oldest recorded sync point and delivers its completions in its own
//! thread (as XSched's launch worker does), so a busy queue needs no hand-off between threads
//! per batch. The completion thread only while the launcher sleeps (idle, suspended, or waiting
//! for the fence the completion thread holds) or after it has ended (closing). At most one of
//! the two holds a fence at a time (`fence_taken`) and fences are taken oldest first, so
//! completions are delivered in launch order whoever delivers them.
//!
//! **Wake-ups.** One mutex guards the state (another the inbox, below); each kind of sleeper (the launcher, the completion
//! thread, outside callers of `suspend`/`wait_idle`) has a condvar of its own and is recorded in
//! the state before it sleeps. A thread notifies only a sleeper recorded there and clears the
//! record as it does, because Rust std's `notify_*` is a futex syscall even when nobody waits.
//! Outside callers are woken only when nothing is in flight any more, when the launcher goes to
//! sleep (idle, or settled after a suspension) and on suspend/resume/reconfiguration.
//!
//! **Submissions** go into an inbox with a lock of its own (on cache lines of its own), which
//! the launcher empties in one swap whenever its own pending queue has run dry: a submitter
//! shares only that lock with the launcher, and only for a swap, so `submit` stays short while
//! the launcher is busy. Lock order: the state, then the inbox; a submitter never holds both.
//!
//! **Lock traffic.** The launcher takes up to the rest of a batch of pending commands at once,
//! launches them and records the batch's sync point without the state lock, and takes that lock
//! again once per run, not once per command. While it is inside hardware calls without the lock it
//! sets `launcher_busy`, which is what `suspend` waits on to guarantee that no launch is under way
//! when it returns; `halt` (set by `suspend`) cuts a run short between two launches, and the
//! commands not launched go back to the front of the pending queue.

use super::{Completion, Stamps, Stats};
use crate::clock::now_ns;
use crate::{CommandId, Config, HwQueue};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A submitted command that has not been launched.
pub(super) struct Pending<C> {
    pub id: CommandId,
    pub cmd: C,
    pub submitted_ns: u64,
}

/// A launched command whose completion has not been observed yet.
struct Flight {
    id: CommandId,
    submitted_ns: u64,
    launched_ns: u64,
}

/// How a group of launched commands is observed complete.
enum Mark<SP> {
    /// A sync point recorded after the last command of the group.
    Point(SP),
    /// Recording failed: fall back to synchronizing the whole queue.
    Synchronize,
}

/// A recorded sync point and how many commands it covers: the next `cmds` of `State::fenced`.
struct Fence<SP> {
    mark: Mark<SP>,
    cmds: usize,
}

type Guard<'a, Q> = MutexGuard<'a, State<Q>>;

/// What `submit` touches: accepted commands the launcher has not taken yet.
struct Inbox<C> {
    next_id: CommandId,
    cmds: VecDeque<Pending<C>>,
    /// The launcher went to sleep for want of work (set under the state lock too): the next
    /// submitter wakes it.
    launcher_waiting: bool,
}

/// Keeps the inbox off the state's cache lines.
#[repr(align(128))]
struct Padded<T>(T);

pub(super) struct State<Q: HwQueue> {
    pub cfg: Config,
    /// Taken from the inbox, not launched yet, in id order (older than anything in the inbox).
    pending: VecDeque<Pending<Q::Command>>,
    /// Launched commands not covered by a sync point yet (the launcher holds their records).
    uncovered: usize,
    /// Recorded sync points not taken yet, oldest first.
    fences: VecDeque<Fence<Q::SyncPoint>>,
    /// The records of the commands those fences cover, in launch order.
    fenced: VecDeque<Flight>,
    /// A fence has been taken (by the launcher or the completer) and its completions are not
    /// counted yet; nobody else takes one meanwhile, which keeps completions in launch order.
    fence_taken: bool,
    /// Launched and not yet observed complete (uncovered + fenced + the taken fence's).
    pub in_flight: usize,
    pub suspended: bool,
    /// The launcher is inside hardware calls (launch or record) without the lock.
    pub launcher_busy: bool,
    /// Commands the launcher took from `pending` for the launches under way: they count as
    /// pending until it takes the lock again and counts the ones it launched in flight, so that
    /// no snapshot of the counts shows a queue with work as empty.
    launching: usize,
    /// The launcher sleeps on `cv_launcher` and nobody has woken it yet.
    launcher_asleep: bool,
    /// The completion thread sleeps on `cv_completer` and nobody has woken it yet.
    completer_asleep: bool,
    /// Threads other than the launcher and the completer sleeping on `cv_ext`.
    ext_waiters: usize,
    pub closing: bool,
    /// The launcher has ended (closing, nothing pending): the completer takes every fence left.
    launcher_done: bool,
    pub stats: Stats,
}

impl<Q: HwQueue> State<Q> {
    /// Whether no launch is under way and every launched command is covered by a sync point
    /// (what `suspend(Drain)` needs before it synchronizes).
    pub fn launches_settled(&self) -> bool {
        !self.launcher_busy && self.uncovered == 0
    }

    /// Whether the launcher is asleep although it could do something now (launch, or take the
    /// next fence at the threshold).
    fn launcher_has_work(&self) -> bool {
        self.launcher_asleep && !self.suspended && !self.pending.is_empty()
    }
}

pub(super) struct Shared<Q: HwQueue> {
    pub hwq: Arc<Q>,
    state: Mutex<State<Q>>,
    inbox: Padded<Mutex<Inbox<Q::Command>>>,
    /// The launcher sleeps here: for pending work, room, the completer's fence, resume, close.
    cv_launcher: Condvar,
    /// The completion thread sleeps here: for a fence to take while the launcher sleeps.
    cv_completer: Condvar,
    /// Everyone else (suspend, wait_idle): for launches to settle, drains, idleness.
    cv_ext: Condvar,
    /// Set by `suspend`, cleared by the resumes and by closing: the launcher stops a run of
    /// launches between two commands (the decision to launch nothing more is `suspended`, under
    /// the lock; this only makes a suspension wait for one launch instead of a batch).
    halt: AtomicBool,
    tx: Sender<Completion<Q::Error>>,
}

impl<Q: HwQueue> Shared<Q> {
    pub fn new(hwq: Arc<Q>, cfg: Config, tx: Sender<Completion<Q::Error>>) -> Self {
        let state = State {
            cfg,
            pending: VecDeque::new(),
            uncovered: 0,
            fences: VecDeque::new(),
            fenced: VecDeque::new(),
            fence_taken: false,
            in_flight: 0,
            suspended: false,
            launcher_busy: false,
            launching: 0,
            launcher_asleep: false,
            completer_asleep: false,
            ext_waiters: 0,
            closing: false,
            launcher_done: false,
            stats: Stats::default(),
        };
        Self {
            hwq,
            state: Mutex::new(state),
            inbox: Padded(Mutex::new(Inbox {
                next_id: 0,
                cmds: VecDeque::new(),
                launcher_waiting: false,
            })),
            cv_launcher: Condvar::new(),
            cv_completer: Condvar::new(),
            cv_ext: Condvar::new(),
            halt: AtomicBool::new(false),
            tx,
        }
    }

    /// Lock the state. A poisoned lock (a panic elsewhere while holding it) is taken over:
    /// the state is only mutated in small non-panicking steps, so it stays consistent.
    pub fn lock(&self) -> Guard<'_, Q> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn inbox(&self) -> MutexGuard<'_, Inbox<Q::Command>> {
        self.inbox.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commands submitted so far and commands not launched yet (taken and in the inbox).
    /// `st` is the state's guard: with it held, no launch run starts or ends meanwhile.
    pub fn counts(&self, st: &State<Q>) -> (u64, usize) {
        let ib = self.inbox();
        (ib.next_id, st.pending.len() + st.launching + ib.cmds.len())
    }

    /// Remove every command not launched yet, in id order.
    pub fn take_pending(&self, st: &mut State<Q>) -> Vec<Pending<Q::Command>> {
        let mut ib = self.inbox();
        st.pending.drain(..).chain(ib.cmds.drain(..)).collect()
    }

    /// Move the inbox's commands behind the pending ones (one swap when nothing is pending).
    /// Returns false if there were none.
    fn take_inbox(&self, st: &mut State<Q>) -> bool {
        let mut ib = self.inbox();
        if ib.cmds.is_empty() {
            return false;
        }
        if st.pending.is_empty() {
            std::mem::swap(&mut st.pending, &mut ib.cmds);
        } else {
            st.pending.append(&mut ib.cmds);
        }
        true
    }

    /// Set or clear the request to cut a run of launches short (see `halt`).
    pub fn set_halt(&self, halt: bool) {
        self.halt.store(halt, Ordering::Relaxed);
    }

    /// Sleep as an outside thread: counted in `ext_waiters` (under the lock, so no wake-up can
    /// be missed), which lets the other threads skip waking nobody. `None`: no time limit.
    pub fn wait_ext<'a>(&self, mut g: Guard<'a, Q>, limit: Option<Duration>) -> Guard<'a, Q> {
        g.ext_waiters += 1;
        let mut g = match limit {
            None => self.cv_ext.wait(g).unwrap_or_else(PoisonError::into_inner),
            Some(d) => self.cv_ext.wait_timeout(g, d).unwrap_or_else(PoisonError::into_inner).0,
        };
        g.ext_waiters -= 1;
        g
    }

    /// Outside waiters, if any.
    pub fn wake_outside(&self, st: &State<Q>) {
        if st.ext_waiters > 0 {
            self.cv_ext.notify_all();
        }
    }

    /// Wakes every recorded sleeper: for the rare changes that may concern anybody (resume,
    /// reconfiguration, closing).
    pub fn wake_all(&self, st: &mut State<Q>) {
        if std::mem::take(&mut st.launcher_asleep) {
            self.cv_launcher.notify_one();
        }
        if std::mem::take(&mut st.completer_asleep) {
            self.cv_completer.notify_one();
        }
        self.wake_outside(st);
    }

    /// Accept a command; wakes the launcher only if it sleeps for want of work.
    pub fn submit(&self, cmd: Q::Command) -> CommandId {
        let submitted_ns = now_ns();
        let mut ib = self.inbox();
        let id = ib.next_id;
        ib.next_id += 1;
        ib.cmds.push_back(Pending { id, cmd, submitted_ns });
        let wake = std::mem::take(&mut ib.launcher_waiting);
        drop(ib);
        if wake {
            // The launcher set `launcher_waiting` under the state lock and holds that lock until
            // it sleeps, so taking it here cannot miss the sleep; it may have been woken (and
            // have cleared `launcher_asleep`) by someone else meanwhile.
            let mut st = self.lock();
            if std::mem::take(&mut st.launcher_asleep) {
                self.cv_launcher.notify_one();
            }
        }
        id
    }

    /// The launcher thread: launch while allowed, in runs that end at the batch boundary;
    /// record a sync point every `batch` commands and whenever it is about to wait with
    /// uncovered commands (so that every launched command is eventually observed); at the
    /// threshold, wait on the oldest sync point itself.
    pub fn launcher(&self) {
        // Kept across iterations so that the steady state allocates nothing.
        let mut run: VecDeque<Pending<Q::Command>> = VecDeque::new();
        let mut uncovered: Vec<Flight> = Vec::new();
        let mut observed: Vec<Flight> = Vec::new();
        let mut st = self.lock();
        loop {
            if st.pending.is_empty() {
                self.take_inbox(&mut st);
            }
            let batch = st.cfg.batch();
            let room = st.cfg.threshold().saturating_sub(st.in_flight);
            if uncovered.len() >= batch {
                // Only after the batch was lowered by `set_config`: close the open batch now.
                st = self.record(st, &mut uncovered);
            } else if !st.suspended && room > 0 && !st.pending.is_empty() {
                let n = room.min(batch - uncovered.len()).min(st.pending.len());
                run.extend(st.pending.drain(..n));
                st = self.launch_run(st, &mut run, &mut uncovered);
            } else if !uncovered.is_empty() {
                st = self.record(st, &mut uncovered);
            } else if !st.suspended && !st.pending.is_empty() && !st.fence_taken && !st.fences.is_empty() {
                // At the threshold with work waiting: observe the oldest sync point here.
                st = self.observe(st, &mut observed);
            } else if st.closing && st.pending.is_empty() {
                st.launcher_done = true;
                if std::mem::take(&mut st.completer_asleep) {
                    self.cv_completer.notify_one();
                }
                self.wake_outside(&st);
                return;
            } else {
                // Idle, suspended, or at the threshold while the completer holds the oldest
                // fence: the completer takes over the fences until something wakes us.
                if st.pending.is_empty() && !st.suspended && !st.closing {
                    // Idle: the next submitter wakes us, unless one came in meanwhile.
                    let mut ib = self.inbox();
                    if !ib.cmds.is_empty() {
                        continue;
                    }
                    ib.launcher_waiting = true;
                }
                if !st.fence_taken && !st.fences.is_empty() && std::mem::take(&mut st.completer_asleep) {
                    self.cv_completer.notify_one();
                }
                self.wake_outside(&st);
                st.launcher_asleep = true;
                st = self.cv_launcher.wait(st).unwrap_or_else(PoisonError::into_inner);
                st.launcher_asleep = false;
            }
        }
    }

    /// Launch the commands of `run` in order without the lock, stopping early if `halt` is
    /// set; record the batch's sync point if this run completes it. Unlaunched commands go
    /// back to the front of the pending queue; failed launches complete at once with their error.
    fn launch_run<'a>(
        &'a self,
        mut st: Guard<'a, Q>,
        run: &mut VecDeque<Pending<Q::Command>>,
        uncovered: &mut Vec<Flight>,
    ) -> Guard<'a, Q> {
        let batch = st.cfg.batch();
        st.launcher_busy = true;
        st.launching = run.len();
        drop(st);
        let before = uncovered.len();
        let mut failed = Vec::new();
        while !self.halt.load(Ordering::Relaxed) {
            let Some(p) = run.pop_front() else { break };
            let flight = Flight {
                id: p.id,
                submitted_ns: p.submitted_ns,
                launched_ns: now_ns(),
            };
            match self.hwq.launch(p.id, p.cmd) {
                Ok(()) => uncovered.push(flight),
                Err(e) => failed.push((flight, e, now_ns())),
            }
        }
        let launched = uncovered.len() - before;
        let fence = (uncovered.len() >= batch).then(|| self.make_fence(uncovered.len()));
        let mut st = self.lock();
        st.launcher_busy = false;
        st.launching = 0;
        while let Some(p) = run.pop_back() {
            st.pending.push_front(p);
        }
        st.in_flight += launched;
        st.stats.launched += launched as u64;
        st.stats.max_in_flight = st.stats.max_in_flight.max(st.in_flight);
        match fence {
            Some(f) => self.push_fence(&mut st, f, uncovered),
            None => st.uncovered = uncovered.len(),
        }
        if !failed.is_empty() {
            for (flight, e, seen_ns) in failed {
                // A failed launch was never in flight: it completes now, out of launch order.
                self.send(std::iter::once(flight), &Err(Arc::new(e)), seen_ns);
                st.stats.completed += 1;
                st.stats.errors += 1;
            }
            self.wake_outside(&st);
        }
        st
    }

    /// Record a sync point covering all uncovered commands (lock released during the call).
    fn record<'a>(&'a self, mut st: Guard<'a, Q>, uncovered: &mut Vec<Flight>) -> Guard<'a, Q> {
        st.launcher_busy = true;
        drop(st);
        let fence = self.make_fence(uncovered.len());
        let mut st = self.lock();
        st.launcher_busy = false;
        self.push_fence(&mut st, fence, uncovered);
        st
    }

    /// Ask the hardware queue for a sync point after everything launched so far.
    fn make_fence(&self, cmds: usize) -> Fence<Q::SyncPoint> {
        let mark = match self.hwq.record() {
            Ok(sp) => Mark::Point(sp),
            Err(_) => Mark::Synchronize,
        };
        Fence { mark, cmds }
    }

    /// Queue a recorded fence with the records of the commands it covers.
    fn push_fence(&self, st: &mut State<Q>, fence: Fence<Q::SyncPoint>, uncovered: &mut Vec<Flight>) {
        st.fenced.extend(uncovered.drain(..));
        st.fences.push_back(fence);
        st.uncovered = 0;
        st.stats.sync_points += 1;
    }

    /// Take the oldest fence, wait on it without the lock, deliver its completions and count
    /// them. The caller checked that a fence is there and none is taken. `cmds` is a buffer.
    fn observe<'a>(&'a self, mut st: Guard<'a, Q>, cmds: &mut Vec<Flight>) -> Guard<'a, Q> {
        let fence = st.fences.pop_front().expect("the caller saw a fence");
        cmds.extend(st.fenced.drain(..fence.cmds));
        st.fence_taken = true;
        drop(st);
        let res = match &fence.mark {
            Mark::Point(sp) => self.hwq.wait(sp),
            Mark::Synchronize => self.hwq.synchronize(),
        };
        let completed_ns = now_ns();
        let n = cmds.len();
        let failed = res.is_err();
        // Sent before they are counted, without the lock: nobody else delivers fences while
        // `fence_taken` is set, so the order holds; `in_flight` drops only once they are sent.
        self.send(cmds.drain(..), &res.map_err(Arc::new), completed_ns);
        let mut st = self.lock();
        st.fence_taken = false;
        st.in_flight -= n;
        st.stats.completed += n as u64;
        if failed {
            st.stats.errors += n as u64;
        }
        if st.in_flight == 0 {
            self.wake_outside(&st);
        }
        st
    }

    /// The completion thread: while the launcher sleeps (or has ended), wait on the sync
    /// points in order and deliver completions.
    pub fn completer(&self) {
        let mut cmds = Vec::new();
        let mut st = self.lock();
        loop {
            let launcher_away = st.launcher_asleep || st.launcher_done;
            if launcher_away && !st.fence_taken && !st.fences.is_empty() {
                st = self.observe(st, &mut cmds);
                // Room under the threshold, or the next fence to take: the launcher's again.
                if st.launcher_has_work() {
                    st.launcher_asleep = false;
                    self.cv_launcher.notify_one();
                }
            } else if st.launcher_done && st.fences.is_empty() {
                return;
            } else {
                st.completer_asleep = true;
                st = self.cv_completer.wait(st).unwrap_or_else(PoisonError::into_inner);
                st.completer_asleep = false;
            }
        }
    }

    /// Send completions. A dropped receiver is fine: completions are then only counted.
    fn send(&self, cmds: impl Iterator<Item = Flight>, outcome: &Result<(), Arc<Q::Error>>, completed_ns: u64) {
        for c in cmds {
            let stamps = Stamps {
                submitted_ns: c.submitted_ns,
                launched_ns: c.launched_ns,
                completed_ns,
            };
            let _ = self.tx.send(Completion {
                id: c.id,
                stamps,
                outcome: outcome.clone(),
            });
        }
    }
}
