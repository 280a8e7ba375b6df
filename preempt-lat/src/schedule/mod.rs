//! `preempt-lat priority --policy up|kedf|laxity`, and `--policy hpf` with `--class`: the
//! scheduling experiment of XSched's evaluation over *classes* (queues), each an LP stream of one
//! application-API session with its own arrivals (fixed, Poisson, log-normal; or saturating),
//! driven by a policy of the `policies` crate: utilization partition (`--shares 75:25`: Fig. 9
//! bottom), K earliest deadlines first (Fig. 15b), least laxity (8.2.1), highest priority first
//! over the classes' `prio=` (Example 5's high, normal and low). Per class: request latency
//! percentiles, throughput, device share achieved (and asked, for up), late requests (kedf), the
//! exactly-once check; combined throughput; with `--standalone`, each class alone first and the
//! loss against it ([`mod@standalone`]). Host device and GPU through the same session API (the
//! GPU path is written for hardware and has not run on one). `--policy hpf` (the default) without
//! `--class` is `priority`'s own mode comparison (`main` picks by
//! [`PriorityOptions::runs_classes`]).
//!
//! One run is [`run_experiment`] over an [`Experiment`]: `priority` runs one, `sweep rate`
//! ([`rate`]) one per offered rate.
mod engine;
mod policy;
pub mod rate;
mod result;
mod standalone;

use crate::device::Device;
use crate::error::{Context, Error, failed};
use crate::exit::{Outcome, Verdict};
use crate::options::class::ClassSpec;
use crate::options::{Arrival, Lv1Options, PolicyKind, PriorityOptions, SweepRateOptions};
use preempt_api::Options;
use preempt_api::SharedDevice;
pub use result::ScheduleResult;
use std::io::Write;

/// One run of the class experiment, whoever asked for it (`priority --class`, each point of
/// `sweep rate`).
#[derive(Debug, Clone)]
pub struct Experiment {
    pub policy: PolicyKind,
    pub classes: Vec<ClassSpec>,
    /// kedf: how many classes run at once.
    pub k: usize,
    /// up: the round the slices add up to.
    pub round_ms: f64,
    pub arrival: Arrival,
    pub sigma: f64,
    pub duration_s: f64,
    pub lv1: Lv1Options,
    /// Class `i`'s arrivals are seeded with `seed + i`.
    pub seed: u64,
    /// Worker processes per class (host device; 0 on a GPU).
    pub workers: u32,
    /// Run each class alone first (same arrivals, same duration) and compare.
    pub standalone: bool,
    /// The `--preset` it was asked as (the test plan's section), recorded for the judge.
    pub preset: Option<&'static str>,
}

/// The experiment of `classes` with `workers` per class, the rest as options `$o` ask for:
/// `priority` and `sweep rate` name the class experiment's options alike.
macro_rules! experiment_of {
    ($o:expr, $classes:expr, $workers:expr) => {
        Experiment {
            policy: $o.policy,
            classes: $classes,
            k: $o.k,
            round_ms: $o.round_ms,
            arrival: $o.arrival,
            sigma: $o.sigma,
            duration_s: $o.duration_s,
            lv1: $o.common.lv1,
            seed: $o.common.seed,
            workers: $workers,
            standalone: $o.standalone,
            preset: $o.preset_name(),
        }
    };
}

impl Experiment {
    /// The experiment `priority --class` (or `--shares`) asks for, with `workers` per class.
    pub fn of_priority(o: &PriorityOptions, workers: u32) -> Self {
        experiment_of!(o, o.class_specs(), workers)
    }

    /// The experiment `sweep rate` runs at one rate: `classes` (its template at that rate), with
    /// `workers` per class.
    pub fn of_sweep(o: &SweepRateOptions, classes: Vec<ClassSpec>, workers: u32) -> Self {
        experiment_of!(o, classes, workers)
    }

    /// Class `i` alone: the same arrivals (its seed kept), duration and policy.
    pub fn alone(&self, i: usize) -> Experiment {
        Experiment {
            classes: vec![self.classes[i].clone()],
            seed: self.seed.wrapping_add(u64::try_from(i).unwrap_or(0)),
            standalone: false,
            ..self.clone()
        }
    }
}

/// One run of `x` on a session opened from `src` (every class alone first with
/// [`Experiment::standalone`], each in a session of its own). Writes nothing; the caller
/// reports it.
pub fn run_experiment(x: &Experiment, src: &SharedDevice) -> Result<ScheduleResult, Error> {
    if !x.standalone {
        return run_once(x, src);
    }
    let mut alone = Vec::new();
    for i in 0..x.classes.len() {
        if crate::measure::control::stop_requested() {
            break;
        }
        alone.push(run_once(&x.alone(i), src)?);
    }
    let mut r = run_once(x, src)?;
    if alone.len() == x.classes.len() {
        standalone::compare(&mut r, &alone);
    }
    Ok(r)
}

/// When class `i`'s requests arrive in a run of `duration_ns`: seeded with `seed + i`.
fn arrivals_of(x: &Experiment, i: usize, duration_ns: u64) -> crate::arrivals::Arrivals {
    let seed = x.seed.wrapping_add(u64::try_from(i).unwrap_or(0));
    crate::arrivals::Arrivals::new(x.arrival, x.sigma, x.classes[i].rate, duration_ns, seed)
}

/// One run of `x` (no runs alone).
fn run_once(x: &Experiment, src: &SharedDevice) -> Result<ScheduleResult, Error> {
    let specs = &x.classes;
    // The commands refuse a bad policy before anything starts: here it would be a bug.
    let (policy, params) = policy::of(x.policy, specs, x.k, x.round_ms).map_err(|e| failed!("{e}"))?;
    let t_start = std::time::Instant::now();
    let duration_ns = crate::num::round_u64(x.duration_s * 1e9);
    let lv1 = lv1::Config::new(x.lv1.threshold as usize, x.lv1.batch as usize)?;
    let session = src
        .session(Options {
            lv1,
            lv1_no_wait: true,
            keep_records: true,
            host_workers: x.workers as usize,
            gpu_slots: slots_per_stream(x),
            policy: Some(policy),
            ..Options::default()
        })
        .context("session")?;
    let arrivals = |i: usize| arrivals_of(x, i, duration_ns);
    let run = engine::run(
        &session,
        specs,
        &params,
        duration_ns,
        x.lv1.threshold as usize,
        arrivals,
    );
    let checked = run.and_then(|out| result::check_classes(&session, &out).map(|checks| (out, checks)));
    let closed = session.close();
    let (out, checks) = checked?;
    closed.context("closing the session")?;
    Ok(ScheduleResult::new(
        x,
        crate::env::of_sessions(src),
        &session,
        out,
        checks,
        t_start.elapsed(),
    ))
}

/// GPU command slots each class's stream books (every stream of a session books as many): the
/// most commands one class can submit in the run, with a fifth more and room for the backlog.
fn slots_per_stream(x: &Experiment) -> usize {
    let most = x
        .classes
        .iter()
        .map(|c| {
            if c.saturates() {
                x.duration_s * 1000.0 / c.t_ms + 64.0
            } else {
                (c.rate * x.duration_s + 1.0) * f64::from(c.cmds)
            }
        })
        .fold(0.0, f64::max);
    usize::try_from(crate::num::round_u64(most * 1.2)).unwrap_or(usize::MAX)
}

/// The most GPU memory the class experiment's command slots may take in all (1 GiB): past it the
/// run is refused up front instead of failing to allocate, or starving the GPU, midway.
const MAX_SLOT_BYTES: usize = 1 << 30;

/// `Usage` if the experiment's streams would book more than [`MAX_SLOT_BYTES`] of slots.
pub fn check_slots(x: &Experiment) -> Result<(), crate::exit::Failure> {
    let per = slots_per_stream(x);
    let bytes = per
        .saturating_mul(x.classes.len())
        .saturating_mul(gpu_device::kernel::SLOT_BYTES);
    if bytes > MAX_SLOT_BYTES {
        return Err(crate::exit::Failure::Usage(format!(
            "the class experiment would book {per} command slots per class on the GPU ({} MiB in all, at most {} \
             MiB): shorten --duration-s or lower the rates",
            bytes >> 20,
            MAX_SLOT_BYTES >> 20
        )));
    }
    Ok(())
}

/// Runs the class experiment of `o` on `dev`: one session, one LP stream per class (and each
/// class alone first with `--standalone`); writes schedule.{csv,json} into --out-dir and the
/// result on stdout in --format.
pub fn run(o: &PriorityOptions, dev: Device) -> Outcome {
    let x = Experiment::of_priority(o, dev.priority_workers(o.common.workers));
    // The policy first: a class it cannot take is refused before anything starts.
    policy::of(x.policy, &x.classes, x.k, x.round_ms)?;
    if !dev.is_host() {
        check_slots(&x)?;
    }
    let src = dev.open_shared(o.common.mechanism, o.common.grace())?;
    crate::output::files::prepare(&o.out_dir)?;
    if !o.common.quiet {
        eprintln!(
            "priority: --policy {} over {} classes for {} s{} ({})",
            o.policy.name(),
            x.classes.len(),
            o.duration_s,
            if x.standalone { ", each class alone first" } else { "" },
            src.label()
        );
    }
    let r = run_experiment(&x, &src)?;
    crate::output::files::write_all(&o.out_dir, "schedule", &r)?;
    let mut stdout = std::io::stdout().lock();
    crate::output::export(o.format, &r, &mut stdout)
        .and_then(|()| stdout.flush())
        .context("writing the result")?;
    if !r.correct() {
        eprintln!("preempt-lat: correctness check FAILED: some command did not complete exactly once");
    }
    Ok(Verdict::from_ok(r.correct()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// K-EDF (K = 1) over `classes` for 10 s, Poisson arrivals.
    fn kedf(classes: [&str; 2]) -> Experiment {
        Experiment {
            policy: PolicyKind::Kedf,
            classes: classes.map(|c| crate::options::class::parse(c).unwrap()).to_vec(),
            k: 1,
            round_ms: 10.0,
            arrival: Arrival::Poisson,
            sigma: 2.0,
            duration_s: 10.0,
            lv1: Lv1Options { threshold: 8, batch: 4 },
            seed: 7,
            workers: 1,
            standalone: false,
            preset: None,
        }
    }

    #[test]
    fn gpu_slots_are_the_busiest_class_s_and_bounded() {
        let mut x = kedf(["a:rate=100:deadline=5", "b:rate=10:deadline=9"]);
        // a: (100/s x 10 s + 1) x 1 command, a fifth more; b's fewer do not add to it.
        assert_eq!(slots_per_stream(&x), 1201);
        assert!(check_slots(&x).is_ok());
        x.duration_s = 600.0;
        x.classes[0] = crate::options::class::parse("a:rate=100000:deadline=5").unwrap();
        let Err(crate::exit::Failure::Usage(m)) = check_slots(&x) else {
            panic!("72 M slots per class accepted");
        };
        assert!(
            m.contains("shorten --duration-s or lower the rates") && !m.contains('\n'),
            "{m}"
        );
    }

    #[test]
    fn a_class_alone_keeps_its_arrivals() {
        let x = Experiment {
            arrival: Arrival::Lognormal,
            duration_s: 1.0,
            standalone: true,
            ..kedf(["a:rate=50:deadline=5", "b:rate=80:deadline=9"])
        };
        let b = x.alone(1);
        assert_eq!(b.classes, [x.classes[1].clone()]);
        assert!(!b.standalone, "a class alone is not compared again");
        // Alone, as class 0, b draws the arrivals it draws as class 1 beside a.
        let second = 1_000_000_000;
        let times = |x: &Experiment, i| arrivals_of(x, i, second).collect::<Vec<u64>>();
        assert!(!times(&x, 1).is_empty());
        assert_eq!(times(&b, 0), times(&x, 1));
        assert_ne!(times(&x.alone(0), 0), times(&x, 1));
    }
}
