//! The bookkeeping every policy does the same way: which queues are registered, with what, and
//! whether the caller's last successful action left each suspended. A policy keeps its own record
//! of a queue (a [`Record`]: its parameters, its readiness, whatever its rule reads) in a
//! [`Queues`] and decides only which queues should be suspended ([`Queues::reconcile`]).

use crate::Action;
use std::collections::BTreeMap;
use std::ops::Deref;

/// A policy's record of one queue.
pub(crate) trait Record {
    /// What the queue is registered with (the policy's [`crate::TimedPolicy::Params`]).
    type Params;

    /// A queue just registered with `params`: idle and running, as every queue joins a policy.
    fn new(params: Self::Params) -> Self;

    /// Its parameters: registering the queue again replaces them and keeps the rest.
    fn params(&mut self) -> &mut Self::Params;

    /// Whether the caller's last successful action left it suspended.
    fn suspended(&self) -> bool;

    /// The same, to record a change.
    fn suspended_mut(&mut self) -> &mut bool;
}

/// The registered queues of one policy, keyed by `Q`, in key order.
///
/// It reads as the map of records; changes go through the methods, so that the recorded
/// suspended states only ever change as [`crate::TimedPolicy`] says they do.
#[derive(Debug, Clone)]
pub(crate) struct Queues<Q, M>(BTreeMap<Q, M>);

impl<Q, M> Default for Queues<Q, M> {
    fn default() -> Self {
        Queues(BTreeMap::new())
    }
}

impl<Q, M> Deref for Queues<Q, M> {
    type Target = BTreeMap<Q, M>;

    fn deref(&self) -> &BTreeMap<Q, M> {
        &self.0
    }
}

impl<'a, Q, M> IntoIterator for &'a Queues<Q, M> {
    type Item = (&'a Q, &'a M);
    type IntoIter = std::collections::btree_map::Iter<'a, Q, M>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<Q: Ord + Copy, M: Record> Queues<Q, M> {
    /// [`crate::TimedPolicy::register`]'s bookkeeping: a new queue joins with `params`; a known one
    /// gets them instead of its old ones.
    pub fn register(&mut self, q: Q, params: M::Params) {
        match self.0.get_mut(&q) {
            Some(m) => *m.params() = params,
            None => {
                self.0.insert(q, M::new(params));
            }
        }
    }

    /// [`crate::TimedPolicy::unregister`]'s first action: `q` is forgotten, and resumed if it was
    /// suspended (a queue leaves the policy running).
    pub fn unregister(&mut self, q: Q) -> Vec<Action<Q>> {
        match self.0.remove(&q) {
            Some(m) if m.suspended() => vec![Action::Resume(q)],
            _ => Vec::new(),
        }
    }

    /// [`crate::TimedPolicy::failed`]: the queue's recorded state goes back to what it was.
    /// Unknown queues are ignored.
    pub fn failed(&mut self, action: Action<Q>) {
        if let Some(m) = self.0.get_mut(&action.queue()) {
            *m.suspended_mut() = matches!(action, Action::Resume(_));
        }
    }

    /// [`crate::TimedPolicy::is_suspended`].
    pub fn is_suspended(&self, q: Q) -> bool {
        self.0.get(&q).is_some_and(Record::suspended)
    }

    /// `q`'s record, to change what the policy knows of it (not whether it is suspended: that
    /// is [`Queues::reconcile`]'s).
    pub fn get_mut(&mut self, q: &Q) -> Option<&mut M> {
        self.0.get_mut(q)
    }

    /// The actions that take every queue, in key order, from its recorded state to the one
    /// `suspend(queue, record)` wants, recording the wanted one.
    pub fn reconcile(&mut self, mut suspend: impl FnMut(Q, &M) -> bool) -> Vec<Action<Q>> {
        let mut out = Vec::new();
        for (&q, m) in &mut self.0 {
            let want = suspend(q, m);
            let suspended = m.suspended_mut();
            if *suspended != want {
                *suspended = want;
                out.push(if want { Action::Suspend(q) } else { Action::Resume(q) });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::{Resume, Suspend};

    #[derive(Debug, PartialEq)]
    struct Member {
        weight: u8,
        ready: bool,
        suspended: bool,
    }

    impl Record for Member {
        type Params = u8;
        fn new(weight: u8) -> Self {
            Member {
                weight,
                ready: false,
                suspended: false,
            }
        }
        fn params(&mut self) -> &mut u8 {
            &mut self.weight
        }
        fn suspended(&self) -> bool {
            self.suspended
        }
        fn suspended_mut(&mut self) -> &mut bool {
            &mut self.suspended
        }
    }

    #[test]
    fn registering_again_changes_the_parameters_and_keeps_the_rest() {
        let mut qs: Queues<char, Member> = Queues::default();
        qs.register('a', 1);
        assert!(!qs.is_suspended('a'), "a new queue runs");
        qs.get_mut(&'a').unwrap().ready = true;
        assert_eq!(qs.reconcile(|_, _| true), vec![Suspend('a')]);
        qs.register('a', 9);
        assert_eq!(
            qs[&'a'],
            Member {
                weight: 9,
                ready: true,
                suspended: true
            }
        );
    }

    #[test]
    fn reconcile_acts_only_where_the_wanted_state_differs() {
        let mut qs: Queues<u8, Member> = Queues::default();
        for (q, w) in [(3, 0), (1, 1), (2, 2)] {
            qs.register(q, w);
        }
        assert_eq!(
            qs.reconcile(|_, m| m.weight < 2),
            vec![Suspend(1), Suspend(3)],
            "in key order"
        );
        assert_eq!(qs.reconcile(|_, m| m.weight < 2), vec![], "already so");
        assert_eq!(qs.reconcile(|q, _| q == 2), vec![Resume(1), Suspend(2), Resume(3)]);
        assert_eq!(
            (&qs).into_iter().map(|(&q, m)| (q, m.suspended)).collect::<Vec<_>>(),
            [(1, false), (2, true), (3, false)]
        );
    }

    #[test]
    fn a_queue_leaves_running_and_is_forgotten() {
        let mut qs: Queues<u8, Member> = Queues::default();
        qs.register(1, 0);
        qs.register(2, 0);
        qs.reconcile(|q, _| q == 1);
        assert_eq!(qs.unregister(1), vec![Resume(1)], "suspended: resumed as it leaves");
        assert_eq!(qs.unregister(2), vec![], "running: nothing to do");
        assert_eq!(qs.unregister(3), vec![], "unknown");
        assert!(qs.is_empty() && !qs.is_suspended(1));
    }

    #[test]
    fn a_failed_action_restores_the_recorded_state() {
        let mut qs: Queues<u8, Member> = Queues::default();
        qs.register(1, 0);
        let acts = qs.reconcile(|_, _| true);
        qs.failed(acts[0]);
        assert!(!qs.is_suspended(1), "the suspend did not happen");
        assert_eq!(qs.reconcile(|_, _| true), vec![Suspend(1)], "so it is asked again");
        qs.failed(Resume(1));
        assert!(qs.is_suspended(1), "a failed resume leaves it suspended");
        qs.failed(Suspend(7));
        assert!(!qs.contains_key(&7), "an unknown queue is ignored, not added");
    }
}
