//! The errors of preempt-lat's commands. A [`UsageError`] is bad input found before anything
//! started (exit status 2); an [`Error`] is a command that could not do its job (exit status 1):
//! what was being done, and the typed cause as its `source()`. Either prints as the one line
//! users see (`preempt-lat: <line>`): `<what was being done>: <cause>`.
//!
//! Call sites add what they were doing with [`Context`]:
//! `std::fs::read(p).with_context(|| format!("{}: cannot read", p.display()))?`.
use gpu_device::hip_rt::HipError;
use preempt_api::host::HostError;
use std::io;

use std::time::Duration;

/// What plotters fails with while drawing in memory (`crate::plot`'s `DrawError`; named here so
/// that this module, which every other one uses, uses none of them).
type DrawError = plotters::drawing::DrawingAreaErrorKind<std::io::Error>;

/// Bad input (a flag combination, a value out of range), found before anything started: one
/// line, exit status 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

impl UsageError {
    pub fn new(line: impl Into<String>) -> Self {
        UsageError(line.into())
    }
}

/// `usage!("--k {k}: at most 64")`: a [`UsageError`] of a formatted line.
#[macro_export]
macro_rules! usage {
    ($($arg:tt)*) => {
        $crate::error::UsageError::new(format!($($arg)*))
    };
}
pub use crate::usage;

/// `failed!("no sample completed")`: an [`Error`] that has no underlying error.
#[macro_export]
macro_rules! failed {
    ($($arg:tt)*) => {
        $crate::error::Error::msg(format!($($arg)*))
    };
}
pub use crate::failed;

/// A command that could not do its job: what it was doing, and why (the cause's own type, kept
/// as `source()`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("{what}: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A call of the application API, its error as it is: the API's message names what failed.
    #[error(transparent)]
    Call(#[from] preempt_api::Error),
    /// A call of the application API (sessions, streams, the policy), under what it was for.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: preempt_api::Error,
    },
    #[error("{what}: {source}")]
    Hip {
        what: String,
        #[source]
        source: HipError,
    },
    #[error("{what}: {source}")]
    Gpu {
        what: String,
        #[source]
        source: gpu_device::Error,
    },
    /// A call of the GPU device layer, its error as it is: its message names what failed.
    #[error(transparent)]
    Device(#[from] gpu_device::Error),
    /// The host device (its worker processes).
    #[error("{what}: {source}")]
    Host {
        what: String,
        #[source]
        source: HostError,
    },
    /// A queue binding that no longer holds (lv3's check of the KFD queue behind a stream); boxed,
    /// as it is large and rare.
    #[error("{what}: {source}")]
    Binding {
        what: String,
        #[source]
        source: Box<lv3::binding::Stale>,
    },
    /// The Lv1 launcher's configuration refused, its error as it is (it names the setting).
    #[error(transparent)]
    Lv1Config(#[from] lv1::ConfigError),
    /// The Lv1 launcher could not wait until idle, its error as it is (it says why).
    #[error(transparent)]
    Lv1Idle(#[from] lv1::WaitIdleError),
    /// The LP queue did not drain at the end of a run: the launcher's wait, how long it was
    /// given, and where to look on this device (empty, or `; ...`).
    #[error("draining the LP queue: {source} after {after:?}: the LP queue may have been left suspended{hint}")]
    Drain {
        #[source]
        source: lv1::WaitIdleError,
        after: Duration,
        hint: String,
    },
    /// A system call made through nix.
    #[error("{what}: {source}")]
    Sys {
        what: String,
        #[source]
        source: nix::errno::Errno,
    },
    /// Drawing a plot (in memory: writing it is [`Error::Io`]).
    #[error("{what}: {source}")]
    Plot {
        what: String,
        #[source]
        source: DrawError,
    },
    /// One of ours, under what the caller was doing.
    #[error("{what}: {source}")]
    Context {
        what: String,
        #[source]
        source: Box<Error>,
    },
    /// A failure, then another one while cleaning up after it (both are reported).
    #[error("{first}; then {then}")]
    Then {
        #[source]
        first: Box<Error>,
        then: Box<Error>,
    },
    /// A condition found wrong that has no underlying error (a child's bad answer, a check).
    #[error("{0}")]
    Failed(String),
}

impl Error {
    /// A failure that has no underlying error: the line says it all.
    pub fn msg(line: impl Into<String>) -> Self {
        Error::Failed(line.into())
    }

    /// `self`, then `later` (a failure while cleaning up after it): one line, both said.
    pub fn then(self, later: Error) -> Self {
        Error::Then {
            first: Box::new(self),
            then: Box::new(later),
        }
    }
}

/// For the modules that still return their errors as a line of text (a `String`: the archive
/// reader, whose error the fleet report keeps as an archive's reason for being skipped): the
/// line, as it is.
impl From<String> for Error {
    fn from(line: String) -> Self {
        Error::Failed(line)
    }
}

/// The other way for the same modules: `?` on ours where a line of text is returned
/// (`acceptance::fleet`).
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}

impl From<UsageError> for String {
    fn from(e: UsageError) -> Self {
        e.0
    }
}

/// A cause an [`Error`] can carry, under what was being done.
pub trait Cause {
    fn under(self, what: String) -> Error;
}

macro_rules! causes {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl Cause for $ty {
            fn under(self, what: String) -> Error {
                Error::$variant { what, source: self }
            }
        }
    )*};
}

causes! {
    io::Error => Io,
    serde_json::Error => Json,
    preempt_api::Error => Api,
    HipError => Hip,
    gpu_device::Error => Gpu,
    HostError => Host,
    nix::errno::Errno => Sys,
}

impl Cause for lv3::binding::Stale {
    fn under(self, what: String) -> Error {
        Error::Binding {
            what,
            source: Box::new(self),
        }
    }
}

impl Cause for Error {
    fn under(self, what: String) -> Error {
        Error::Context {
            what,
            source: Box::new(self),
        }
    }
}

/// `.context("reading the report")?`: the error, under what was being done.
pub trait Context<T> {
    fn context(self, what: &str) -> Result<T, Error>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T, E: Cause> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, Error> {
        self.map_err(|e| e.under(what.to_string()))
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|e| e.under(what()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_line_is_what_then_why_and_the_cause_stays_typed() {
        let r: Result<(), io::Error> = Err(io::Error::from(io::ErrorKind::NotFound));
        let e = r.context("reading the report").unwrap_err();
        assert_eq!(e.to_string(), "reading the report: entity not found");
        let io = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(io.map(io::Error::kind), Some(io::ErrorKind::NotFound));
        let outer = Err::<(), _>(e).with_context(|| "run 3".into()).unwrap_err();
        assert_eq!(outer.to_string(), "run 3: reading the report: entity not found");
        assert!(
            outer.source().is_some_and(|s| s.source().is_some()),
            "the chain is kept"
        );
        assert_eq!(String::from(Error::msg("no samples")), "no samples");
        assert_eq!(
            UsageError::new("--t-ms 0: too small").to_string(),
            "--t-ms 0: too small"
        );
    }
}
