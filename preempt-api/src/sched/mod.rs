//! Scheduling across processes (docs/scheduler-daemon.md): the wire protocol of the
//! `preempt-sched` daemon ([`proto`]) and a process's side of it ([`client`]), here so that a
//! [`crate::Session`] opened with [`crate::Options::scheduler`] routes its helper calls to the
//! daemon (the daemon's crate, `preempt-sched`, uses both from here: one copy of the protocol).
//!
//! Where the daemon is: the word `unix:PATH` (C's `preempt_options.scheduler`, Python's
//! `Session(scheduler=...)`), else the environment variable [`SCHEDULER_ENV`]; the word `none`
//! says "no daemon" whatever the environment says ([`scheduler_setting`]). A session without
//! either has no daemon; a client without a session ([`SchedClient::connect_standalone`]) that is
//! told nothing may look where the daemon listens when told nothing ([`default_socket`]).
use crate::error::{Error, ErrorKind, Result};
use std::path::PathBuf;

pub mod client;
pub mod hop;
/// The wire protocol (the `sched-proto` crate, which the daemon links alone).
pub use sched_proto as proto;

pub use client::trust::{self, DAEMON_USER, TRUST_ENV};
pub use client::{
    ClientError, ClientOptions, DEFAULT_LEASE, DEFAULT_REPLY_TIMEOUT, Entered, LinkStats, REPLY_TIMEOUT_ENV,
    SchedClient, Schedulable,
};
/// Where the daemon listens when told nothing else, and its parts (the daemon's own default).
pub use proto::{SOCKET_NAME, SYSTEM_DIR, default_socket};

/// The environment variable naming the daemon when the caller names none: `unix:PATH` or `none`.
pub const SCHEDULER_ENV: &str = "PREEMPT_SCHEDULER";

/// The grammar of a scheduler word, for error texts.
pub const SCHEDULER_WORDS: &str = "unix:PATH (the daemon's socket) or none";

/// A scheduler word: `unix:PATH` is the daemon listening on the Unix socket `PATH` (absolute or
/// relative), `none` is no daemon (the session's in-process helper).
pub fn parse_scheduler(word: &str) -> Result<Option<PathBuf>> {
    if word == "none" {
        return Ok(None);
    }
    match word.strip_prefix("unix:") {
        Some(path) if !path.is_empty() && !path.contains('\0') => Ok(Some(PathBuf::from(path))),
        _ => Err(Error::invalid(format!(
            "unknown scheduler {word:?}: expected {SCHEDULER_WORDS}"
        ))),
    }
}

/// The one precedence rule of every front end: the word the caller gave, else
/// `$PREEMPT_SCHEDULER` (unset or empty: not given), else no daemon. A bad word in the variable
/// is refused with the variable's name (never silently unscheduled).
pub fn scheduler_setting(given: Option<&str>) -> Result<Option<PathBuf>> {
    if let Some(word) = given {
        return parse_scheduler(word);
    }
    match std::env::var(SCHEDULER_ENV) {
        Ok(v) if !v.is_empty() => parse_scheduler(&v).map_err(|e| e.context(SCHEDULER_ENV)),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid(format!("{SCHEDULER_ENV} is not valid UTF-8"))),
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Api(e) => e,
            ClientError::Invalid(m) => Error::new(ErrorKind::InvalidArgument, format!("scheduler: {m}")),
            e => Error::new(ErrorKind::Scheduler, e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_words_parse_and_bad_ones_name_the_grammar() {
        assert_eq!(
            parse_scheduler("unix:/run/s.sock").unwrap(),
            Some(PathBuf::from("/run/s.sock"))
        );
        assert_eq!(
            parse_scheduler("unix:rel.sock").unwrap(),
            Some(PathBuf::from("rel.sock"))
        );
        assert_eq!(parse_scheduler("none").unwrap(), None);
        for bad in ["", "unix:", "/run/s.sock", "tcp:1.2.3.4:5", "unix:a\0b", "None"] {
            let e = parse_scheduler(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgument, "{bad:?}");
            assert!(e.message.contains(SCHEDULER_WORDS), "{e}");
        }
        // A word given wins over the environment (which this test does not touch).
        assert_eq!(scheduler_setting(Some("none")).unwrap(), None);
        assert_eq!(scheduler_setting(Some("unix:/x")).unwrap(), Some(PathBuf::from("/x")));
    }

    #[test]
    fn client_errors_become_api_errors_of_their_kind() {
        let e = Error::from(ClientError::Connect("connecting to /x: refused".into()));
        assert_eq!(e.kind, ErrorKind::Scheduler);
        assert!(e.message.starts_with("scheduler: "), "{e}");
        assert_eq!(
            Error::from(ClientError::Invalid("no active block".into())).kind,
            ErrorKind::InvalidArgument
        );
        let api = Error::new(ErrorKind::Device, "worker died");
        assert_eq!(Error::from(ClientError::Api(api.clone())), api);
    }
}
