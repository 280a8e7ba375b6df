//! Measurements on the host device (CPU worker processes; Lv3 = SIGSTOP/SIGCONT; Lv2 = each
//! worker finishes the command it runs and takes no new one). Host figures, never GPU figures.
use super::abandon::{self, Registered};
use super::backend::{Abandoned, Backend, DeviceSpan, Finished, HpStart, RawSample, Settled, Suspended};
use super::samples;
use super::{Correctness, Params, RunResult};
use crate::error::{Context, Error, failed};
use crate::options::Level;
use lv1::{Config, HwQueue, XQueue};
use preempt_api::host::{
    HostCommand, HostDevice, HostError, HostHold, HostQueue, HostSuspension, KernelRecord, WORKER_ENV, WORKER_NAME,
};
use preempt_api::{Mechanism, WorkerExe, now_ns};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// The host device set up for one run (see [`Backend`]).
struct HostBackend {
    dev: HostDevice,
    t_ns: u64,
    level: Level,
    workers: u32,
    /// The HP probe records, by probe index: the host probe runs to completion at launch.
    probes: Mutex<HashMap<u32, KernelRecord>>,
    /// Every probe's (index, start, end), for the timeline.
    probe_spans: Mutex<Vec<(u32, u64, u64)>>,
    /// The LP workers, killed if a stop's close time passes while the loop waits on them.
    _abandonable: Registered,
}

/// Registers `dev`'s LP workers with [`abandon::kill_at_deadline`] (the registration holds the
/// queue; its kill goes through the workers' pidfds).
fn abandonable(dev: &HostDevice) -> Registered {
    let q = Arc::clone(dev.lp());
    abandon::kill_at_deadline(move || q.kill_workers())
}

/// A host Lv3 suspension (SIGSTOP of every LP worker); resumes (SIGCONT) on drop too.
struct HostSuspended<'a>(HostSuspension<'a>);

impl Suspended for HostSuspended<'_> {
    fn resume(self: Box<Self>) -> Result<(), Error> {
        self.0.resume().map_err(err("resume (SIGCONT)"))
    }
}

/// A host Lv2 hold (every LP worker finished its command and takes no new one); releases on drop.
struct HostHeld<'a>(HostHold<'a>);

impl Suspended for HostHeld<'_> {
    fn resume(self: Box<Self>) -> Result<(), Error> {
        self.0.resume().map_err(err("resume (release the held workers)"))
    }
}

/// The mechanism a host run at `level` records.
fn host_mechanism(level: Level) -> Mechanism {
    match level {
        Level::Lv1 | Level::Auto => Mechanism::Launcher,
        Level::Lv2 => Mechanism::Lv2Hold,
        Level::Lv3 => Mechanism::Sigstop,
    }
}

impl Backend for HostBackend {
    type Queue = HostQueue;

    fn now_ns(&self) -> u64 {
        now_ns()
    }
    fn lp_queue(&self) -> Arc<HostQueue> {
        Arc::clone(self.dev.lp())
    }
    fn command(&self) -> HostCommand {
        HostCommand::delay_ns(self.t_ns)
    }
    #[allow(clippy::cast_precision_loss)] // T <= 10 s: exact in an f64
    fn t_ns(&self) -> f64 {
        self.t_ns as f64
    }
    fn budget(&self) -> Option<u64> {
        None
    }
    fn wait_first_start(&self, _launched: &dyn Fn() -> u64) -> Result<(), Error> {
        self.dev
            .lp()
            .wait_started(1, Duration::from_secs(30))
            .map(drop)
            .map_err(err("waiting for the first LP command"))
    }
    fn suspend(&self) -> Result<Box<dyn Suspended + '_>, Error> {
        if self.level == Level::Lv2 {
            let held = self.dev.lp().hold().map_err(err("suspend (hold the workers)"))?;
            return Ok(Box::new(HostHeld(held)));
        }
        Ok(Box::new(HostSuspended(
            self.dev.lp().suspend().map_err(err("suspend (SIGSTOP)"))?,
        )))
    }
    fn hp_launch(&self, index: u32) -> Result<(), Error> {
        let rec = self.dev.probe_hp(u64::from(index)).map_err(err("HP probe"))?;
        self.probes.lock().unwrap_or_else(|p| p.into_inner()).insert(index, rec);
        Ok(())
    }
    fn hp_wait(&self, index: u32) -> Result<HpStart, Error> {
        let rec = self.probes.lock().unwrap_or_else(|p| p.into_inner()).remove(&index);
        if let Some(r) = &rec {
            self.probe_spans
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((index, r.start_ns, r.end_ns));
        }
        rec.map(|r| HpStart::At(r.start_ns))
            .ok_or_else(|| failed!("HP probe {index} was not run"))
    }
    fn abandon(&self) -> Abandoned {
        abandon_lp(&self.dev)
    }
    fn finish(&mut self, raw: &[RawSample], settled: Settled, completions: &[(u64, bool)]) -> Result<Finished, Error> {
        let hp_start_ns = raw
            .iter()
            .map(|r| match r.hp {
                HpStart::At(start) => Ok(start.saturating_sub(r.t_req)),
                HpStart::Later => Err(failed!("the host HP probe's start is known at once")),
            })
            .collect::<Result<_, _>>()?;
        // Every command runs on every LP worker: one record per worker.
        let lp_records = self.dev.lp().take_records();
        let records: Vec<(u64, bool)> = lp_records.iter().map(|r| (r.id, r.is_correct())).collect();
        let mut device_spans: Vec<DeviceSpan> = lp_records
            .iter()
            .map(|r| DeviceSpan {
                track: format!("LP worker {}", r.worker),
                name: format!("LP {}", r.id),
                start_ns: r.start_ns,
                end_ns: r.end_ns,
            })
            .collect();
        let probes = std::mem::take(&mut *self.probe_spans.lock().unwrap_or_else(|p| p.into_inner()));
        device_spans.extend(probes.into_iter().map(|(i, start_ns, end_ns)| DeviceSpan {
            track: "HP worker".into(),
            name: format!("HP probe {i}"),
            start_ns,
            end_ns,
        }));
        Ok(Finished {
            device_spans,
            hp_start_ns,
            correctness: Correctness::check(settled.ran, completions, &records, self.workers as usize)
                .unless_abandoned(settled.abandoned),
            env: crate::env::host(host_mechanism(self.level)),
            lp_kernel: None,
            achieved_t: None,
        })
    }
}

/// Runs one measurement on the host device. `quiet` hides the progress bar.
pub fn run(p: &Params, quiet: bool) -> Result<RunResult, Error> {
    let exe = worker_exe()?;
    let dev = HostDevice::spawn(&exe, p.workers as usize).map_err(err("starting workers"))?;
    // T <= 10 s (checked at parse time): the rounded ns fit a u64.
    let t_ns = crate::num::round_u64(p.t_ms * 1e6);
    let b = HostBackend {
        _abandonable: abandonable(&dev),
        dev,
        t_ns,
        level: p.level,
        workers: p.workers,
        probes: Mutex::default(),
        probe_spans: Mutex::default(),
    };
    samples::run(p, b, "host", quiet)
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
    let dev = HostDevice::spawn(exe, workers as usize).map_err(err("starting workers"))?;
    let _abandonable = abandonable(&dev);
    direct_run(&dev, crate::num::round_u64(t_ms * 1e6), commands, workers)
}

/// Kills `dev`'s LP workers (a stop abandons what they run).
fn abandon_lp(dev: &HostDevice) -> Abandoned {
    dev.lp().kill_workers();
    Abandoned::Stopped
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
    let exe = worker_exe()?;
    let dev = HostDevice::spawn(&exe, workers as usize).map_err(err("starting workers"))?;
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
