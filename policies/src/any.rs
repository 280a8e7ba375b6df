//! One of the crate's policies, chosen at run time: what a caller that takes the policy from
//! its user (the application API's helper, a command line) holds, with the parameters of a
//! queue as one type ([`Params`]) checked against the policy ([`AnyPolicy::register`]).

use crate::kedf::{KEdf, ZeroK};
use crate::laxity::{Laxity, LaxityParams};
use crate::priority::HighestFirst;
use crate::up::Partition;
use crate::{Action, TimedPolicy};
use hpf::Priority;
use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

/// Which policy, with its own settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Utilization partition with slices that add up to `round` ([`Partition`]).
    Partition {
        /// XSched's time slice: one turn of every queue.
        round: Duration,
    },
    /// K earliest deadlines first ([`KEdf`]).
    KEdf {
        /// How many queues run at once (at least 1).
        k: usize,
    },
    /// Least laxity ([`Laxity`]).
    Laxity,
    /// Highest priority first over ready queues ([`HighestFirst`]).
    HighestFirst,
}

impl Choice {
    /// The policy's name in outputs (its module's `NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Choice::Partition { .. } => crate::up::NAME,
            Choice::KEdf { .. } => crate::kedf::NAME,
            Choice::Laxity => crate::laxity::NAME,
            Choice::HighestFirst => crate::priority::NAME,
        }
    }

    /// What a queue is registered with under this policy, for messages.
    pub fn needs(self) -> &'static str {
        match self {
            Choice::Partition { .. } => "a share",
            Choice::KEdf { .. } => "a deadline",
            Choice::Laxity => "a laxity, its priority and its critical priority",
            Choice::HighestFirst => "a priority",
        }
    }
}

/// What one queue is registered with; the kind must match the policy's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Params {
    /// Utilization partition: the queue's share of device time (relative to the others').
    Share(NonZeroU32),
    /// K-EDF: the queue's relative deadline (its work is due this long after it became ready).
    Deadline(Duration),
    /// Least laxity.
    Laxity(LaxityParams),
    /// Highest priority first: the queue's priority (larger runs first).
    Priority(Priority),
}

/// [`AnyPolicy::register`] with parameters of another policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongParams {
    /// The policy's name.
    pub policy: &'static str,
    /// What its queues are registered with.
    pub needs: &'static str,
}

impl fmt::Display for WrongParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} policy registers a queue with {}", self.policy, self.needs)
    }
}

impl std::error::Error for WrongParams {}

/// One of the crate's policies over queues keyed by `Q`.
#[derive(Debug, Clone)]
pub enum AnyPolicy<Q: Ord + Copy> {
    /// See [`Partition`].
    Partition(Partition<Q>),
    /// See [`KEdf`].
    KEdf(KEdf<Q>),
    /// See [`Laxity`].
    Laxity(Laxity<Q>),
    /// See [`HighestFirst`].
    HighestFirst(HighestFirst<Q>),
}

macro_rules! each {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            AnyPolicy::Partition($p) => $e,
            AnyPolicy::KEdf($p) => $e,
            AnyPolicy::Laxity($p) => $e,
            AnyPolicy::HighestFirst($p) => $e,
        }
    };
}

impl<Q: Ord + Copy> AnyPolicy<Q> {
    /// The chosen policy with no queue; `k` = 0 is refused.
    pub fn new(choice: Choice) -> Result<Self, ZeroK> {
        Ok(match choice {
            Choice::Partition { round } => AnyPolicy::Partition(Partition::new(round)),
            Choice::KEdf { k } => AnyPolicy::KEdf(KEdf::new(k)?),
            Choice::Laxity => AnyPolicy::Laxity(Laxity::new()),
            Choice::HighestFirst => AnyPolicy::HighestFirst(HighestFirst::new()),
        })
    }

    /// The policy's name in outputs.
    pub fn name(&self) -> &'static str {
        each!(self, p => p.name())
    }

    /// [`TimedPolicy::register`], refused (nothing changed) when `params` are another
    /// policy's.
    pub fn register(&mut self, q: Q, params: Params, now: Duration) -> Result<Vec<Action<Q>>, WrongParams> {
        match (self, params) {
            (AnyPolicy::Partition(p), Params::Share(s)) => Ok(p.register(q, s, now)),
            (AnyPolicy::KEdf(p), Params::Deadline(d)) => Ok(p.register(q, d, now)),
            (AnyPolicy::Laxity(p), Params::Laxity(l)) => Ok(p.register(q, l, now)),
            (AnyPolicy::HighestFirst(p), Params::Priority(prio)) => Ok(p.register(q, prio, now)),
            (me, _) => Err(WrongParams {
                policy: me.name(),
                needs: me.choice_needs(),
            }),
        }
    }

    fn choice_needs(&self) -> &'static str {
        match self {
            AnyPolicy::Partition(_) => Choice::Partition { round: Duration::ZERO }.needs(),
            AnyPolicy::KEdf(_) => Choice::KEdf { k: 1 }.needs(),
            AnyPolicy::Laxity(_) => Choice::Laxity.needs(),
            AnyPolicy::HighestFirst(_) => Choice::HighestFirst.needs(),
        }
    }

    /// [`TimedPolicy::unregister`].
    pub fn unregister(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        each!(self, p => p.unregister(q, now))
    }

    /// [`TimedPolicy::ready`].
    pub fn ready(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        each!(self, p => p.ready(q, now))
    }

    /// [`TimedPolicy::idle`].
    pub fn idle(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        each!(self, p => p.idle(q, now))
    }

    /// [`TimedPolicy::tick`].
    pub fn tick(&mut self, now: Duration) -> Vec<Action<Q>> {
        each!(self, p => p.tick(now))
    }

    /// [`TimedPolicy::next_wakeup`].
    pub fn next_wakeup(&self) -> Option<Duration> {
        each!(self, p => p.next_wakeup())
    }

    /// [`TimedPolicy::failed`].
    pub fn failed(&mut self, action: Action<Q>) {
        each!(self, p => p.failed(action))
    }

    /// [`TimedPolicy::is_suspended`].
    pub fn is_suspended(&self, q: Q) -> bool {
        each!(self, p => p.is_suspended(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parameters_of_another_policy_are_refused_and_change_nothing() {
        let mut p = AnyPolicy::new(Choice::KEdf { k: 1 }).unwrap();
        let e = p.register(7u32, Params::Share(NonZeroU32::MIN), ms(0)).unwrap_err();
        assert_eq!(e.to_string(), "the k-edf policy registers a queue with a deadline");
        assert!(p.ready(7, ms(1)).is_empty(), "7 was not registered");
        assert!(!p.is_suspended(7));
        assert!(AnyPolicy::<u32>::new(Choice::KEdf { k: 0 }).is_err());
    }

    /// The dispatch reaches the chosen policy: the same steps give the same actions as the
    /// policy used directly.
    #[test]
    fn each_choice_acts_as_its_policy() {
        let mut any = AnyPolicy::new(Choice::Partition { round: ms(10) }).unwrap();
        let mut up = Partition::new(ms(10));
        for (q, s) in [(1u32, 3u32), (2, 1)] {
            let s = NonZeroU32::new(s).unwrap();
            assert_eq!(
                any.register(q, Params::Share(s), ms(0)).unwrap(),
                up.register(q, s, ms(0))
            );
        }
        for t in 1..40 {
            let q = if t % 3 == 0 { 1 } else { 2 };
            assert_eq!(any.ready(q, ms(t)), up.ready(q, ms(t)));
            assert_eq!(any.tick(ms(t)), up.tick(ms(t)));
            assert_eq!(any.next_wakeup(), up.next_wakeup());
        }
        let mut any = AnyPolicy::new(Choice::Laxity).unwrap();
        let l = LaxityParams {
            laxity: ms(5),
            laxity_priority: 0,
            critical_priority: 2,
        };
        let h = LaxityParams {
            laxity: ms(50),
            laxity_priority: 1,
            critical_priority: 1,
        };
        any.register(1u32, Params::Laxity(l), ms(0)).unwrap();
        any.register(2, Params::Laxity(h), ms(0)).unwrap();
        assert_eq!(any.ready(2, ms(0)), vec![Action::Suspend(1)], "below the ready ceiling");
        assert!(any.ready(1, ms(0)).is_empty(), "1 waits on its slack");
        assert_eq!(any.next_wakeup(), Some(ms(5)));
        assert_eq!(any.tick(ms(5)), vec![Action::Resume(1), Action::Suspend(2)], "critical");
        assert_eq!(any.name(), crate::laxity::NAME);
    }
}
