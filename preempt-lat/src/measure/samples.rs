//! The measurement loop, once for every device: keep the LP queue busy through the Lv1
//! launcher, and per sample wait a random gap, take an HP request, suspend the LP queue (Lv1:
//! stop launching and drain; Lv3, and Lv2 on the host device: the device's suspension), run the
//! HP probe, resume. Ctrl-C stops at the next sample boundary (a gap is cut short; a sample
//! blocked in a wait on the host workers is cut once the stop's close time has passed:
//! [`super::abandon`]); an error stops the loop too, and in every case the LP queue is resumed
//! (guards) and settled before anything is returned ([`super::settle`]: drained, or after a stop
//! closed within the API's bounded close), so nothing is left suspended.
use super::abandon;
use super::control::{progress, sleep_until_or_stop, stop_requested};
use super::rng::SplitMix64;
use super::settle::settle;
use super::timeline::{LpSpan, Timeline};
use super::{Correctness, Params, RunResult, Sample};
use crate::error::{Cause, Context, Error, failed};
use crate::options::Level;
use lv1::{Config, HwQueue, SuspendMode, XQueue};
use preempt_api::latency::{HpStart, LatencyDevice, RawSample};
use std::time::Duration;

/// LP commands kept submitted beyond the threshold, so the launcher always has work.
pub fn keep_ahead(p: &Params) -> u64 {
    2 * u64::from(p.threshold) + 2
}

/// Runs `p.warmup + p.samples` preemptions on `b`. `label` names the run on the progress bar.
pub fn run<B>(p: &Params, mut b: B, label: &str, quiet: bool) -> Result<RunResult, Error>
where
    B: LatencyDevice<Queue: HwQueue<Error: Cause>>,
{
    // The device's commands, killed if a stop's close time passes while the loop waits on them.
    let _abandonable = b.abandoner().map(abandon::kill_at_deadline);
    let t_start = std::time::Instant::now();
    let run_start_ns = preempt_api::now_ns();
    let cfg = Config::new(p.threshold as usize, p.batch as usize)?;
    let xq = XQueue::new(b.lp_queue(), cfg).context("starting the launcher")?;
    let completions = xq
        .take_completions()
        .ok_or_else(|| failed!("launcher completions already taken"))?;
    let keep_ahead = keep_ahead(p);
    let t_ns = b.t_ns();
    let total = p.warmup + p.samples;
    let mut rng = SplitMix64::new(p.seed);
    let pb = progress(
        u64::from(total),
        quiet,
        &format!("Lv{} {label} T={}ms", p.level.number(), p.t_ms),
    );
    let mut raw: Vec<RawSample> = Vec::with_capacity(total as usize);
    let mut loop_err = None;
    for i in 0..total {
        if stop_requested() {
            break;
        }
        let budget_hit = loop {
            let s = xq.stats();
            if s.pending as u64 >= keep_ahead {
                break false;
            }
            if b.budget().is_some_and(|max| s.submitted + 1 > max) {
                break true;
            }
            xq.submit(b.command());
        };
        if budget_hit {
            eprintln!("preempt-lat: WARNING: the LP command budget is used up after {i} samples; stopping early");
            break;
        }
        if i == 0
            && let Err(e) = b.wait_first_start(&|| xq.stats().launched)
        {
            if !abandon::happened() {
                loop_err = Some(Error::from(e));
            }
            break;
        }
        // A gap is up to 3 x T (T up to 10 s): a stop cuts it short.
        let gap = rng.range(gap_ns(p.gap_t.0, t_ns), gap_ns(p.gap_t.1, t_ns));
        if sleep_until_or_stop(preempt_api::now_ns() + gap) {
            break;
        }
        let sample = if p.level == Level::Lv1 {
            preempt_lv1(&b, &xq, i)
        } else {
            preempt_guarded(&b, i)
        };
        match sample {
            Ok(s) => raw.push(s),
            // The stop's deadline killed the workers this sample waited on: the interruption
            // (the sample is not one), not a failure of the device.
            Err(_) if abandon::happened() => break,
            Err(e) => {
                loop_err = Some(e.under(format!("sample {i}")));
                break;
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();

    // Every guard is gone, so the queue runs: drained after a full run (everything submitted
    // must complete), closed within the API's bounded close after a stop (also one that comes
    // during the drain).
    let drain_limit = Duration::from_secs(60) + Duration::from_secs_f64(t_ns * 1e-9 * (keep_ahead as f64 + 8.0) * 4.0);
    let settled = match settle(xq, &b, drain_limit) {
        Ok(s) => s,
        Err(why) => {
            return Err(match loop_err {
                Some(le) => le.then(why),
                None => why,
            });
        }
    };
    if let Some(e) = loop_err {
        return Err(e);
    }
    let lp: Vec<LpSpan> = completions
        .try_iter()
        .map(|c| LpSpan {
            id: c.id,
            ok: c.outcome.is_ok(),
            launched_ns: c.stamps.launched_ns,
            completed_ns: c.stamps.completed_ns,
        })
        .collect();
    let done: Vec<(u64, bool)> = lp.iter().map(|c| (c.id, c.ok)).collect();
    let offset_ns = b.monotonic_offset_ns();
    let fin = b.finish(&raw, settled)?;
    let correctness =
        Correctness::check(settled.ran, &done, &fin.records, fin.copies).unless_abandoned(settled.abandoned);
    let samples: Vec<Sample> = raw
        .iter()
        .zip(&fin.hp_start_ns)
        .skip(p.warmup as usize)
        .map(|(r, &hp_start_ns)| Sample {
            suspend_ns: r.suspend_ns,
            preempt_call_ns: r.preempt_call_ns,
            hp_start_ns,
            resume_ns: r.resume_ns,
        })
        .collect();
    Ok(RunResult {
        latency_ns: RunResult::summarize(&samples),
        params: p.clone(),
        env: crate::env::of_run(&fin.facts),
        lp_kernel: fin.lp_kernel,
        achieved_t: fin.achieved_t,
        correctness,
        interrupted: samples.len() < p.samples as usize,
        samples,
        wall_time_s: t_start.elapsed().as_secs_f64(),
        timeline: Timeline {
            run_ns: (run_start_ns, preempt_api::now_ns()),
            offset_ns,
            warmup: p.warmup,
            lp,
            samples: raw.iter().zip(&fin.hp_start_ns).map(|(r, &h)| (*r, h)).collect(),
            device: fin.device_spans,
        },
    })
}

/// A gap of `multiple` x T in ns (T is at most 10 s, so this fits easily).
fn gap_ns(multiple: f64, t_ns: f64) -> u64 {
    crate::num::round_u64((multiple * t_ns).max(0.0))
}

/// Lv3 and Lv2: suspend through the device's guard, HP probe, resume. An error between suspend
/// and resume drops the guard, which resumes the queue.
fn preempt_guarded<B: LatencyDevice>(b: &B, i: u32) -> Result<RawSample, Error> {
    let t_req = b.now_ns();
    let guard = b.suspend().context("suspend")?;
    let t_s = b.now_ns();
    let preempt_call_ns = guard.preempt_call_ns();
    b.hp_launch(i)?;
    let hp = b.hp_wait(i)?;
    let t_r = b.now_ns();
    guard.resume().context("resume")?;
    let resume_ns = b.now_ns() - t_r;
    Ok(RawSample {
        index: i,
        t_req,
        suspend_ns: t_s - t_req,
        preempt_call_ns,
        resume_ns,
        window: (t_s, t_r),
        hp,
    })
}

/// Lv1: stop launching and drain the in-flight commands, HP probe, resume. The launcher is
/// resumed whatever happened; errors are returned after that.
fn preempt_lv1<B: LatencyDevice<Queue: HwQueue<Error: Cause>>>(
    b: &B,
    xq: &XQueue<B::Queue>,
    i: u32,
) -> Result<RawSample, Error> {
    let t_req = b.now_ns();
    let drained = xq.suspend(SuspendMode::Drain);
    let t_s = b.now_ns();
    let launched = drained.is_ok().then(|| b.hp_launch(i));
    let t_r = b.now_ns();
    xq.resume();
    let resume_ns = b.now_ns() - t_r;
    drained.context("Lv1 suspend (drain)")?;
    launched.unwrap_or(Ok(()))?;
    let hp: HpStart = b.hp_wait(i)?;
    Ok(RawSample {
        index: i,
        t_req,
        suspend_ns: t_s - t_req,
        preempt_call_ns: None,
        resume_ns,
        window: (t_s, t_r),
        hp,
    })
}
