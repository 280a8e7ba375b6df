//! Scheduling across processes (docs/scheduler-daemon.md): the wire protocol of the
//! `preempt-sched` daemon ([`proto`]) and a process's side of it ([`client`]), here so that a
//! [`crate::Session`] opened with [`crate::Options::scheduler`] routes its helper calls to the
//! daemon (the daemon's crate, `preempt-sched`, uses both from here: one copy of the protocol).
//!
//! Where the daemon is: the word `unix:PATH` (C's `preempt_options.scheduler`, Python's
//! `Session(scheduler=...)`), else the environment variable [`SCHEDULER_ENV`]; the word `none`
//! says "no daemon" whatever the environment says ([`scheduler_setting`]). A session without
//! either has no daemon; a client without a session ([`SchedClient::connect_standalone`]) whose
//! program cannot be asked goes where the daemon listens when told nothing ([`default_socket`]),
//! unless the variable says otherwise ([`scheduler_or_default`]).
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
    match given {
        Some(word) => parse_scheduler(word),
        None => Ok(env_setting(std::env::var(SCHEDULER_ENV))?.flatten()),
    }
}

/// The rule of a client without a session ([`SchedClient::connect_standalone`]) whose caller
/// names no daemon: `$PREEMPT_SCHEDULER` (`none`: no daemon), else [`default_socket`], where
/// the daemon listens when told nothing. Unlike a session's, whose daemon must be asked for
/// (a program that opens a session chose its scheduling), such a client serves a program that
/// cannot ask (an interposer inside an unmodified program): the node's daemon, if any, is its.
pub fn scheduler_or_default() -> Result<Option<PathBuf>> {
    or_default(std::env::var(SCHEDULER_ENV))
}

fn or_default(var: std::result::Result<String, std::env::VarError>) -> Result<Option<PathBuf>> {
    Ok(env_setting(var)?.unwrap_or_else(|| Some(default_socket())))
}

/// `$PREEMPT_SCHEDULER`'s setting (`var`, as read): `None` unset or empty, `Some(None)` for
/// `none`.
fn env_setting(var: std::result::Result<String, std::env::VarError>) -> Result<Option<Option<PathBuf>>> {
    match var {
        Ok(v) if !v.is_empty() => parse_scheduler(&v).map(Some).map_err(|e| e.context(SCHEDULER_ENV)),
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
    fn a_client_without_a_session_goes_to_the_default_socket_unless_told() {
        use std::env::VarError;
        let unset = || Err(VarError::NotPresent);
        assert_eq!(or_default(unset()).unwrap(), Some(default_socket()));
        assert_eq!(or_default(Ok(String::new())).unwrap(), Some(default_socket()));
        assert_eq!(or_default(Ok("none".into())).unwrap(), None);
        assert_eq!(or_default(Ok("unix:/x".into())).unwrap(), Some(PathBuf::from("/x")));
        let e = or_default(Ok("/x".into())).unwrap_err();
        assert!(e.message.contains(SCHEDULER_ENV), "{e}");
        // A session's rule: unset is no daemon.
        assert_eq!(env_setting(unset()).unwrap(), None);
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
