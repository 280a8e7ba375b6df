//! Measurements on the host device (CPU worker processes; Lv3 = SIGSTOP/SIGCONT). Host figures,
//! never GPU figures.
use super::control::{progress, stop_requested};
use super::rng::SplitMix64;
use super::{Correctness, Params, RunResult, Sample};
use crate::options::Level;
use lv1::clock::now_ns;
use host_device::{HostCommand, HostDevice, HostError, WorkerExe};
use lv1::{Config, HwQueue, SuspendMode, XQueue};
use std::sync::Arc;
use std::time::Duration;

/// The worker executable: this binary, re-executed with its hidden worker subcommand.
pub fn worker_exe() -> Result<WorkerExe, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find preempt-lat's own executable: {e}"))?;
    Ok(WorkerExe::new(me).arg("__host-worker"))
}

/// LP workers by default: every core but one, which the HP worker and the launcher need.
pub fn default_workers() -> u32 {
    (crate::env::cores().saturating_sub(1)).max(1) as u32
}

fn err(what: &str) -> impl FnOnce(HostError) -> String + '_ {
    move |e| format!("host device: {what}: {e}")
}

/// Runs one measurement. `quiet` hides the progress bar.
pub fn run(p: &Params, quiet: bool) -> Result<RunResult, String> {
    let t0 = std::time::Instant::now();
    let exe = worker_exe()?;
    let dev = HostDevice::spawn(&exe, p.workers as usize).map_err(err("starting workers"))?;
    let cfg = Config::new(p.threshold as usize, p.batch as usize).map_err(|e| e.to_string())?;
    let xq = XQueue::new(Arc::clone(dev.lp()), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let completions = xq.take_completions().ok_or("launcher completions already taken")?;
    let t_ns = (p.t_ms * 1e6).round() as u64;
    let mut rng = SplitMix64::new(p.seed);
    let total = u64::from(p.warmup + p.samples);
    let pb = progress(total, quiet, &format!("Lv{} host T={}ms", p.level, p.t_ms));
    let mut samples = Vec::with_capacity(p.samples as usize);
    // Keep the LP queue busy: always more submitted than the threshold lets in flight.
    let keep_ahead = 2 * p.threshold as u64 + 2;
    for i in 0..total {
        if stop_requested() {
            break;
        }
        while xq.stats().pending < keep_ahead as usize {
            xq.submit(HostCommand::delay_ns(t_ns));
        }
        if i == 0 {
            // The first preemption must find LP work running.
            dev.lp().wait_started(1, Duration::from_secs(30)).map_err(err("waiting for the first LP command"))?;
        }
        let gap = rng.range((p.gap_t.0 * t_ns as f64) as u64, (p.gap_t.1 * t_ns as f64) as u64);
        std::thread::sleep(Duration::from_nanos(gap));
        let s = preempt_once(p.level, &dev, &xq, i)?;
        if i >= u64::from(p.warmup) {
            samples.push(s);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let interrupted = (samples.len() as u32) < p.samples;
    // Correctness: everything submitted must complete exactly once with the right result.
    xq.wait_idle().map_err(|e| format!("draining the LP queue: {e}"))?;
    let submitted = xq.stats().submitted;
    let done: Vec<(u64, bool)> = completions.try_iter().map(|c| (c.id, c.outcome.is_ok())).collect();
    let records: Vec<(u64, bool)> = dev.lp().take_records().iter().map(|r| (r.id, r.is_correct())).collect();
    let correctness = Correctness::check(submitted, &done, &records, p.workers as usize);
    drop(xq);
    Ok(RunResult {
        latency_ns: RunResult::summarize(&samples),
        params: p.clone(),
        env: crate::env::host(if p.level == Level::Lv1 { "progressive-launch" } else { "sigstop" }),
        correctness,
        samples,
        interrupted,
        wall_time_s: t0.elapsed().as_secs_f64(),
    })
}

/// One HP request: suspend the LP queue, run the HP probe, resume. Lv3's suspension is a
/// guard: an error or a panic between suspend and resume still resumes the workers.
fn preempt_once(level: Level, dev: &HostDevice, xq: &XQueue<host_device::HostQueue>, probe_id: u64) -> Result<Sample, String> {
    let t_req = now_ns();
    match level {
        Level::Lv3 => {
            let guard = dev.lp().suspend().map_err(err("suspend (SIGSTOP)"))?;
            let suspend_ns = now_ns() - t_req;
            let rec = dev.probe_hp(probe_id).map_err(err("HP probe"))?;
            let t_r = now_ns();
            guard.resume().map_err(err("resume (SIGCONT)"))?;
            Ok(Sample { suspend_ns, hp_start_ns: rec.start_ns.saturating_sub(t_req), resume_ns: now_ns() - t_r })
        }
        Level::Lv1 => {
            xq.suspend(SuspendMode::Drain).map_err(err("Lv1 suspend (drain)"))?;
            let suspend_ns = now_ns() - t_req;
            let probe = dev.probe_hp(probe_id);
            let t_r = now_ns();
            xq.resume();
            let resume_ns = now_ns() - t_r;
            let rec = probe.map_err(err("HP probe"))?;
            Ok(Sample { suspend_ns, hp_start_ns: rec.start_ns.saturating_sub(t_req), resume_ns })
        }
    }
}

/// LP throughput cost of the Lv1 launcher: `commands` delay commands of T, once launched
/// directly onto the hardware queue, once through an XQueue with `threshold`/`batch`.
/// Returns (direct seconds, launcher seconds, overhead percent).
pub fn lv1_overhead(t_ms: f64, threshold: u32, batch: u32, commands: u32, workers: u32) -> Result<(f64, f64, f64), String> {
    let exe = worker_exe()?;
    let t_ns = (t_ms * 1e6).round() as u64;
    let dev = HostDevice::spawn(&exe, workers as usize).map_err(err("starting workers"))?;
    let q = dev.lp();
    let t0 = std::time::Instant::now();
    for id in 0..u64::from(commands) {
        q.launch(id, HostCommand::delay_ns(t_ns)).map_err(err("direct launch"))?;
    }
    q.synchronize().map_err(err("direct synchronize"))?;
    let direct = t0.elapsed().as_secs_f64();
    drop(q.take_records());
    let cfg = Config::new(threshold as usize, batch.min(threshold) as usize).map_err(|e| e.to_string())?;
    let xq = XQueue::new(Arc::clone(q), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let t1 = std::time::Instant::now();
    for _ in 0..commands {
        xq.submit(HostCommand::delay_ns(t_ns));
    }
    xq.wait_idle().map_err(|e| e.to_string())?;
    let launcher = t1.elapsed().as_secs_f64();
    Ok((direct, launcher, (launcher / direct - 1.0) * 100.0))
}

fn process_cpu_ns() -> Result<f64, String> {
    use nix::time::{ClockId, clock_gettime};
    clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(|t| t.tv_sec() as f64 * 1e9 + t.tv_nsec() as f64)
        .map_err(|e| format!("CLOCK_PROCESS_CPUTIME_ID: {e}"))
}

/// The launcher's own host CPU per command: `commands` through an XQueue over lv1's
/// [`NullQueue`](lv1::NullQueue) (every command completes the moment it is launched: no device, no I/O).
pub fn launcher_cost_null_device(commands: u32, threshold: u32, batch: u32) -> Result<f64, String> {
    let cfg = Config::new(threshold as usize, batch as usize).map_err(|e| e.to_string())?;
    let xq = XQueue::new(lv1::NullQueue::shared(), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let c0 = process_cpu_ns()?;
    for i in 0..commands {
        xq.submit(u64::from(i));
    }
    xq.wait_idle().map_err(|e| e.to_string())?;
    Ok((process_cpu_ns()? - c0) / f64::from(commands))
}

/// Host CPU time this process spends per LP command on the host device, launched directly and
/// through the Lv1 launcher, with T -> 0 (1 ns of work). Measured on CLOCK_PROCESS_CPUTIME_ID,
/// which counts every thread of this process (launcher, completion and reader threads) and none
/// of the worker processes. The difference also holds the host device's extra pipe wake-ups at a
/// shallow in-flight depth; [`launcher_cost_null_device`] isolates the launcher. Returns
/// (direct ns, launcher ns).
pub fn launcher_cost(commands: u32, threshold: u32, batch: u32, workers: u32) -> Result<(f64, f64), String> {
    let cpu = process_cpu_ns;
    let exe = worker_exe()?;
    let dev = HostDevice::spawn(&exe, workers as usize).map_err(err("starting workers"))?;
    let q = dev.lp();
    // Direct, in chunks so the worker pipes never fill.
    let c0 = cpu()?;
    for chunk in 0..u64::from(commands).div_ceil(256) {
        for id in chunk * 256..((chunk + 1) * 256).min(u64::from(commands)) {
            q.launch(id, HostCommand::delay_ns(1)).map_err(err("direct launch"))?;
        }
        q.synchronize().map_err(err("direct synchronize"))?;
    }
    let direct = (cpu()? - c0) / f64::from(commands);
    drop(q.take_records());
    let cfg = Config::new(threshold as usize, batch as usize).map_err(|e| e.to_string())?;
    let xq = XQueue::new(Arc::clone(q), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let c1 = cpu()?;
    for _ in 0..commands {
        xq.submit(HostCommand::delay_ns(1));
    }
    xq.wait_idle().map_err(|e| e.to_string())?;
    let launcher = (cpu()? - c1) / f64::from(commands);
    Ok((direct, launcher))
}
