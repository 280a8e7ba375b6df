//! The helper's time-driven policy at the boundary (docs/c-api.md, "The helper's policy"):
//! `preempt_options.policy` and its settings, read at open, and the calls that schedule a stream
//! with the policy, say it ready or idle, and read the policy's counters. The rules of the parent
//! module hold here too (NULL and handle checks, `catch_unwind`, the thread's last error).
//!
//! The checks are preempt-api's (`policy_choice`: the same words as Rust, Python and
//! `preempt-lat`), plus the ones a C integer needs where Rust has a type: a share of 0 (Rust's
//! `NonZeroU32`), a deadline of 0 (due the moment it becomes ready: nothing to order by), and a
//! deadline or laxity past PREEMPT_MAX_POLICY_SPAN_NS (a unit mistake, a clock reading or
//! `(uint64_t)-1`, see the constant).
use super::{invalid, put, run};
use crate::handles;
use crate::types::{PREEMPT_MAX_POLICY_SPAN_NS, preempt_options, preempt_policy, preempt_session_t, preempt_stream_t};
use preempt_api::{LaxityParams, LpStream, Policy, PolicyChoice, PolicyParams, Result, Session, policy_choice};
use std::ffi::c_int;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

/// The policy `c` asks for (`None`: highest-priority-first blocks only), checked by preempt-api's
/// `policy_choice`; the message names the field that is wrong.
pub(super) fn choice(c: &preempt_options) -> Result<Option<PolicyChoice>> {
    let word = preempt_policy::ALL
        .iter()
        .find(|(p, _)| *p as i32 == c.policy)
        .map(|&(_, w)| w)
        .ok_or_else(|| {
            let names: Vec<String> = preempt_policy::ALL
                .iter()
                .map(|&(p, w)| format!("{w} ({})", p as i32))
                .collect();
            let (last, first) = names.split_last().expect("ALL is not empty");
            invalid(format!(
                "preempt_options.policy: unknown policy \"{}\": expected {} or {last}",
                c.policy,
                first.join(", ")
            ))
        })?;
    let field = match Policy::from_word(word) {
        Some(Policy::Partition) => "preempt_options.policy_round_ns",
        Some(Policy::KEdf) => "preempt_options.policy_k",
        _ => "preempt_options.policy",
    };
    // A k past usize cannot happen (u32), and would be refused as above MAX_POLICY_K anyway.
    let k = usize::try_from(c.policy_k).unwrap_or(usize::MAX);
    policy_choice(word, Duration::from_nanos(c.policy_round_ns), k).map_err(|e| e.context(field))
}

/// The session's policy, or the error for a session opened without one.
fn policy_of(s: &Session) -> Result<PolicyChoice> {
    s.helper_policy().ok_or_else(|| {
        invalid(
            "the session's helper runs highest-priority-first blocks only (preempt_options.policy is \
             PREEMPT_POLICY_HPF): open the session with PREEMPT_POLICY_UP, PREEMPT_POLICY_KEDF or \
             PREEMPT_POLICY_LAXITY to schedule streams by share, deadline or laxity",
        )
    })
}

/// The stream and its session, which must be this process's and have a policy.
fn with_policy(stream: preempt_stream_t) -> Result<(Session, Arc<LpStream>)> {
    let (s, st) = handles::stream(stream)?;
    st.check_process()?;
    policy_of(&s)?;
    Ok((s, st))
}

/// A deadline or laxity of `ns`, at most PREEMPT_MAX_POLICY_SPAN_NS.
fn span(stream: preempt_stream_t, what: &str, ns: u64) -> Result<Duration> {
    if ns > PREEMPT_MAX_POLICY_SPAN_NS {
        return Err(invalid(format!(
            "stream handle {stream}: a {what} of {ns} ns is longer than PREEMPT_MAX_POLICY_SPAN_NS ({:?}): give a \
             span in ns from when the stream becomes ready",
            Duration::from_nanos(PREEMPT_MAX_POLICY_SPAN_NS)
        )));
    }
    Ok(Duration::from_nanos(ns))
}

/// Schedules the stream with the session's utilization partition (`PREEMPT_POLICY_UP`) at
/// `share` (its weight against the other scheduled streams': 3 and 1, or 75 and 25; again: a new
/// share). From now on the policy suspends and resumes it, a hold of its own beside the caller's
/// and the blocks': every scheduled stream but the one whose turn it is stays suspended, idle
/// ones included. A delay command submitted through the library makes it ready; work launched
/// on its handle is announced with `preempt_helper_ready`. The session's policy thread starts
/// with the first scheduled stream. `PREEMPT_ERR_INVALID_ARGUMENT`: a share of 0, a session
/// without a policy, or one with another policy (which schedules with a deadline or a laxity).
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_schedule_share(stream: preempt_stream_t, share: u32) -> c_int {
    run(|| {
        let (s, st) = with_policy(stream)?;
        let share = NonZeroU32::new(share).ok_or_else(|| {
            invalid(format!(
                "stream handle {stream}: a share of 0: a stream's share is at least 1 (a weight against the other \
                 streams' shares)"
            ))
        })?;
        s.helper_schedule(&st, PolicyParams::Share(share))
    })
}

/// Schedules the stream with the session's K-EDF policy (`PREEMPT_POLICY_KEDF`) at the relative
/// deadline `deadline_ns` (its work is due that long after it becomes ready; again: a new
/// deadline). The `policy_k` ready streams due first run, the others are suspended by the policy
/// (a hold of its own, as `preempt_helper_schedule_share`'s). `PREEMPT_ERR_INVALID_ARGUMENT`: a
/// deadline of 0 or above PREEMPT_MAX_POLICY_SPAN_NS, a session without a policy or with another.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_schedule_deadline(stream: preempt_stream_t, deadline_ns: u64) -> c_int {
    run(|| {
        let (s, st) = with_policy(stream)?;
        if deadline_ns == 0 {
            return Err(invalid(format!(
                "stream handle {stream}: a deadline of 0 ns: a relative deadline is more than 0 (its work is due that \
                 long after the stream becomes ready)"
            )));
        }
        let deadline = span(stream, "deadline", deadline_ns)?;
        s.helper_schedule(&st, PolicyParams::Deadline(deadline))
    })
}

/// Schedules the stream with the session's least-laxity policy (`PREEMPT_POLICY_LAXITY`; again:
/// new parameters): once ready it counts at `laxity_priority` for `laxity_ns` (its slack; 0:
/// critical at once), then at `critical_priority` (larger runs first, as the helper's blocks);
/// the policy suspends every scheduled stream below the highest ready one (a hold of its own, as
/// `preempt_helper_schedule_share`'s). `PREEMPT_ERR_INVALID_ARGUMENT`: a laxity above
/// PREEMPT_MAX_POLICY_SPAN_NS, a session without a policy or with another.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_schedule_laxity(
    stream: preempt_stream_t,
    laxity_ns: u64,
    laxity_priority: i32,
    critical_priority: i32,
) -> c_int {
    run(|| {
        let (s, st) = with_policy(stream)?;
        let laxity = span(stream, "laxity", laxity_ns)?;
        s.helper_schedule(
            &st,
            PolicyParams::Laxity(LaxityParams {
                laxity,
                laxity_priority,
                critical_priority,
            }),
        )
    })
}

/// The scheduled stream has work the library does not see (kernels launched on its handle) from
/// now on, until `preempt_helper_idle`: call it before launching. (Delay commands submitted
/// through the library make the stream ready by themselves, and idle once they are done.)
/// `PREEMPT_ERR_INVALID_ARGUMENT` unless the stream is scheduled.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_ready(stream: preempt_stream_t) -> c_int {
    run(|| {
        let (s, st) = with_policy(stream)?;
        s.helper_ready(&st)
    })
}

/// All of the scheduled stream's work announced with `preempt_helper_ready` is done: call it
/// after the stream's synchronize. `PREEMPT_ERR_INVALID_ARGUMENT` unless the stream is scheduled.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_idle(stream: preempt_stream_t) -> c_int {
    run(|| {
        let (s, st) = with_policy(stream)?;
        s.helper_idle(&st)
    })
}

/// The policy's counters: `*actions` gets the suspends and resumes it carried out, `*failures`
/// those that failed (each is retried at the policy's next decision). Neither pointer may be
/// NULL. `PREEMPT_ERR_INVALID_ARGUMENT` for a session without a policy.
///
/// # Safety
/// `actions` and `failures` are valid for writing a `uint64_t` each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_policy_counts(
    session: preempt_session_t,
    actions: *mut u64,
    failures: *mut u64,
) -> c_int {
    run(|| {
        if actions.is_null() || failures.is_null() {
            return Err(invalid("actions or failures is NULL"));
        }
        let s = handles::session(session)?;
        s.check_process()?;
        policy_of(&s)?;
        let status = s
            .helper_policy_status()
            .ok_or_else(|| invalid("the session's helper has no policy"))?;
        // SAFETY: both checked non-NULL above; valid for a write per this function's contract.
        unsafe {
            put(actions, status.actions, "actions")?;
            put(failures, status.failures, "failures")
        }
    })
}
