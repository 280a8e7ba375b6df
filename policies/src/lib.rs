//! Scheduling policies as pure, time-driven state machines: which registered queues run and
//! which are suspended, decided from the queues' readiness and the time.
//!
//! Beside [`hpf`] (highest-priority-first, driven by prioritised blocks of work entering and
//! leaving), this crate holds the policies of XSched's evaluation, driven by the queues'
//! readiness and (`up`, `laxity`) the time:
//! - [`up::Partition`]: utilization partition. One queue at a time holds the device for a slice
//!   proportional to its share; over time each busy queue gets its share of device time.
//! - [`kedf::KEdf`]: K earliest deadlines first. The `k` ready queues whose work is due first
//!   run; the others are suspended.
//! - [`laxity::Laxity`]: least laxity. A ready queue runs at its laxity priority until its slack is
//!   used up, then at its critical priority; queues below the highest priority among the ready
//!   ones are suspended.
//! - [`priority::HighestFirst`]: highest priority first over queues driven by their readiness.
//!   While some queue is ready, the queues below the highest priority among the ready ones are
//!   suspended: [`hpf`]'s rule with each ready queue of priority `p` as a block of `p`.
//!
//! [`any::AnyPolicy`] holds one of them chosen at run time (the application API's helper takes it
//! from its user; `preempt-lat priority`'s class experiment runs through that helper), with a
//! queue's parameters as one type.
//!
//! Every policy implements [`TimedPolicy`]: the caller reports what happened to a queue (it
//! became [`ready`](TimedPolicy::ready): it has work; it went [`idle`](TimedPolicy::idle): all its
//! work is done) and the time, carries out the returned [`Action`]s (through whatever level it
//! uses: Lv3, the Lv1 launcher, host SIGSTOP) under one lock with the policy, reports the ones that
//! failed ([`TimedPolicy::failed`]), and calls [`TimedPolicy::tick`] again no later than
//! [`TimedPolicy::next_wakeup`]. Time is a [`Duration`] since an epoch the caller chooses (a
//! monotonic clock); the policies read no clock, do no I/O and start no thread, so every rule is
//! tested here over random interleavings with a simulated clock.
//!
//! ```
//! use policies::{Action, TimedPolicy, kedf::KEdf};
//! use std::time::Duration;
//! let ms = Duration::from_millis;
//! let mut p = KEdf::new(1).unwrap(); // one queue at a time: the earliest deadline
//! p.register("batch", ms(100), ms(0));
//! p.register("video", ms(40), ms(0)); // both idle: the first key runs, video is suspended
//! // Both have work at t = 10 ms: video's (due at 50 ms) is due before batch's (at 110 ms).
//! assert!(p.ready("batch", ms(10)).is_empty());
//! assert_eq!(p.ready("video", ms(10)), vec![Action::Suspend("batch"), Action::Resume("video")]);
//! // Video is done: batch runs again.
//! assert_eq!(p.idle("video", ms(30)), vec![Action::Resume("batch"), Action::Suspend("video")]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::time::Duration;

pub use hpf::Action;

pub mod any;
pub mod kedf;
pub mod laxity;
pub mod priority;
mod queues;
pub mod up;

#[cfg(test)]
mod sim;

/// A policy driven by the readiness of its queues and by the time.
///
/// After every call the returned actions bring the queues to the policy's rule; the recorded
/// state ([`TimedPolicy::is_suspended`]) is what the queues are once the caller has carried the
/// actions out, unless it reports a failure.
pub trait TimedPolicy<Q: Ord + Copy> {
    /// What a queue is registered with (a share, a deadline, a laxity).
    type Params;

    /// The policy's name in outputs.
    fn name(&self) -> &'static str;

    /// Registers `q` (or changes its parameters); a new queue is idle.
    fn register(&mut self, q: Q, params: Self::Params, now: Duration) -> Vec<Action<Q>>;

    /// Forgets `q`; if it was suspended, its resume is among the actions (a queue leaves the
    /// policy running).
    fn unregister(&mut self, q: Q, now: Duration) -> Vec<Action<Q>>;

    /// `q` has work from `now` on (call it before the work is submitted, so that a queue the
    /// policy suspends does not start it). A queue already ready stays ready since its first call.
    fn ready(&mut self, q: Q, now: Duration) -> Vec<Action<Q>>;

    /// All of `q`'s work is done.
    fn idle(&mut self, q: Q, now: Duration) -> Vec<Action<Q>>;

    /// The time is `now`: slices that ended and slack that ran out take effect.
    fn tick(&mut self, now: Duration) -> Vec<Action<Q>>;

    /// When [`TimedPolicy::tick`] must be called next, if the policy has a time-driven decision
    /// pending.
    fn next_wakeup(&self) -> Option<Duration>;

    /// Reports that `action` could not be carried out: the queue's recorded state goes back to
    /// what it was (the next decision tries again). Unknown queues are ignored.
    fn failed(&mut self, action: Action<Q>);

    /// Whether `q` is registered and recorded as suspended.
    fn is_suspended(&self, q: Q) -> bool;
}
