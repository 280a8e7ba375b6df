//! The high-priority stream of a session ([`HpStream`]): delay commands that nothing suspends,
//! written once over the device's body ([`crate::device::HpBody`]).
use crate::check::{Check, DeviceRecord};
use crate::device::{Abandon, HpBody};
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{CLOSE_WAIT, check_delay};
use crate::owner::{Bound, Owner};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

/// The high-priority stream of a session: delay commands that nothing suspends. Its calls fail
/// with `Closed` once its session closed, with `Forked` in a fork child.
pub struct HpStream {
    owner: Owner,
    closed: AtomicBool,
    /// As [`crate::LpStream`]'s: no submit lands after close.
    gate: RwLock<()>,
    dev: Bound<Box<dyn HpBody>>,
}

impl HpStream {
    pub(crate) fn new(owner: Owner, body: Box<dyn HpBody>) -> Self {
        HpStream {
            owner,
            closed: AtomicBool::new(false),
            gate: RwLock::new(()),
            dev: Bound::new(owner, body),
        }
    }

    fn live(&self) -> Result<()> {
        self.owner.check()?;
        self.not_closed()
    }

    /// `Closed` after close (for calls that checked the process first, before a lock).
    fn not_closed(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::closed())
        } else {
            Ok(())
        }
    }

    /// Submits a delay command of `ns` of work; returns its id. `InvalidArgument` past
    /// [`crate::MAX_DELAY_NS`].
    pub fn submit_delay(&self, ns: u64) -> Result<u64> {
        self.owner.check()?;
        check_delay(ns).map_err(|e| e.context("the high-priority stream"))?;
        let _open = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        self.not_closed()?;
        self.dev.submit_delay(ns)
    }

    /// Waits for everything submitted so far.
    pub fn synchronize(&self) -> Result<()> {
        self.wait(None).map(drop)
    }

    /// Waits for everything submitted so far, on a GPU at most `limit` (a stuck GPU is an error,
    /// not a hang; the host device's worker always finishes). Returns the device's records of
    /// what completed since the last call: the host worker's own timing; nothing on a GPU.
    pub fn wait(&self, limit: Option<Duration>) -> Result<Vec<DeviceRecord>> {
        self.live()?;
        self.dev.wait(limit)
    }

    /// Every command submitted so far completed exactly once (call after waiting); empty in a
    /// fork child.
    pub fn check(&self) -> Check {
        if self.owner.is_here() {
            self.dev.check()
        } else {
            Check::default()
        }
    }

    /// The raw `hipStream_t` (GPU), `None` on the host device and in a fork child.
    pub fn handle(&self) -> Option<usize> {
        self.owner.is_here().then(|| self.dev.handle()).flatten()
    }

    /// As a low-priority stream's close: waits until `deadline` for what is in flight, then abandons it.
    pub(crate) fn close(&self, deadline: Instant) -> Result<()> {
        if !self.owner.is_here() {
            return Ok(());
        }
        {
            let _shut = self.gate.write().unwrap_or_else(PoisonError::into_inner);
            if self.closed.swap(true, Ordering::AcqRel) {
                return Ok(());
            }
        }
        if self.dev.idle_within(deadline.saturating_duration_since(Instant::now())) {
            return Ok(());
        }
        let how = self.dev.abandon();
        if how == Abandon::Left {
            self.dev.leak();
        }
        Err(Error::new(
            ErrorKind::Abandoned,
            format!(
                "the high-priority stream: commands still running when close's wait ({:?}) ended were abandoned ({})",
                CLOSE_WAIT,
                how.how()
            ),
        ))
    }
}
