//! The experiment's policy: one of the `policies` crate's policies over the class indices,
//! registered from the classes' parameters.
use crate::options::PolicyKind;
use crate::options::class::ClassSpec;
use policies::kedf::KEdf;
use policies::laxity::{Laxity, LaxityParams};
use policies::priority::HighestFirst;
use policies::up::Partition;
use policies::{Action, TimedPolicy};
use std::num::NonZeroU32;
use std::time::Duration;

/// A policy over queues keyed by class index.
pub enum Policy {
    Up(Partition<usize>),
    KEdf(KEdf<usize>),
    Laxity(Laxity<usize>),
    Hpf(HighestFirst<usize>),
}

macro_rules! each {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            Policy::Up($p) => $e,
            Policy::KEdf($p) => $e,
            Policy::Laxity($p) => $e,
            Policy::Hpf($p) => $e,
        }
    };
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1000.0)
}

impl Policy {
    /// The policy of `kind` with every class registered at time 0; the one-line reason a class
    /// lacks what the policy needs.
    pub fn new(
        kind: PolicyKind,
        classes: &[ClassSpec],
        k: usize,
        round_ms: f64,
    ) -> Result<(Policy, Vec<Action<usize>>), String> {
        let missing = |c: &ClassSpec| {
            format!(
                "--policy {} needs {} in --class {}",
                kind.name(),
                crate::options::class::needs(kind),
                c.name
            )
        };
        let mut actions = Vec::new();
        let policy = match kind {
            PolicyKind::Up => {
                let mut p = Partition::new(ms(round_ms));
                for (i, c) in classes.iter().enumerate() {
                    let share = c.share.and_then(NonZeroU32::new).ok_or_else(|| missing(c))?;
                    actions.extend(p.register(i, share, Duration::ZERO));
                }
                Policy::Up(p)
            }
            PolicyKind::Kedf => {
                let mut p = KEdf::new(k).map_err(|e| format!("--k: {e}"))?;
                for (i, c) in classes.iter().enumerate() {
                    let d = c.deadline_ms.ok_or_else(|| missing(c))?;
                    actions.extend(p.register(i, ms(d), Duration::ZERO));
                }
                Policy::KEdf(p)
            }
            PolicyKind::Laxity => {
                let mut p = Laxity::new();
                for (i, c) in classes.iter().enumerate() {
                    let (Some(l), Some(prio), Some(crit)) = (c.laxity_ms, c.prio, c.crit) else {
                        return Err(missing(c));
                    };
                    let params = LaxityParams {
                        laxity: ms(l),
                        laxity_priority: prio,
                        critical_priority: crit,
                    };
                    actions.extend(p.register(i, params, Duration::ZERO));
                }
                Policy::Laxity(p)
            }
            PolicyKind::Hpf => {
                let mut p = HighestFirst::new();
                for (i, c) in classes.iter().enumerate() {
                    let prio = c.prio.ok_or_else(|| missing(c))?;
                    actions.extend(p.register(i, prio, Duration::ZERO));
                }
                Policy::Hpf(p)
            }
        };
        Ok((policy, actions))
    }

    pub fn ready(&mut self, q: usize, now: Duration) -> Vec<Action<usize>> {
        each!(self, p => p.ready(q, now))
    }
    pub fn idle(&mut self, q: usize, now: Duration) -> Vec<Action<usize>> {
        each!(self, p => p.idle(q, now))
    }
    pub fn tick(&mut self, now: Duration) -> Vec<Action<usize>> {
        each!(self, p => p.tick(now))
    }
    pub fn next_wakeup(&self) -> Option<Duration> {
        each!(self, p => p.next_wakeup())
    }
    pub fn failed(&mut self, a: Action<usize>) {
        each!(self, p => p.failed(a))
    }
}
