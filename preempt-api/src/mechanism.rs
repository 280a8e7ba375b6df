//! The one table of mechanism words: every name a run, a suspension or a report gives to what
//! suspended a stream is spelled here (lv3's [`MechanismKind`] spells its own KFD mechanisms),
//! so `preempt-lat`, the C ABI and Python read and write the same words.
use kfd::GracePeriod;
use lv3::mechanism::MechanismKind;
use std::fmt;

/// What suspends a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// Lv3 on a GPU or `kfd` session: one of lv3's KFD mechanisms (CWSR at wave granularity).
    Kfd(MechanismKind),
    /// Lv3 on the host device: SIGSTOP/SIGCONT of the stream's worker processes.
    Sigstop,
    /// Lv2 on the host device: each worker finishes the command it runs and starts no new one.
    Lv2Hold,
    /// Lv1, XSched's progressive launching: the launcher keeps at most a threshold of commands
    /// on the device and, suspended, launches no more ([`Lv1Suspend`]: how one suspend ended).
    Launcher,
}

impl Mechanism {
    /// The word outputs and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Kfd(k) => k.name(),
            Mechanism::Sigstop => "sigstop",
            Mechanism::Lv2Hold => "lv2-hold",
            Mechanism::Launcher => "progressive-launch",
        }
    }

    /// The mechanisms that need no KFD: Lv1 on every device, the host device's Lv3 and Lv2.
    pub const WITHOUT_KFD: [Mechanism; 3] = [Mechanism::Launcher, Mechanism::Sigstop, Mechanism::Lv2Hold];

    /// The grace period that applied to a run suspending with this mechanism, when `asked` was
    /// asked for: only a KFD mechanism that sets it applies it.
    pub fn grace_applied(self, asked: GracePeriod) -> String {
        match self {
            Mechanism::Sigstop => "n/a (host device: SIGSTOP has no grace period)".into(),
            Mechanism::Lv2Hold => "n/a (Lv2: the running commands finish, nothing is saved)".into(),
            Mechanism::Launcher => "n/a (Lv1: nothing is preempted)".into(),
            Mechanism::Kfd(k) if !k.sets_grace_period() => {
                format!("n/a ({k} cannot set it: the device's own setting applies)")
            }
            Mechanism::Kfd(_) => asked.to_string(),
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one Lv1 suspend of a stream ended (its [`crate::SuspendInfo`]'s word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lv1Suspend {
    /// The launcher stopped and the suspend waited until the device ran out of its commands.
    Drain,
    /// The launcher stopped; what it had launched may still run (the suspend did not wait).
    Stop,
}

impl Lv1Suspend {
    pub const fn name(self) -> &'static str {
        match self {
            Lv1Suspend::Drain => "lv1-drain",
            Lv1Suspend::Stop => "lv1-stop",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_distinct_and_kfd_words_are_lv3s() {
        let mut words: Vec<&str> = MechanismKind::AUTO_ORDER
            .iter()
            .map(|&k| Mechanism::Kfd(k).name())
            .chain(Mechanism::WITHOUT_KFD.iter().map(|m| m.name()))
            .chain([Lv1Suspend::Drain.name(), Lv1Suspend::Stop.name()])
            .collect();
        for k in MechanismKind::AUTO_ORDER {
            assert_eq!(Mechanism::Kfd(k).to_string(), k.name());
            let g = Mechanism::Kfd(k).grace_applied(GracePeriod::SHORTEST);
            assert_eq!(
                g == GracePeriod::SHORTEST.to_string(),
                k.sets_grace_period(),
                "{k}: {g}"
            );
        }
        for m in Mechanism::WITHOUT_KFD {
            assert!(m.grace_applied(GracePeriod::SHORTEST).starts_with("n/a ("), "{m}");
        }
        let n = words.len();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), n, "two mechanisms share a word: {words:?}");
    }
}
