//! The API's limits: the longest delay command, and how long a close waits for the work in
//! flight (docs/c-api.md#close). The C header repeats both (`PREEMPT_MAX_DELAY_NS`,
//! `PREEMPT_CLOSE_WAIT_MS`; preempt-capi's tests check they agree).
use crate::error::{Error, Result};
use std::time::Duration;

/// The longest delay command a stream takes, in ns (10 s, as `preempt-lat --t-ms` at most):
/// a delay command is a stand-in for one GPU kernel of T; a longer one is refused up front
/// (`InvalidArgument`) instead of holding a worker or a CU for hours.
pub const MAX_DELAY_NS: u64 = 10_000_000_000;

/// How long closing a session (or a stream) waits for the work in flight before it abandons
/// what still runs (the host device kills its workers; a GPU runs it out).
pub const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// `InvalidArgument` past [`MAX_DELAY_NS`].
pub(crate) fn check_delay(ns: u64) -> Result<()> {
    if ns > MAX_DELAY_NS {
        return Err(Error::invalid(format!(
            "a delay command of {ns} ns: at most {MAX_DELAY_NS} ns ({:?}) per command",
            Duration::from_nanos(MAX_DELAY_NS)
        )));
    }
    Ok(())
}
