//! The correctness check of a stream's delay commands: every submitted command completed
//! exactly once with its own result.

/// What [`crate::LpStream::check`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Check {
    /// Commands submitted through the library.
    pub submitted: u64,
    /// Commands whose completion the launcher observed.
    pub completed: u64,
    /// Commands that ran exactly once with the right result (on the host: on every worker).
    pub exactly_once: u64,
    /// False while commands are still pending or in flight (the check is then partial).
    pub finished: bool,
    /// One line per wrong command (missing, duplicated, wrong result, launch error), capped.
    pub problems: Vec<String>,
}

/// Problem lines kept in a [`Check`].
pub const MAX_PROBLEMS: usize = 20;

impl Check {
    /// Finished, and every submitted command ran exactly once.
    pub fn ok(&self) -> bool {
        self.finished && self.problems.is_empty() && self.exactly_once == self.submitted
    }

    pub(crate) fn problem(&mut self, line: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(line);
        }
    }
}

/// One command's completion as the launcher saw it (streams opened with
/// [`crate::Options::keep_records`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LpCompletion {
    pub id: u64,
    /// Submitted, launched and completed (CLOCK_MONOTONIC ns, as `lv1::clock::now_ns`).
    pub stamps: lv1::Stamps,
    /// Completed without a launch or completion error.
    pub ok: bool,
}

/// A host worker's own account of one execution: which worker and when (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSpan {
    pub worker: usize,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// What the device recorded of one execution of a command: a command that ran exactly once
/// has [`Verified::records_per_command`] correct records (host: one per worker; GPU: its slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRecord {
    pub id: u64,
    /// Its result was this command's own (host: the checksum; GPU: the slot's tag, block count,
    /// stamps, and at Lv3 no end inside a suspension window).
    pub correct: bool,
    /// Host device only.
    pub worker: Option<WorkerSpan>,
}

impl DeviceRecord {
    pub(crate) fn plain(id: u64, correct: bool) -> Self {
        DeviceRecord {
            id,
            correct,
            worker: None,
        }
    }
}

/// The check of a stream with the device records it rests on ([`crate::LpStream::verify`]).
#[derive(Debug, Clone, Default)]
pub struct Verified {
    pub check: Check,
    /// Records taken by this call (host: those not taken before; GPU: every slot).
    pub records: Vec<DeviceRecord>,
    pub records_per_command: usize,
}

impl Verified {
    /// The launcher's side of the check, before any record is read.
    pub(crate) fn new(stats: &lv1::Stats, records_per_command: usize) -> Self {
        let mut check = Check {
            submitted: stats.submitted,
            completed: stats.completed,
            finished: stats.pending == 0 && stats.in_flight == 0,
            ..Check::default()
        };
        if stats.errors > 0 {
            check.problem(format!("{} command(s) failed to launch or complete", stats.errors));
        }
        Verified {
            check,
            records: Vec::new(),
            records_per_command,
        }
    }

    /// Adds records and recounts the commands that ran exactly once among all records held.
    pub(crate) fn add_records(&mut self, records: impl IntoIterator<Item = DeviceRecord>) {
        self.records.extend(records);
        let mut per_id: std::collections::BTreeMap<u64, (usize, bool)> = std::collections::BTreeMap::new();
        for r in &self.records {
            let e = per_id.entry(r.id).or_insert((0, true));
            e.0 += 1;
            e.1 &= r.correct;
        }
        let want = self.records_per_command;
        self.check.exactly_once = per_id
            .range(..self.check.submitted)
            .filter(|(_, (n, ok))| *n == want && *ok)
            .count() as u64;
    }
}

/// The launcher's completions kept for a stream, drained into the API's form (empty where none
/// are kept).
pub(crate) fn drain_completions<E>(
    kept: &std::sync::Mutex<Option<std::sync::mpsc::Receiver<lv1::Completion<E>>>>,
) -> Vec<LpCompletion> {
    let rx = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    rx.as_ref().map_or_else(Vec::new, |rx| {
        rx.try_iter()
            .map(|c| LpCompletion {
                id: c.id,
                stamps: c.stamps,
                ok: c.outcome.is_ok(),
            })
            .collect()
    })
}
