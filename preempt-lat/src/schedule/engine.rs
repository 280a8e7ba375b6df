//! The experiment's loop: every class an LP stream of one session, scheduled by the session's
//! helper with the class's parameters (`preempt_api::Session::helper_schedule`: the policy
//! thread ticks the policy and carries its actions out on the streams, Lv3 where the session has
//! it, else the Lv1 launcher), requests arriving on their own schedules (saturating classes: a
//! standing backlog, said ready for the whole run). A submit makes its class ready before the work
//! is sent (the helper's submit hook); the loop says a class idle once its requests are done. One thread, polling every
//! [`POLL`] for arrivals and completions; the timing is the caller's clock (CLOCK_MONOTONIC, the
//! launcher's completion stamps' clock).
use crate::error::{Context, Error};
use crate::measure::control::stop_requested;
use crate::options::class::ClassSpec;
use crate::stats::Recorder;
use lv1::clock::{now_ns, sleep_until};
use preempt_api::{Level, LpStream, PolicyParams, Session};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How often the loop looks at arrivals, completions and the policy's wake-up.
pub const POLL: Duration = Duration::from_micros(200);

/// How often the host device's worker records are taken from the streams.
const RECORDS_EVERY: Duration = Duration::from_millis(50);

/// One request: when it arrived (ns since the start) and how many of its commands are left.
struct Request {
    arrival_ns: u64,
    left: u32,
}

/// One class's state during the run.
pub struct ClassRun {
    pub spec: ClassSpec,
    pub stream: Arc<LpStream>,
    /// The arrival times still to come, generated as they come (memory does not grow with the run's
    /// length); none for a saturating class (a standing backlog).
    arrivals: Option<std::iter::Peekable<crate::arrivals::Arrivals>>,
    /// Command id -> its request (`None`: a saturating class's command).
    pending: HashMap<u64, Option<u64>>,
    /// Requests not yet finished, by arrival number (memory bounded by what is outstanding).
    requests: HashMap<u64, Request>,
    /// Arrival to completion of each finished request (a histogram: memory does not grow with
    /// the run's length).
    pub latency: Recorder,
    pub finished: u64,
    /// Requests that finished after their deadline (kedf classes).
    pub late: u64,
    /// Commands completed inside the measured window.
    pub completed_cmds: u64,
    /// Arrivals inside the window.
    pub arrived: u64,
    /// Requests not finished at the window's end, and the age of the oldest then.
    pub unfinished: u64,
    pub oldest_unfinished_ns: Option<u64>,
}

/// What the loop measured.
pub struct Outcome {
    pub classes: Vec<ClassRun>,
    pub window_ns: u64,
    pub suspends: u64,
    pub resumes: u64,
    pub failed_actions: Vec<String>,
    pub interrupted: bool,
}

/// A saturating class keeps this many commands outstanding: enough to cover the launcher's
/// in-flight window twice, so it is never idle between polls.
fn backlog(threshold: usize) -> usize {
    (2 * threshold).max(4)
}

/// Runs `specs` on `session` (opened with the experiment's policy) for `duration_ns`, class `i`
/// scheduled with `params[i]`. Arrival times come from `arrivals(class index)`. Leaves every
/// stream unscheduled and resumed.
pub fn run(
    session: &Session,
    specs: &[ClassSpec],
    params: &[PolicyParams],
    duration_ns: u64,
    threshold: usize,
    arrivals: impl Fn(usize) -> crate::arrivals::Arrivals,
) -> Result<Outcome, Error> {
    let mut classes = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let stream = session
            .create_lp_stream(Level::Auto)
            .with_context(|| format!("class {}: LP stream", spec.name))?;
        // The helper's messages (a failed suspend) name the class.
        stream.set_label(format!("class {}", spec.name));
        classes.push(ClassRun {
            spec: spec.clone(),
            stream,
            arrivals: (!spec.saturates()).then(|| arrivals(i).peekable()),
            pending: HashMap::new(),
            requests: HashMap::new(),
            latency: Recorder::default(),
            finished: 0,
            late: 0,
            completed_cmds: 0,
            arrived: 0,
            unfinished: 0,
            oldest_unfinished_ns: None,
        });
    }
    let mut o = Outcome {
        classes: Vec::new(),
        window_ns: 0,
        suspends: 0,
        resumes: 0,
        failed_actions: Vec::new(),
        interrupted: false,
    };
    for (c, p) in classes.iter().zip(params) {
        session
            .helper_schedule(&c.stream, *p)
            .with_context(|| format!("class {}", c.spec.name))?;
        // A saturating class always has work: said ready for the whole run, so that a moment
        // when its backlog ran dry (this loop descheduled on a loaded machine) does not make it
        // idle to the policy.
        if c.spec.saturates() {
            session
                .helper_ready(&c.stream)
                .with_context(|| format!("class {}", c.spec.name))?;
        }
    }
    let t0 = now_ns();
    let poll_ns = u64::try_from(POLL.as_nanos()).unwrap_or(200_000);
    // On the host device the workers' records stay in a stream until its check takes them: taken as
    // the run goes (the check keeps only its counts), memory does not grow with the run's length. A
    // GPU's records are its slots, read once at the end.
    let host = session.device().is_host();
    let mut records_taken = std::time::Instant::now();
    let result = (|| -> Result<(), Error> {
        loop {
            let now = now_ns().saturating_sub(t0);
            if now >= duration_ns {
                break;
            }
            if stop_requested() {
                o.interrupted = true;
                break;
            }
            for c in &mut classes {
                // Arrivals: a submit makes the class ready before the work is sent (the helper's
                // submit hook).
                while let Some(arrival_ns) = c.arrivals.as_mut().and_then(|a| a.next_if(|&a| a <= now)) {
                    c.arrived += 1;
                    let req = c.arrived;
                    c.requests.insert(
                        req,
                        Request {
                            arrival_ns,
                            left: c.spec.cmds,
                        },
                    );
                    let t_ns = crate::num::round_u64(c.spec.t_ms * 1e6);
                    for _ in 0..c.spec.cmds {
                        let id = c
                            .stream
                            .submit_delay(t_ns)
                            .with_context(|| format!("class {}: submit", c.spec.name))?;
                        c.pending.insert(id, Some(req));
                    }
                }
                // Saturating classes: a standing backlog.
                if c.spec.saturates() {
                    let t_ns = crate::num::round_u64(c.spec.t_ms * 1e6);
                    while c.pending.len() < backlog(threshold) {
                        let id = c
                            .stream
                            .submit_delay(t_ns)
                            .with_context(|| format!("class {}: submit", c.spec.name))?;
                        c.pending.insert(id, None);
                    }
                }
                // Completions.
                let was_busy = !c.pending.is_empty();
                for done in c.stream.take_completions() {
                    let Some(req) = c.pending.remove(&done.id) else {
                        continue;
                    };
                    let end = done.stamps.completed_ns.saturating_sub(t0);
                    if end <= duration_ns {
                        c.completed_cmds += 1;
                    }
                    let Some(req) = req else { continue };
                    let Some(r) = c.requests.get_mut(&req) else { continue };
                    r.left -= 1;
                    if r.left > 0 {
                        continue;
                    }
                    let arrival_ns = r.arrival_ns;
                    c.requests.remove(&req);
                    if end <= duration_ns {
                        let lat = end.saturating_sub(arrival_ns);
                        c.latency.record(lat);
                        c.finished += 1;
                        #[allow(clippy::cast_precision_loss)] // ns of one run: far below 2^52
                        if c.spec.deadline_ms.is_some_and(|d| lat as f64 > d * 1e6) {
                            c.late += 1;
                        }
                    }
                }
                if was_busy && c.pending.is_empty() && !c.spec.saturates() {
                    session
                        .helper_idle(&c.stream)
                        .with_context(|| format!("class {}: idle", c.spec.name))?;
                }
            }
            if host && records_taken.elapsed() >= RECORDS_EVERY {
                records_taken = std::time::Instant::now();
                for c in &classes {
                    // What it finds is the final check's to report (it keeps the counts).
                    let _ = c.stream.verify();
                }
            }
            sleep_until(t0 + now + poll_ns);
        }
        Ok(())
    })();
    o.window_ns = now_ns().saturating_sub(t0).min(duration_ns);
    for c in &mut classes {
        c.unfinished = c.requests.len() as u64;
        c.oldest_unfinished_ns = c
            .requests
            .values()
            .map(|r| o.window_ns.saturating_sub(r.arrival_ns))
            .max();
    }
    if let Some(st) = session.helper_policy_status() {
        (o.suspends, o.resumes, o.failed_actions) = (st.suspends, st.resumes, st.failure_log);
    }
    // Leave nothing suspended: the policy lets go of every stream (closing the session would
    // too), so the final check can wait for what is left.
    for c in &classes {
        let _ = session.helper_unregister(&c.stream);
    }
    result?;
    o.classes = classes;
    Ok(o)
}
