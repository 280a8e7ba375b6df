//! The launcher's shared state and its two threads.
//!
//! One mutex guards everything; one condvar is notified on every change (the waiters are
//! few: the launcher, the completion thread, suspenders and `wait_idle` callers). Hardware
//! calls are made *without* the lock so that submitters never wait for the device; while
//! the launcher is inside `launch`/`record` it sets `launcher_busy`, which is what
//! `suspend` waits on to guarantee that no launch is under way when it returns.

use super::{Completion, Stamps};
use crate::clock::now_ns;
use crate::{CommandId, Config, HwQueue};
use std::collections::VecDeque;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// A submitted command that has not been launched.
pub(super) struct Pending<C> {
    pub id: CommandId,
    pub cmd: C,
    pub submitted_ns: u64,
}

/// A launched command whose completion has not been observed yet.
pub(super) struct Flight {
    id: CommandId,
    submitted_ns: u64,
    launched_ns: u64,
}

/// How the completion thread learns that a group of launched commands completed.
enum Mark<SP> {
    /// A sync point recorded after the last command of the group.
    Point(SP),
    /// Recording failed: fall back to synchronizing the whole queue.
    Synchronize,
}

/// A recorded sync point and the commands it covers (those launched since the last one).
struct Fence<SP> {
    mark: Mark<SP>,
    cmds: Vec<Flight>,
}

pub(super) struct State<Q: HwQueue> {
    pub cfg: Config,
    pub next_id: CommandId,
    pub pending: VecDeque<Pending<Q::Command>>,
    /// Launched, not yet covered by a sync point.
    uncovered: Vec<Flight>,
    /// Recorded, not yet taken by the completion thread.
    fences: VecDeque<Fence<Q::SyncPoint>>,
    /// Launched and not yet observed complete (uncovered + fenced + being waited on).
    pub in_flight: usize,
    pub suspended: bool,
    /// The launcher is inside a hardware call (launch or record) without the lock.
    pub launcher_busy: bool,
    /// Threads other than the launcher and the completer waiting on the condvar (suspend,
    /// wait_idle): the launcher wakes everybody after a plain launch only when there are any.
    pub ext_waiters: usize,
    pub closing: bool,
    launcher_done: bool,
    pub stats: super::Stats,
}

/// One condvar per kind of waiter, so that the hot path (a launch, a delivered batch) wakes only
/// the thread the change concerns instead of all of them: with a single condvar and
/// `notify_all`, every launch and every completion cost the other threads a futile wake-up.
pub(super) struct Shared<Q: HwQueue> {
    pub hwq: Arc<Q>,
    state: Mutex<State<Q>>,
    /// The launcher waits here: for pending work, room under the threshold, resume, close.
    cv_launcher: Condvar,
    /// The completion thread waits here: for a sync point to wait on, or the launcher's end.
    cv_completer: Condvar,
    /// Everyone else (suspend, wait_idle): for launches to stop, drains, idleness.
    cv_ext: Condvar,
    tx: Sender<Completion<Q::Error>>,
}

impl<Q: HwQueue> Shared<Q> {
    pub fn new(hwq: Arc<Q>, cfg: Config, tx: Sender<Completion<Q::Error>>) -> Self {
        let state = State {
            cfg,
            next_id: 0,
            pending: VecDeque::new(),
            uncovered: Vec::new(),
            fences: VecDeque::new(),
            in_flight: 0,
            suspended: false,
            launcher_busy: false,
            ext_waiters: 0,
            closing: false,
            launcher_done: false,
            stats: super::Stats::default(),
        };
        Self {
            hwq,
            state: Mutex::new(state),
            cv_launcher: Condvar::new(),
            cv_completer: Condvar::new(),
            cv_ext: Condvar::new(),
            tx,
        }
    }

    /// Lock the state. A poisoned lock (a panic elsewhere while holding it) is taken over:
    /// the state is only mutated in small non-panicking steps, so it stays consistent.
    pub fn lock(&self) -> MutexGuard<'_, State<Q>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_on<'a>(cv: &Condvar, g: MutexGuard<'a, State<Q>>) -> MutexGuard<'a, State<Q>> {
        cv.wait(g).unwrap_or_else(PoisonError::into_inner)
    }

    /// For a thread outside the launcher and the completer: counted in `ext_waiters` (under
    /// the lock, so no wake-up can be missed), which lets the hot paths skip waking nobody.
    pub fn wait_ext<'a>(&self, mut g: MutexGuard<'a, State<Q>>) -> MutexGuard<'a, State<Q>> {
        g.ext_waiters += 1;
        let mut g = Self::wait_on(&self.cv_ext, g);
        g.ext_waiters -= 1;
        g
    }

    /// Like [`wait_ext`](Self::wait_ext), but gives up after `d`.
    pub fn wait_timeout_ext<'a>(
        &self,
        mut g: MutexGuard<'a, State<Q>>,
        d: std::time::Duration,
    ) -> MutexGuard<'a, State<Q>> {
        g.ext_waiters += 1;
        let mut g = self.cv_ext.wait_timeout(g, d).unwrap_or_else(PoisonError::into_inner).0;
        g.ext_waiters -= 1;
        g
    }

    /// Wakes every waiter: for the rare changes that concern everybody (suspend, resume,
    /// reconfiguration, closing, errors).
    pub fn notify(&self) {
        self.cv_launcher.notify_all();
        self.cv_completer.notify_all();
        self.cv_ext.notify_all();
    }

    /// A first pending command: only the launcher can be waiting for that.
    pub fn notify_launcher(&self) {
        self.cv_launcher.notify_one();
    }

    /// Outside waiters, if any (checked under the lock by the caller).
    fn notify_ext(&self, st: &State<Q>) {
        if st.ext_waiters > 0 {
            self.cv_ext.notify_all();
        }
    }

    /// True once no launch is under way and every launched command is covered by a
    /// sync point (what `suspend(Drain)` needs before it synchronizes).
    pub fn launcher_parked(st: &State<Q>) -> bool {
        !st.launcher_busy && st.uncovered.is_empty()
    }

    /// The launcher thread: launch while allowed, record a sync point every `batch`
    /// commands and whenever it is about to block with uncovered commands (so that every
    /// launched command is eventually observed and the threshold wait always progresses).
    pub fn launcher(&self) {
        let mut st = self.lock();
        loop {
            let can_launch = !st.suspended && !st.pending.is_empty() && st.in_flight < st.cfg.threshold();
            if can_launch {
                let p = st.pending.pop_front().expect("pending is not empty");
                st.launcher_busy = true;
                drop(st);
                let launched_ns = now_ns();
                let res = self.hwq.launch(p.id, p.cmd);
                st = self.lock();
                st.launcher_busy = false;
                let flight = Flight {
                    id: p.id,
                    submitted_ns: p.submitted_ns,
                    launched_ns,
                };
                // A new sync point or a failed launch concerns the completer; a plain launch
                // does not (it would wake for nothing).
                let wake = match res {
                    Ok(()) => {
                        st.in_flight += 1;
                        st.stats.launched += 1;
                        st.stats.max_in_flight = st.stats.max_in_flight.max(st.in_flight);
                        st.uncovered.push(flight);
                        if st.uncovered.len() >= st.cfg.batch() {
                            st = self.record(st);
                            true
                        } else {
                            false
                        }
                    }
                    Err(e) => {
                        self.deliver(&mut st, vec![flight], Err(Arc::new(e)), now_ns());
                        true
                    }
                };
                if wake {
                    self.cv_completer.notify_one();
                }
                // launcher_busy went false (and the uncovered set may be empty): suspend waits.
                self.notify_ext(&st);
            } else if !st.uncovered.is_empty() {
                st = self.record(st);
                self.cv_completer.notify_one();
                self.notify_ext(&st);
            } else if st.closing && st.pending.is_empty() {
                st.launcher_done = true;
                self.notify();
                return;
            } else {
                st = Self::wait_on(&self.cv_launcher, st);
            }
        }
    }

    /// Record a sync point covering all uncovered commands (lock released during the call).
    fn record<'a>(&'a self, mut st: MutexGuard<'a, State<Q>>) -> MutexGuard<'a, State<Q>> {
        let cmds = std::mem::take(&mut st.uncovered);
        st.launcher_busy = true;
        drop(st);
        let mark = match self.hwq.record() {
            Ok(sp) => Mark::Point(sp),
            Err(_) => Mark::Synchronize,
        };
        let mut st = self.lock();
        st.launcher_busy = false;
        st.stats.sync_points += 1;
        st.fences.push_back(Fence { mark, cmds });
        st
    }

    /// The completion thread: wait on sync points in order and deliver completions.
    pub fn completer(&self) {
        let mut st = self.lock();
        loop {
            if let Some(f) = st.fences.pop_front() {
                drop(st);
                let res = match &f.mark {
                    Mark::Point(sp) => self.hwq.wait(sp),
                    Mark::Synchronize => self.hwq.synchronize(),
                };
                let completed_ns = now_ns();
                st = self.lock();
                st.in_flight -= f.cmds.len();
                self.deliver(&mut st, f.cmds, res.map_err(Arc::new), completed_ns);
                // Room under the threshold for the launcher; maybe idle/drained for others.
                self.cv_launcher.notify_one();
                self.notify_ext(&st);
            } else if st.launcher_done {
                return;
            } else {
                st = Self::wait_on(&self.cv_completer, st);
            }
        }
    }

    /// Send completions (under the lock, so counters and the channel agree). A dropped
    /// receiver is fine: completions are then only counted.
    fn deliver(&self, st: &mut State<Q>, cmds: Vec<Flight>, outcome: Result<(), Arc<Q::Error>>, completed_ns: u64) {
        st.stats.completed += cmds.len() as u64;
        if outcome.is_err() {
            st.stats.errors += cmds.len() as u64;
        }
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
