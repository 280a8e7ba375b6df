//! What the policies' tests share: a deterministic random source (no dependency, reproducible
//! from its seed) and a check that a policy's actions are consistent with its recorded state.

use crate::{Action, TimedPolicy};
use std::collections::BTreeMap;

/// xorshift64: enough to drive random interleavings reproducibly.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The queues as the caller sees them: applies each action, checking that the policy never asks
/// to suspend a suspended queue or resume a running one (the caller's mechanisms would refuse).
#[derive(Default)]
pub struct Device<Q: Ord + Copy> {
    pub suspended: BTreeMap<Q, bool>,
}

impl<Q: Ord + Copy + std::fmt::Debug> Device<Q> {
    /// Carries out `actions`; `fail` picks ones that fail (reported back to the policy).
    pub fn apply<P: TimedPolicy<Q>>(
        &mut self,
        policy: &mut P,
        actions: Vec<Action<Q>>,
        mut fail: impl FnMut() -> bool,
    ) {
        for a in actions {
            let q = a.queue();
            let was = self.suspended.get(&q).copied().unwrap_or(false);
            match a {
                Action::Suspend(_) => assert!(!was, "{q:?} suspended twice"),
                Action::Resume(_) => assert!(was, "{q:?} resumed while running"),
            }
            if fail() {
                policy.failed(a);
            } else {
                self.suspended.insert(q, matches!(a, Action::Suspend(_)));
            }
        }
    }

    /// Whether the policy's record agrees with the device for every queue it knows.
    pub fn agrees<P: TimedPolicy<Q>>(&self, policy: &P, queues: impl Iterator<Item = Q>) {
        for q in queues {
            let dev = self.suspended.get(&q).copied().unwrap_or(false);
            assert_eq!(policy.is_suspended(q), dev, "record of {q:?} differs from the device");
        }
    }
}
