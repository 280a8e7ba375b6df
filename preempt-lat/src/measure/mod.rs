//! One preempt-lat measurement: LP delay commands of T, HP requests at random moments,
//! suspend / HP probe / resume per sample, and the correctness check at the end.
pub mod abandon;
pub mod control;
pub mod once;
pub mod rng;
pub mod samples;
pub mod settle;
pub mod timeline;

use crate::options::{Common, Level, LpState};
use crate::stats::Summary;
use preempt_api::GracePeriod;
use serde::Serialize;

/// Everything that defines a run (written into every output): the options of one point of a
/// run or sweep, resolved for the device (LP state, workers, grace period). Owned: it is the
/// run's record, cloned into its result.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// Lv1 or Lv3 (the options refuse `auto`: a measurement names its level); written as its
    /// number.
    pub level: Level,
    pub t_ms: f64,
    /// The GPU's LP kernel (`light` or `heavy`); `None` (JSON null, CSV empty, text "n.a.") on the
    /// host device, whose LP commands have no GPU wave state.
    #[serde(serialize_with = "lp_state_name")]
    pub lp_state: Option<LpState>,
    pub samples: u32,
    pub warmup: u32,
    pub threshold: u32,
    pub batch: u32,
    pub seed: u64,
    pub workers: u32,
    /// The random gap before each HP request, in multiples of T: uniform in [lo, hi).
    pub gap_t: (f64, f64),
    /// The grace period Lv3 asked for (`--grace`; what applied is `Environment::grace_period`).
    pub grace: GracePeriod,
}

impl Params {
    /// The random gap before each HP request, in multiples of T.
    pub const GAP_T: (f64, f64) = (1.0, 3.0);

    /// A run's parameters from the shared options; `workers` is the host device's LP workers
    /// (0 on a GPU), `lp_state` the GPU's LP kernel (`None` on the host device).
    pub fn new(
        level: Level,
        t_ms: f64,
        lp_state: Option<LpState>,
        samples: u32,
        warmup: u32,
        c: &Common,
        workers: u32,
    ) -> Self {
        Params {
            level,
            t_ms,
            lp_state,
            samples,
            warmup,
            threshold: c.lv1.threshold,
            batch: c.lv1.batch,
            seed: c.seed,
            workers,
            gap_t: Self::GAP_T,
            grace: c.grace(),
        }
    }

    /// LP commands a GPU run may submit in all (the slots it allocates): per sample, the gap (in
    /// T), a drained threshold, and 2 ms of host overhead in units of T; twice that, plus the
    /// keep-ahead, capped at 4 Mi commands.
    pub fn gpu_budget(&self) -> u64 {
        gpu_device::setup::command_budget(
            self.warmup + self.samples,
            self.gap_t.1,
            self.threshold,
            self.t_ms,
            samples::keep_ahead(self),
        )
    }
}

/// Where a device's notes and warnings during a run go: stderr, notes only unless `quiet`.
pub struct Stderr {
    pub quiet: bool,
}

impl preempt_api::latency::Reporter for Stderr {
    fn note(&self, msg: &str) {
        if !self.quiet {
            eprintln!("preempt-lat: {msg}");
        }
    }
    fn warn(&self, msg: &str) {
        eprintln!("preempt-lat: WARNING: {msg}");
    }
}

/// The LP state's name, or null.
fn lp_state_name<S: serde::Serializer>(v: &Option<LpState>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(state) => s.serialize_str(state.name()),
        None => s.serialize_none(),
    }
}

// The LP kernel and the achieved T are what the device says of a run (preempt-api's latency
// layer); the result records them as they are.
pub use preempt_api::latency::{AchievedT, LpKernel};

/// One preemption, in nanoseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Suspend call until the LP queue runs nothing.
    pub suspend_ns: u64,
    /// Lv3 on a GPU: the preempting ioctl alone, within `suspend_ns` (dbg-trap's suspend also
    /// takes a queue snapshot; the difference is that extra work). `None` elsewhere.
    pub preempt_call_ns: Option<u64>,
    /// HP request until the HP probe started.
    pub hp_start_ns: u64,
    /// Resume call until it returned.
    pub resume_ns: u64,
}

/// Did every LP command complete exactly once, with the right result?
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Correctness {
    /// The commands checked: every one submitted, or after a stop every one launched (those
    /// not launched yet are dropped then, never run, and not counted).
    pub submitted: u64,
    pub completed_once: u64,
    pub missing: Vec<u64>,
    pub duplicated: Vec<u64>,
    pub failed: Vec<u64>,
    pub wrong_result: Vec<u64>,
    /// The verdict: `None` (JSON null, an empty CSV cell, text "not checked") when a stop
    /// abandoned commands still running, so that the check could not be complete; it is then
    /// neither a pass nor a failure, and the lists are empty.
    pub ok: Option<bool>,
    /// LP commands a first Ctrl-C (SIGTERM, SIGHUP) abandoned: still running when the bounded
    /// close after the stop ended (host workers killed; a GPU runs them out). 0 otherwise.
    pub abandoned: u64,
}

impl Correctness {
    /// Checks completions (ids, in any order) and per-command device records against the
    /// ids 0..submitted. `records_per_cmd` is how many device records one command yields.
    pub fn check(submitted: u64, completions: &[(u64, bool)], records: &[(u64, bool)], records_per_cmd: usize) -> Self {
        // Commands this process submitted: they fit in memory, so the count fits a usize.
        let n = usize::try_from(submitted).unwrap_or(usize::MAX);
        let slot = |id: u64| usize::try_from(id).unwrap_or(usize::MAX);
        let mut seen = vec![0u32; n];
        let mut failed = Vec::new();
        let mut extra = Vec::new();
        for &(id, ok) in completions {
            match seen.get_mut(slot(id)) {
                Some(c) => *c += 1,
                None => extra.push(id),
            }
            if !ok {
                failed.push(id);
            }
        }
        let mut rec = vec![0usize; n];
        let mut wrong_result = Vec::new();
        for &(id, correct) in records {
            if let Some(c) = rec.get_mut(slot(id)) {
                *c += 1;
            }
            if !correct {
                wrong_result.push(id);
            }
        }
        let missing: Vec<u64> = (0..n)
            .filter(|&i| seen[i] == 0 || rec[i] < records_per_cmd)
            .map(|i| i as u64)
            .collect();
        let mut duplicated: Vec<u64> = (0..n)
            .filter(|&i| seen[i] > 1 || rec[i] > records_per_cmd)
            .map(|i| i as u64)
            .collect();
        duplicated.extend(extra);
        wrong_result.dedup();
        let completed_once = seen.iter().filter(|&&c| c == 1).count() as u64;
        let ok = missing.is_empty() && duplicated.is_empty() && failed.is_empty() && wrong_result.is_empty();
        Correctness {
            submitted,
            completed_once,
            missing,
            duplicated,
            failed,
            wrong_result,
            ok: Some(ok),
            abandoned: 0,
        }
    }

    /// The check that could not be made: a stop abandoned `abandoned` of the `submitted`
    /// commands launched while they ran; `completed_once` is then the rest, the commands whose
    /// completion the launcher saw (not checked further).
    pub fn not_checked(submitted: u64, abandoned: u64) -> Self {
        Correctness {
            submitted,
            completed_once: submitted.saturating_sub(abandoned),
            missing: Vec::new(),
            duplicated: Vec::new(),
            failed: Vec::new(),
            wrong_result: Vec::new(),
            ok: None,
            abandoned,
        }
    }

    /// This check, or [`Correctness::not_checked`] when commands were abandoned.
    pub fn unless_abandoned(self, abandoned: u64) -> Self {
        match abandoned {
            0 => self,
            n => Self::not_checked(self.submitted, n),
        }
    }

    /// The check was made and found a command lost, duplicated, failed or wrong.
    pub fn failed(&self) -> bool {
        self.ok == Some(false)
    }

    /// Several runs' checks in a word: `FAILED` if one failed, else `not checked (interrupted)`
    /// if one could not be made, else `OK`.
    pub fn word_for<'a>(checks: impl IntoIterator<Item = &'a Correctness> + Clone) -> &'static str {
        if checks.clone().into_iter().any(Correctness::failed) {
            "FAILED"
        } else if checks.into_iter().any(|c| c.ok.is_none()) {
            "not checked (interrupted)"
        } else {
            "OK"
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Summaries {
    pub suspend: Option<Summary>,
    /// The preempting call alone (Lv3 on a GPU; see [`Sample::preempt_call_ns`]).
    pub preempt_call: Option<Summary>,
    pub hp_start: Option<Summary>,
    pub resume: Option<Summary>,
}

/// The result of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub params: Params,
    pub env: crate::env::Environment,
    /// The GPU's LP kernel and its wave state (null on the host device).
    pub lp_kernel: Option<LpKernel>,
    /// T as the run's commands achieved it (null on the host device, whose commands spin on
    /// thread CPU time: T by construction).
    pub achieved_t: Option<AchievedT>,
    pub latency_ns: Summaries,
    pub correctness: Correctness,
    /// Measured samples (after warm-up), in order.
    pub samples: Vec<Sample>,
    /// Stopped early by Ctrl-C/SIGTERM: fewer samples than asked.
    pub interrupted: bool,
    pub wall_time_s: f64,
    /// What happened when, for `--trace` (not part of the result's outputs).
    #[serde(skip)]
    pub timeline: timeline::Timeline,
}

impl RunResult {
    pub fn summarize(samples: &[Sample]) -> Summaries {
        let mut s = crate::stats::Recorder::default();
        let mut c = crate::stats::Recorder::default();
        let mut h = crate::stats::Recorder::default();
        let mut r = crate::stats::Recorder::default();
        for x in samples {
            s.record(x.suspend_ns);
            if let Some(ns) = x.preempt_call_ns {
                c.record(ns);
            }
            h.record(x.hp_start_ns);
            r.record(x.resume_ns);
        }
        Summaries {
            suspend: s.summary(),
            preempt_call: c.summary(),
            hp_start: h.summary(),
            resume: r.summary(),
        }
    }
}

#[cfg(test)]
/// For tests: a GPU run at level `level` with LP state `state` whose kernel keeps `kib` KiB per CU and
/// whose every sample took `suspend_us` to suspend and twice that to start the HP probe.
pub(crate) fn fake_gpu_run(level: Level, state: LpState, kib: u64, suspend_us: u64) -> RunResult {
    let samples = vec![
        Sample {
            suspend_ns: suspend_us * 1000,
            preempt_call_ns: Some(suspend_us * 500),
            hp_start_ns: 2 * suspend_us * 1000,
            resume_ns: 1000,
        };
        10
    ];
    RunResult {
        params: Params {
            level,
            t_ms: 0.5,
            lp_state: Some(state),
            samples: 10,
            warmup: 0,
            threshold: 8,
            batch: 4,
            seed: 1,
            workers: 0,
            gap_t: Params::GAP_T,
            grace: GracePeriod::SHORTEST,
        },
        env: crate::env::Environment {
            device: "hip:0".into(),
            device_detail: String::new(),
            kernel: String::new(),
            kfd_version: None,
            gfx_target: None,
            mechanism: "dbg-trap".into(),
            grace_period: "1".into(),
            cores: 2,
            git_revision: "test",
            tool_version: "test",
            host_figures: false,
        },
        lp_kernel: Some(LpKernel {
            name: state.kernel_name().into(),
            grid_blocks: 80,
            block_threads: 256,
            waves_per_cu: 4,
            vgprs_per_lane: 512,
            agprs_per_lane: 256,
            lds_bytes_per_block: 0,
            state_bytes_per_cu: kib * 1024,
        }),
        achieved_t: Some(AchievedT {
            ms: 0.501,
            error: 0.002,
            commands: 40,
            excluded: 10,
        }),
        latency_ns: RunResult::summarize(&samples),
        correctness: Correctness::check(0, &[], &[], 1),
        samples,
        interrupted: false,
        wall_time_s: 1.0,
        timeline: timeline::Timeline::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Correctness, Params, RunResult, Sample};

    /// A GPU run's slots cover every sample's gap, a drained threshold and host overhead, twice,
    /// plus the keep-ahead; a run so long that it would need more is capped at 4 Mi commands.
    #[test]
    fn gpu_budget_covers_samples_and_is_capped() {
        let p = |t_ms, samples| Params {
            samples,
            warmup: 10,
            t_ms,
            ..super::fake_gpu_run(super::Level::Lv3, super::LpState::Light, 0, 1).params
        };
        // keep-ahead 2 x 8 + 2 = 18; 1010 samples x (3 + 8 + 2 + 4) x 2 + 72 + 1024
        assert_eq!(p(0.5, 1000).gpu_budget(), 2 * 1010 * 17 + 72 + 1024);
        assert_eq!(p(0.001, 100_000).gpu_budget(), 1 << 22);
    }

    /// The preempting call is summarized beside the whole suspend where a device reports it, and
    /// absent (not zero) where none does.
    #[test]
    fn preempt_call_is_summarized_only_where_reported() {
        let s = |suspend_ns, preempt_call_ns| Sample {
            suspend_ns,
            preempt_call_ns,
            hp_start_ns: 1,
            resume_ns: 1,
        };
        let gpu = RunResult::summarize(&[s(100_000, Some(60_000)), s(120_000, Some(70_000))]);
        let (all, call) = (gpu.suspend.unwrap(), gpu.preempt_call.unwrap());
        assert_eq!((all.count, call.count), (2, 2));
        assert!(
            call.max < all.min,
            "the call alone is inside the suspend: {call:?} vs {all:?}"
        );
        let host = RunResult::summarize(&[s(10_000, None)]);
        assert!(host.suspend.is_some() && host.preempt_call.is_none());
    }

    #[test]
    fn exactly_once_is_checked_both_ways() {
        let ok = Correctness::check(
            3,
            &[(0, true), (2, true), (1, true)],
            &[(0, true), (1, true), (2, true)],
            1,
        );
        assert!(ok.ok == Some(true) && ok.completed_once == 3);
        let lost = Correctness::check(3, &[(0, true), (2, true)], &[(0, true), (2, true)], 1);
        assert!(lost.failed());
        assert_eq!(lost.missing, vec![1]);
        let dup = Correctness::check(2, &[(0, true), (1, true), (1, true)], &[(0, true), (1, true)], 1);
        assert_eq!(dup.duplicated, vec![1]);
        let wrong = Correctness::check(1, &[(0, true)], &[(0, false)], 1);
        assert_eq!(wrong.wrong_result, vec![0]);
        let failed = Correctness::check(1, &[(0, false)], &[(0, true)], 1);
        assert_eq!(failed.failed, vec![0]);
        let short = Correctness::check(1, &[(0, true)], &[(0, true)], 2);
        assert_eq!(short.missing, vec![0], "a command must run on every worker");
    }
}
