//! K earliest deadlines first (K-EDF): the `k` queues whose work is due first run.
//!
//! Each queue is registered with a relative deadline; a queue that becomes ready at `t` is due
//! at `t + deadline` (it keeps that deadline until it goes idle). The rule: order the queues by
//! (due time, key), idle queues after every ready one; the first `k` run, the rest are
//! suspended. With fewer than `k` ready queues, idle ones fill the remaining places, so work
//! arriving there starts without waiting for a decision. Deadlines do not change the order as
//! time passes, so the policy needs no tick of its own.

use crate::queues::{Queues, Record};
use crate::{Action, TimedPolicy};
use std::fmt;
use std::time::Duration;

/// The policy's name in outputs.
pub const NAME: &str = "k-edf";

/// [`KEdf::new`] with `k` = 0: no queue could ever run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroK;

impl fmt::Display for ZeroK {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("k must be at least 1 (the number of queues that run at once)")
    }
}

impl std::error::Error for ZeroK {}

#[derive(Debug, Clone)]
struct Member {
    deadline: Duration,
    due: Option<Duration>,
    suspended: bool,
}

impl Record for Member {
    type Params = Duration;

    fn new(deadline: Duration) -> Self {
        Member {
            deadline,
            due: None,
            suspended: false,
        }
    }

    fn params(&mut self) -> &mut Duration {
        &mut self.deadline
    }

    fn suspended(&self) -> bool {
        self.suspended
    }

    fn suspended_mut(&mut self) -> &mut bool {
        &mut self.suspended
    }
}

/// K-EDF over queues keyed by `Q`. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct KEdf<Q: Ord + Copy> {
    k: usize,
    queues: Queues<Q, Member>,
}

impl<Q: Ord + Copy> KEdf<Q> {
    /// At most `k` queues run at once.
    pub fn new(k: usize) -> Result<Self, ZeroK> {
        if k == 0 {
            return Err(ZeroK);
        }
        Ok(KEdf {
            k,
            queues: Queues::default(),
        })
    }

    /// How many queues run at once.
    pub fn k(&self) -> usize {
        self.k
    }

    /// When `q`'s current work is due (`None`: idle or unknown).
    pub fn due(&self, q: Q) -> Option<Duration> {
        self.queues.get(&q)?.due
    }

    /// The queues in the rule's order: due ones by due time, then idle ones, ties by key.
    fn order(&self) -> Vec<Q> {
        let mut order: Vec<(Option<Duration>, Q)> = self.queues.iter().map(|(&q, m)| (m.due, q)).collect();
        order.sort_by(|a, b| match (a.0, b.0) {
            (Some(x), Some(y)) => (x, a.1).cmp(&(y, b.1)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.1.cmp(&b.1),
        });
        order.into_iter().map(|(_, q)| q).collect()
    }

    fn reconcile(&mut self) -> Vec<Action<Q>> {
        let running: Vec<Q> = self.order().into_iter().take(self.k).collect();
        self.queues.reconcile(|q, _| !running.contains(&q))
    }
}

impl<Q: Ord + Copy> TimedPolicy<Q> for KEdf<Q> {
    /// The queue's relative deadline: its work is due this long after it becomes ready.
    type Params = Duration;

    fn name(&self) -> &'static str {
        NAME
    }

    fn register(&mut self, q: Q, deadline: Duration, _now: Duration) -> Vec<Action<Q>> {
        self.queues.register(q, deadline);
        self.reconcile()
    }

    fn unregister(&mut self, q: Q, _now: Duration) -> Vec<Action<Q>> {
        let mut out = self.queues.unregister(q);
        out.extend(self.reconcile());
        out
    }

    fn ready(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        if let Some(m) = self.queues.get_mut(&q)
            && m.due.is_none()
        {
            m.due = Some(now.saturating_add(m.deadline));
        }
        self.reconcile()
    }

    fn idle(&mut self, q: Q, _now: Duration) -> Vec<Action<Q>> {
        if let Some(m) = self.queues.get_mut(&q) {
            m.due = None;
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn k_zero_is_refused() {
        assert_eq!(KEdf::<u8>::new(0).unwrap_err(), ZeroK);
    }

    #[test]
    fn the_k_earliest_due_queues_run() {
        let mut p = KEdf::new(2).unwrap();
        for (q, d) in [('a', 30), ('b', 10), ('c', 20)] {
            p.register(q, ms(d), ms(0));
        }
        assert!(p.is_suspended('c'), "all idle: the first two keys run");
        assert_eq!(p.ready('a', ms(0)), vec![], "a due at 30, b idle: a and b run");
        assert_eq!(p.ready('c', ms(0)), vec![Suspend('b'), Resume('c')]);
        assert_eq!(
            p.ready('b', ms(15)),
            vec![Suspend('a'), Resume('b')],
            "b due at 25: after c (20), before a (30)"
        );
        assert_eq!(p.due('b'), Some(ms(25)));
        assert!(p.is_suspended('a'));
        assert_eq!(p.ready('b', ms(50)), vec![], "still ready: keeps its due time");
        assert_eq!(p.due('b'), Some(ms(25)));
        assert_eq!(p.idle('c', ms(18)), vec![Resume('a'), Suspend('c')]);
        assert_eq!(p.unregister('b', ms(19)), vec![Resume('c')], "idle c fills b's place");
    }

    /// Random registrations, readiness changes and failed actions: after every call (and a
    /// retry after a failure) exactly the first `k` queues in (due, key) order run.
    #[test]
    fn random_interleavings_keep_the_rule() {
        let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
        for k in 1..=3 {
            let mut p: KEdf<u64> = KEdf::new(k).unwrap();
            let mut dev = Device::default();
            let mut now = Duration::ZERO;
            for _ in 0..20_000 {
                now += Duration::from_micros(rng.below(1_000));
                let q = rng.below(6);
                let a = match rng.below(5) {
                    0 => p.register(q, Duration::from_micros(rng.below(5_000)), now),
                    1 => {
                        dev.suspended.remove(&q);
                        p.unregister(q, now)
                    }
                    2 | 3 => p.ready(q, now),
                    _ => p.idle(q, now),
                };
                let a: Vec<_> = a.into_iter().filter(|a| p.queues.contains_key(&a.queue())).collect();
                let failing = rng.below(10) == 0;
                dev.apply(&mut p, a, || failing);
                if failing {
                    let a = p.tick(now);
                    dev.apply(&mut p, a, || false);
                }
                dev.agrees(&p, p.queues.keys().copied());
                let mut by_due: Vec<(u128, u64)> = p
                    .queues
                    .iter()
                    .map(|(&q, m)| (m.due.map_or(u128::MAX, |d| d.as_nanos()), q))
                    .collect();
                by_due.sort();
                for (rank, (_, q)) in by_due.iter().enumerate() {
                    assert_eq!(p.is_suspended(*q), rank >= k, "queue {q} at rank {rank}, k {k}");
                }
            }
        }
    }
}
