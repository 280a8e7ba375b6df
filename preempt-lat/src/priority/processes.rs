//! `priority --processes N`: the HP and LP sides in separate processes, coordinated by the
//! scheduler daemon (docs/scheduler-daemon.md). N LP processes (`preempt-lat __sched-lp`), each a
//! session scheduled by the daemon with one registered LP stream, and this process as the HP side:
//! what the daemon's hop costs on HP start, i.e. the time from an HP block's start until every LP
//! stream is suspended, through the daemon against the in-process helper with the same N streams in
//! this process. The measurement is preempt-api's (`preempt_api::sched::hop`, also
//! `preempt-sched/examples/hop.rs`); the daemon is the `preempt-sched` binary beside preempt-lat.
//! The LP streams are idle: what is compared is the hop, not the suspend of running work (the
//! figures of `preempt-lat --level 3`).
use crate::device::Device;
use crate::env::Environment;
use crate::error::{Context, Error, failed};
use crate::exit::{Outcome, Verdict};
use crate::options::{PriorityOptions, SchedLpOptions};
use crate::stats::{Recorder, Summary};
use preempt_api::sched::hop::{Daemon, time_enters};
use preempt_api::{Level, Options};
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The longest an LP process may take to open its session and say `ready`.
const READY: Duration = Duration::from_secs(60);

/// One side's HP start latency.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// `in-process helper` or `daemon`.
    pub side: &'static str,
    pub hp_start_ns: Summary,
}

/// The result of `priority --processes`.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessesResult {
    pub env: Environment,
    /// LP processes (one stream each), and as many streams in-process.
    pub processes: u32,
    pub samples: u32,
    pub sides: Vec<Side>,
    /// Daemon minus in-process helper, ns (p50 and p99 differences).
    pub hop_p50_ns: i64,
    pub hop_p99_ns: i64,
}

impl crate::output::Export for ProcessesResult {
    type Whole = Self;
    type Row<'a> = CsvRow<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<CsvRow<'_>> {
        self.sides
            .iter()
            .map(|s| CsvRow {
                device: &self.env.device,
                host_figures: self.env.host_figures,
                processes: self.processes,
                side: s.side,
                samples: s.hp_start_ns.count,
                p50_ns: s.hp_start_ns.p50,
                p99_ns: s.hp_start_ns.p99,
                max_ns: s.hp_start_ns.max,
            })
            .collect()
    }
    fn text(&self, w: &mut dyn Write) -> std::io::Result<()> {
        if self.env.host_figures {
            writeln!(
                w,
                "host figures (CPU worker processes stand in for the GPU; not GPU numbers)"
            )?;
        }
        writeln!(
            w,
            "HP start until {} LP stream(s) suspended ({} process(es) through the daemon, or in this process), {} \
             samples, us: p50 / p99 / max",
            self.processes, self.processes, self.samples
        )?;
        #[allow(clippy::cast_precision_loss)] // ns of one run, far below 2^52
        let us = |ns: u64| ns as f64 / 1000.0;
        for s in &self.sides {
            let h = s.hp_start_ns;
            writeln!(
                w,
                "  {:<18}: {:9.1} / {:9.1} / {:9.1}",
                s.side,
                us(h.p50),
                us(h.p99),
                us(h.max)
            )?;
        }
        #[allow(clippy::cast_precision_loss)] // as above
        let d = |ns: i64| ns as f64 / 1000.0;
        writeln!(
            w,
            "  {:<18}: {:9.1} / {:9.1} (p50 and p99 differences)",
            "hop cost",
            d(self.hop_p50_ns),
            d(self.hop_p99_ns)
        )
    }
}

/// One CSV row per side.
#[derive(Debug, Serialize)]
pub struct CsvRow<'a> {
    pub device: &'a str,
    pub host_figures: bool,
    pub processes: u32,
    pub side: &'static str,
    pub samples: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

fn beside_me(name: &str) -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().context("the running executable")?;
    let p = exe.with_file_name(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(failed!(
            "--processes needs the scheduler daemon beside preempt-lat: no {} (build it: cargo build --release -p \
             preempt-sched)",
            p.display()
        ))
    }
}

fn summary(ns: &[u64]) -> Result<Summary, Error> {
    let mut r = Recorder::default();
    for &v in ns {
        r.record(v);
    }
    r.summary().ok_or_else(|| Error::msg("no sample"))
}

fn diff(a: u64, b: u64) -> i64 {
    i64::try_from(a).unwrap_or(i64::MAX) - i64::try_from(b).unwrap_or(i64::MAX)
}

/// The LP processes, killed (if still there) when dropped.
struct LpProcesses(Vec<Child>);

impl Drop for LpProcesses {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // Closing stdin ends them (they close their sessions); a kill is for one that hangs.
            drop(c.stdin.take());
        }
        for c in &mut self.0 {
            let end = std::time::Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `n` LP processes on `socket` and waits for each one's `ready`.
fn spawn_lp(n: u32, socket: &std::path::Path, o: &PriorityOptions, dev: &Device) -> Result<LpProcesses, Error> {
    let exe = std::env::current_exe().context("the running executable")?;
    let mut procs = LpProcesses(Vec::new());
    for _ in 0..n {
        let mut c = Command::new(&exe)
            .arg("__sched-lp")
            .arg("--socket")
            .arg(socket)
            .args(["--device", &dev.spec().to_string()])
            .args(["--mechanism", &o.common.mechanism.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting an LP process")?;
        let out = c.stdout.take().ok_or_else(|| Error::msg("the LP process's stdout"))?;
        procs.0.push(c);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        match rx.recv_timeout(READY) {
            Ok(l) if l.starts_with("ready") => {}
            Ok(l) => return Err(failed!("an LP process did not start: {:?}", l.trim())),
            Err(_) => return Err(failed!("an LP process did not say ready within {READY:?}")),
        }
    }
    Ok(procs)
}

/// `priority --processes n` on `dev`.
pub fn run(o: &PriorityOptions, dev: Device, n: u32) -> Outcome {
    let daemon_exe = beside_me("preempt-sched")?;
    crate::output::files::prepare(&o.out_dir)?;
    let src = dev.open_shared(o.common.mechanism, o.common.grace())?;
    let samples = o.hop_samples as usize;
    let opts = Options {
        host_workers: 1,
        ..Options::default()
    };
    // In-process: the helper suspends this session's own n streams.
    let s = src.session(opts.clone()).context("in-process session")?;
    for _ in 0..n {
        let lp = s.create_lp_stream(Level::Auto).map_err(Error::from)?;
        s.helper_register(&lp, 0).map_err(Error::from)?;
    }
    let local = time_enters(&s, samples, 0);
    s.close().context("closing the in-process session")?;
    let local = local?;

    // Across processes: the daemon, n LP processes, this process as the HP side.
    let daemon = Daemon::start(&daemon_exe)?;
    let lp = spawn_lp(n, daemon.socket(), o, &dev)?;
    let hp = src
        .session(Options {
            scheduler: Some(daemon.socket().to_path_buf()),
            scheduler_client: preempt_api::sched::hop::measuring_client(),
            ..opts
        })
        .context("HP session")?;
    let remote = time_enters(&hp, samples, n);
    hp.close().context("closing the HP session")?;
    drop(lp);
    drop(daemon);
    let remote = remote?;

    let (local, remote) = (summary(&local)?, summary(&remote)?);
    let result = ProcessesResult {
        env: crate::env::of_sessions(&src),
        processes: n,
        samples: o.hop_samples,
        hop_p50_ns: diff(remote.p50, local.p50),
        hop_p99_ns: diff(remote.p99, local.p99),
        sides: vec![
            Side {
                side: "in-process helper",
                hp_start_ns: local,
            },
            Side {
                side: "daemon",
                hp_start_ns: remote,
            },
        ],
    };
    crate::output::files::write_all(&o.out_dir, "priority-processes", &result)?;
    let mut out = std::io::stdout().lock();
    crate::output::export(o.format, &result, &mut out)
        .and_then(|()| out.flush())
        .context("writing the result")?;
    Ok(Verdict::Pass)
}

/// `__sched-lp`: a session scheduled by the daemon on `o.device`, one LP stream registered at
/// priority 0; `ready` on stdout, then until stdin closes.
pub fn lp_process(
    o: &SchedLpOptions,
    hip: impl FnOnce() -> crate::doctor::facts::Fact<crate::doctor::facts::HipInfo>,
) -> Outcome {
    let dev = crate::device::select(o.device, Some(o.workers), o.mechanism, hip)?;
    let src = dev.open_shared(o.mechanism, preempt_api::GracePeriod::Default)?;
    let s = src
        .session(Options {
            host_workers: o.workers as usize,
            scheduler: Some(o.socket.clone()),
            scheduler_client: preempt_api::sched::hop::measuring_client(),
            ..Options::default()
        })
        .map_err(Error::from)?;
    let lp = s.create_lp_stream(Level::Auto).map_err(Error::from)?;
    s.helper_register(&lp, 0).map_err(Error::from)?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready {}", std::process::id())
            .and_then(|()| out.flush())
            .map_err(|e| failed!("{e}"))?;
    }
    let mut sink = String::new();
    while std::io::stdin().read_line(&mut sink).map_err(|e| failed!("{e}"))? > 0 {
        sink.clear();
    }
    s.close().map_err(Error::from)?;
    Ok(Verdict::Pass)
}
