//! The handles the ABI hands out: numbers, never pointers, so that a stale or made-up handle is
//! an error (`PREEMPT_ERR_BAD_HANDLE`) instead of undefined behaviour. One sequence for
//! sessions and streams (a session handle passed as a stream handle is refused too); 0 is never
//! a handle.
use preempt_api::{Error, ErrorKind, LpStream, Result, Session};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

static NEXT: AtomicU64 = AtomicU64::new(1);
static SESSIONS: Mutex<BTreeMap<u64, Session>> = Mutex::new(BTreeMap::new());
/// stream handle -> (its session's handle, the stream).
static STREAMS: Mutex<BTreeMap<u64, (u64, Arc<LpStream>)>> = Mutex::new(BTreeMap::new());

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn bad(what: &str, h: u64) -> Error {
    Error::new(ErrorKind::BadHandle, format!("{what} handle {h} is not open"))
}

pub fn add_session(s: Session) -> u64 {
    let h = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(&SESSIONS).insert(h, s);
    h
}

pub fn session(h: u64) -> Result<Session> {
    lock(&SESSIONS).get(&h).cloned().ok_or_else(|| bad("session", h))
}

/// Removes the session and every stream handle of it.
pub fn remove_session(h: u64) -> Result<Session> {
    let s = lock(&SESSIONS).remove(&h).ok_or_else(|| bad("session", h))?;
    lock(&STREAMS).retain(|_, (sh, _)| *sh != h);
    Ok(s)
}

pub fn add_stream(session: u64, s: Arc<LpStream>) -> u64 {
    let h = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(&STREAMS).insert(h, (session, s));
    h
}

/// The stream and its session.
pub fn stream(h: u64) -> Result<(Session, Arc<LpStream>)> {
    let (sh, s) = lock(&STREAMS).get(&h).cloned().ok_or_else(|| bad("stream", h))?;
    Ok((session(sh)?, s))
}

pub fn remove_stream(h: u64) -> Result<(Session, Arc<LpStream>)> {
    let (sh, s) = lock(&STREAMS).remove(&h).ok_or_else(|| bad("stream", h))?;
    Ok((session(sh)?, s))
}
