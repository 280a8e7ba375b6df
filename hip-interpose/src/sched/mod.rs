//! The rule, as a pure state machine (no HIP, no threads): which of a process's streams are
//! suspended, given their priorities and what each has in flight.
//!
//! **The rule.** A preemptible stream (one with a queue of its own) is suspended exactly while
//! some stream of strictly more urgent priority (a lower HIP number) has work in flight, unless
//! something that must finish depends on it:
//! - a more urgent stream waits on one of its events (`hipStreamWaitEvent`: the stream is
//!   *pinned* until that event completes), or
//! - it is a blocking stream and the null stream has work in flight (legacy semantics: null
//!   stream work waits for every blocking stream, and later work on blocking streams waits for
//!   it; docs/interposer.md#the-rule).
//!
//! Without those two exceptions a high-priority stream could wait forever for a stream
//! suspended on its behalf. Independently of the rule, the scheduler daemon may *hold* a stream
//! (another process's more urgent work runs): a held stream is suspended whatever the rule says,
//! and released only by the daemon (or when the daemon goes away). Work in flight is counted in *marks*: the interposer records an event
//! after each submission on a stream that can suspend others, and a stream is busy until its
//! latest mark completes (a stream runs in order, so that covers everything before it).
use std::collections::BTreeMap;

/// A stream, by its `hipStream_t` value (0: the null stream).
pub type Key = usize;

/// What the interposer must carry out, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Suspend(Key),
    Resume(Key),
}

#[derive(Debug, Clone)]
struct Entry {
    priority: i32,
    preemptible: bool,
    blocking: bool,
    /// Latest mark submitted and latest completed.
    marked: u64,
    done: u64,
    pins: u32,
    /// Held by the scheduler daemon.
    held: bool,
    suspended: bool,
    /// A suspend or resume of it failed: it is left running and never suspended again.
    broken: bool,
}

impl Entry {
    fn busy(&self) -> bool {
        self.done < self.marked
    }
}

/// The process's streams and the rule over them.
#[derive(Debug)]
pub struct Scheduler {
    streams: BTreeMap<Key, Entry>,
    /// Whether the process's own streams outrank each other (stream granularity); without it
    /// only the daemon's holds suspend anything.
    in_process: bool,
}

impl Default for Scheduler {
    fn default() -> Scheduler {
        Scheduler::new(true)
    }
}

impl Scheduler {
    /// `in_process`: the process's more urgent streams suspend its less urgent ones.
    pub fn new(in_process: bool) -> Scheduler {
        Scheduler {
            streams: BTreeMap::new(),
            in_process,
        }
    }

    /// The priorities of the streams with work in flight.
    pub fn busy_priorities(&self) -> std::collections::BTreeSet<i32> {
        self.streams.values().filter(|e| e.busy()).map(|e| e.priority).collect()
    }

    /// Registers a stream (the null stream is key 0, normal priority, never preemptible).
    /// `blocking`: created without `hipStreamNonBlocking`.
    pub fn add(&mut self, key: Key, priority: i32, preemptible: bool, blocking: bool) -> Vec<Action> {
        self.streams.insert(
            key,
            Entry {
                priority,
                preemptible: preemptible && key != 0,
                blocking,
                marked: 0,
                done: 0,
                pins: 0,
                held: false,
                suspended: false,
                broken: false,
            },
        );
        self.settle()
    }

    /// Forgets a stream; it is resumed first if it was suspended.
    pub fn remove(&mut self, key: Key) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(e) = self.streams.remove(&key)
            && e.suspended
        {
            out.push(Action::Resume(key));
        }
        out.extend(self.settle());
        out
    }

    /// Whether `key` is registered.
    pub fn knows(&self, key: Key) -> bool {
        self.streams.contains_key(&key)
    }

    /// Whether `key` is a preemptible stream.
    pub fn is_preemptible(&self, key: Key) -> bool {
        self.streams.get(&key).is_some_and(|e| e.preemptible)
    }

    /// The priority `key` was registered with.
    pub fn priority(&self, key: Key) -> Option<i32> {
        self.streams.get(&key).map(|e| e.priority)
    }

    /// Whether work on `key` can change anything (a less urgent preemptible stream exists, or
    /// `key` is the null stream and a blocking preemptible stream exists): only then is it marked.
    pub fn needs_mark(&self, key: Key) -> bool {
        let Some(me) = self.streams.get(&key) else {
            return false;
        };
        self.streams
            .iter()
            .any(|(k, e)| *k != key && e.preemptible && (e.priority > me.priority || (key == 0 && e.blocking)))
    }

    /// Work was submitted on `key`: returns the mark's number (to hand to [`Scheduler::completed`]
    /// when the event recorded after it completes) and what to carry out *before* the work
    /// reaches the device.
    pub fn submit(&mut self, key: Key) -> Option<(u64, Vec<Action>)> {
        let e = self.streams.get_mut(&key)?;
        e.marked += 1;
        let mark = e.marked;
        Some((mark, self.settle()))
    }

    /// Mark `mark` of `key` completed (so did everything before it on that stream).
    pub fn completed(&mut self, key: Key, mark: u64) -> Vec<Action> {
        match self.streams.get_mut(&key) {
            Some(e) if mark > e.done => {
                e.done = mark.min(e.marked);
                self.settle()
            }
            _ => Vec::new(),
        }
    }

    /// Something that must finish waits on `key`'s work: it runs until [`Scheduler::unpin`].
    pub fn pin(&mut self, key: Key) -> Vec<Action> {
        match self.streams.get_mut(&key) {
            Some(e) => {
                e.pins += 1;
                self.settle()
            }
            None => Vec::new(),
        }
    }

    pub fn unpin(&mut self, key: Key) -> Vec<Action> {
        match self.streams.get_mut(&key) {
            Some(e) => {
                e.pins = e.pins.saturating_sub(1);
                self.settle()
            }
            None => Vec::new(),
        }
    }

    /// Gives `key` a new priority (a program's own hint after creation); `None` if unknown.
    pub fn set_priority(&mut self, key: Key, priority: i32) -> Option<Vec<Action>> {
        self.streams.get_mut(&key)?.priority = priority;
        Some(self.settle())
    }

    /// Whether `key` has work in flight (a mark not yet completed).
    pub fn is_busy(&self, key: Key) -> bool {
        self.streams.get(&key).is_some_and(Entry::busy)
    }

    /// The daemon holds `key` (suspended until [`Scheduler::release`]); `false` when the stream
    /// cannot be held (unknown, not preemptible, or left running after a failure).
    pub fn hold(&mut self, key: Key) -> Option<Vec<Action>> {
        let e = self.streams.get_mut(&key).filter(|e| e.preemptible && !e.broken)?;
        e.held = true;
        Some(self.settle())
    }

    /// The daemon releases `key`.
    pub fn release(&mut self, key: Key) -> Vec<Action> {
        match self.streams.get_mut(&key) {
            Some(e) => {
                e.held = false;
                self.settle()
            }
            None => Vec::new(),
        }
    }

    /// Every hold released (the daemon went away).
    pub fn release_holds(&mut self) -> Vec<Action> {
        for e in self.streams.values_mut() {
            e.held = false;
        }
        self.settle()
    }

    /// A suspend or resume of `key` failed: it is taken as running and never suspended again.
    pub fn failed(&mut self, key: Key) {
        if let Some(e) = self.streams.get_mut(&key) {
            e.suspended = false;
            e.broken = true;
        }
    }

    /// Whether `key` is suspended now.
    pub fn is_suspended(&self, key: Key) -> bool {
        self.streams.get(&key).is_some_and(|e| e.suspended)
    }

    /// Every suspended stream, resumed and forgotten (at exit, or when the interposer stops).
    pub fn release_all(&mut self) -> Vec<Action> {
        self.streams
            .iter_mut()
            .filter(|(_, e)| e.suspended)
            .map(|(k, e)| {
                e.suspended = false;
                e.held = false;
                e.broken = true;
                Action::Resume(*k)
            })
            .collect()
    }

    /// Brings every preemptible stream to what the rule says; resumes come before suspends, so
    /// that a stream released and another one stopped in one step never both wait.
    fn settle(&mut self) -> Vec<Action> {
        let null_busy = self.streams.get(&0).is_some_and(Entry::busy);
        let busy: Vec<i32> = self.streams.values().filter(|e| e.busy()).map(|e| e.priority).collect();
        let mut resumes = Vec::new();
        let mut suspends = Vec::new();
        let in_process = self.in_process;
        for (k, e) in self.streams.iter_mut().filter(|(_, e)| e.preemptible) {
            let depended_on = e.pins > 0 || (e.blocking && null_busy);
            let outranked = in_process && !depended_on && busy.iter().any(|p| *p < e.priority);
            let want = !e.broken && (e.held || outranked);
            if want != e.suspended {
                e.suspended = want;
                if want {
                    suspends.push(Action::Suspend(*k));
                } else {
                    resumes.push(Action::Resume(*k));
                }
            }
        }
        resumes.extend(suspends);
        resumes
    }
}

#[cfg(test)]
mod tests;
