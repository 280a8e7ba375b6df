//! Utilization partition: the device's time divided between queues by their shares.
//!
//! The rule: at most one queue runs, the *holder*; every other registered queue is suspended
//! (whether it has work or not, so that work arriving outside its turn does not start). While
//! any queue is ready there is a holder (no time is left unused), and the holder keeps the device
//! until its slice ends or it goes idle. A slice is `round x share / (sum of registered shares)`.
//! The next holder is the ready queue that has had the least device time for its share (its
//! *virtual time*: held time / share; ties go to the smaller key), so lateness of the caller's
//! ticks is charged to the queue that used it and the long-run split follows the shares. A
//! queue that becomes ready starts at no less than the least virtual time among the ready ones,
//! so time it spent idle does not let it take the device for a long catch-up.

use crate::queues::{Queues, Record};
use crate::{Action, TimedPolicy};
use std::num::NonZeroU32;
use std::time::Duration;

/// The policy's name in outputs.
pub const NAME: &str = "utilization-partition";

/// The shortest slice, whatever the shares: the caller's tick cannot be asked for more often.
pub const MIN_SLICE: Duration = Duration::from_micros(1);

/// Scale of the virtual time: nanoseconds held x `VT_SCALE` / share, in integers.
const VT_SCALE: u128 = 1 << 20;

#[derive(Debug, Clone)]
struct Member {
    share: NonZeroU32,
    ready: bool,
    suspended: bool,
    vtime: u128,
}

impl Record for Member {
    type Params = NonZeroU32;

    fn new(share: NonZeroU32) -> Self {
        Member {
            share,
            ready: false,
            suspended: false,
            vtime: 0,
        }
    }

    fn params(&mut self) -> &mut NonZeroU32 {
        &mut self.share
    }

    fn suspended(&self) -> bool {
        self.suspended
    }

    fn suspended_mut(&mut self) -> &mut bool {
        &mut self.suspended
    }
}

#[derive(Debug, Clone, Copy)]
struct Holder<Q> {
    queue: Q,
    since: Duration,
    until: Duration,
}

/// Utilization partition over queues keyed by `Q`. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Partition<Q: Ord + Copy> {
    round: Duration,
    queues: Queues<Q, Member>,
    holder: Option<Holder<Q>>,
}

impl<Q: Ord + Copy> Partition<Q> {
    /// A partition whose slices add up to `round` when every queue takes its turn (XSched's
    /// time slice).
    pub fn new(round: Duration) -> Self {
        Partition {
            round,
            queues: Queues::default(),
            holder: None,
        }
    }

    /// The queue holding the device, if any.
    pub fn holder(&self) -> Option<Q> {
        self.holder.map(|h| h.queue)
    }

    /// The slice `q` gets when it holds the device.
    pub fn slice(&self, q: Q) -> Option<Duration> {
        let share = self.queues.get(&q)?.share.get();
        let total: u64 = self.queues.values().map(|m| u64::from(m.share.get())).sum();
        let nanos = self.round.as_nanos() * u128::from(share) / u128::from(total.max(1));
        Some(Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)).max(MIN_SLICE))
    }

    /// Charges the holder for the time it held the device and releases it.
    fn release(&mut self, now: Duration) {
        if let Some(h) = self.holder.take()
            && let Some(m) = self.queues.get_mut(&h.queue)
        {
            let held = now.saturating_sub(h.since).as_nanos();
            m.vtime += held * VT_SCALE / u128::from(m.share.get());
        }
    }

    /// Gives the device to the ready queue with the least virtual time, if there is none yet.
    fn pick(&mut self, now: Duration) {
        if self.holder.is_some() {
            return;
        }
        let next = self
            .queues
            .iter()
            .filter(|(_, m)| m.ready)
            .min_by_key(|(q, m)| (m.vtime, **q))
            .map(|(&q, _)| q);
        if let Some(q) = next {
            let slice = self.slice(q).unwrap_or(MIN_SLICE);
            self.holder = Some(Holder {
                queue: q,
                since: now,
                until: now.saturating_add(slice),
            });
        }
    }

    /// The actions that bring every queue to the rule (the holder runs, the rest are
    /// suspended).
    fn reconcile(&mut self) -> Vec<Action<Q>> {
        let holder = self.holder();
        self.queues.reconcile(|q, _| holder != Some(q))
    }
}

impl<Q: Ord + Copy> TimedPolicy<Q> for Partition<Q> {
    /// The queue's share (any positive weight: 75 and 25, or 3 and 1).
    type Params = NonZeroU32;

    fn name(&self) -> &'static str {
        NAME
    }

    fn register(&mut self, q: Q, share: NonZeroU32, now: Duration) -> Vec<Action<Q>> {
        self.queues.register(q, share);
        self.pick(now);
        self.reconcile()
    }

    fn unregister(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        if self.holder() == Some(q) {
            self.release(now);
        }
        let mut out = self.queues.unregister(q);
        self.pick(now);
        out.extend(self.reconcile());
        out
    }

    fn ready(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        let floor = self.queues.values().filter(|m| m.ready).map(|m| m.vtime).min();
        if let Some(m) = self.queues.get_mut(&q)
            && !m.ready
        {
            m.ready = true;
            if let Some(floor) = floor {
                m.vtime = m.vtime.max(floor);
            }
        }
        self.pick(now);
        self.reconcile()
    }

    fn idle(&mut self, q: Q, now: Duration) -> Vec<Action<Q>> {
        if let Some(m) = self.queues.get_mut(&q) {
            m.ready = false;
        }
        if self.holder() == Some(q) {
            self.release(now);
            self.pick(now);
        }
        self.reconcile()
    }

    fn tick(&mut self, now: Duration) -> Vec<Action<Q>> {
        if self.holder.is_some_and(|h| now >= h.until) {
            self.release(now);
            self.pick(now);
        }
        self.reconcile()
    }

    fn next_wakeup(&self) -> Option<Duration> {
        self.holder.map(|h| h.until)
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

    fn share(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_holder_runs_until_its_slice_ends_then_the_other_queue_takes_over() {
        let mut p = Partition::new(ms(8));
        assert_eq!(p.register('a', share(3), ms(0)), vec![Suspend('a')]);
        assert_eq!(p.register('b', share(1), ms(0)), vec![Suspend('b')]);
        assert_eq!(p.ready('a', ms(0)), vec![Resume('a')]);
        assert_eq!(p.slice('a'), Some(ms(6)));
        assert_eq!(p.slice('b'), Some(ms(2)));
        assert_eq!(p.ready('b', ms(1)), vec![], "b waits for a's slice to end");
        assert_eq!(p.next_wakeup(), Some(ms(6)));
        assert_eq!(p.tick(ms(5)), vec![], "before the end of the slice nothing changes");
        assert_eq!(p.tick(ms(6)), vec![Suspend('a'), Resume('b')]);
        assert_eq!(p.next_wakeup(), Some(ms(8)));
        // b goes idle early: a takes the device at once.
        assert_eq!(p.idle('b', ms(7)), vec![Resume('a'), Suspend('b')]);
        assert_eq!(p.idle('a', ms(9)), vec![Suspend('a')]);
        assert_eq!(p.holder(), None);
        assert_eq!(p.next_wakeup(), None);
    }

    #[test]
    fn leaving_the_policy_resumes_the_queue_and_hands_the_device_on() {
        let mut p = Partition::new(ms(4));
        p.register(1, share(1), ms(0));
        p.register(2, share(1), ms(0));
        p.ready(1, ms(0));
        p.ready(2, ms(0));
        assert_eq!(p.unregister(2, ms(1)), vec![Resume(2)]);
        assert_eq!(p.unregister(1, ms(1)), vec![]);
        assert_eq!(p.holder(), None);
    }

    #[test]
    fn a_failed_resume_is_retried_by_the_next_tick() {
        let mut p = Partition::new(ms(4));
        p.register(1, share(1), ms(0));
        let acts = p.ready(1, ms(0));
        assert_eq!(acts, vec![Resume(1)]);
        p.failed(acts[0]);
        assert!(p.is_suspended(1));
        assert_eq!(p.tick(ms(1)), vec![Resume(1)]);
    }

    /// A queue that was idle while another ran alone for a second gets its share from then on,
    /// not a second of catch-up.
    #[test]
    fn time_spent_idle_is_not_owed_back() {
        let mut p = Partition::new(ms(10));
        p.register('a', share(1), ms(0));
        p.register('b', share(1), ms(0));
        p.ready('a', ms(0));
        let mut now = ms(0);
        while now < ms(1000) {
            now = p.next_wakeup().unwrap();
            p.tick(now);
        }
        p.ready('b', now);
        let mut held_b = Duration::ZERO;
        let end = now + ms(100);
        while now < end {
            let next = p.next_wakeup().unwrap();
            if p.holder() == Some('b') {
                held_b += next - now;
            }
            now = next;
            p.tick(now);
        }
        assert!(held_b <= ms(55), "b held {held_b:?} of 100 ms at an equal share");
    }

    /// With every queue busy, device time follows the shares (75:25 within 1 %) even when the
    /// caller's ticks come up to 30 % of a slice late; and no busy queue waits longer than two
    /// rounds (the virtual time may give the larger share two slices in a row).
    #[test]
    fn busy_queues_get_their_shares_despite_late_ticks() {
        let mut rng = Rng::new(7);
        let mut p = Partition::new(ms(10));
        let mut dev = Device::default();
        let mut now = Duration::ZERO;
        for (q, s) in [(0u8, 75), (1, 25)] {
            let a = p.register(q, share(s), now);
            dev.apply(&mut p, a, || false);
            let a = p.ready(q, now);
            dev.apply(&mut p, a, || false);
        }
        let mut held = [Duration::ZERO; 2];
        let mut waiting_since = [Some(now), Some(now)];
        let mut longest_wait = Duration::ZERO;
        while now < Duration::from_secs(20) {
            let holder = p.holder().unwrap();
            let wake = p.next_wakeup().unwrap();
            let late = p.slice(holder).unwrap() * u32::try_from(rng.below(30)).unwrap() / 100;
            let next = wake + late;
            held[usize::from(holder)] += next - now;
            now = next;
            let a = p.tick(now);
            dev.apply(&mut p, a, || false);
            for (q, since) in waiting_since.iter_mut().enumerate() {
                if p.holder() == Some(u8::try_from(q).unwrap()) {
                    if let Some(s) = since.take() {
                        longest_wait = longest_wait.max(now - s);
                    }
                } else if since.is_none() {
                    *since = Some(now);
                }
            }
        }
        let total = (held[0] + held[1]).as_secs_f64();
        let got = held[0].as_secs_f64() / total;
        assert!(
            (got - 0.75).abs() < 0.01,
            "queue 0 got {got:.4} of the time, asked 0.75"
        );
        assert!(longest_wait <= 2 * ms(10), "a busy queue waited {longest_wait:?}");
    }

    /// Random registrations, readiness changes, ticks and failed actions at random times: after
    /// every call (and a retry after a failure) at most one queue runs, it is the holder and it
    /// is ready; some queue holds the device whenever one is ready; the holder changes only when
    /// its slice has ended, it went idle or it left.
    #[test]
    fn random_interleavings_keep_the_rule() {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut p: Partition<u64> = Partition::new(ms(5));
        let mut dev = Device::default();
        let mut now = Duration::ZERO;
        for _ in 0..50_000 {
            now += Duration::from_micros(rng.below(2_000));
            let before = p.holder;
            let q = rng.below(5);
            let event = rng.below(6);
            let a = match event {
                0 => p.register(q, share(u32::try_from(1 + rng.below(4)).unwrap()), now),
                1 => {
                    dev.suspended.remove(&q);
                    p.unregister(q, now)
                }
                2 | 3 => p.ready(q, now),
                4 => p.idle(q, now),
                _ => p.tick(now),
            };
            // Actions on a queue just unregistered are its resume: the device forgets it too.
            let failing = rng.below(10) == 0;
            let a: Vec<_> = a.into_iter().filter(|a| p.queues.contains_key(&a.queue())).collect();
            dev.apply(&mut p, a, || failing);
            if failing {
                let a = p.tick(now);
                dev.apply(&mut p, a, || false);
            }
            dev.agrees(&p, p.queues.keys().copied());
            let running: Vec<_> = p.queues.iter().filter(|(_, m)| !m.suspended).collect();
            assert!(running.len() <= 1, "two queues run: {running:?}");
            if let Some(&(&q, m)) = running.first() {
                assert_eq!(p.holder(), Some(q));
                assert!(m.ready, "the holder {q} has no work");
            }
            let any_ready = p.queues.values().any(|m| m.ready);
            assert_eq!(p.holder().is_some(), any_ready, "work-conserving");
            if let (Some(b), Some(h)) = (before, p.holder)
                && b.queue != h.queue
            {
                let left = !p.queues.get(&b.queue).is_some_and(|m| m.ready);
                assert!(left || now >= b.until, "holder {} lost the device early", b.queue);
            }
        }
    }
}
