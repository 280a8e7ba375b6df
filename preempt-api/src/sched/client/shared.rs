//! What the client's API calls and its link thread share, under one lock: the streams (and other
//! objects) registered and the blocks entered (replayed to every new daemon connection), the streams
//! suspended on the daemon's behalf (what the fail-safe resumes), the connection's writer and
//! the replies awaited.
use super::ClientOptions;
use super::object::{Schedulable, release};
use crate::LpStream;
use crate::sched::proto::{Device, Notice, Request, encode_request};
use hpf::Priority;
use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, send};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Whether a stream is one of the client's session's open streams. Its session's own test, held
/// weakly (a session opened with a scheduler holds its client: a strong handle would be a cycle).
pub(crate) type Owns = Box<dyn Fn(&LpStream) -> bool + Send + Sync>;

pub(super) struct Registered {
    pub obj: Arc<dyn Schedulable>,
    pub priority: Priority,
    /// The device it runs on: its own ([`Schedulable::sched_device`]), else the client's.
    pub device: Device,
}

/// Counters for tests, logs and `preempt-lat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Connections made (each with a welcome).
    pub connects: u64,
    /// Connections lost: end of stream, an error, or the lease expired.
    pub disconnects: u64,
    /// Of those, how many because the daemon stayed silent past the lease while streams were
    /// held.
    pub lease_expiries: u64,
    /// Streams resumed by the fail-safe (held for the daemon when the connection was lost).
    pub failsafe_resumes: u64,
    /// Orders carried out (acknowledged ok).
    pub orders_done: u64,
    /// Orders refused or failed (acknowledged not ok).
    pub orders_failed: u64,
    /// Calls that gave up waiting for the daemon's reply after
    /// [`super::ClientOptions::reply_timeout`] and went on (an `enter` then runs unscheduled).
    pub timeouts: u64,
}

#[derive(Default)]
pub(super) struct State {
    pub streams: BTreeMap<u64, Registered>,
    /// The device this client's blocks are on: its session's, or for a session that has none of
    /// its own (`kfd`) the device of the first stream it registered; set once.
    pub device: Option<Device>,
    /// Blocks entered, by device (sent to, and replayed to, the daemon).
    pub blocks: BTreeMap<(Device, Priority), usize>,
    /// Blocks entered while the client knew no device for them: run unscheduled, never sent.
    pub unplaced: BTreeMap<Priority, usize>,
    /// Streams this client suspended because the daemon said so.
    pub held: BTreeSet<u64>,
    pub writer: Option<UnixStream>,
    /// The socket of the connection being made or served, for `close` to shut down (which
    /// wakes the link thread wherever it waits on it).
    pub socket: Option<UnixStream>,
    pub seq: u64,
    pub pending: BTreeMap<u64, Sender<Notice>>,
    /// Whether a connection attempt finished (for `connect`'s wait) and its error if it failed.
    pub attempted: bool,
    pub last_error: Option<String>,
    pub daemon_pid: Option<u32>,
    pub stats: LinkStats,
    /// Whether the one warning about a daemon that does not answer in time was written.
    pub warned: bool,
}

pub(super) struct Shared {
    pub path: PathBuf,
    pub opts: ClientOptions,
    /// The session's test of its streams; `None`: a client without a session
    /// (`SchedClient::connect_standalone`), whose objects are registered with `register_obj`.
    pub owns: Option<Owns>,
    /// The client's own device: its session's (`None` on a `kfd` session) or the one a client
    /// without a session was given; where an object that names none runs.
    pub default_device: Option<Device>,
    pub state: Mutex<State>,
    /// Signalled when a connection attempt finishes.
    pub attempt: Condvar,
    pub stop: AtomicBool,
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Writes one request on the current connection; `None` if there is none or the write
    /// failed (the link thread then sees the connection end). `reply`: where its answer goes.
    pub fn send(&mut self, msg: Request, reply: Option<Sender<Notice>>) -> Option<u64> {
        let w = self.writer.as_mut()?;
        self.seq += 1;
        let seq = self.seq;
        if write_all(w, &encode_request(seq, msg)).is_err() {
            let _ = w.shutdown(std::net::Shutdown::Both);
            self.writer = None;
            return None;
        }
        if let Some(tx) = reply {
            self.pending.insert(seq, tx);
        }
        Some(seq)
    }

    /// Resumes every stream held for the daemon (the connection is gone: nothing may stay
    /// suspended because the scheduler went away). Returns the failures as text.
    pub fn resume_held(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        for id in std::mem::take(&mut self.held) {
            let Some(r) = self.streams.get(&id) else { continue };
            self.stats.failsafe_resumes += 1;
            if let Err(e) = release(&*r.obj) {
                failed.push(format!("stream {id}: {e}"));
            }
        }
        failed
    }
}

/// Writes all of `buf` with `MSG_NOSIGNAL`: the client runs inside applications (C, Python)
/// whose SIGPIPE may still kill the process on a write to a daemon that just died, where Rust's
/// own binaries ignore it. A write blocked longer than the socket's send timeout fails (EAGAIN).
pub(super) fn write_all(stream: &UnixStream, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        match send(stream.as_raw_fd(), buf, MsgFlags::MSG_NOSIGNAL) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
