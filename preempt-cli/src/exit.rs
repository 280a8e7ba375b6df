//! How a command ends, and the exit status that says it (the contract scripts rely on):
//! 0 = done and every check passed; 3 = done, but a check failed (an LP command lost or
//! duplicated, a `validate` check failed); 2 = bad input (nothing was started); 1 = the command
//! could not do its job (no device, an I/O error, a kernel call that failed).
//!
//! A command a first Ctrl-C (SIGTERM, SIGHUP) stopped is done with what it measured, marked
//! interrupted: 0, or 3 if a check it made failed. A check it could not complete because the
//! stop abandoned LP commands still running is not made (`not checked`, JSON `ok: null`): neither
//! a pass nor a failure, so it does not turn 0 into 3. A second signal ends the process at once
//! with 130/143/129 (preempt-lat's `measure::control`).
use crate::error::{Error, UsageError};
use std::process::ExitCode;

/// What a command that ran to the end found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Verdict {
    Pass,
    /// A correctness or validation check failed (exit 3).
    CheckFailed,
}

impl Verdict {
    pub fn from_ok(ok: bool) -> Self {
        if ok { Verdict::Pass } else { Verdict::CheckFailed }
    }
}

/// Why a command did not run to the end, as the one line `main` prints: lines rather than the
/// typed errors, because some modules build these variants from text of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Bad input found before anything started (exit 2).
    Usage(String),
    /// Anything else (exit 1).
    Error(String),
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.into())
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Error(e.to_string())
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure::Error(s)
    }
}

impl From<&str> for Failure {
    fn from(s: &str) -> Self {
        Failure::Error(s.to_string())
    }
}

/// The result of every subcommand.
pub type Outcome = Result<Verdict, Failure>;

/// The exit status of a verdict (usage errors are printed and mapped by `main`, which owns clap's
/// formatting).
pub fn code(v: Verdict) -> ExitCode {
    match v {
        Verdict::Pass => ExitCode::SUCCESS,
        Verdict::CheckFailed => ExitCode::from(3),
    }
}
