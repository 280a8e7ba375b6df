//! Highest priority first over queues driven by their readiness: while a queue of higher
//! priority has work, the queues below it are suspended.
//!
//! Each queue is registered with a [`Priority`] (larger runs first, as in [`hpf`]). The rule:
//! while some queue is ready, every queue whose priority is below the highest priority among the
//! ready queues (the *ceiling*) is suspended; the others run (the ready ones at the ceiling, and
//! every queue at or above it, ready or not, so that its work starts without waiting for a
//! decision). With no ready queue, all run.
//!
//! This is [`hpf::Policy`]'s rule with the blocks made by the queues themselves: a ready queue of
//! priority `p` is an active block of `p` (it enters when the queue becomes ready and leaves when
//! it goes idle), so a queue of priority `q` is suspended exactly while a block above `q` is
//! active. `hpf::Policy` suits a caller whose high-priority work is not a registered queue (the
//! application API's helper: HP blocks around a program's own stream); this policy suits a caller
//! that schedules queues of several priorities against each other (Example 5's high, normal and
//! low replicas). Nothing here depends on the time, so [`TimedPolicy::next_wakeup`] is `None`
//! and [`TimedPolicy::tick`] only retries what failed.
//!
//! ```
//! use policies::{Action, TimedPolicy, priority::HighestFirst};
//! use std::time::Duration;
//! let t = Duration::ZERO;
//! let mut p = HighestFirst::new();
//! p.register("low", 0, t);
//! p.register("high", 2, t);
//! p.register("normal", 1, t); // nothing ready: all run
//! assert_eq!(p.ready("normal", t), vec![Action::Suspend("low")]);
//! assert_eq!(p.ready("high", t), vec![Action::Suspend("normal")]);
//! assert_eq!(p.idle("high", t), vec![Action::Resume("normal")]);
//! assert_eq!(p.idle("normal", t), vec![Action::Resume("low")]);
//! ```

use crate::queues::{Queues, Record};
use crate::{Action, TimedPolicy};
use hpf::Priority;
use std::time::Duration;

/// The policy's name in outputs: hpf's, since the rule is hpf's (see the module documentation),
/// so `preempt-lat priority --policy hpf` names one policy whether it runs its modes or classes.
pub const NAME: &str = hpf::NAME;

#[derive(Debug, Clone)]
struct Member {
    priority: Priority,
    ready: bool,
    suspended: bool,
}

impl Record for Member {
    type Params = Priority;

    fn new(priority: Priority) -> Self {
        Member {
            priority,
            ready: false,
            suspended: false,
        }
    }

    fn params(&mut self) -> &mut Priority {
        &mut self.priority
    }

    fn suspended(&self) -> bool {
        self.suspended
    }

    fn suspended_mut(&mut self) -> &mut bool {
        &mut self.suspended
    }
}

/// Highest priority first over queues keyed by `Q`. See the [module documentation](self).
#[derive(Debug, Clone, Default)]
pub struct HighestFirst<Q: Ord + Copy> {
    queues: Queues<Q, Member>,
}

impl<Q: Ord + Copy> HighestFirst<Q> {
    /// No queue.
    pub fn new() -> Self {
        HighestFirst {
            queues: Queues::default(),
        }
    }

    /// `q`'s priority, if it is registered.
    pub fn priority(&self, q: Q) -> Option<Priority> {
        Some(self.queues.get(&q)?.priority)
    }

    /// The highest priority among the ready queues (`None`: no queue is ready).
    pub fn ceiling(&self) -> Option<Priority> {
        self.queues.values().filter(|m| m.ready).map(|m| m.priority).max()
    }

    /// The actions that bring every queue to the rule, recording the new states.
    fn reconcile(&mut self) -> Vec<Action<Q>> {
        let ceiling = self.ceiling();
        self.queues.reconcile(|_, m| ceiling.is_some_and(|c| m.priority < c))
    }
}

impl<Q: Ord + Copy> TimedPolicy<Q> for HighestFirst<Q> {
    /// The queue's priority: larger runs first.
    type Params = Priority;

    fn name(&self) -> &'static str {
        NAME
    }

    fn register(&mut self, q: Q, priority: Priority, _now: Duration) -> Vec<Action<Q>> {
        self.queues.register(q, priority);
        self.reconcile()
    }

    fn unregister(&mut self, q: Q, _now: Duration) -> Vec<Action<Q>> {
        let mut out = self.queues.unregister(q);
        out.extend(self.reconcile());
        out
    }

    fn ready(&mut self, q: Q, _now: Duration) -> Vec<Action<Q>> {
        if let Some(m) = self.queues.get_mut(&q) {
            m.ready = true;
        }
        self.reconcile()
    }

    fn idle(&mut self, q: Q, _now: Duration) -> Vec<Action<Q>> {
        if let Some(m) = self.queues.get_mut(&q) {
            m.ready = false;
        }
        self.reconcile()
    }

    fn tick(&mut self, _now: Duration) -> Vec<Action<Q>> {
        self.reconcile()
    }

    fn next_wakeup(&self) -> Option<Duration> {
        None
    }

    fn failed(&mut self, action: Action<Q>) {
        self.queues.failed(action);
    }

    fn is_suspended(&self, q: Q) -> bool {
        self.queues.is_suspended(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Device, Rng};
    use Action::{Resume, Suspend};
    use std::collections::{BTreeMap, BTreeSet};

    const T: Duration = Duration::ZERO;

    #[test]
    fn queues_below_the_highest_ready_priority_are_suspended() {
        let mut p = HighestFirst::new();
        for (q, prio) in [("low", 0), ("normal", 1), ("high", 2), ("normal2", 1)] {
            assert_eq!(p.register(q, prio, T), vec![], "nothing ready: {q} runs");
        }
        assert_eq!(p.ready("low", T), vec![], "the lowest alone outranks nothing");
        assert_eq!(p.ready("normal", T), vec![Suspend("low")]);
        assert_eq!(p.ceiling(), Some(1));
        assert!(
            !p.is_suspended("normal2"),
            "an idle queue at the ceiling runs: its work starts at once"
        );
        assert_eq!(
            p.ready("high", T),
            vec![Suspend("normal"), Suspend("normal2")],
            "idle queues below the ceiling are held too"
        );
        assert!(!p.is_suspended("high"));
        assert_eq!(p.ready("high", T), vec![], "already ready");
        assert_eq!(p.idle("normal", T), vec![], "high is still ready");
        assert_eq!(
            p.idle("high", T),
            vec![Resume("low"), Resume("normal"), Resume("normal2")],
            "low is the only ready queue left: everything at or above it runs"
        );
        assert_eq!(p.idle("low", T), vec![]);
        assert_eq!(p.ceiling(), None);
        assert_eq!(p.next_wakeup(), None, "no decision depends on the time");
    }

    #[test]
    fn a_priority_change_takes_effect_at_once() {
        let mut p = HighestFirst::new();
        p.register('a', 1, T);
        p.register('b', 2, T);
        p.ready('a', T);
        assert_eq!(p.ready('b', T), vec![Suspend('a')]);
        assert_eq!(p.register('a', 3, T), vec![Resume('a'), Suspend('b')]);
        assert_eq!(p.priority('a'), Some(3));
        assert_eq!(p.name(), hpf::NAME);
    }

    #[test]
    fn unregistering_resumes_the_queue_and_releases_the_others() {
        let mut p = HighestFirst::new();
        p.register("low", 0, T);
        p.register("high", 5, T);
        p.ready("low", T);
        assert_eq!(p.ready("high", T), vec![Suspend("low")]);
        // A suspended queue leaves running.
        let mut q = p.clone();
        assert_eq!(q.unregister("low", T), vec![Resume("low")]);
        assert!(!q.is_suspended("low"), "forgotten");
        // The ready queue on top leaves: what it held runs again.
        assert_eq!(p.unregister("high", T), vec![Resume("low")]);
        assert_eq!(p.unregister("nobody", T), vec![]);
    }

    #[test]
    fn a_failed_action_restores_the_record_and_the_next_tick_retries() {
        let mut p = HighestFirst::new();
        p.register(1, 0, T);
        p.register(2, 1, T);
        assert_eq!(p.ready(2, T), vec![Suspend(1)]);
        p.failed(Suspend(1));
        assert!(!p.is_suspended(1), "the suspend did not happen: recorded as running");
        assert_eq!(p.tick(T), vec![Suspend(1)], "retried");
        assert_eq!(p.idle(2, T), vec![Resume(1)]);
        p.failed(Resume(1));
        assert!(p.is_suspended(1), "the resume did not happen: still suspended");
        assert_eq!(p.tick(T), vec![Resume(1)], "retried");
        p.failed(Resume(99));
        assert!(!p.is_suspended(99), "an unknown queue is ignored");
    }

    /// Random registrations (priority changes included), readiness changes, unregistrations and
    /// failed actions: after every call (and a retry after a failure) a queue is suspended iff
    /// its priority is below the highest priority among the ready queues, and that is what
    /// `hpf::Policy` decides with every ready queue of priority p entered as a block of p.
    #[test]
    fn random_interleavings_keep_the_rule() {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut p: HighestFirst<u64> = HighestFirst::new();
        let mut dev = Device::default();
        // The same history told to hpf: queues registered at their priorities, blocks entered
        // while a queue is ready (its priority at that time).
        let mut blocks = hpf::Policy::new();
        let mut in_block: BTreeMap<u64, Priority> = BTreeMap::new();
        let leave = |blocks: &mut hpf::Policy<u64>, in_block: &mut BTreeMap<u64, Priority>, q| {
            if let Some(prio) = in_block.remove(&q) {
                blocks.leave(prio).unwrap();
            }
        };
        let mut ready: BTreeSet<u64> = BTreeSet::new();
        for step in 0..30_000 {
            let q = rng.below(6);
            let prio = Priority::try_from(rng.below(4)).unwrap();
            let a = match rng.below(6) {
                0 => {
                    blocks.register(q, prio);
                    if ready.contains(&q) {
                        leave(&mut blocks, &mut in_block, q);
                        blocks.enter(prio);
                        in_block.insert(q, prio);
                    }
                    p.register(q, prio, T)
                }
                1 => {
                    dev.suspended.remove(&q);
                    blocks.unregister(q);
                    leave(&mut blocks, &mut in_block, q);
                    ready.remove(&q);
                    p.unregister(q, T)
                }
                2 | 3 => {
                    if let Some(prio) = p.priority(q) {
                        ready.insert(q);
                        in_block.entry(q).or_insert_with(|| {
                            blocks.enter(prio);
                            prio
                        });
                    }
                    p.ready(q, T)
                }
                4 => {
                    ready.remove(&q);
                    leave(&mut blocks, &mut in_block, q);
                    p.idle(q, T)
                }
                _ => p.tick(T),
            };
            let a: Vec<_> = a.into_iter().filter(|a| p.queues.contains_key(&a.queue())).collect();
            let failing = rng.below(10) == 0;
            dev.apply(&mut p, a, || failing);
            if failing {
                let a = p.tick(T);
                dev.apply(&mut p, a, || false);
            }
            dev.agrees(&p, p.queues.keys().copied());
            let ceiling = p
                .queues
                .iter()
                .filter(|(q, _)| ready.contains(q))
                .map(|(_, m)| m.priority)
                .max();
            assert_eq!(p.ceiling(), ceiling, "step {step}");
            for (&q, m) in &p.queues {
                let want = ceiling.is_some_and(|c| m.priority < c);
                assert_eq!(m.suspended, want, "queue {q} at step {step}");
                assert_eq!(
                    blocks.is_suspended(q),
                    want,
                    "hpf disagrees on queue {q} at step {step}"
                );
            }
            assert_eq!(p.next_wakeup(), None);
        }
    }
}
