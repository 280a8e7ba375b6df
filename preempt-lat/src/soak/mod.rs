//! `preempt-lat soak`: the seeds' stability item. Two experiments run in turn for a long time
//! (an hour by default), in one process on a device opened once, as a scheduler serving for
//! hours would: 7.2.1's priority load in lv3 mode, and 8.3.1's HP client against an LP client
//! under hpf, each window in sessions of its own. After every window the series gets the
//! window's HP P50/P99, its exactly-once check, and what this process holds (RSS, open
//! descriptors, threads); at the end, the drift ([`drift`]): P99 of the last third of each
//! experiment's windows against the first third, and growth since the second window (not after a
//! stop, whose window was cut short). Growth in descriptors or threads, RSS past its bound, or an
//! LP command not done exactly once is a FAIL (exit status 3); the P99 drift is reported, not
//! judged: the seeds name no bound for it (`report` judges the problems, none allowed).
pub mod drift;
pub mod process;
mod report;

use crate::device::Device;
use crate::env::Environment;
use crate::error::{Context, Error, failed};
use crate::exit::{Outcome, Verdict};
use crate::measure::control::stop_requested;
use crate::num::ms;
use crate::options::{Mode, PriorityOptions, SoakOptions};
use crate::schedule::Experiment;
use crate::trace::Trace;
use drift::{HeldDrift, Kind, LatencyDrift, Window};
use preempt_api::SharedDevice;
use serde::Serialize;
use std::io::Write;
use std::time::Instant;

/// What defines a soak (written into every output).
#[derive(Debug, Clone, Serialize)]
pub struct SoakParams {
    pub minutes: f64,
    pub window_s: f64,
    pub windows: u32,
    pub rss_growth_mib: f64,
    pub priority_preset: &'static str,
    pub classes_preset: &'static str,
    /// LP workers per stream (host device).
    pub workers: u32,
    pub seed: u64,
}

/// The result of `preempt-lat soak`.
#[derive(Debug, Clone, Serialize)]
pub struct SoakResult {
    pub params: SoakParams,
    pub env: Environment,
    pub windows: Vec<Window>,
    pub p99_drift: Vec<LatencyDrift>,
    pub held_drift: Option<HeldDrift>,
    /// What failed the soak (empty: it passed).
    pub problems: Vec<String>,
    pub interrupted: bool,
    pub wall_time_s: f64,
}

/// One window's figures: HP requests, P50 and P99 in ms, the exactly-once verdict.
type Figures = (u64, Option<f64>, Option<f64>, Option<bool>);

/// The experiments of the windows, set up once.
struct Experiments {
    priority: PriorityOptions,
    classes: Experiment,
    workers: u32,
}

impl Experiments {
    fn window(&self, kind: Kind, src: &SharedDevice) -> Result<Figures, Error> {
        match kind {
            Kind::Priority => {
                let r = crate::priority::measure(&self.priority, &[Mode::Lv3], self.workers, src, &mut Trace::off())?;
                let m = r.modes.first().ok_or_else(|| failed!("the lv3 mode did not run"))?;
                let lat = m.hp_latency_ns;
                let correct = m.correctness.as_ref().and_then(|c| c.ok);
                Ok((m.hp_requests, lat.map(|s| ms(s.p50)), lat.map(|s| ms(s.p99)), correct))
            }
            Kind::Classes => {
                let r = crate::schedule::run_experiment(&self.classes, src)?;
                let hp = r
                    .classes
                    .first()
                    .ok_or_else(|| failed!("the class experiment ran no class"))?;
                let lat = hp.latency_ns;
                Ok((hp.finished, lat.map(|s| ms(s.p50)), lat.map(|s| ms(s.p99)), r.verdict()))
            }
        }
    }
}

/// Runs the soak of `o` on `dev`; writes soak.{csv,json} into --out-dir (also when a window
/// failed to run: what came before it is kept) and the result on stdout in --format.
pub fn run(o: &SoakOptions, dev: Device) -> Outcome {
    let workers = dev.priority_workers(o.common.workers);
    let x = Experiments {
        priority: o.window_options(Kind::Priority.preset())?,
        classes: Experiment::of_priority(&o.window_options(Kind::Classes.preset())?, workers),
        workers,
    };
    if !dev.is_host() {
        crate::schedule::check_slots(&x.classes)?;
    }
    let src = dev.open_shared(o.common.mechanism, o.common.grace())?;
    crate::output::files::prepare(&o.out_dir)?;
    let n = o.windows();
    if !o.common.quiet {
        eprintln!(
            "soak: {n} windows of {} s ({} min), {} (lv3) and {} in turn ({})",
            o.window_s,
            o.minutes,
            Kind::Priority.preset().name(),
            Kind::Classes.preset().name(),
            src.label()
        );
    }
    let start = Instant::now();
    let mut windows = Vec::new();
    let mut broke: Option<Error> = None;
    for index in 0..n {
        if stop_requested() {
            break;
        }
        let kind = if index % 2 == 0 { Kind::Priority } else { Kind::Classes };
        let start_s = start.elapsed().as_secs_f64();
        let figures = x
            .window(kind, &src)
            .with_context(|| format!("window {index} ({})", kind.name()));
        let (hp_requests, hp_p50_ms, hp_p99_ms, correct) = match figures {
            Ok(f) => f,
            Err(e) => {
                broke = Some(e);
                break;
            }
        };
        let held = process::held().with_context(|| format!("after window {index}"))?;
        let w = Window {
            index,
            kind,
            preset: kind.preset().name(),
            start_s,
            duration_s: start.elapsed().as_secs_f64() - start_s,
            hp_requests,
            hp_p50_ms,
            hp_p99_ms,
            correct,
            held,
        };
        if !o.common.quiet {
            eprintln!("soak: {}", report::progress(&w, n));
        }
        windows.push(w);
    }
    // A stop cuts its window short, with the stop's own thread still running: what the process
    // holds then says nothing about growth.
    let interrupted = stop_requested();
    let held_drift = if interrupted { None } else { drift::held(&windows) };
    let mut problems = drift::problems(
        &windows,
        held_drift.as_ref(),
        crate::num::round_u64(o.rss_growth_mib * 1024.0),
    );
    if let Some(e) = &broke {
        problems.push(format!("stopped early: {e}"));
    }
    let result = SoakResult {
        params: SoakParams {
            minutes: o.minutes,
            window_s: o.window_s,
            windows: n,
            rss_growth_mib: o.rss_growth_mib,
            priority_preset: Kind::Priority.preset().name(),
            classes_preset: Kind::Classes.preset().name(),
            workers,
            seed: o.common.seed,
        },
        env: crate::env::of_sessions(&src),
        p99_drift: [Kind::Priority, Kind::Classes]
            .into_iter()
            .filter_map(|k| drift::latency(&windows, k))
            .collect(),
        held_drift,
        problems,
        interrupted,
        wall_time_s: start.elapsed().as_secs_f64(),
        windows,
    };
    crate::output::files::write_all(&o.out_dir, "soak", &result)?;
    let mut out = std::io::stdout().lock();
    crate::output::export(o.format, &result, &mut out)
        .and_then(|()| out.flush())
        .context("writing the result")?;
    if let Some(e) = broke {
        return Err(e.into());
    }
    for p in &result.problems {
        eprintln!("preempt-lat: soak FAILED: {p}");
    }
    Ok(Verdict::from_ok(result.problems.is_empty()))
}
