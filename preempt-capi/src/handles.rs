//! The handles the ABI hands out: numbers, never pointers, so that a stale or made-up handle is
//! an error (`PREEMPT_ERR_BAD_HANDLE`) instead of undefined behaviour. One sequence for
//! sessions and streams (a session handle passed as a stream handle is refused too); 0 is never
//! a handle. A stream is named in messages by its handle (`stream handle N`), which is what the
//! C caller knows (the API's stream ids restart at 1 in every session).
//!
//! After `fork()` the child has a copy of the tables: a handle of the parent's session is
//! `PREEMPT_ERR_FORKED` there (docs/c-api.md#fork), and a table lock that a parent thread held at
//! the fork (it stays locked in the child, whose copy of that thread does not exist) is waited
//! for a bounded time, then reported, instead of hanging the child.
use preempt_api::{Error, ErrorKind, LpStream, Result, Session};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

static NEXT: AtomicU64 = AtomicU64::new(1);
static SESSIONS: Mutex<BTreeMap<u64, Session>> = Mutex::new(BTreeMap::new());
/// stream handle -> (its session's handle, the stream).
static STREAMS: Mutex<BTreeMap<u64, (u64, Arc<LpStream>)>> = Mutex::new(BTreeMap::new());
/// The process that first used the tables (0: none yet); in any other, a table lock that will
/// not come is not waited for without end.
static FIRST_USER: AtomicU32 = AtomicU32::new(0);
/// How long a fork child waits for a table lock before it concludes a parent thread held it.
const CHILD_LOCK_WAIT: Duration = Duration::from_millis(200);

fn lock<T>(m: &'static Mutex<T>) -> Result<MutexGuard<'static, T>> {
    match m.try_lock() {
        Ok(g) => return Ok(g),
        Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => {}
    }
    let me = std::process::id();
    let first = FIRST_USER.load(Ordering::Acquire);
    if first == 0 || first == me {
        return Ok(m.lock().unwrap_or_else(PoisonError::into_inner));
    }
    let deadline = Instant::now() + CHILD_LOCK_WAIT;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
        match m.try_lock() {
            Ok(g) => return Ok(g),
            Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => {}
        }
    }
    Err(Error::new(
        ErrorKind::Forked,
        format!(
            "libpreempt_kfd's handle table was in use by another thread of process {first} when it forked this process \
             ({me}), and stays locked here: a fork child can use libpreempt_kfd only after exec"
        ),
    ))
}

fn first_use() {
    let _ = FIRST_USER.compare_exchange(0, std::process::id(), Ordering::AcqRel, Ordering::Acquire);
}

fn bad(what: &str, h: u64) -> Error {
    Error::new(ErrorKind::BadHandle, format!("{what} handle {h} is not open"))
}

pub fn add_session(s: Session) -> Result<u64> {
    first_use();
    let h = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(&SESSIONS)?.insert(h, s);
    Ok(h)
}

/// The session, if it is open. Its calls check the process themselves (`Forked` in a fork
/// child); the entry points that only read a value call `check_process` (one `getpid` a call).
pub fn session(h: u64) -> Result<Session> {
    lock(&SESSIONS)?.get(&h).cloned().ok_or_else(|| bad("session", h))
}

/// Removes the session and every stream handle of it (in a fork child too: the child's copies).
pub fn remove_session(h: u64) -> Result<Session> {
    let s = lock(&SESSIONS)?.remove(&h).ok_or_else(|| bad("session", h))?;
    lock(&STREAMS)?.retain(|_, (sh, _)| *sh != h);
    Ok(s)
}

/// A handle for `s`, which messages then name `stream handle N`.
pub fn add_stream(session: u64, s: Arc<LpStream>) -> Result<u64> {
    let h = NEXT.fetch_add(1, Ordering::Relaxed);
    s.set_label(format!("stream handle {h}"));
    lock(&STREAMS)?.insert(h, (session, s));
    Ok(h)
}

/// The stream and its session (as [`session`]: the calls check the process).
pub fn stream(h: u64) -> Result<(Session, Arc<LpStream>)> {
    let (sh, s) = lock(&STREAMS)?.get(&h).cloned().ok_or_else(|| bad("stream", h))?;
    Ok((session(sh)?, s))
}

/// Removes the stream's handle (in a fork child too: the child's copy).
pub fn remove_stream(h: u64) -> Result<(Session, Arc<LpStream>)> {
    let (sh, s) = lock(&STREAMS)?.remove(&h).ok_or_else(|| bad("stream", h))?;
    let session = lock(&SESSIONS)?.get(&sh).cloned().ok_or_else(|| bad("session", sh))?;
    Ok((session, s))
}
