//! The stop a first Ctrl-C (SIGTERM, SIGHUP) asks for: one flag for the whole process, raised by
//! preempt-lat's signal thread (`measure::control`) and read at every boundary where a run can
//! stop with what it has: a sample, a stage of `acceptance`, a window of `soak`. It lives here so
//! that the acceptance harness, which runs no device code, stops on the same signal.
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Raises the flag; true the first time (the signal that asks for an orderly stop), false when
/// it was already raised (a second signal, which means "now").
pub fn request() -> bool {
    !STOP.swap(true, Ordering::SeqCst)
}

/// Whether a stop was asked for. Inline: the measurement loop reads it at every sample, from
/// another crate.
#[inline]
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}
