//! preempt-lat: preemption latency of GPU compute queues on AMD GPUs, and of the host device.
//!
//! No `unsafe` here: the HIP binding (with its FFI) is the `hip-rt` crate, the GPU device `gpu-device`.
#![deny(unsafe_code)]

/// `eprintln!` for this crate, shadowing std's (defined before the modules, so that all of them
/// use it): an error writing to stderr is ignored. std's panics on it, and a broken stderr (as
/// `2>&1 | head -1` leaves it) then ended a run mid-way with exit 101 and its result unwritten.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod arrivals;
mod bystander;
mod device;
mod doctor;
mod env;
mod gpu;
mod host_direct;
mod launcher_cost;
mod measure;
mod measure_on;
mod output;
mod overhead;
mod priority;
mod schedule;
mod soak;
mod stage;
mod stats;
mod sweep;
mod trace;
mod validate;

// The command line's shared parts (preempt-cli) and the acceptance harness and report
// (preempt-acceptance), under the names the modules use (`crate::error::Context`).
use preempt_acceptance::{acceptance, report, targets};
use preempt_cli::{atomic_file, error, exit, num, options, plot};

use clap::{CommandFactory, Parser, error::ErrorKind};
use doctor::facts::{Fact, HipInfo};
use error::{Context, usage};
use exit::{Failure, Outcome, Verdict};
use options::{Cli, Command, Common, Sweep};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // --help and --version: clap prints them on stdout and exits 0.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => usage_error(&clap_error_line(&e)),
    };
    let command = match cli.checked() {
        Ok(c) => c,
        Err(e) => usage_error(&e.to_string()),
    };
    if let Command::BystanderWorker(o) = &command {
        return match bystander::worker::main(o) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("preempt-lat bystander worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Before any thread exists: Ctrl-C/SIGTERM only raise a flag (see measure::control).
    measure::control::install_stop_on_signals();
    // A stage of `acceptance` (its child): SIGTERM when the acceptance run dies.
    if let Err(e) = acceptance::runner::adopt_parent() {
        eprintln!("preempt-lat: {e}");
        return ExitCode::FAILURE;
    }
    // What the libraries report from drops and retries (they never print themselves).
    kfd::events::set_handler(|e| eprintln!("preempt-lat: {e}"));
    match dispatch(command) {
        Ok(v) => exit::code(v),
        Err(Failure::Usage(msg)) => usage_error(&msg),
        Err(Failure::Error(e)) => {
            eprintln!("preempt-lat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Bad input: one line on stderr and exit status 2, before anything starts (`--help` teaches
/// the rest).
fn usage_error(msg: &str) -> ! {
    eprintln!("preempt-lat: {msg}");
    std::process::exit(2)
}

/// clap's error as one line: its first line without the `error: ` prefix; a command given
/// without the subcommand it needs (`sweep`) names the ones it takes.
fn clap_error_line(e: &clap::Error) -> String {
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let root = Cli::command();
        let sub = args.iter().find_map(|a| root.find_subcommand(a));
        return match sub {
            Some(c) => {
                let names: Vec<&str> = c.get_subcommands().map(clap::Command::get_name).collect();
                format!(
                    "{} needs a subcommand: {} (see preempt-lat {} --help)",
                    c.get_name(),
                    names.join(", "),
                    c.get_name()
                )
            }
            None => "a subcommand or an option is needed (see preempt-lat --help)".into(),
        };
    }
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

fn dispatch(command: Command) -> Outcome {
    let stdout = || std::io::stdout().lock();
    let select = |c: &Common| device::select(c.device, c.workers, c.mechanism, hip_facts);
    match command {
        Command::Run(o) => run(&o, || select(&o.common)),
        Command::Doctor(o) => {
            doctor::run(&o, hip_facts(), &mut stdout()).context("writing the report")?;
            Ok(Verdict::Pass)
        }
        Command::Validate(o) => validate::run(&o, hip_facts(), &mut stdout()),
        Command::Sweep(Sweep::T(o)) => sweep::t(&o, select(&o.common)?),
        Command::Sweep(Sweep::State(o)) => sweep::state(&o, select(&o.common)?),
        Command::Sweep(Sweep::Threshold(o)) => sweep::threshold(&o, select(&o.common)?),
        Command::Sweep(Sweep::Rate(o)) => schedule::rate::run(&o, select(&o.common)?),
        Command::LauncherCost(o) => {
            let dev = device::select(o.device, o.workers, preempt_api::MechanismChoice::Auto, hip_facts)?;
            launcher_cost::run(&o, dev)
        }
        // The class experiment (hpf over --class too) or priority's modes (hpf alone).
        Command::Priority(o) if o.runs_classes() => schedule::run(&o, select(&o.common)?),
        Command::Priority(o) => priority::run(&o, select(&o.common)?),
        Command::Report(o) => report::run(&o),
        Command::Acceptance(o) => acceptance::run(&o, env::git_revision()),
        Command::AcceptanceStage(o) => stage::run(&o, hip_facts),
        Command::BystanderWorker(_) => {
            unreachable!("handled in main before any thread starts")
        }
        Command::Overhead(o) => overhead::run(&o, select(&o.common)?),
        Command::SchedLp(o) => priority::processes::lp_process(&o, hip_facts),
        Command::Soak(o) => soak::run(&o, select(&o.common)?),
    }
}

fn run(o: &options::RunOptions, select: impl FnOnce() -> Result<device::Device, Failure>) -> Outcome {
    // The outputs first, before the device is chosen: an unwritable path is a usage error before
    // anything runs, and --out replaces a previous result only once the new one is complete.
    let cannot =
        |what: &str, p: &std::path::Path, e: std::io::Error| usage!("{what} {}: cannot write: {e}", p.display());
    let out = match &o.out {
        Some(p) => Some(atomic_file::AtomicFile::create(p).map_err(|e| cannot("--out", p, e))?),
        None => None,
    };
    if let Some(t) = &o.trace {
        drop(atomic_file::AtomicFile::create(t).map_err(|e| cannot("--trace", t, e))?);
    }
    let dev = select()?;
    dev.check_level(o.level)?;
    let lp_state = dev.lp_state(o.lp.lp_state)?;
    let p = measure::Params::new(o.level, o.t_ms, lp_state, o.samples, o.warmup, &o.common, dev.workers());
    let r = dev.measure(&p, o.common.mechanism, o.common.quiet)?;
    let written = match out {
        Some(mut f) => output::export(o.format, &r, &mut f).and_then(|()| f.commit()),
        None => output::export(o.format, &r, &mut std::io::stdout().lock()),
    };
    // The trace is written even if the result could not be (stdout closed or full): one output
    // lost is not both.
    let traced = o.trace.as_ref().map_or(Ok(()), |t| {
        let note = if r.env.host_figures {
            "preempt-lat on the host device: host figures, not GPU figures"
        } else {
            "preempt-lat on a GPU: host-side stamps (the GPU's own stamps are not on this timeline)"
        };
        trace::write_file(&r.timeline.trace(p.level, &r.env.device), note, t)
    });
    if let (Err(e), Err(_)) = (&traced, &written) {
        eprintln!("preempt-lat: {e}");
    }
    written.context("writing the result")?;
    traced?;
    if r.correctness.failed() {
        eprintln!("preempt-lat: correctness check FAILED: some LP command did not complete exactly once");
    }
    // Not checked (a stop abandoned LP commands) is not a failure: the output says it.
    Ok(Verdict::from_ok(!r.correctness.failed()))
}

/// Asks the HIP runtime (loaded at run time) what doctor reports about it.
fn hip_facts() -> Fact<HipInfo> {
    let info = gpu_device::hip_rt::Hip::load().and_then(|h| {
        Ok(HipInfo {
            library: h.library_path().to_string(),
            origin: h.library_origin().to_string(),
            runtime_version: h.runtime_version()?,
            devices: Fact::from_result(h.device_count()),
        })
    });
    Fact::from_result(info)
}
