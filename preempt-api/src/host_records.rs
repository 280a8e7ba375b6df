//! The worker records a host LP stream's exactly-once check has seen, kept in memory that does not
//! grow with the stream's length (a stream may run for hours).
use crate::check::{Check, DeviceRecord};
use std::collections::BTreeMap;

/// The worker records a stream's check has seen, in memory that does not grow with the stream's
/// length (an id per command ever run, 40 bytes each, would be gigabytes over a long run): the
/// commands below `below` ran on every worker with their own result and are only counted.
#[derive(Default)]
pub(crate) struct Seen {
    below: u64,
    /// id -> (records, all correct), from `below` on, and for an id below it only records that
    /// came after it was counted (one too many).
    open: BTreeMap<u64, (usize, bool)>,
}

impl Seen {
    /// Adds records, then forgets the commands done right, in order (only counted from then on).
    pub(crate) fn add(&mut self, records: &[DeviceRecord], submitted: u64, workers: usize) {
        for r in records {
            let e = self.open.entry(r.id).or_insert((0, true));
            e.0 += 1;
            e.1 &= r.correct;
        }
        while self.below < submitted && self.open.get(&self.below) == Some(&(workers, true)) {
            self.open.remove(&self.below);
            self.below += 1;
        }
    }

    /// Counts the commands of `0..submitted` that ran exactly once on every worker into `c`, and
    /// adds a line for each wrong one (one that never ran only once `c` is finished).
    pub(crate) fn check(&self, c: &mut Check, submitted: u64, workers: usize) {
        let line = |id: u64, n: usize, correct: bool| {
            let wrong = if correct { "" } else { ", wrong result" };
            format!("command {id}: {n} worker record(s) for {workers} worker(s){wrong}")
        };
        c.exactly_once = self.below;
        for (&id, &(n, correct)) in self.open.range(..self.below) {
            c.exactly_once -= 1;
            c.problem(line(id, n + workers, correct));
        }
        for id in self.below..submitted {
            match self.open.get(&id) {
                Some(&(n, true)) if n == workers => c.exactly_once += 1,
                Some(&(n, correct)) if n > workers || !correct => c.problem(line(id, n, correct)),
                Some(&(n, _)) if c.finished => c.problem(format!("command {id}: ran on {n} of {workers} workers")),
                None if c.finished => c.problem(format!("command {id}: never ran")),
                _ => {}
            }
        }
        if let Some((&id, _)) = self.open.range(submitted..).next() {
            c.problem(format!("a record for command {id}, which was never submitted"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, correct: bool) -> DeviceRecord {
        DeviceRecord::plain(id, correct)
    }

    /// The check remembers the commands in flight, not every command a long stream ever ran, and
    /// still finds a record that comes after its command was counted.
    #[test]
    fn the_check_forgets_commands_done_right_and_still_counts_them() {
        let (workers, n) = (2, 10_000u64);
        let mut seen = Seen::default();
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            let recs: Vec<DeviceRecord> = chunk.iter().flat_map(|&id| [rec(id, true), rec(id, true)]).collect();
            seen.add(&recs, n, workers);
        }
        assert_eq!(
            (seen.below, seen.open.len()),
            (n, 0),
            "nothing kept of the commands done"
        );
        let done = |seen: &Seen, submitted: u64| {
            let mut c = Check {
                finished: true,
                ..Check::default()
            };
            seen.check(&mut c, submitted, workers);
            c
        };
        let c = done(&seen, n);
        assert_eq!((c.exactly_once, c.problems.len()), (n, 0), "{c:?}");
        // One record too many for a command already counted, and one wrong result in flight.
        seen.add(&[rec(7, true), rec(n, false)], n + 1, workers);
        let c = done(&seen, n + 1);
        assert_eq!(c.exactly_once, n - 1);
        assert_eq!(
            c.problems,
            [
                format!("command 7: {} worker record(s) for {workers} worker(s)", workers + 1),
                format!("command {n}: 1 worker record(s) for {workers} worker(s), wrong result")
            ]
        );
    }
}
