//! Scheduling policies of `preempt-lat priority`, as pure state machines: HP arrivals and
//! completions in, suspend/resume decisions for the LP queue out. They know nothing of devices
//! or clocks, so each is tested alone and another policy can be added beside them.

/// What happened on the HP side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An HP request arrived (it is now pending until its completion).
    HpArrival,
    /// A pending HP request completed.
    HpCompletion,
}

/// What the policy wants done to the LP queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave the LP queue as it is.
    Nothing,
    /// Suspend the LP queue (through the chosen level).
    SuspendLp,
    /// Resume the LP queue.
    ResumeLp,
}

/// An event the policy cannot accept: a bug in the caller, never a device condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError(pub &'static str);

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A scheduling policy over one HP source and one LP queue.
pub trait Policy {
    /// Its name in outputs.
    fn name(&self) -> &'static str;
    /// Takes one event (in time order) and says what to do to the LP queue.
    fn on_event(&mut self, e: Event) -> Result<Action, PolicyError>;
    /// Whether the policy currently holds the LP queue suspended.
    fn lp_suspended(&self) -> bool;
}

/// Counts pending HP requests; shared by the policies below.
#[derive(Debug, Default, Clone, Copy)]
struct Pending(u64);

impl Pending {
    fn apply(&mut self, e: Event) -> Result<(), PolicyError> {
        match e {
            Event::HpArrival => self.0 += 1,
            Event::HpCompletion => {
                self.0 = self
                    .0
                    .checked_sub(1)
                    .ok_or(PolicyError("an HP completion without a pending HP request"))?;
            }
        }
        Ok(())
    }
}

/// No scheduling: both queues run as submitted (the `native` mode).
#[derive(Debug, Default)]
pub struct NoScheduling {
    pending: Pending,
}

impl Policy for NoScheduling {
    fn name(&self) -> &'static str {
        "none"
    }
    fn on_event(&mut self, e: Event) -> Result<Action, PolicyError> {
        self.pending.apply(e)?;
        Ok(Action::Nothing)
    }
    fn lp_suspended(&self) -> bool {
        false
    }
}

/// Highest priority first (XSched's HPF): the LP queue is suspended while any HP request is
/// pending and resumed when none remains.
#[derive(Debug, Default)]
pub struct HighestPriorityFirst {
    pending: Pending,
    suspended: bool,
}

impl Policy for HighestPriorityFirst {
    fn name(&self) -> &'static str {
        "highest-priority-first"
    }
    fn on_event(&mut self, e: Event) -> Result<Action, PolicyError> {
        self.pending.apply(e)?;
        Ok(match (self.pending.0 > 0, self.suspended) {
            (true, false) => {
                self.suspended = true;
                Action::SuspendLp
            }
            (false, true) => {
                self.suspended = false;
                Action::ResumeLp
            }
            _ => Action::Nothing,
        })
    }
    fn lp_suspended(&self) -> bool {
        self.suspended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::{Nothing, ResumeLp, SuspendLp};
    use Event::{HpArrival as A, HpCompletion as C};

    fn run(p: &mut dyn Policy, events: &[Event]) -> Vec<Action> {
        events.iter().map(|&e| p.on_event(e).unwrap()).collect()
    }

    #[test]
    fn hpf_suspends_on_the_first_arrival_and_resumes_when_none_remains() {
        let mut p = HighestPriorityFirst::default();
        assert_eq!(run(&mut p, &[A, C]), vec![SuspendLp, ResumeLp]);
        assert!(!p.lp_suspended());
        // Overlapping requests: one suspension for the whole busy period.
        assert_eq!(
            run(&mut p, &[A, A, C, A, C, C]),
            vec![SuspendLp, Nothing, Nothing, Nothing, Nothing, ResumeLp]
        );
        assert_eq!(run(&mut p, &[A]), vec![SuspendLp]);
        assert!(p.lp_suspended());
    }

    #[test]
    fn suspends_and_resumes_always_alternate() {
        // Any valid event sequence: decisions alternate, starting with a suspend.
        let mut p = HighestPriorityFirst::default();
        let (mut pending, mut last) = (0u32, ResumeLp);
        for i in 0..1000u32 {
            let e = if pending == 0 || (i * 7919) % 3 == 0 { A } else { C };
            pending = if e == A { pending + 1 } else { pending - 1 };
            match p.on_event(e).unwrap() {
                Nothing => {}
                a => {
                    assert_ne!(a, last, "event {i}");
                    last = a;
                }
            }
            assert_eq!(p.lp_suspended(), pending > 0);
        }
    }

    #[test]
    fn native_never_acts_and_both_refuse_a_completion_without_a_request() {
        let mut n = NoScheduling::default();
        assert_eq!(run(&mut n, &[A, A, C, C]), vec![Nothing; 4]);
        assert!(n.on_event(C).is_err());
        assert!(HighestPriorityFirst::default().on_event(C).is_err());
        assert_eq!(
            (n.name(), HighestPriorityFirst::default().name()),
            ("none", "highest-priority-first")
        );
    }
}
