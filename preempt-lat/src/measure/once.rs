//! The exactly-once check of a long stream of numbered commands, in memory that does not grow with
//! the stream (keeping every completion and every worker record of a `priority` mode to check them
//! at its end would grow without bound). Events (a completion, a device record) are counted per
//! command id as they come; commands come and complete nearly in id order, so every id below a
//! watermark is settled (counted as run once, or listed as a problem) and forgotten, and only the
//! ids around the ones in flight are held. An id more than `window` behind the newest event is
//! settled as it stands: it is lost, not late. Each problem list names its first [`MAX_LISTED`]
//! ids; the counts are exact.
use super::Correctness;
use std::collections::BTreeMap;

/// The most ids a problem list of a [`Correctness`] built here names.
pub const MAX_LISTED: usize = 100;

/// What an event for an id that was never submitted means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beyond {
    /// A completion of a command never submitted: one too many.
    Duplicated,
    /// A device record past the commands submitted (a GPU's unused slots): not counted.
    Ignored,
}

/// Ids with a problem: how many, and the first [`MAX_LISTED`] of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listed {
    pub count: u64,
    pub ids: Vec<u64>,
}

impl Listed {
    fn add(&mut self, id: u64) {
        self.count += 1;
        if self.ids.len() < MAX_LISTED {
            self.ids.push(id);
        }
    }
}

/// How often each id was seen, for `want` events per id (completions: 1; records: one per
/// worker).
#[derive(Debug)]
pub struct OnceTally {
    want: u32,
    beyond: Beyond,
    window: u64,
    /// Every id below is settled.
    low: u64,
    /// Ids at or above `low` with an event: (events, all of them ok).
    open: BTreeMap<u64, (u32, bool)>,
    newest: u64,
    /// Ids settled with exactly `want` events.
    pub once: u64,
    pub missing: Listed,
    pub duplicated: Listed,
    /// Ids with an event that was not ok (a failed completion, a wrong result).
    pub bad: Listed,
}

impl OnceTally {
    pub fn new(want: usize, beyond: Beyond, window: u64) -> Self {
        OnceTally {
            want: u32::try_from(want).unwrap_or(u32::MAX),
            beyond,
            window: window.max(1),
            low: 0,
            open: BTreeMap::new(),
            newest: 0,
            once: 0,
            missing: Listed::default(),
            duplicated: Listed::default(),
            bad: Listed::default(),
        }
    }

    /// Ids held now (for tests: it must not grow with the stream).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.open.len()
    }

    /// One event for `id`, while `submitted` commands have been submitted.
    pub fn add(&mut self, id: u64, ok: bool, submitted: u64) {
        if id >= submitted {
            if self.beyond == Beyond::Duplicated {
                self.duplicated.add(id);
            }
            return;
        }
        if id < self.low {
            // Settled already: one event too many, unless it is already listed as a problem.
            let listed = |l: &Listed| l.ids.contains(&id);
            if !(listed(&self.missing) || listed(&self.duplicated) || listed(&self.bad)) {
                self.once = self.once.saturating_sub(1);
                self.duplicated.add(id);
            }
            return;
        }
        let e = self.open.entry(id).or_insert((0, true));
        e.0 = e.0.saturating_add(1);
        e.1 &= ok;
        self.newest = self.newest.max(id);
        self.advance();
    }

    /// Settles ids from `low` on while they are complete, or too far behind the newest event.
    fn advance(&mut self) {
        loop {
            let complete = self.open.get(&self.low).is_some_and(|&(n, _)| n >= self.want);
            if !complete && self.newest.saturating_sub(self.low) <= self.window {
                return;
            }
            let seen = self.open.remove(&self.low);
            self.settle(self.low, seen);
            self.low += 1;
        }
    }

    fn settle(&mut self, id: u64, seen: Option<(u32, bool)>) {
        let (n, ok) = seen.unwrap_or((0, true));
        match n.cmp(&self.want) {
            std::cmp::Ordering::Equal => self.once += 1,
            std::cmp::Ordering::Less => self.missing.add(id),
            std::cmp::Ordering::Greater => self.duplicated.add(id),
        }
        if !ok {
            self.bad.add(id);
        }
    }

    /// Settles every id below `submitted` (the stream is drained: what is incomplete is missing).
    pub fn finish(&mut self, submitted: u64) {
        while self.low < submitted {
            let seen = self.open.remove(&self.low);
            self.settle(self.low, seen);
            self.low += 1;
        }
        // Anything left is beyond `submitted` (never submitted).
        for (id, _) in std::mem::take(&mut self.open) {
            if self.beyond == Beyond::Duplicated {
                self.duplicated.add(id);
            }
        }
    }
}

/// Merges two id lists (sorted, each id once, at most [`MAX_LISTED`]).
fn union(a: &Listed, b: &Listed) -> Vec<u64> {
    let mut v: Vec<u64> = a.ids.iter().chain(&b.ids).copied().collect();
    v.sort_unstable();
    v.dedup();
    v.truncate(MAX_LISTED);
    v
}

impl Correctness {
    /// The check of `submitted` commands from the launcher's completions (`done`, one each) and
    /// the device's records (`records`), both finished: as [`Correctness::check`], with each
    /// list naming at most [`MAX_LISTED`] ids.
    pub fn from_tallies(submitted: u64, done: &OnceTally, records: &OnceTally) -> Correctness {
        let ok = [
            &done.missing,
            &done.duplicated,
            &done.bad,
            &records.missing,
            &records.duplicated,
            &records.bad,
        ]
        .iter()
        .all(|l| l.count == 0);
        let mut wrong_result = records.bad.ids.clone();
        wrong_result.sort_unstable();
        Correctness {
            submitted,
            completed_once: done.once,
            missing: union(&done.missing, &records.missing),
            duplicated: union(&done.duplicated, &records.duplicated),
            failed: done.bad.ids.clone(),
            wrong_result,
            ok: Some(ok),
            abandoned: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(want: usize) -> OnceTally {
        OnceTally::new(want, Beyond::Duplicated, 64)
    }

    /// The same verdicts as the check over whole lists, and memory of the ids in flight only.
    #[test]
    fn a_long_stream_is_checked_holding_only_what_is_in_flight() {
        let n = 100_000u64;
        let (mut done, mut recs) = (tally(1), tally(2));
        let mut most_held = 0;
        for id in 0..n {
            done.add(id, true, n);
            // Two workers' records, one of them behind by a few commands.
            recs.add(id, true, n);
            if id >= 3 {
                recs.add(id - 3, true, n);
            }
            most_held = most_held.max(done.held()).max(recs.held());
        }
        for id in n - 3..n {
            recs.add(id, true, n);
        }
        assert!(most_held <= 4, "held {most_held} ids at most");
        done.finish(n);
        recs.finish(n);
        let c = Correctness::from_tallies(n, &done, &recs);
        assert!(c.ok == Some(true) && c.completed_once == n, "{c:?}");
    }

    #[test]
    fn lost_duplicated_failed_and_wrong_commands_are_found() {
        let n = 1000u64;
        let (mut done, mut recs) = (tally(1), tally(1));
        for id in 0..n {
            if id != 10 {
                done.add(id, id != 20, n);
            }
            recs.add(id, id != 30, n);
        }
        done.add(5, true, n); // long settled: one too many
        done.add(n + 1, true, n); // never submitted
        recs.add(n + 1, true, n);
        assert!(
            done.held() <= 65,
            "the lost command 10 did not hold everything after it"
        );
        done.finish(n);
        recs.finish(n);
        let c = Correctness::from_tallies(n, &done, &recs);
        let whole = Correctness::check(
            n,
            &(0..n)
                .filter(|&i| i != 10)
                .map(|i| (i, i != 20))
                .chain([(5, true), (n + 1, true)])
                .collect::<Vec<_>>(),
            &(0..n).map(|i| (i, i != 30)).chain([(n + 1, true)]).collect::<Vec<_>>(),
            1,
        );
        assert_eq!(c, whole, "the same verdict as the check over whole lists");
        assert!(c.failed());
        assert_eq!(
            (c.missing, c.duplicated, c.failed, c.wrong_result),
            (vec![10], vec![5, n + 1], vec![20], vec![30])
        );
    }

    #[test]
    fn the_lists_are_capped_and_the_counts_are_not() {
        let n = 10 * MAX_LISTED as u64;
        let mut done = tally(1);
        done.finish(n);
        assert_eq!(done.missing.count, n);
        assert_eq!(done.missing.ids.len(), MAX_LISTED);
        let c = Correctness::from_tallies(n, &done, &tally(1));
        assert!(c.failed() && c.missing.len() == MAX_LISTED);
    }
}
