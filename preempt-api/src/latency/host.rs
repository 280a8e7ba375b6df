//! The host device as a [`LatencyDevice`]: CPU worker processes (Lv3 = SIGSTOP/SIGCONT; Lv2 =
//! each worker finishes the command it runs and takes no new one). Host figures, never GPU
//! figures.
use super::{Abandon, DeviceSpan, Finished, HpStart, LatencyDevice, RawSample, RunFacts, Settled, Suspended};
use crate::error::{Error, Result};
use crate::host::{HostCommand, HostDevice, HostError, HostHold, HostQueue, HostSuspension, KernelRecord};
use crate::options::Level;
use crate::{GracePeriod, Mechanism, WorkerExe, lock, now_ns};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the first LP command may take to start.
const FIRST_START: Duration = Duration::from_secs(30);

/// The host device's error under what was being done: `host device: <what>: <error>`.
fn err(what: &str) -> impl FnOnce(HostError) -> Error + '_ {
    move |e| {
        let message = format!("host device: {what}: {e}");
        Error {
            message,
            ..Error::from(e)
        }
    }
}

/// The host device set up for one latency run.
pub struct HostLatency {
    dev: HostDevice,
    t_ns: u64,
    level: Level,
    workers: usize,
    /// The HP probe records, by probe index: the host probe runs to completion at launch.
    probes: Mutex<HashMap<u32, KernelRecord>>,
    /// Every probe's (index, start, end), for the timeline.
    probe_spans: Mutex<Vec<(u32, u64, u64)>>,
}

impl HostLatency {
    /// `workers` LP worker processes of `exe` and an HP worker, for a run of commands of `t_ns`
    /// at `level` (Lv1, Lv2 or Lv3).
    pub fn open(exe: &WorkerExe, workers: usize, t_ns: u64, level: Level) -> Result<Self> {
        Ok(HostLatency {
            dev: HostDevice::spawn(exe, workers).map_err(err("starting workers"))?,
            t_ns,
            level,
            workers,
            probes: Mutex::default(),
            probe_spans: Mutex::default(),
        })
    }

    /// The mechanism a host run at `level` records.
    pub fn mechanism(level: Level) -> Mechanism {
        match level {
            Level::Lv1 | Level::Auto => Mechanism::Launcher,
            Level::Lv2 => Mechanism::Lv2Hold,
            Level::Lv3 => Mechanism::Sigstop,
        }
    }
}

/// A host Lv3 suspension (SIGSTOP of every LP worker); resumes (SIGCONT) on drop too.
struct Stopped<'a>(HostSuspension<'a>);

impl Suspended for Stopped<'_> {
    fn resume(self: Box<Self>) -> Result<()> {
        self.0.resume().map_err(err("resume (SIGCONT)"))
    }
}

/// A host Lv2 hold (every LP worker finished its command and takes no new one); releases on drop.
struct Held<'a>(HostHold<'a>);

impl Suspended for Held<'_> {
    fn resume(self: Box<Self>) -> Result<()> {
        self.0.resume().map_err(err("resume (release the held workers)"))
    }
}

impl LatencyDevice for HostLatency {
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
    fn wait_first_start(&self, _launched: &dyn Fn() -> u64) -> Result<()> {
        self.dev
            .lp()
            .wait_started(1, FIRST_START)
            .map(drop)
            .map_err(err("waiting for the first LP command"))
    }
    fn suspend(&self) -> Result<Box<dyn Suspended + '_>> {
        if self.level == Level::Lv2 {
            let held = self.dev.lp().hold().map_err(err("suspend (hold the workers)"))?;
            return Ok(Box::new(Held(held)));
        }
        Ok(Box::new(Stopped(
            self.dev.lp().suspend().map_err(err("suspend (SIGSTOP)"))?,
        )))
    }
    fn hp_launch(&self, index: u32) -> Result<()> {
        let rec = self.dev.probe_hp(u64::from(index)).map_err(err("HP probe"))?;
        lock(&self.probes).insert(index, rec);
        Ok(())
    }
    fn hp_wait(&self, index: u32) -> Result<HpStart> {
        let rec = lock(&self.probes).remove(&index);
        if let Some(r) = &rec {
            lock(&self.probe_spans).push((index, r.start_ns, r.end_ns));
        }
        rec.map(|r| HpStart::At(r.start_ns))
            .ok_or_else(|| Error::new(crate::ErrorKind::Device, format!("HP probe {index} was not run")))
    }
    fn abandon(&self) -> Abandon {
        self.dev.lp().kill_workers();
        Abandon::Stopped
    }
    fn abandoner(&self) -> Option<Box<dyn Fn() + Send>> {
        // The closure holds the queue, so that its workers are not reaped while it lives.
        let q = Arc::clone(self.dev.lp());
        Some(Box::new(move || q.kill_workers()))
    }
    fn finish(&mut self, raw: &[RawSample], _settled: Settled) -> Result<Finished> {
        let hp_start_ns = raw
            .iter()
            .map(|r| match r.hp {
                HpStart::At(start) => Ok(start.saturating_sub(r.t_req)),
                HpStart::Later => Err(Error::new(
                    crate::ErrorKind::Device,
                    "the host HP probe's start is known at once",
                )),
            })
            .collect::<Result<_>>()?;
        // Every command runs on every LP worker: one record per worker.
        let lp_records = self.dev.lp().take_records();
        let records = lp_records.iter().map(|r| (r.id, r.is_correct())).collect();
        let mut device_spans: Vec<DeviceSpan> = lp_records
            .iter()
            .map(|r| DeviceSpan {
                track: format!("LP worker {}", r.worker),
                name: format!("LP {}", r.id),
                start_ns: r.start_ns,
                end_ns: r.end_ns,
            })
            .collect();
        let probes = std::mem::take(&mut *lock(&self.probe_spans));
        device_spans.extend(probes.into_iter().map(|(i, start_ns, end_ns)| DeviceSpan {
            track: "HP worker".into(),
            name: format!("HP probe {i}"),
            start_ns,
            end_ns,
        }));
        let mechanism = Self::mechanism(self.level);
        Ok(Finished {
            device_spans,
            hp_start_ns,
            records,
            copies: self.workers,
            lp_kernel: None,
            achieved_t: None,
            facts: RunFacts {
                mechanism,
                grace_applied: mechanism.grace_applied(GracePeriod::SHORTEST),
                gpu: None,
            },
        })
    }
}
