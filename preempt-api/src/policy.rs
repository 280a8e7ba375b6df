//! The one table of scheduling-policy words: the word a user types (`--policy`, the C enum's
//! word, Python's `policy=`) and the name outputs and reports write (each policy's own crate
//! spells it: `hpf::NAME`, `policies::<name>::NAME`).
use std::fmt;

/// A scheduling policy of the helper, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Highest priority first: blocks of a high-priority stream suspend the lower ones (hpf).
    HighestFirst,
    /// Utilization partition: streams take turns of a round in proportion to their shares.
    Partition,
    /// K-EDF: the k streams with the earliest deadlines run.
    KEdf,
    /// Least laxity: a stream runs at its laxity priority until its slack is used up.
    Laxity,
}

impl Policy {
    /// Every policy, in the C enum's number order.
    pub const ALL: [Policy; 4] = [Policy::HighestFirst, Policy::Partition, Policy::KEdf, Policy::Laxity];

    /// The word a user types.
    pub const fn word(self) -> &'static str {
        match self {
            Policy::HighestFirst => "hpf",
            Policy::Partition => "up",
            Policy::KEdf => "kedf",
            Policy::Laxity => "laxity",
        }
    }

    /// The name outputs and reports write.
    pub const fn name(self) -> &'static str {
        match self {
            Policy::HighestFirst => hpf::NAME,
            Policy::Partition => policies::up::NAME,
            Policy::KEdf => policies::kedf::NAME,
            Policy::Laxity => policies::laxity::NAME,
        }
    }

    /// The policy a user's word names.
    pub fn from_word(word: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.word() == word)
    }

    /// The policy an output's name names (reports read results back).
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The words as a message lists them: `hpf, up, kedf or laxity`.
    pub fn expected() -> String {
        let words = Policy::ALL.map(Policy::word);
        let (last, first) = words.split_last().expect("ALL is not empty");
        format!("{} or {last}", first.join(", "))
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_names_round_trip_and_are_distinct() {
        for p in Policy::ALL {
            assert_eq!(Policy::from_word(p.word()), Some(p));
            assert_eq!(Policy::from_name(p.name()), Some(p));
        }
        let mut words = Policy::ALL.map(Policy::word).to_vec();
        words.dedup();
        assert_eq!(words.len(), Policy::ALL.len());
        assert_eq!(Policy::expected(), "hpf, up, kedf or laxity");
        assert_eq!(Policy::from_word("edf"), None);
    }
}
