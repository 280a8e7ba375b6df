//! The experiment's policy: which of the `policies` crate's policies, and what each class is
//! scheduled with. The session's helper runs it (`preempt_api::Options::policy`, its policy
//! thread and the policy's own hold on each stream): the same code an application's helper runs,
//! so what the experiment measures is what an application gets.
use crate::error::{UsageError, usage};
use crate::options::PolicyKind;
use crate::options::class::ClassSpec;
use preempt_api::{LaxityParams, PolicyChoice, PolicyParams};
use std::num::NonZeroU32;
use std::time::Duration;

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1000.0)
}

/// The policy of `kind` with its settings, and every class's parameters (in class order); the
/// one-line reason a class lacks what the policy needs (the options refuse it first: bad input).
pub fn of(
    kind: PolicyKind,
    classes: &[ClassSpec],
    k: usize,
    round_ms: f64,
) -> Result<(PolicyChoice, Vec<PolicyParams>), UsageError> {
    let missing = |c: &ClassSpec| {
        usage!(
            "--policy {} needs {} in --class {}",
            kind.name(),
            crate::options::class::needs(kind),
            c.name
        )
    };
    let choice = match kind {
        PolicyKind::Up => PolicyChoice::Partition { round: ms(round_ms) },
        PolicyKind::Kedf if k == 0 => {
            return Err(usage!(
                "--k: k must be at least 1 (the number of queues that run at once)"
            ));
        }
        PolicyKind::Kedf => PolicyChoice::KEdf { k },
        PolicyKind::Laxity => PolicyChoice::Laxity,
        PolicyKind::Hpf => PolicyChoice::HighestFirst,
    };
    let params = classes
        .iter()
        .map(|c| {
            Ok(match kind {
                PolicyKind::Up => PolicyParams::Share(c.share.and_then(NonZeroU32::new).ok_or_else(|| missing(c))?),
                PolicyKind::Kedf => PolicyParams::Deadline(ms(c.deadline_ms.ok_or_else(|| missing(c))?)),
                PolicyKind::Laxity => {
                    let (Some(l), Some(prio), Some(crit)) = (c.laxity_ms, c.prio, c.crit) else {
                        return Err(missing(c));
                    };
                    PolicyParams::Laxity(LaxityParams {
                        laxity: ms(l),
                        laxity_priority: prio,
                        critical_priority: crit,
                    })
                }
                PolicyKind::Hpf => PolicyParams::Priority(c.prio.ok_or_else(|| missing(c))?),
            })
        })
        .collect::<Result<Vec<_>, UsageError>>()?;
    Ok((choice, params))
}
