//! `preempt-sched-client`: a small client of the daemon on the host device, driven line by line
//! from stdin, for the crate's tests and for trying a daemon by hand (docs/scheduler-daemon.md).
//!
//! It opens a host session (`--device host:N`, default `host`) scheduled by the daemon (`Options::scheduler`: the client inside
//! preempt-api that C and Python sessions use too; with `--no-wait` a `SchedClient` started
//! beside an unscheduled session), creates `--lp` low-priority streams of `--workers` worker
//! processes each, registers them at `--priority`, prints
//! `ready pid=P streams=ID,.. workers=PID,..` and then answers one line per command:
//! `enter P` -> `entered scheduled=B suspended=N failed=N late=N us=T`, `leave P` -> `left`,
//! `held` -> `held N`, `connected` -> `connected B`, `stats` -> the link's counters,
//! `submit NS` -> `submitted` (a delay command of NS ns on every stream), `check` -> waits (at
//! most 60 s) until every stream is idle, then `check submitted=N exactly_once=N ok=B` (the
//! workers' own records over all streams), `quit` (or end of
//! input) closes the session and exits 0. A failure prints `error ...` (and the process goes on).
use clap::Parser;
use preempt_api::sched::{ClientOptions, SchedClient};
use preempt_api::{DeviceSpec, Level, Options, Session};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// A test and demonstration client of preempt-sched on the host device (commands on stdin).
#[derive(Parser, Debug)]
#[command(name = "preempt-sched-client")]
struct Args {
    /// The daemon's socket.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// The host device (`host` = `host:0`, `host:N`): the daemon schedules each device apart.
    #[arg(long, default_value = "host", value_parser = host_device)]
    device: DeviceSpec,
    /// Low-priority streams to create and register.
    #[arg(long, default_value_t = 1)]
    lp: usize,
    /// Worker processes per stream.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// The streams' priority.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i32,
    /// The client's lease (ms): see `ClientOptions::lease`.
    #[arg(long, default_value_t = 50)]
    lease_ms: u64,
    /// The longest wait on the daemon (ms): see `ClientOptions::reply_timeout` [default: 50,
    /// or $PREEMPT_SCHEDULER_TIMEOUT_MS].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=600_000))]
    timeout_ms: Option<u64>,
    /// Start even when no daemon answers (connect in the background).
    #[arg(long)]
    no_wait: bool,
    /// The client's name in the daemon's log.
    #[arg(long, value_name = "TEXT")]
    name: Option<String>,
}

/// `--device`: the API's device words, host devices only (this client runs host workers).
fn host_device(word: &str) -> Result<DeviceSpec, String> {
    match word.parse::<DeviceSpec>() {
        Ok(d) if d.is_host() => Ok(d),
        Ok(d) => Err(format!("{d} is not a host device (host or host:N)")),
        Err(e) => Err(e.to_string()),
    }
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            let text = e.to_string();
            eprintln!(
                "preempt-sched-client: {}",
                text.lines()
                    .next()
                    .unwrap_or("bad arguments")
                    .trim_start_matches("error: ")
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("preempt-sched-client: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let defaults = ClientOptions::default();
    let copts = ClientOptions {
        name: args
            .name
            .clone()
            .unwrap_or_else(|| format!("pid {} test client", std::process::id())),
        lease: Duration::from_millis(args.lease_ms.max(1)),
        reply_timeout: args.timeout_ms.map_or(defaults.reply_timeout, Duration::from_millis),
        ..defaults
    };
    let opts = Options {
        host_workers: args.workers.max(1),
        scheduler: (!args.no_wait).then(|| args.socket.clone()),
        scheduler_client: copts.clone(),
        ..Options::default()
    };
    let session = Session::open(args.device, opts)?;
    let streams = (0..args.lp)
        .map(|_| session.create_lp_stream(Level::Lv3))
        .collect::<Result<Vec<_>, _>>()?;
    let standalone;
    let sched = match session.scheduler() {
        Some(c) => c,
        None => {
            standalone = SchedClient::start(&args.socket, &session, copts)?;
            &standalone
        }
    };
    for s in &streams {
        sched.register(s, args.priority)?;
    }
    let ids: Vec<String> = streams.iter().map(|s| s.id().to_string()).collect();
    let pids: Vec<String> = streams
        .iter()
        .flat_map(|s| s.host_pids())
        .map(|p| p.to_string())
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "ready pid={} streams={} workers={}",
        std::process::id(),
        ids.join(","),
        pids.join(",")
    )?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut words = line.split_whitespace();
        let reply = match (words.next(), words.next().map(str::parse::<i64>)) {
            (Some("enter"), Some(Ok(p))) => {
                let t0 = Instant::now();
                match sched.enter(i32::try_from(p)?) {
                    Ok(e) => format!(
                        "entered scheduled={} suspended={} failed={} late={} us={}",
                        e.scheduled,
                        e.suspended,
                        e.failed,
                        e.late,
                        t0.elapsed().as_micros()
                    ),
                    Err(e) => format!("error {e}"),
                }
            }
            (Some("leave"), Some(Ok(p))) => match sched.leave(i32::try_from(p)?) {
                Ok(()) => "left".into(),
                Err(e) => format!("error {e}"),
            },
            (Some("submit"), Some(Ok(ns))) => {
                let ns = u64::try_from(ns)?;
                match streams.iter().try_for_each(|s| s.submit_delay(ns).map(drop)) {
                    Ok(()) => "submitted".into(),
                    Err(e) => format!("error {e}"),
                }
            }
            (Some("check"), None) => check(&streams),
            (Some("held"), None) => format!("held {}", sched.held().len()),
            (Some("connected"), None) => format!("connected {}", sched.connected()),
            (Some("stats"), None) => format!("stats {:?}", sched.stats()),
            (Some("quit"), None) => break,
            _ => format!("error unknown command {line:?}"),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    session.close()?;
    Ok(())
}

/// The exactly-once check over every stream, once they are idle.
fn check(streams: &[std::sync::Arc<preempt_api::LpStream>]) -> String {
    let (mut submitted, mut once, mut ok) = (0, 0, true);
    for s in streams {
        if let Err(e) = s.wait_idle_for(Duration::from_secs(60)) {
            return format!("error {e}");
        }
        match s.check() {
            Ok(c) => {
                submitted += c.submitted;
                once += c.exactly_once;
                ok &= c.ok();
            }
            Err(e) => return format!("error {e}"),
        }
    }
    format!("check submitted={submitted} exactly_once={once} ok={ok}")
}
