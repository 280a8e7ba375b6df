//! Who holds a stream's suspension (docs/c-api.md#who-holds-a-suspension): the user, the
//! helper's blocks, the helper's policy and the scheduler daemon each hold their own, and the
//! stream runs only when none does; and what a release that is not the caller's is told.
use crate::device::Lv3Held;
use crate::error::{Error, ErrorKind};

/// A suspension a stream holds; dropping it resumes (the guards' rule).
pub(super) enum Held {
    Lv1,
    Lv2(Box<dyn Lv3Held>),
    Lv3(Box<dyn Lv3Held>),
}

/// Who asks for a suspension: the user by hand (`suspend`, `resume`, sets), the in-process
/// helper's blocks, the helper's time-driven policy, or the scheduler daemon (its orders, carried
/// out by the session's `SchedClient`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    Hand,
    Helper,
    Policy,
    Scheduler,
}

impl Holder {
    /// How messages name the holder.
    pub fn name(self) -> &'static str {
        match self {
            Holder::Hand => "the user",
            Holder::Helper => "the helper",
            Holder::Policy => "the helper's policy",
            Holder::Scheduler => "the scheduler daemon",
        }
    }
}

/// The stream's suspension and its holders: `held` is `Some` exactly while one holds it.
#[derive(Default)]
pub(super) struct Hold {
    pub held: Option<Held>,
    pub hand: bool,
    pub helper: bool,
    pub policy: bool,
    pub scheduler: bool,
}

impl Hold {
    pub fn by(&mut self, who: Holder) -> &mut bool {
        match who {
            Holder::Hand => &mut self.hand,
            Holder::Helper => &mut self.helper,
            Holder::Policy => &mut self.policy,
            Holder::Scheduler => &mut self.scheduler,
        }
    }

    pub fn any(&self) -> bool {
        self.hand || self.helper || self.policy || self.scheduler
    }

    /// Who other than the user holds it, for messages.
    fn others(&self) -> Option<Holder> {
        [
            (self.helper, Holder::Helper),
            (self.policy, Holder::Policy),
            (self.scheduler, Holder::Scheduler),
        ]
        .into_iter()
        .find_map(|(held, who)| held.then_some(who))
    }

    /// Why `who` cannot release a suspension it does not hold: `Busy` for a hand resume of a
    /// stream only others hold (their hold ends by itself), else `NotSuspended`.
    pub fn refusal(&self, who: Holder, label: &str) -> Error {
        match (who, self.others()) {
            (Holder::Hand, Some(Holder::Policy)) => Error::new(
                ErrorKind::Busy,
                format!(
                    "{label} is suspended by the helper's policy (another stream has the device now): it \
                     resumes when the policy gives it its turn; a hand resume releases only a hand suspension"
                ),
            ),
            (Holder::Hand, Some(other)) => Error::new(
                ErrorKind::Busy,
                format!(
                    "{label} is suspended by {} (a block of higher priority is active): it resumes when \
                     the block leaves; a hand resume releases only a hand suspension",
                    other.name()
                ),
            ),
            (Holder::Hand, None) => Error::new(ErrorKind::NotSuspended, format!("{label} is not suspended")),
            (other, _) => Error::new(
                ErrorKind::NotSuspended,
                format!("{label} is not suspended by {}", other.name()),
            ),
        }
    }
}
