//! The host device (CPU worker processes) as this crate uses it outside a latency run (that is
//! preempt-api's [`preempt_api::latency::host`]) and outside a session: its worker program, the
//! default LP worker count, and commands launched straight onto its LP queue or through a
//! launcher of this process's own (`overhead`'s native run, the threshold sweep's direct phase,
//! `launcher-cost`). Host figures, never GPU figures.
use crate::error::{Context, Error, failed};
use crate::measure::abandon;
use lv1::{Config, HwQueue, XQueue};
use preempt_api::WorkerExe;
use preempt_api::host::{HostCommand, HostDevice, HostError, WORKER_ENV, WORKER_NAME};
use std::collections::HashMap;
use std::sync::Arc;

/// The worker program: `$PREEMPT_HOST_WORKER`, else host-device's `preempt-host-worker` beside
/// this binary (where cargo builds both). Missing: one line saying how to build it.
pub fn worker_exe() -> Result<WorkerExe, Error> {
    WorkerExe::find_beside_current_exe().ok_or_else(|| {
        let dir = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.display().to_string()));
        let release = if cfg!(debug_assertions) { "" } else { " --release" };
        failed!(
            "host device: no {WORKER_NAME} beside preempt-lat (in {}) and {WORKER_ENV} is not set: build it with \
             `cargo build{release} -p preempt-lat -p host-device`, or set {WORKER_ENV} to it",
            dir.as_deref().unwrap_or("an unknown directory")
        )
    })
}

/// LP workers by default: every core but one, which the HP worker and the launcher need.
pub fn default_workers() -> u32 {
    u32::try_from(crate::env::cores().saturating_sub(1).max(1)).unwrap_or(u32::MAX)
}

/// The host device's error under what was being done: `host device: <what>: <error>`.
fn err(what: &str) -> impl FnOnce(HostError) -> Error + '_ {
    move |e| Error::Host {
        what: format!("host device: {what}"),
        source: e,
    }
}

/// A host device of its own: `workers` LP workers of `exe`, and the HP worker.
fn spawn(exe: &WorkerExe, workers: u32) -> Result<HostDevice, Error> {
    HostDevice::spawn(exe, workers as usize).map_err(err("starting workers"))
}

/// `commands` delay commands of `t_ns` launched straight onto `dev`'s LP queue (no launcher, no
/// session) and waited for: the direct phase of the threshold sweep and the native baseline of
/// `overhead`. Returns what this process used meanwhile (wall and CPU time of every thread,
/// `getrusage`; the worker processes are the device, not counted) and whether every command ran
/// exactly once on each of the `workers` workers with the right result (their own records).
pub fn direct_run(dev: &HostDevice, t_ns: u64, commands: u32, workers: u32) -> Result<(lv1::cost::Usage, bool), Error> {
    let q = dev.lp();
    drop(q.take_records());
    let usage = || lv1::cost::Usage::now().context("getrusage");
    let before = usage()?;
    for id in 0..u64::from(commands) {
        q.launch(id, HostCommand::delay_ns(t_ns))
            .map_err(err("direct launch"))?;
    }
    q.synchronize().map_err(err("direct synchronize"))?;
    let used = usage()?.since(&before);
    let mut runs: HashMap<u64, u32> = HashMap::new();
    let mut wrong = false;
    for r in q.take_records() {
        *runs.entry(r.id).or_default() += 1;
        wrong |= !r.is_correct();
    }
    let once = u64::try_from(runs.len()).is_ok_and(|n| n == u64::from(commands))
        && runs.iter().all(|(&id, &n)| id < u64::from(commands) && n == workers);
    Ok((used, once && !wrong))
}

/// [`direct_run`] on a host device of its own with `workers` workers of `exe`: `overhead`'s
/// native run. A stop's close time passing while it runs kills its workers (it waits for up to
/// commands x T): it then fails, and its caller leaves it out.
pub fn native(exe: &WorkerExe, t_ms: f64, commands: u32, workers: u32) -> Result<(lv1::cost::Usage, bool), Error> {
    let dev = spawn(exe, workers)?;
    let q = Arc::clone(dev.lp());
    let _abandonable = abandon::kill_at_deadline(move || q.kill_workers());
    direct_run(&dev, crate::num::round_u64(t_ms * 1e6), commands, workers)
}

/// CPU time of every thread of this process so far, ns: the same source (`getrusage`, through
/// [`lv1::cost::Usage`]) as the launcher-alone and Fig. 12b figures it is reported beside.
#[allow(clippy::cast_precision_loss)] // ns of CPU time: exact below 2^53 (104 days)
fn process_cpu_ns() -> Result<f64, Error> {
    lv1::cost::Usage::now().map(|u| u.cpu_ns as f64).context("getrusage")
}

/// The launcher's own host cost: `commands` through an XQueue over lv1's
/// [`NullQueue`](lv1::NullQueue) (every command completes the moment it is launched: no device,
/// no I/O), measured by [`lv1::cost::measure`] (CPU of every thread, context switches, wall,
/// `submit` latency).
pub fn launcher_cost_null_device(commands: u32, threshold: u32, batch: u32) -> Result<lv1::cost::Cost, Error> {
    let cfg = Config::new(threshold as usize, batch as usize)?;
    lv1::cost::measure(u64::from(commands), cfg).context("the launcher over the null queue")
}

/// XSched's Fig. 12b on the host device: the CPU this process spends (the submitting thread, the
/// launcher and its completion thread, the worker pipes' reader; not the worker processes) as a
/// share of one core while LP commands of `t_ms` run back to back through the launcher for
/// about `window_ms`.
pub fn launcher_core_share(t_ms: f64, threshold: u32, batch: u32, workers: u32, window_ms: f64) -> Result<f64, Error> {
    let dev = spawn(&worker_exe()?, workers)?;
    let cfg = Config::new(threshold as usize, batch as usize)?;
    let xq = XQueue::new(Arc::clone(dev.lp()), cfg).context("starting the launcher")?;
    drop(xq.take_completions());
    let commands = crate::num::ceil_u32(window_ms / t_ms).max(1);
    let ns = crate::num::round_u64(t_ms * 1e6);
    let before = lv1::cost::Usage::now().context("getrusage")?;
    for _ in 0..commands {
        xq.submit(HostCommand::delay_ns(ns));
    }
    xq.wait_idle()?;
    let used = lv1::cost::Usage::now().context("getrusage")?.since(&before);
    drop(xq);
    drop(dev.lp().take_records());
    #[allow(clippy::cast_precision_loss)] // ns of one run: far below 2^53
    Ok(100.0 * used.cpu_ns as f64 / used.wall_ns.max(1) as f64)
}

/// Host CPU time this process spends per LP command on the host device, launched directly and
/// through the Lv1 launcher, with T -> 0 (1 ns of work). Measured with `getrusage(RUSAGE_SELF)`,
/// which counts every thread of this process (launcher, completion and reader threads) and none
/// of the worker processes. The difference also holds the host device's extra pipe wake-ups at a
/// shallow in-flight depth; [`launcher_cost_null_device`] isolates the launcher. Returns
/// (direct ns, launcher ns).
pub fn launcher_cost(commands: u32, threshold: u32, batch: u32, workers: u32) -> Result<(f64, f64), Error> {
    let cpu = process_cpu_ns;
    let dev = spawn(&worker_exe()?, workers)?;
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
    let cfg = Config::new(threshold as usize, batch as usize)?;
    let xq = XQueue::new(Arc::clone(q), cfg).context("starting the launcher")?;
    let c1 = cpu()?;
    for _ in 0..commands {
        xq.submit(HostCommand::delay_ns(1));
    }
    xq.wait_idle()?;
    let launcher = (cpu()? - c1) / f64::from(commands);
    Ok((direct, launcher))
}
