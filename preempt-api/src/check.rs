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
