//! The watcher: one thread per process that polls the events standing for work in flight and
//! reports each that completed. A mark is an event of the interposer's, recorded after a
//! submission; a pin watches the program's own event that a more urgent stream waits on (until
//! it completes or the program destroys it: [`Watch::forget_event`] runs under the same lock as
//! the polling, so a destroyed event is never queried).
use crate::sched::Key;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How often events are polled while any is pending: how late a resume can come after the work
/// it waited for completed (the high-priority work itself is never delayed by it).
pub const POLL: Duration = Duration::from_micros(50);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What an event stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// Mark `mark` of stream `key`, on the interposer's event.
    Mark { key: Key, mark: u64 },
    /// Stream `key` is pinned until the program's event completes.
    Pin { key: Key },
    /// `n` of Lv1 stream `key`'s commands are on the device, up to the interposer's event.
    Flight { key: Key, n: u32 },
}

/// A completed (or forgotten) event with what it stood for; `owned`: the interposer's own
/// event, to be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub event: usize,
    pub what: Pending,
    pub owned: bool,
}

#[derive(Default)]
struct State {
    pending: Vec<(usize, Pending, bool)>,
    started: bool,
}

/// The pending events; the thread is started at the first one.
#[derive(Default, Clone)]
pub struct Watch {
    inner: Arc<(Mutex<State>, Condvar)>,
}

impl Watch {
    /// Watches `event`; `owned`: it is the interposer's.
    pub fn add(&self, event: usize, what: Pending, owned: bool, on_done: &'static (dyn Fn(Vec<Done>) + Sync)) {
        let (m, cv) = &*self.inner;
        let mut s = lock(m);
        s.pending.push((event, what, owned));
        if !s.started {
            s.started = true;
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("preempt-hip watch".into())
                .spawn(move || me.run(on_done));
            if spawned.is_err() {
                // Without the thread nothing would ever be resumed: report all as done now.
                s.started = false;
                let all = s
                    .pending
                    .drain(..)
                    .map(|(event, what, owned)| Done { event, what, owned })
                    .collect();
                drop(s);
                on_done(all);
                return;
            }
        }
        cv.notify_one();
    }

    /// The program destroys `event`: pins on it end now (returned, to be unpinned).
    pub fn forget_event(&self, event: usize) -> Vec<Done> {
        let mut s = lock(&self.inner.0);
        let mut gone = Vec::new();
        s.pending.retain(|&(e, what, owned)| {
            let keep = owned || e != event;
            if !keep {
                gone.push(Done { event: e, what, owned });
            }
            keep
        });
        gone
    }

    fn run(&self, on_done: &'static (dyn Fn(Vec<Done>) + Sync)) {
        let (m, cv) = &*self.inner;
        loop {
            let done = {
                let mut s = lock(m);
                while s.pending.is_empty() {
                    s = cv.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
                let mut done = Vec::new();
                s.pending.retain(|&(event, what, owned)| {
                    // An error (a handle the runtime no longer knows) counts as completed: a
                    // stream is never kept suspended on an event that cannot complete.
                    let complete = crate::ffi::next::query_event(event).unwrap_or(true);
                    if complete {
                        done.push(Done { event, what, owned });
                    }
                    !complete
                });
                done
            };
            if !done.is_empty() {
                on_done(done);
            }
            std::thread::sleep(POLL);
        }
    }
}
