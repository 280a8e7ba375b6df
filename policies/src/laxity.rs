//! Least laxity: deadline-aware priorities. A queue's work may wait for a while (its laxity) at
//! a modest priority; once that slack is used up it becomes critical and outranks the others.
//!
//! Each queue is registered with [`LaxityParams`]. A queue ready since `t` has, at time `now`,
//! priority `laxity_priority` while `now < t + laxity` and `critical_priority` from then on; an
//! idle queue counts at its `laxity_priority`. The rule: while some queue is ready, every queue
//! whose priority is below the highest priority among the ready queues is suspended; the others
//! run. [`TimedPolicy::next_wakeup`] is the next moment a ready queue turns critical.
//!
//! With `critical_priority > laxity_priority` this gives video-call frames (short laxity) the
//! device just in time, while a background job (long laxity, high critical priority) still
//! finishes by its deadline: XSched's laxity-based policy of its video-conferencing case study.

use crate::queues::{Queues, Record};
use crate::{Action, TimedPolicy};
use hpf::Priority;
use std::time::Duration;

/// The policy's name in outputs.
pub const NAME: &str = "laxity";

/// What a queue is registered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaxityParams {
    /// How long the queue's work may wait at `laxity_priority` once it is ready.
    pub laxity: Duration,
    /// Its priority while it has slack (larger runs first, as in hpf).
    pub laxity_priority: Priority,
    /// Its priority once the slack is used up.
    pub critical_priority: Priority,
}

#[derive(Debug, Clone)]
struct Member {
    params: LaxityParams,
    ready_since: Option<Duration>,
    suspended: bool,
}

impl Record for Member {
    type Params = LaxityParams;

    fn new(params: LaxityParams) -> Self {
        Member {
            params,
            ready_since: None,
            suspended: false,
        }
    }

    fn params(&mut self) -> &mut LaxityParams {
        &mut self.params
    }

    fn suspended(&self) -> bool {
        self.suspended
    }

    fn suspended_mut(&mut self) -> &mut bool {
        &mut self.suspended
    }
}

impl Member {
    fn priority(&self, now: Duration) -> Priority {
        match self.ready_since {
            Some(t) if now >= t.saturating_add(self.params.laxity) => self.params.critical_priority,
            _ => self.params.laxity_priority,
        }
    }
}

/// Least laxity over queues keyed by `Q`. See the [module documentation](self).
#[derive(Debug, Clone, Default)]
pub struct Laxity<Q: Ord + Copy> {
    queues: Queues<Q, Member>,
    now: Duration,
}

impl<Q: Ord + Copy> Laxity<Q> {
    /// No queue.
    pub fn new() -> Self {
        Laxity {
            queues: Queues::default(),
            now: Duration::ZERO,
        }
    }

    /// `q`'s priority at the time of the last call.
    pub fn priority(&self, q: Q) -> Option<Priority> {
        Some(self.queues.get(&q)?.priority(self.now))
    }

    /// The highest priority among the ready queues.
    pub fn ceiling(&self) -> Option<Priority> {
        self.queues
            .values()
            .filter(|m| m.ready_since.is_some())
            .map(|m| m.priority(self.now))
            .max()
    }

    /// Moves the clock (never backwards) and brings every queue to the rule.
    fn decide(&mut self, now: Duration) -> Vec<Action<Q>> {
        self.now = self.now.max(now);
        let ceiling = self.ceiling();
        let now = self.now;
        self.queues
            .reconcile(|_, m| ceiling.is_some_and(|c| m.priority(now) < c))
    }
}

impl<Q: Ord + Copy> TimedPolicy<Q> for Laxity<Q> {
    type Params = LaxityParams;

    fn name(&self) -> &'static str {
        NAME
    }

    fn register(&mut self, q: Q, params: LaxityParams, now: Duration) -> Vec<Action<Q>> {
        self.queues.register(q, params);
        self.decide(now)
    }

    fn unregister(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        let mut out = self.queues.unregister(q);
        out.extend(self.decide(now));
        out
    }

    fn ready(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        let at = self.now.max(now);
        if let Some(m) = self.queues.get_mut(&q)
            && m.ready_since.is_none()
        {
            m.ready_since = Some(at);
        }
        self.decide(now)
    }

    fn idle(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        if let Some(m) = self.queues.get_mut(&q) {
            m.ready_since = None;
        }
        self.decide(now)
    }

    fn tick(&mut self, now: Duration) -> Vec<Action<Q>> {
        self.decide(now)
    }

    fn next_wakeup(&self) -> Option<Duration> {
        self.queues
            .values()
            .filter_map(|m| Some(m.ready_since?.saturating_add(m.params.laxity)))
            .filter(|&t| t > self.now)
            .min()
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn lax(laxity_ms: u64, laxity_priority: Priority, critical_priority: Priority) -> LaxityParams {
        LaxityParams {
            laxity: ms(laxity_ms),
            laxity_priority,
            critical_priority,
        }
    }

    /// XSched's video-conferencing case, in small: frames (laxity 10 ms) outrank a speech job at
    /// first; once the speech job's slack (50 ms) is gone it outranks the frames until done.
    #[test]
    fn a_queue_outranks_the_others_once_its_slack_is_used_up() {
        let mut p = Laxity::new();
        p.register("frames", lax(10, 2, 3), ms(0));
        p.register("speech", lax(50, 1, 4), ms(0));
        assert_eq!(p.ready("speech", ms(0)), vec![]);
        assert_eq!(p.ready("frames", ms(5)), vec![Suspend("speech")]);
        assert_eq!(p.next_wakeup(), Some(ms(15)), "frames turn critical first");
        assert_eq!(p.tick(ms(15)), vec![], "frames critical at 3: speech still below");
        assert_eq!(p.next_wakeup(), Some(ms(50)));
        assert_eq!(p.tick(ms(50)), vec![Suspend("frames"), Resume("speech")]);
        assert_eq!(p.priority("speech"), Some(4));
        // Idle, speech counts at its laxity priority (1), below the frames (3).
        assert_eq!(p.idle("speech", ms(60)), vec![Resume("frames"), Suspend("speech")]);
        assert_eq!(p.next_wakeup(), None, "frames' slack is already used up");
        assert_eq!(
            p.idle("frames", ms(61)),
            vec![Resume("speech")],
            "nothing ready: all run"
        );
    }

    #[test]
    fn the_clock_never_goes_backwards() {
        let mut p = Laxity::new();
        p.register(1, lax(10, 0, 5), ms(100));
        p.register(2, lax(100, 1, 1), ms(100));
        p.ready(1, ms(100));
        p.ready(2, ms(100));
        assert!(p.is_suspended(1));
        assert_eq!(p.tick(ms(110)), vec![Resume(1), Suspend(2)]);
        assert_eq!(p.tick(ms(50)), vec![], "a late call with an old time changes nothing");
    }

    /// Random registrations, readiness changes, ticks at random times and failed actions:
    /// after every call (and a retry after a failure) a queue is suspended iff its priority now
    /// is below the highest priority among the ready queues; the wake-up is the next time a
    /// ready queue turns critical.
    #[test]
    fn random_interleavings_keep_the_rule() {
        let mut rng = Rng::new(0x5851_f42d_4c95_7f2d);
        let mut p: Laxity<u64> = Laxity::new();
        let mut dev = Device::default();
        let mut now = Duration::ZERO;
        for _ in 0..30_000 {
            now += Duration::from_micros(rng.below(3_000));
            let q = rng.below(6);
            let prio = |r: u64| Priority::try_from(r % 4).unwrap();
            let a = match rng.below(6) {
                0 => {
                    let (l, c) = (rng.next(), rng.next());
                    p.register(q, lax(rng.below(20), prio(l), prio(c)), now)
                }
                1 => {
                    dev.suspended.remove(&q);
                    p.unregister(q, now)
                }
                2 | 3 => p.ready(q, now),
                4 => p.idle(q, now),
                _ => p.tick(now),
            };
            let a: Vec<_> = a.into_iter().filter(|a| p.queues.contains_key(&a.queue())).collect();
            let failing = rng.below(10) == 0;
            dev.apply(&mut p, a, || failing);
            if failing {
                let a = p.tick(now);
                dev.apply(&mut p, a, || false);
            }
            dev.agrees(&p, p.queues.keys().copied());
            let prio_now = |m: &Member| match m.ready_since {
                Some(t) if now >= t + m.params.laxity => m.params.critical_priority,
                _ => m.params.laxity_priority,
            };
            let ceiling = p
                .queues
                .values()
                .filter(|m| m.ready_since.is_some())
                .map(prio_now)
                .max();
            for (q, m) in &p.queues {
                let want = ceiling.is_some_and(|c| prio_now(m) < c);
                assert_eq!(m.suspended, want, "queue {q} at {now:?}");
            }
            let wake = p
                .queues
                .values()
                .filter_map(|m| m.ready_since.map(|t| t + m.params.laxity))
                .filter(|&t| t > now)
                .min();
            assert_eq!(p.next_wakeup(), wake);
        }
    }
}
