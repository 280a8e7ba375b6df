//! The helper's time-driven policy as the native layer hands it to Python
//! (docs/c-api.md#the-helpers-policy): the session's policy from its word and settings, a
//! stream's parameters, and the status as a dict. `Helper.schedule`'s keywords are matched to
//! the session's policy in `python/preempt_kfd/_args.py`, so that the message names them; what
//! reaches here is refused again by preempt-api if it does not fit.
use crate::py_err;
use preempt_api::{Error, ErrorKind, LaxityParams, Policy, PolicyChoice, PolicyParams, PolicyStatus};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::num::NonZeroU32;
use std::time::Duration;

/// The policy words `policy_choice` knows (preempt-api's one table), for the argument checks'
/// messages.
pub(crate) fn words() -> [&'static str; 4] {
    Policy::ALL.map(Policy::word)
}

/// `Session(policy=, round_ms=, k=)`: `None` for `hpf` (blocks only).
pub(crate) fn choice(word: &str, round_ns: u64, k: usize) -> PyResult<Option<PolicyChoice>> {
    preempt_api::policy_choice(word, Duration::from_nanos(round_ns), k).map_err(py_err)
}

/// A utilization partition's share: at least 1.
pub(crate) fn share(share: u32) -> PyResult<PolicyParams> {
    NonZeroU32::new(share).map(PolicyParams::Share).ok_or_else(|| {
        py_err(Error::new(
            ErrorKind::InvalidArgument,
            "schedule: share must be at least 1",
        ))
    })
}

pub(crate) fn deadline(ns: u64) -> PolicyParams {
    PolicyParams::Deadline(Duration::from_nanos(ns))
}

pub(crate) fn laxity(laxity_ns: u64, priority: i32, critical: i32) -> PolicyParams {
    PolicyParams::Laxity(LaxityParams {
        laxity: Duration::from_nanos(laxity_ns),
        laxity_priority: priority,
        critical_priority: critical,
    })
}

/// `{"policy", "streams": [(id, ready, held)], "actions", "failures", "last_error"}`.
pub(crate) fn status_dict<'py>(py: Python<'py>, st: &PolicyStatus) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("policy", st.policy)?;
    d.set_item("streams", st.streams.clone())?;
    d.set_item("actions", st.actions)?;
    d.set_item("failures", st.failures)?;
    d.set_item("last_error", st.last_error.clone())?;
    Ok(d)
}
