//! A deterministic hardware queue for tests of the launcher (and of code built on it).
//!
//! Nothing runs by itself unless asked: in manual mode a launched command completes only
//! when the test calls [`FakeQueue::complete`], so a test decides exactly what is in flight.
//! In auto mode every command completes the moment it is launched. The fake records every
//! launch in order and the high-water mark of commands launched but not yet *observed*
//! complete through [`HwQueue::wait`]/[`HwQueue::synchronize`], which is the quantity the
//! launcher's threshold bounds (it is never below the launcher's own in-flight count), and
//! which threads wait on its sync points (the launcher's threads are named `lv1-launcher` and
//! `lv1-completer`).

use crate::{CommandId, HwQueue};
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The fake's commands are opaque payloads; tests encode e.g. (thread, sequence) in them.
pub type FakeCommand = u64;

/// A sync point: "the first `n` launched commands".
#[derive(Debug)]
pub struct FakeSync(usize);

/// A launch the test asked to fail ([`FakeQueue::fail_launch_of`]).
#[derive(Debug)]
pub struct FakeError(pub CommandId);

impl fmt::Display for FakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fake launch failure of command {}", self.0)
    }
}

impl std::error::Error for FakeError {}

#[derive(Default)]
struct FakeState {
    auto: bool,
    launched: Vec<(CommandId, FakeCommand)>,
    hw_done: usize,
    observed: usize,
    max_unobserved: usize,
    records: usize,
    fail: HashSet<CommandId>,
    /// Names of the threads inside `wait` now, in the order they entered.
    waiting: Vec<String>,
    /// Calls of `wait` per thread name.
    waits: BTreeMap<String, usize>,
}

/// The fake hardware queue. See the module documentation.
#[derive(Default)]
pub struct FakeQueue {
    state: Mutex<FakeState>,
    cv: Condvar,
}

impl FakeQueue {
    /// Manual mode: commands complete only through [`complete`](Self::complete).
    pub fn manual() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Auto mode: commands complete as soon as they are launched.
    pub fn auto() -> Arc<Self> {
        let q = Self::manual();
        q.set_auto(true);
        q
    }

    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_until(&self, mut pred: impl FnMut(&FakeState) -> bool, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        while !pred(&st) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self.cv.wait_timeout(st, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        true
    }

    /// Switch auto mode; turning it on completes everything already launched.
    pub fn set_auto(&self, auto: bool) {
        let mut st = self.lock();
        st.auto = auto;
        if auto {
            st.hw_done = st.launched.len();
        }
        drop(st);
        self.cv.notify_all();
    }

    /// Complete the next `n` launched commands (in launch order); returns how many were
    /// actually completed (never more than were launched).
    pub fn complete(&self, n: usize) -> usize {
        let mut st = self.lock();
        let k = n.min(st.launched.len() - st.hw_done);
        st.hw_done += k;
        drop(st);
        self.cv.notify_all();
        k
    }

    /// Make the launch of command `id` fail.
    pub fn fail_launch_of(&self, id: CommandId) {
        self.lock().fail.insert(id);
    }

    /// Every successful launch so far, in order: (launcher id, payload).
    pub fn launched(&self) -> Vec<(CommandId, FakeCommand)> {
        self.lock().launched.clone()
    }

    /// Number of successful launches.
    pub fn launched_count(&self) -> usize {
        self.lock().launched.len()
    }

    /// Highest number of commands that were launched and not yet observed complete.
    pub fn max_unobserved(&self) -> usize {
        self.lock().max_unobserved
    }

    /// Number of sync points recorded.
    pub fn records(&self) -> usize {
        self.lock().records
    }

    /// Names of the threads blocked in [`HwQueue::wait`] now, in the order they entered
    /// (`"?"` for an unnamed thread).
    pub fn waiting_threads(&self) -> Vec<String> {
        self.lock().waiting.clone()
    }

    /// How many times each thread (by name) has called [`HwQueue::wait`].
    pub fn waits_by_thread(&self) -> BTreeMap<String, usize> {
        self.lock().waits.clone()
    }

    /// Wait until the threads blocked in [`HwQueue::wait`] are exactly `names`; false on timeout.
    pub fn wait_waiting(&self, names: &[&str], timeout: Duration) -> bool {
        self.wait_until(
            |s| s.waiting.iter().map(String::as_str).eq(names.iter().copied()),
            timeout,
        )
    }

    /// Wait until at least `n` commands have been launched; false on timeout.
    pub fn wait_launched(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(|s| s.launched.len() >= n, timeout)
    }

    /// A guard that switches on auto mode when dropped. Declare it *after* the `XQueue` in
    /// a test so that a failing assertion unwinds without the queue's drop waiting forever
    /// on commands the test would have completed.
    pub fn release_on_drop(self: &Arc<Self>) -> ReleaseOnDrop {
        ReleaseOnDrop(Arc::clone(self))
    }

    fn observe(&self, upto: usize, timeout: Duration) -> bool {
        if !self.wait_until(|s| s.hw_done >= upto, timeout) {
            return false;
        }
        let mut st = self.lock();
        st.observed = st.observed.max(upto);
        drop(st);
        self.cv.notify_all();
        true
    }
}

/// See [`FakeQueue::release_on_drop`].
pub struct ReleaseOnDrop(Arc<FakeQueue>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.set_auto(true);
    }
}

impl HwQueue for FakeQueue {
    type Command = FakeCommand;
    type SyncPoint = FakeSync;
    type Error = FakeError;

    fn launch(&self, id: CommandId, cmd: FakeCommand) -> Result<(), FakeError> {
        let mut st = self.lock();
        if st.fail.remove(&id) {
            return Err(FakeError(id));
        }
        st.launched.push((id, cmd));
        if st.auto {
            st.hw_done = st.launched.len();
        }
        st.max_unobserved = st.max_unobserved.max(st.launched.len() - st.observed);
        drop(st);
        self.cv.notify_all();
        Ok(())
    }

    fn record(&self) -> Result<FakeSync, FakeError> {
        let mut st = self.lock();
        st.records += 1;
        Ok(FakeSync(st.launched.len()))
    }

    fn wait(&self, sp: &FakeSync) -> Result<(), FakeError> {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        let mut st = self.lock();
        *st.waits.entry(name.clone()).or_default() += 1;
        st.waiting.push(name.clone());
        drop(st);
        self.cv.notify_all();
        while !self.observe(sp.0, Duration::from_secs(3600)) {}
        let mut st = self.lock();
        if let Some(i) = st.waiting.iter().position(|n| *n == name) {
            st.waiting.remove(i);
        }
        drop(st);
        self.cv.notify_all();
        Ok(())
    }

    fn synchronize(&self) -> Result<(), FakeError> {
        let n = self.lock().launched.len();
        while !self.observe(n, Duration::from_secs(3600)) {}
        Ok(())
    }
}
