//! The daemon: one per node (or per socket), hpf's policy across the processes that connect
//! (docs/scheduler-daemon.md).
//!
//! - [`listen`]: the socket (0600, or 0660 with a group), created only after taking the lock
//!   file beside it: a second daemon on the same socket is refused, a stale socket of a dead one
//!   replaced, a live one never unlinked.
//! - [`access`]: who may connect (`SO_PEERCRED`: the daemon's own user, a named group, listed
//!   uids).
//! - [`plan`]: the decisions, without I/O.
//! - `server`: one thread, one `poll(2)` loop over the listener, a signalfd and every
//!   connection, all non-blocking with bounded buffers: a client that stops reading, writes
//!   garbage, stalls mid-frame or never acknowledges cannot block the others. A thread per client
//!   would need the plan behind a lock and a bounded queue per thread for the same guarantee;
//!   one loop keeps the plan single-owner and the order of events total.
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub mod access;
mod conn;
pub mod listen;
pub mod plan;
mod server;
pub mod text;

pub use server::serve;

/// The socket's name, its system-wide directory and the default path: the protocol's, so that
/// clients find the daemon where it listens (`preempt_api::sched::default_socket`).
pub use crate::proto::{SOCKET_NAME, SYSTEM_DIR, default_socket};

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The socket's path.
    pub socket: PathBuf,
    /// Who may connect besides the daemon's own user.
    pub access: access::Access,
    /// How long an order may stay unacknowledged before it is reported and not waited for.
    pub ack_timeout: Duration,
    /// Connections at most (more are refused with `limit`).
    pub max_clients: usize,
    /// Connections of one uid at most (more are refused with `limit`): one user cannot take
    /// every slot.
    pub max_per_uid: usize,
    /// How long a connection may stay without saying hello before it is closed.
    pub hello_timeout: Duration,
    /// Per-client bounds.
    pub limits: plan::Limits,
}

/// Default of [`Config::ack_timeout`]: below the clients' own bound on an `enter` (50 ms), so
/// that the daemon answers a block before its client gives up on it and runs unscheduled.
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_millis(40);

/// Default of [`Config::max_clients`].
pub const DEFAULT_MAX_CLIENTS: usize = 1024;

/// Default of [`Config::max_per_uid`].
pub const DEFAULT_MAX_PER_UID: usize = 256;

/// Default of [`Config::hello_timeout`].
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// Descriptors the daemon needs besides one per client: the connections reserved for its own
/// user and root beyond `--max-clients`, stdio, the listener, its lock, epoll, the signalfd, one
/// accepted and being refused, and a margin.
pub const FDS_BESIDES_CLIENTS: u64 = server::RESERVED as u64 + 16;

/// Makes sure the process may open a descriptor for each of `max_clients` clients (raising
/// the soft `RLIMIT_NOFILE` up to the hard one if needed): a daemon that cannot would fail to
/// accept (EMFILE) while still counting itself below `--max-clients`. `Err` says what to do.
pub fn ensure_fd_limit(max_clients: usize) -> Result<u64, DaemonError> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let need = u64::try_from(max_clients)
        .unwrap_or(u64::MAX)
        .saturating_add(FDS_BESIDES_CLIENTS);
    let (soft, hard) =
        getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| DaemonError::io("getrlimit(RLIMIT_NOFILE)", e))?;
    if soft >= need {
        return Ok(soft);
    }
    if hard >= need {
        setrlimit(Resource::RLIMIT_NOFILE, need, hard).map_err(|e| DaemonError::io("setrlimit(RLIMIT_NOFILE)", e))?;
        return Ok(need);
    }
    Err(DaemonError::Config(format!(
        "--max-clients {max_clients} needs {need} open files, but the limit is {soft} (hard {hard}): raise it \
         (LimitNOFILE= in the unit, ulimit -n) or lower --max-clients"
    )))
}

/// Why the daemon could not start or stopped.
#[derive(Debug)]
pub enum DaemonError {
    /// A system call failed.
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
    /// Another daemon holds the socket's lock file or answers on the socket.
    AlreadyRunning {
        /// The socket.
        socket: PathBuf,
        /// Its pid, as its lock file says.
        pid: Option<u32>,
    },
    /// The configuration cannot work (an unknown group, a path that is not a socket).
    Config(String),
}

impl DaemonError {
    pub(crate) fn io(what: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        DaemonError::Io {
            what: what.into(),
            source: source.into(),
        }
    }
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DaemonError::Io { what, source } => write!(f, "{what}: {source}"),
            DaemonError::AlreadyRunning { socket, pid } => {
                write!(f, "another preempt-sched serves {}", socket.display())?;
                match pid {
                    Some(p) => write!(f, " (pid {p}); stop it first"),
                    None => write!(f, "; stop it first"),
                }
            }
            DaemonError::Config(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DaemonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DaemonError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
