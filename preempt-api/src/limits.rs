//! The API's limits: the longest delay command, how long a close waits for the work in
//! flight (docs/c-api.md#close), and the longest deadline or laxity of the helper's policy. The C header repeats both (`PREEMPT_MAX_DELAY_NS`,
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

/// The longest deadline or laxity a stream is scheduled with ([`crate::Session::helper_schedule`]):
/// commands last at most 10 s and a round at most 10 s, so an hour puts a stream last already; a
/// longer span is a unit mistake or a clock reading. The C header repeats it
/// (`PREEMPT_MAX_POLICY_SPAN_NS`).
pub const MAX_POLICY_SPAN: Duration = Duration::from_secs(3600);

/// `InvalidArgument` for a deadline of 0, or a deadline or laxity past [`MAX_POLICY_SPAN`].
pub(crate) fn check_policy_params(params: &crate::PolicyParams) -> Result<()> {
    let (what, span) = match params {
        crate::PolicyParams::Share(_) => return Ok(()),
        crate::PolicyParams::Deadline(d) if d.is_zero() => {
            return Err(Error::invalid(
                "a deadline of 0: give the time from when the stream becomes ready to when its work is due",
            ));
        }
        crate::PolicyParams::Deadline(d) => ("deadline", *d),
        crate::PolicyParams::Laxity(l) => ("laxity", l.laxity),
    };
    if span > MAX_POLICY_SPAN {
        return Err(Error::invalid(format!(
            "a {what} of {span:?} is longer than {MAX_POLICY_SPAN:?}: give a span from when the stream becomes ready"
        )));
    }
    Ok(())
}
