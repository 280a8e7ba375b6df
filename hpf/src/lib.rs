//! Highest-priority-first (HPF): which registered queues must be suspended while blocks of
//! higher-priority work run, and which may run again when those blocks leave.
//!
//! The rule: a registered queue of priority `p` is suspended exactly while at least one active
//! block has a priority strictly greater than `p`. [`Policy`] keeps the registered queues and the
//! multiset of active block priorities, and every change ([`Policy::enter`], [`Policy::leave`],
//! [`Policy::register`], [`Policy::unregister`]) returns the [`Action`]s that bring the queues
//! to that rule. It is pure (no I/O, no clock, no threads): the caller carries the actions out
//! through whatever level it uses (Lv3 preemption, Lv1 launcher suspension, host SIGSTOP), under
//! one lock with the policy, and reports the ones that failed ([`Policy::failed`]), so that the
//! recorded state is always what the queues are.
//!
//! The policy knows nothing of devices, FFI or Python: `preempt-api`'s helper drives it, and any
//! other scheduler (e.g. a `preempt-lat` priority mode) can reuse it with its own queue keys.
//!
//! ```
//! use hpf::{Action, Policy};
//! let mut p = Policy::new();
//! assert!(p.register("lp-a", 0).is_empty()); // nothing runs above it: it keeps running
//! assert!(p.register("lp-b", 0).is_empty());
//! // An HP block enters: both LP queues are suspended.
//! assert_eq!(p.enter(1), vec![Action::Suspend("lp-a"), Action::Suspend("lp-b")]);
//! assert!(p.enter(1).is_empty()); // a second, concurrent HP block: nothing more to do
//! assert!(p.leave(1).unwrap().is_empty()); // one HP block is still running
//! // The last HP block leaves (after its GPU work is done): both resume.
//! assert_eq!(p.leave(1).unwrap(), vec![Action::Resume("lp-a"), Action::Resume("lp-b")]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The policy's name in outputs (`preempt-lat priority`'s `policy` column).
pub const NAME: &str = "highest-priority-first";

/// A priority: larger runs first. The helper of `preempt-api` registers low-priority queues at
/// 0 and runs high-priority blocks at 1.
pub type Priority = i32;

/// What the caller must do to one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action<Q> {
    /// Suspend the queue (it is recorded as suspended from now on).
    Suspend(Q),
    /// Resume the queue (it is recorded as running from now on).
    Resume(Q),
}

impl<Q: Copy> Action<Q> {
    /// The queue the action is about.
    pub fn queue(&self) -> Q {
        match *self {
            Action::Suspend(q) | Action::Resume(q) => q,
        }
    }
}

/// [`Policy::leave`] of a priority with no active block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotActive(pub Priority);

impl fmt::Display for NotActive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no block of priority {} is active", self.0)
    }
}

impl std::error::Error for NotActive {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Queue {
    priority: Priority,
    suspended: bool,
}

/// The HPF state: registered queues (each with a priority and whether it is suspended) and the
/// active blocks (a multiset of priorities). See the [crate documentation](crate).
///
/// **Cost.** Every call costs O(log n) plus the queues whose state it changes, plus at most
/// [`RETRIES_PER_CALL`] queues left unsettled by [`Policy::failed`] (tried again in turn), never
/// a walk over every registered queue: the queues are also indexed by priority, and a change of
/// the ceiling (the highest active block) touches only the priorities between the old and the
/// new ceiling. A daemon that schedules tens of thousands
/// of queues across processes relies on it (one registration must not cost the node's whole
/// plan). [`Policy::reconcile`] alone is a full walk; [`Policy::visited`] counts what each call
/// examined, so that tests can hold the bound.
#[derive(Debug, Clone)]
pub struct Policy<Q: Ord + Copy> {
    queues: BTreeMap<Q, Queue>,
    /// The same queues by priority.
    by_priority: BTreeMap<Priority, BTreeSet<Q>>,
    active: BTreeMap<Priority, usize>,
    /// Queues whose recorded state differs from the rule (an action that failed); every
    /// other queue follows the rule.
    unsettled: BTreeSet<Q>,
    /// Where the next call's retries of unsettled queues start (they are tried in turn).
    retry_after: Option<Q>,
    visited: u64,
}

/// Unsettled queues one call tries again at most: whoever makes a call pays for a bounded part of
/// the failures others caused (a daemon's client that fails every suspend of thousands of
/// streams must not make every other client's request a walk over them); the rest wait for the
/// next calls, in turn.
pub const RETRIES_PER_CALL: usize = 64;

impl<Q: Ord + Copy> Default for Policy<Q> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Q: Ord + Copy> Policy<Q> {
    /// No queue, no active block.
    pub fn new() -> Self {
        Policy {
            queues: BTreeMap::new(),
            by_priority: BTreeMap::new(),
            active: BTreeMap::new(),
            unsettled: BTreeSet::new(),
            retry_after: None,
            visited: 0,
        }
    }

    /// The highest priority among the active blocks.
    pub fn ceiling(&self) -> Option<Priority> {
        self.active.keys().next_back().copied()
    }

    /// Active blocks (of every priority).
    pub fn active_blocks(&self) -> usize {
        self.active.values().sum()
    }

    /// Registered queues.
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// Whether no queue is registered.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Queues examined by every call so far (a measure of their cost, for tests).
    pub fn visited(&self) -> u64 {
        self.visited
    }

    /// Whether the rule wants `priority` suspended now.
    fn wants_suspended(&self, priority: Priority) -> bool {
        self.ceiling().is_some_and(|c| c > priority)
    }

    /// Whether `q` is registered and recorded as suspended.
    pub fn is_suspended(&self, q: Q) -> bool {
        self.queues.get(&q).is_some_and(|s| s.suspended)
    }

    /// The registered queues, in key order, with their priority and suspended flag.
    pub fn queues(&self) -> impl Iterator<Item = (Q, Priority, bool)> + '_ {
        self.queues.iter().map(|(&q, s)| (q, s.priority, s.suspended))
    }

    /// Brings `q` to the rule, recording the action in `out`.
    fn settle(&mut self, q: Q, ceiling: Option<Priority>, out: &mut BTreeMap<Q, Action<Q>>) {
        self.visited += 1;
        let Some(s) = self.queues.get_mut(&q) else { return };
        let want = ceiling.is_some_and(|c| c > s.priority);
        if want != s.suspended {
            s.suspended = want;
            out.insert(q, if want { Action::Suspend(q) } else { Action::Resume(q) });
        }
        self.unsettled.remove(&q);
    }

    /// The actions after the ceiling moved from `old` to the current one: only the priorities
    /// between the two change, plus some unsettled queues (tried again), in key order.
    fn moved(&mut self, old: Option<Priority>) -> Vec<Action<Q>> {
        let new = self.ceiling();
        let mut out = BTreeMap::new();
        let span = match (old, new) {
            (None, None) => None,
            (Some(a), Some(b)) if a == b => None,
            (None, Some(c)) | (Some(c), None) => Some((None, c)),
            (Some(a), Some(b)) => Some((Some(a.min(b)), a.max(b))),
        };
        if let Some((low, high)) = span {
            // Queues of priority p with low <= p < high: below one ceiling, not the other.
            let range = match low {
                Some(l) => self.by_priority.range(l..high),
                None => self.by_priority.range(..high),
            };
            let touched: Vec<Q> = range.flat_map(|(_, qs)| qs.iter().copied()).collect();
            for q in touched {
                self.settle(q, new, &mut out);
            }
        }
        let start = self.retry_after;
        let after = match start {
            Some(a) => self
                .unsettled
                .range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
            None => self.unsettled.range(..),
        };
        let mut retry: Vec<Q> = after.take(RETRIES_PER_CALL).copied().collect();
        if retry.len() < RETRIES_PER_CALL {
            // Wrapped around: from the first, up to where this turn started.
            let more = RETRIES_PER_CALL - retry.len();
            retry.extend(
                self.unsettled
                    .iter()
                    .take_while(|&&q| start.is_some_and(|a| q <= a))
                    .take(more)
                    .copied(),
            );
        }
        self.retry_after = retry.last().copied();
        for q in retry {
            self.settle(q, new, &mut out);
        }
        out.into_values().collect()
    }

    /// The actions that bring every queue to the rule, recording the new states. Also what to
    /// call after [`Policy::failed`] to try again. A walk over every queue.
    pub fn reconcile(&mut self) -> Vec<Action<Q>> {
        let ceiling = self.ceiling();
        let mut out = BTreeMap::new();
        let all: Vec<Q> = self.queues.keys().copied().collect();
        for q in all {
            self.settle(q, ceiling, &mut out);
        }
        out.into_values().collect()
    }

    /// Registers `q` at `priority` (or changes its priority); suspends it at once if a block of
    /// higher priority is active.
    pub fn register(&mut self, q: Q, priority: Priority) -> Vec<Action<Q>> {
        let suspended = match self.queues.insert(
            q,
            Queue {
                priority,
                suspended: false,
            },
        ) {
            Some(old) => {
                self.forget_priority(q, old.priority);
                old.suspended
            }
            None => false,
        };
        if let Some(s) = self.queues.get_mut(&q) {
            s.suspended = suspended;
        }
        self.by_priority.entry(priority).or_default().insert(q);
        // The new queue's place in the rule, and some unsettled ones tried again.
        let c = self.ceiling();
        let mut out = BTreeMap::new();
        self.settle(q, c, &mut out);
        let mut actions = self.moved(c);
        actions.extend(out.into_values());
        actions.sort_by_key(|a| a.queue());
        actions.dedup_by_key(|a| a.queue());
        actions
    }

    fn forget_priority(&mut self, q: Q, priority: Priority) {
        if let Some(qs) = self.by_priority.get_mut(&priority) {
            qs.remove(&q);
            if qs.is_empty() {
                self.by_priority.remove(&priority);
            }
        }
    }

    /// Forgets `q`; if it was suspended, the one action is its resume (a queue leaves the
    /// policy running).
    pub fn unregister(&mut self, q: Q) -> Vec<Action<Q>> {
        self.unsettled.remove(&q);
        match self.queues.remove(&q) {
            Some(s) => {
                self.forget_priority(q, s.priority);
                if s.suspended {
                    vec![Action::Resume(q)]
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        }
    }

    /// A block of `priority` starts: every queue of lower priority that runs is suspended.
    pub fn enter(&mut self, priority: Priority) -> Vec<Action<Q>> {
        let old = self.ceiling();
        *self.active.entry(priority).or_insert(0) += 1;
        self.moved(old)
    }

    /// A block of `priority` is done (call it once the block's device work has completed):
    /// queues that no other active block outranks resume.
    pub fn leave(&mut self, priority: Priority) -> Result<Vec<Action<Q>>, NotActive> {
        let old = self.ceiling();
        match self.active.get_mut(&priority) {
            None => return Err(NotActive(priority)),
            Some(1) => {
                self.active.remove(&priority);
            }
            Some(n) => *n -= 1,
        }
        Ok(self.moved(old))
    }

    /// Reports that `action` could not be carried out: the queue's recorded state goes back to
    /// what it was (a failed suspend: running; a failed resume: still suspended, so that a later
    /// call tries again). Unknown queues are ignored.
    pub fn failed(&mut self, action: Action<Q>) {
        let ceiling = self.ceiling();
        if let Some(s) = self.queues.get_mut(&action.queue()) {
            s.suspended = matches!(action, Action::Resume(_));
            if s.suspended != ceiling.is_some_and(|c| c > s.priority) {
                self.unsettled.insert(action.queue());
            }
        }
    }

    /// Whether the rule and the recorded states agree for every queue (true after every call
    /// unless an action failed).
    pub fn settled(&self) -> bool {
        self.queues
            .values()
            .all(|s| s.suspended == self.wants_suspended(s.priority))
    }

    /// Drops every active block and returns the resumes of every suspended queue (a session
    /// closing, or recovery after an error).
    pub fn clear_blocks(&mut self) -> Vec<Action<Q>> {
        let old = self.ceiling();
        self.active.clear();
        self.moved(old)
    }
}

#[cfg(test)]
mod tests;
