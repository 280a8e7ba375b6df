//! `validate`'s bystander check on a GPU, our side: for one mechanism, a bystander process
//! ([`crate::bystander::worker`], started from this executable) runs short delay kernels on the
//! same GPU while we keep an LP queue of our own busy, leave it alone for a baseline window, then
//! suspend and resume it at a fixed period with the mechanism (the API's [`GpuSuspension`], as
//! the latency run does); the bystander's kernel stamps against our preemption windows
//! ([`crate::bystander::analysis`]) give its cost.
//!
//! Written for hardware from the same pieces as the latency run and `priority`; it has NOT run
//! on a GPU. On every path the bystander process is stopped (its stdin closed, killed if it does
//! not exit: [`Worker`]'s drop), and no queue is left suspended: each suspension is resumed in
//! the loop or by its guard on an early return, and the mechanism is torn down at the end.
//!
//! Our LP kernel is the light delay kernel at one block (16 waves) per CU, the bystander's one
//! block of 4 waves per CU: both fit in a gfx942 CU's 32 wave slots side by side, so the
//! bystander's kernels do not get faster while our queue is suspended, and every CU holds waves
//! of both for a whole-node unmap to save.
use std::path::Path;
use std::time::Duration;

use gpu_device::{DelayCmd, LpState, SlotStatus};
use lv1::HwQueue;
use lv1::clock::{now_ns, sleep_until};
use lv3::binding::QueueBinding;
use preempt_api::Preemptor;
use preempt_api::gpu::{self, GpuSuspension, KernelChoice, LpRequest, Prepare, PreparedLp};
use preempt_api::{GracePeriod, Lv3Request, MechanismChoice, MechanismKind};

use super::h;
use super::usable::{unusable_reason, usable};
use crate::bystander::analysis::{self, Span, Timeline};
use crate::bystander::child::Worker;
use crate::bystander::{Measured, Plan};
use crate::error::{Context, Error, failed};
use crate::stats::nearest_rank;

/// How long the bystander may take to get ready (HIP start, hiprtc, calibration).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long it may take to exit once its stdin is closed (one kernel, then `done`).
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long our LP chain may take to finish after the measured window.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// One mechanism's bystander measurement on `hip:device`. Err((true, why)): cannot run here
/// (skip); Err((false, why)): ran and failed.
pub fn bystander(device: u32, kind: MechanismKind, plan: &Plan, program: &Path) -> Result<Measured, (bool, String)> {
    usable(device).map_err(|why| (true, format!("skipped: no GPU ({why})")))?;
    if crate::measure::control::stop_requested() {
        return Err((true, "skipped: interrupted (Ctrl-C/SIGTERM)".into()));
    }
    if let Some(why) = unusable_reason(kind) {
        return Err((true, why));
    }
    let mut worker =
        Worker::spawn(program, &plan.worker_args(&format!("hip:{device}"))).map_err(|e| (false, e.to_string()))?;
    // `worker` is stopped on the way through, and dropped (killed if still running) on every
    // early return.
    measure(device, kind, plan, &mut worker).map_err(|e| (false, e.to_string()))
}

fn measure(device: u32, kind: MechanismKind, plan: &Plan, worker: &mut Worker) -> Result<Measured, Error> {
    // One light block (16 waves) per CU: room beside it for the bystander's 4 waves.
    let choice = KernelChoice {
        state: LpState::Light,
        blocks_per_cu: 1,
    };
    let prepared = gpu::prepare(&Prepare {
        device,
        kernel: choice,
        t_ms: Some(plan.lp_t_ms),
        hp_stream: false,
    })?;
    let cal = prepared
        .t
        .ok_or_else(|| failed!("the GPU was prepared without T"))?
        .calibration;
    let n_lp = plan.lp_commands();

    // The bystander ready (its set-up is no part of any window), then the mechanism (dbg-trap
    // turns debugging on before the LP queue exists), then the LP stream and its KFD queue, kept
    // busy from its first use on.
    let ready = worker.wait_ready(READY_TIMEOUT)?;
    if ready.pid != worker.pid() {
        return Err(failed!(
            "the bystander says it is pid {}, but pid {} was started",
            ready.pid,
            worker.pid()
        ));
    }
    let PreparedLp { lv3, queue: lp } = prepared.lp(LpRequest {
        lv3: Some(Lv3Request::required(MechanismChoice::Only(kind), GracePeriod::SHORTEST)),
        slots: n_lp as usize,
    })?;
    let pre = lv3
        .and_then(|s| s.preemptor)
        .ok_or_else(|| failed!("no Lv3 mechanism was built for the bystander check"))?;
    let binding = lp
        .binding
        .ok_or_else(|| failed!("the LP queue was set up without its KFD queue"))?;

    // Our LP chain: enqueued at once, it outlasts both windows (Plan::lp_commands).
    let ticks = cal.ticks_for(plan.lp_t_ms);
    for i in 0..n_lp {
        lp.queue
            .launch(u64::from(i), DelayCmd { ticks })
            .map_err(h("LP launch"))?;
    }
    let lp_done = prepared.gpu.device().event(false).map_err(h("LP event"))?;
    lp_done.record(lp.queue.stream()).map_err(h("LP event"))?;
    std::thread::sleep(Duration::from_millis(20));
    let windows = run_windows(plan, &pre, &binding, worker);
    let rec = worker.finish(EXIT_TIMEOUT);
    // The mechanism goes first (dbg-trap: debug mode off, which resumes anything a failed
    // resume left suspended), then our LP chain must end, then every LP command is checked.
    if let Err(e) = pre.teardown() {
        eprintln!("preempt-lat: WARNING: {kind}: teardown failed: {e}");
    }
    drop(pre);
    let (baseline, measured, preemptions, mut suspend_ns, mut resume_ns) = windows?;
    if !lp_done.wait_timeout(DRAIN_TIMEOUT).map_err(h("LP event"))? {
        return Err(failed!(
            "our LP commands did not finish within {DRAIN_TIMEOUT:?} after the last resume: check dmesg and \
             /sys/class/kfd/kfd/proc/{}/queues",
            std::process::id()
        ));
    }
    let got = lp
        .queue
        .read_slots(u64::from(n_lp))
        .map_err(h("reading the LP slots"))?;
    if let Some((i, s)) = (0u32..)
        .zip(&got)
        .map(|(i, s)| (i, s.status(i, lp.queue.nblocks())))
        .find(|(_, s)| *s != SlotStatus::Complete)
    {
        return Err(failed!("our LP command {i} did not complete exactly once: {s:?}"));
    }
    if !rec.problems.is_empty() {
        return Err(failed!("the bystander's output: {}", rec.problems.join("; ")));
    }
    let cost = analysis::analyze(&Timeline {
        kernels: &rec.kernels,
        baseline,
        measured,
        preemptions: &preemptions,
        bystander_stopped_ns: rec.stopped_ns,
    })
    .map_err(|p| failed!("{p} ({})", rec.ended))?;
    suspend_ns.sort_unstable();
    resume_ns.sort_unstable();
    Ok(Measured {
        device: format!("hip:{device}"),
        mechanism: kind.name(),
        bystander: ready.device,
        bystander_pid: ready.pid,
        kernel_ns: ready.kernel_ns,
        period_ns: plan.period_ns,
        hold_ns: plan.hold_ns,
        baseline_window_ns: baseline.len_ns(),
        measured_window_ns: measured.len_ns(),
        suspend_call_p50_ns: nearest_rank(&suspend_ns, 0.5),
        suspend_call_p99_ns: nearest_rank(&suspend_ns, 0.99),
        resume_call_p50_ns: nearest_rank(&resume_ns, 0.5),
        resume_call_p99_ns: nearest_rank(&resume_ns, 0.99),
        lp_commands_exactly_once: n_lp,
        cost,
    })
}

/// The baseline window, the measured window, our preemptions in it (suspend call start to resume
/// call end), and our suspend and resume call times.
type Windows = (Span, Span, Vec<Span>, Vec<u64>, Vec<u64>);

/// The baseline window, then the measured window with a preemption at each of the plan's
/// offsets. A suspension is resumed before the next step, or by its guard on an early return.
fn run_windows(plan: &Plan, pre: &Preemptor, binding: &QueueBinding, worker: &mut Worker) -> Result<Windows, Error> {
    let kind = pre.kind();
    let baseline_from = now_ns();
    std::thread::sleep(Duration::from_nanos(plan.baseline_ns));
    let baseline = Span {
        from_ns: baseline_from,
        to_ns: now_ns(),
    };
    if !worker.running() {
        return Err(failed!(
            "the bystander process ended during the baseline window{}",
            worker.stderr_tail()
        ));
    }
    let (mut preemptions, mut suspend_ns, mut resume_ns) = (Vec::new(), Vec::new(), Vec::new());
    let from = now_ns();
    for off in plan.preemption_offsets() {
        sleep_until(from + off);
        if crate::measure::control::stop_requested() {
            return Err(failed!("interrupted"));
        }
        let t0 = now_ns();
        let held = GpuSuspension::suspend(pre, binding).with_context(|| format!("{kind} suspend"))?;
        let t1 = now_ns();
        std::thread::sleep(Duration::from_nanos(plan.hold_ns));
        let t2 = now_ns();
        held.resume().with_context(|| format!("{kind} resume"))?;
        let t3 = now_ns();
        preemptions.push(Span { from_ns: t0, to_ns: t3 });
        suspend_ns.push(t1 - t0);
        resume_ns.push(t3 - t2);
    }
    sleep_until(from + plan.window_ns);
    let measured = Span {
        from_ns: from,
        to_ns: now_ns(),
    };
    Ok((baseline, measured, preemptions, suspend_ns, resume_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_gpu_it_is_a_skip_that_starts_no_process() {
        if gpu_device::usable(0).is_ok() {
            eprintln!("a GPU is usable here: the bystander check is left to validate");
            return;
        }
        // A program that cannot start: a spawn attempt would be a failure, not this skip.
        let (skip, why) = bystander(0, MechanismKind::DbgTrap, &Plan::VALIDATE, Path::new("/nonexistent")).unwrap_err();
        assert!(skip, "{why}");
        assert!(why.starts_with("skipped: no GPU ("), "{why}");
    }
}
