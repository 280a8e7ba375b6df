//! What belongs to the process that opened a session (docs/c-api.md#fork): after `fork()` the
//! child has a copy of the session's memory, but none of its threads, and the worker processes,
//! queues and GPU state are the parent's. [`Owner`] tells the two apart (every call checks it
//! first, before any lock, which a parent thread may have held at the fork); [`Bound`] holds what
//! must never be dropped in the child (a drop would join threads the child does not have, kill
//! or SIGCONT the parent's workers, free the parent's GPU objects) nor after close abandoned
//! work a GPU cannot stop.
use crate::error::{Error, ErrorKind, Result};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};

/// The process a session (and its streams) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner(u32);

impl Owner {
    /// The calling process.
    pub fn here() -> Self {
        Owner(std::process::id())
    }

    /// Whether the calling process is the owner (false in a fork child). One `getpid` system
    /// call: glibc no longer caches it, which is what makes the answer right after a fork.
    pub fn is_here(self) -> bool {
        std::process::id() == self.0
    }

    /// `Forked` unless the calling process is the owner.
    pub fn check(self) -> Result<()> {
        if self.is_here() {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Forked,
                format!(
                    "this session belongs to process {}, which opened it; this is process {}, a fork child of \
                     it: a child must open its own session (nothing of the parent's was touched)",
                    self.0,
                    std::process::id()
                ),
            ))
        }
    }
}

/// A device resource of the owner's: dropped normally in the owner, never dropped (forgotten,
/// its memory left to the process's exit or exec) in a fork child or once [`Bound::leak`] said
/// so (close abandoned work that a GPU cannot stop: dropping would wait for it).
pub(crate) struct Bound<T> {
    owner: Owner,
    value: Option<T>,
    leak: AtomicBool,
}

impl<T> Bound<T> {
    pub fn new(owner: Owner, value: T) -> Self {
        Bound {
            owner,
            value: Some(value),
            leak: AtomicBool::new(false),
        }
    }

    /// Never drop the value (close abandoned what it runs).
    pub fn leak(&self) {
        self.leak.store(true, Ordering::Release);
    }
}

impl<T> Deref for Bound<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // `value` is taken only in `drop`.
        self.value.as_ref().expect("a Bound is read only before its drop")
    }
}

impl<T> Drop for Bound<T> {
    fn drop(&mut self) {
        if !self.owner.is_here() || self.leak.load(Ordering::Acquire) {
            std::mem::forget(self.value.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_owner_drops_what_it_did_not_leak() {
        let v = Arc::new(());
        drop(Bound::new(Owner::here(), Arc::clone(&v)));
        assert_eq!(Arc::strong_count(&v), 1, "dropped");
        let b = Bound::new(Owner::here(), Arc::clone(&v));
        b.leak();
        drop(b);
        assert_eq!(Arc::strong_count(&v), 2, "leaked: never dropped");
    }

    #[test]
    fn another_process_s_resources_are_never_dropped() {
        let v = Arc::new(());
        let other = Owner(std::process::id().wrapping_add(1));
        assert_eq!(other.check().unwrap_err().kind, ErrorKind::Forked);
        assert!(Owner::here().check().is_ok());
        drop(Bound::new(other, Arc::clone(&v)));
        assert_eq!(Arc::strong_count(&v), 2, "a fork child forgets the parent's resources");
    }
}
