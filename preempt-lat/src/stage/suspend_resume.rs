//! The per-mechanism stage: through the application API (a `Session` and its low-priority
//! stream, the code a C or Python program runs), one suspend/resume of an idle queue, one of a
//! queue running a long LP command (which must stand still while suspended), then a burst of LP
//! commands through repeated suspend/resume cycles, each command run exactly once.
//!
//! "Stood still": on the host device the command's worker spins on its thread CPU time, so a
//! stopped worker's command lasts its work plus the hold; on a GPU the delay kernel spins on the
//! wall clock, and the API's check of its slot at Lv3 says whether it ended inside the
//! suspension window (it must not have). The hold outlasts the rest of the command
//! ([`SUSPEND_AT`] + [`HOLD`] > [`LONG`]), so a suspend that did not take effect lets the command
//! end inside the window, where the check sees it; a saved one ends after the resume.
use super::StageResult;
use crate::acceptance::summary::Status;
use crate::error::{Context, Error, failed};
use crate::measure::control::stop_requested;
use preempt_api::GracePeriod;
use preempt_api::MechanismChoice;
use preempt_api::{DeviceSpec, Level, LpStream, Options, Session};
use serde_json::json;
use std::time::Duration;

/// The long command, the moment it is suspended and how long it is held.
const LONG: Duration = Duration::from_millis(200);
const SUSPEND_AT: Duration = Duration::from_millis(50);
const HOLD: Duration = Duration::from_millis(300);
const _: () = assert!(SUSPEND_AT.as_millis() + HOLD.as_millis() > LONG.as_millis());
/// The burst: commands, and suspend/resume cycles while they run.
const BURST: u32 = 40;
const CYCLES: u32 = 10;
/// The longest wait for the stream to drain.
const DRAIN: Duration = Duration::from_secs(60);

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn session(device: DeviceSpec, mechanism: MechanismChoice) -> Result<Session, Error> {
    if matches!(device, DeviceSpec::Auto | DeviceSpec::Kfd) {
        return Err(failed!("internal: host or hip:N expected, not {device}"));
    }
    // By what the device is: worker processes take the worker program and one worker (and no
    // mechanism or grace period of a GPU's); a GPU takes the mechanism asked for.
    let opts = if device.is_host() {
        Options {
            worker: Some(crate::host_direct::worker_exe()?),
            host_workers: 1,
            ..Options::default()
        }
    } else {
        Options {
            mechanism,
            grace: GracePeriod::SHORTEST,
            gpu_slots: 1024,
            ..Options::default()
        }
    };
    Session::open(
        device,
        Options {
            keep_records: true,
            ..opts
        },
    )
    .context("opening the session")
}

/// Runs the stage; `mechanism` is the KFD mechanism on a GPU (auto on the host device).
pub fn run(device: DeviceSpec, mechanism: MechanismChoice, t_ms: f64) -> StageResult {
    if let (DeviceSpec::Hip(_), MechanismChoice::Only(kind)) = (device, mechanism)
        && let Some(why) = crate::gpu::unusable_reason(kind)
    {
        return StageResult {
            status: Status::Skip,
            reason: why,
            facts: serde_json::Value::Null,
        };
    }
    let mut facts = json!({});
    let r = steps(device, mechanism, t_ms, &mut facts);
    super::outcome(r, facts)
}

/// The three steps; every failure names the step. The session resumes whatever a failure left
/// suspended when it is dropped.
fn steps(
    device: DeviceSpec,
    mechanism: MechanismChoice,
    t_ms: f64,
    facts: &mut serde_json::Value,
) -> Result<String, Error> {
    let s = session(device, mechanism)?;
    facts["mechanism"] = json!(s.mechanism().name);
    facts["mechanism_why"] = json!(s.mechanism().why);
    let lp = s.create_lp_stream(Level::Lv3).context("creating the Lv3 stream")?;
    facts["stream"] = json!(lp.describe());
    if let Some(q) = lp.queue() {
        facts["kfd_queue"] = json!({"queue_id": q.queue_id, "gpu_id": q.gpu_id, "ring_base": q.ring_base_address});
    }

    // 1. An idle queue.
    let idle = lp.suspend().context("idle: suspend")?;
    if !lp.is_suspended() {
        return Err(Error::msg(
            "idle: the stream does not say it is suspended after suspend",
        ));
    }
    lp.resume().context("idle: resume")?;
    facts["idle_suspend_us"] = json!(idle.latency_ns as f64 / 1e3);
    super::interrupted()?;

    // 2. A running command, held suspended.
    let long = lp.submit_delay(ns(LONG)).context("running: submit")?;
    std::thread::sleep(SUSPEND_AT);
    let in_flight = lp.stats().map_or(0, |s| s.in_flight);
    let held = lp.suspend().context("running: suspend")?;
    std::thread::sleep(HOLD);
    lp.resume().context("running: resume")?;
    lp.wait_idle_for(DRAIN).context("running: draining")?;
    let v = lp.verify().context("running: check")?;
    facts["running_suspend_us"] = json!(held.latency_ns as f64 / 1e3);
    facts["in_flight_at_suspend"] = json!(in_flight);
    if in_flight == 0 {
        return Err(failed!(
            "running: the {LONG:?} command was not in flight {SUSPEND_AT:?} after its submit: nothing ran to suspend"
        ));
    }
    if !v.check.ok() {
        return Err(failed!(
            "running: the held command did not run exactly once: {:?}",
            v.check
        ));
    }
    if device.is_host() {
        // The worker's own span of the long command: its work plus the hold it stood still for.
        let span = v
            .records
            .iter()
            .find(|r| r.id == long)
            .and_then(|r| r.worker)
            .map(|w| w.end_ns.saturating_sub(w.start_ns))
            .ok_or_else(|| Error::msg("running: no worker record of the long command"))?;
        facts["held_command_ms"] = json!(span as f64 / 1e6);
        let want = ns(LONG) + ns(HOLD) * 8 / 10;
        if span < want {
            return Err(failed!(
                "running: the command lasted {:.1} ms for {LONG:?} of work held {HOLD:?}: it did not stand still \
                 while suspended",
                span as f64 / 1e6
            ));
        }
    }
    super::interrupted()?;

    // 3. A burst through repeated cycles.
    let cycles = burst(&lp, t_ms)?;
    let v = lp.verify().context("burst: check")?;
    facts["burst"] = json!({"commands": BURST, "cycles": cycles, "exactly_once": v.check.exactly_once, "submitted": v.check.submitted});
    if !v.check.ok() {
        return Err(failed!(
            "burst: {} of {} commands ran exactly once: {}",
            v.check.exactly_once,
            v.check.submitted,
            v.check.problems.join("; ")
        ));
    }
    s.close().context("closing the session")?;
    Ok(format!(
        "{}: idle suspend {:.1} us; a running {LONG:?} command suspended in {:.1} us and held {HOLD:?}; {BURST} \
         commands through {cycles} cycles; all {} commands exactly once",
        idle.mechanism,
        idle.latency_ns as f64 / 1e3,
        held.latency_ns as f64 / 1e3,
        v.check.submitted
    ))
}

/// [`BURST`] commands of `t_ms`, suspended and resumed [`CYCLES`] times while they run.
fn burst(lp: &LpStream, t_ms: f64) -> Result<u32, Error> {
    let t = Duration::from_secs_f64(t_ms / 1e3);
    for _ in 0..BURST {
        lp.submit_delay(ns(t)).context("burst: submit")?;
    }
    let mut done = 0;
    for _ in 0..CYCLES {
        if stop_requested() {
            break;
        }
        std::thread::sleep(t);
        lp.suspend().with_context(|| format!("burst: suspend {done}"))?;
        std::thread::sleep(t / 2);
        lp.resume().with_context(|| format!("burst: resume {done}"))?;
        done += 1;
    }
    lp.wait_idle_for(DRAIN).context("burst: draining")?;
    Ok(done)
}
