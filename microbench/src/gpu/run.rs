//! The GPU measurement: the same samples as the host device (suspend, HP probe, resume per HP
//! request), on an AMD GPU through HIP, producing the same [`RunResult`].
//!
//! Set-up order matters for queue discovery (see [`gpu_device::discover`]):
//! load HIP, open the device, compile and load the delay kernel, create the warm-up stream and the
//! HP stream and run work on both (ROCr's utility queue, blit kernels, the HP queue all exist
//! afterwards), calibrate T, fit the clock map, build the Lv3 mechanism (dbg-trap enables the
//! debug trap now), then create the LP stream while diffing the queue sets.
//!
//! Lv1: the LP stream behind an [`XQueue`]; suspend = `XQueue::suspend(Drain)`.
//! Lv3: the LP stream behind an [`XQueue`] too (commands keep flowing to the hardware queue),
//! and suspend = the chosen mechanism on the discovered queue through a [`Preemptor`] guard.
//!
//! Times: request, suspend and resume are host ns ([`calib::host_ns`]); the HP probe's start is
//! the GPU wall clock, mapped to host ns by a [`ClockMap`] fitted from probe round trips taken
//! before and after the run (so the rate is fitted over the whole run, not assumed).
use std::sync::Arc;
use std::time::{Duration, Instant};

use kfd::sysfs::SysRoot;
use kfd::{GracePeriod, Kfd, KfdOps};
use lv1::{Config, SuspendMode, XQueue};
use lv3::mechanism::{self, MechanismKind, Preempt, Preemptor, ProbeFacts, QueueTarget};

use gpu_device::verify::{self, Window};
use gpu_device::{
    Calibration, ClockMap, ClockPair, DelayCmd, DelayKernel, HipLpQueue, HpProbe, calib, discover, kernel,
};
use hip_rt::{Hip, StreamPriority};

use super::setup::*;
use crate::measure::control::{progress, stop_requested};
use crate::measure::rng::SplitMix64;
use crate::measure::{Correctness, Params, RunResult, Sample};
use crate::options::Level;

/// How long the HP probe may take while the LP queue is suspended before the run gives up
/// (the guard then resumes the queue).
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock pairs taken before and after the run.
const CLOCK_PAIRS: usize = 32;
/// HP probes on an idle GPU: the floor of the HP start latency (launch + dispatch).
pub(super) const FLOOR_PROBES: u32 = 16;
/// LP blocks per CU (of 1024 threads = 16 waves each): 2 fill the 32 wave slots of a gfx90a/
/// gfx942 CU (8 per SIMD), so the HP probe cannot slip in beside a running LP command.
/// `PREEMPT_LP_BLOCKS_PER_CU` overrides it (1..=8).
pub(super) const LP_BLOCKS_PER_CU: u32 = 2;

pub(super) fn h<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("hip: {what}: {e}")
}

fn note(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("preempt-lat: {msg}");
    }
}

/// What `--mechanism` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MechanismChoice {
    Auto,
    Kind(MechanismKind),
}

impl MechanismChoice {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(MechanismChoice::Auto);
        }
        MechanismKind::from_name(s)
            .map(MechanismChoice::Kind)
            .ok_or_else(|| format!("unknown mechanism {s:?}: expected auto, ioctl, dbg-trap or update-queue"))
    }
}

/// Whether `hip:device_index` can run a measurement here; the reason if not (for main.rs, before
/// it starts anything). Does not compile the kernel or touch KFD queues.
pub fn usable(device_index: u32) -> Result<(), String> {
    gpu_device::usable(device_index).map_err(|e| e.to_string())
}

struct Raw {
    t_req: u64,
    suspend_ns: u64,
    resume_ns: u64,
    probe: u32,
}

/// Runs one measurement on `hip:device_index`. `mechanism` (`auto|update-queue|dbg-trap|ioctl`)
/// applies to Lv3; Lv1 is progressive launching and ignores it.
pub fn run(p: &Params, device_index: u32, mechanism: &str, quiet: bool) -> Result<RunResult, String> {
    let t_start = Instant::now();
    let level = p.level;
    let choice = MechanismChoice::parse(mechanism)?;
    // A Ctrl-C while the LP queue is suspended must resume it. main's signal thread
    // (measure::control) raises the stop flag on the first signal: the loop stops at the next
    // sample boundary and the guards resume. On a second signal it resumes everything in lv3's
    // registry (the guards register there) and exits 130/143. Nothing stays suspended.
    let hip = Hip::load().map_err(|e| e.to_string())?;
    let dev = Arc::new(gpu_device::open(&hip, device_index).map_err(|e| e.to_string())?);
    let arch = gpu_device::gfx_target(&dev.info).map_err(|e| e.to_string())?;
    let hip_version = hip_rt::decode_version(hip.runtime_version().map_err(|e| e.to_string())?);

    // Kernel, warm-up and HP streams: every queue but the LP one exists after this block.
    let code = kernel::compile(&hip, &arch).map_err(h("compiling delay.hip with hiprtc"))?;
    let grid = lp_grid(dev.info.cu_count, dev.info.wave_size, lp_blocks_per_cu()).map_err(|e| e.to_string())?;
    let k = Arc::new(DelayKernel::load(&dev, &code, grid).map_err(h("loading the delay kernel"))?);
    let warm = dev.stream(StreamPriority::Normal).map_err(h("warm-up stream"))?;
    let hp_stream = dev.stream(StreamPriority::High).map_err(h("HP stream"))?;
    let cal: Calibration = kernel::calibrate(&k, &dev, &warm, &calibration_points(p.t_ms), 3)
        .map_err(h("calibrating T"))?
        .calibration;
    let achieved = kernel::check_t(&k, &dev, &warm, &cal, p.t_ms, 5).map_err(h("checking T"))?;
    let t_note = format!(
        "T requested {} ms, achieved {:.4} ms ({:+.1}%)",
        p.t_ms,
        achieved.achieved_ms,
        achieved.error * 100.0
    );
    if achieved.off {
        eprintln!("preempt-lat: WARNING: {t_note}: more than 5% off; every figure below is for the achieved T");
    } else {
        note(quiet, &t_note);
    }
    if cal.rates_disagree {
        eprintln!(
            "preempt-lat: WARNING: wall-clock and event calibrations disagree by > 5% (clock changes under DVFS?)"
        );
    }
    let cfg = Config::new(p.threshold as usize, p.batch as usize).map_err(|e| e.to_string())?;
    let keep_ahead = 2 * u64::from(p.threshold) + 2;
    let budget = command_budget(p, keep_ahead);
    let total = p.warmup + p.samples;
    let lp_slots = kernel::slot_buffer(&dev, &warm, budget as usize).map_err(h("LP slot buffer"))?;
    let check_slots = kernel::slot_buffer(&dev, &warm, 1).map_err(h("co-run check slot"))?;
    // Probe stamps: samples, then the floor probes, the co-run check, the LP stream's first
    // launch, and the clock pairs before and after the run.
    let (floor_idx, corun_idx, first_use_idx) = (total, total + FLOOR_PROBES, total + FLOOR_PROBES + 1);
    let (pairs_pre_idx, pairs_post_idx) = (first_use_idx + 1, first_use_idx + 1 + CLOCK_PAIRS as u32);
    let n_probes = pairs_post_idx as usize + CLOCK_PAIRS;
    let probe = HpProbe::new(Arc::clone(&dev), Arc::clone(&k), hp_stream, n_probes).map_err(h("HP probe"))?;
    let mut pairs: Vec<ClockPair> = clock_pairs(&probe, pairs_pre_idx, CLOCK_PAIRS)?;
    let map0 = ClockMap::fit(&pairs, dev.info.wall_clock_khz).map_err(|e| e.to_string())?;
    let floor = hp_floor(&probe, &map0, floor_idx)?;
    warm.synchronize().map_err(h("warm-up"))?;

    // Lv3: the mechanism (dbg-trap turns the debug trap on now, before the LP queue exists).
    let preemptor = match level {
        Level::Lv1 => None,
        Level::Lv3 => Some(build_mechanism(choice, quiet)?),
    };
    let mech_name = preemptor.as_ref().map_or("progressive-launch", |p| p.kind().name());
    if mech_name == "update-queue" && std::env::var("HSA_ENABLE_SCRATCH_ASYNC_RECLAIM").as_deref() != Ok("0") {
        eprintln!(
            "preempt-lat: WARNING: update-queue with ROCr's async scratch reclaim on: ROCr may re-enable the LP queue \
             behind our back (set HSA_ENABLE_SCRATCH_ASYNC_RECLAIM=0); the correctness check would catch it"
        );
    }
    if hip_version >= (6, 5, 0) {
        note(
            quiet,
            "HIP >= 6.5 may hand an idle stream's queue to another (dynamic queues); the LP stream is kept busy",
        );
    }

    // The LP stream and (Lv3) the queue behind it.
    let first_use = |s: &hip_rt::Stream| -> Result<(), gpu_device::Error> {
        k.launch_probe(s, hip_rt::Mem::Host(probe_stamps(&probe)), first_use_idx)?;
        Ok(s.synchronize()?)
    };
    let (lp_stream, target): (hip_rt::Stream, Option<QueueTarget>) = match &preemptor {
        None => {
            let s = dev.stream_own_queue().map_err(h("LP stream"))?;
            first_use(&s).map_err(h("first launch on the LP stream"))?;
            (s, None)
        }
        Some(pre) => {
            let d = discover::lp_stream_with_queue(&dev, first_use, pre.kind() == MechanismKind::DbgTrap)
                .map_err(|e| e.to_string())?;
            let t = d.target;
            note(
                quiet,
                &format!(
                    "LP stream -> KFD queue {} on gpu 0x{:x}, ring 0x{:x} ({} bytes), priority {}",
                    t.queue_id, t.gpu_id, t.ring_base_address, t.ring_size, t.priority
                ),
            );
            for n in &d.notes {
                note(quiet, n);
            }
            (d.stream, Some(t))
        }
    };
    let lpq = Arc::new(HipLpQueue::new(Arc::clone(&dev), Arc::clone(&k), lp_stream, lp_slots));
    let corun = co_run_check(&lpq, &k, &check_slots, &probe, &cal, corun_idx, dev.info.wall_clock_khz)?;
    if let Some(w) = &corun {
        eprintln!("preempt-lat: WARNING: {w}");
    }

    // The samples.
    let xq = XQueue::new(Arc::clone(&lpq), cfg).map_err(|e| format!("starting the launcher: {e}"))?;
    let completions = xq.take_completions().ok_or("launcher completions already taken")?;
    let cycles = cal.cycles_for(p.t_ms);
    let t_ns = achieved.achieved_ms * 1e6;
    let mut rng = SplitMix64::new(p.seed);
    let pb = progress(
        u64::from(total),
        quiet,
        &format!("Lv{} hip:{device_index} T={}ms", p.level, p.t_ms),
    );
    let mut raw: Vec<Raw> = Vec::with_capacity(total as usize);
    let mut windows: Vec<Window> = Vec::with_capacity(total as usize);
    let mut budget_hit = false;
    let mut loop_err = None;
    for i in 0..total {
        if stop_requested() {
            break;
        }
        while xq.stats().pending < keep_ahead as usize {
            if xq.stats().submitted + 1 > budget {
                budget_hit = true;
                break;
            }
            xq.submit(DelayCmd { cycles });
        }
        if budget_hit {
            eprintln!(
                "preempt-lat: WARNING: the LP command budget ({budget}) is used up after {i} samples; stopping early"
            );
            break;
        }
        if i == 0 {
            let t0 = Instant::now();
            while xq.stats().launched == 0 && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        let gap = rng.range((p.gap_t.0 * t_ns) as u64, (p.gap_t.1 * t_ns) as u64);
        std::thread::sleep(Duration::from_nanos(gap));
        let r = match (&preemptor, &target) {
            (Some(pre), Some(t)) => preempt_lv3(pre, t, &probe, i),
            _ => preempt_lv1(&xq, &probe, i),
        };
        match r {
            Ok((s, w)) => {
                raw.push(s);
                windows.push(Window {
                    sample: i as usize,
                    from_ns: w.0,
                    to_ns: w.1,
                });
            }
            Err(e) => {
                loop_err = Some(e);
                break;
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();

    // Drain: everything submitted must complete (the queue is resumed: guards are gone).
    let drain_limit = Duration::from_secs(60) + Duration::from_secs_f64(t_ns * 1e-9 * (keep_ahead as f64 + 8.0) * 4.0);
    let drained = xq.wait_idle_for(drain_limit);
    if let Err(e) = &drained {
        let why = format!(
            "draining the LP queue: {e} after {drain_limit:?}: the LP queue may have been left suspended/disabled; \
             check dmesg and /sys/class/kfd/kfd/proc/{}/queues",
            std::process::id()
        );
        // Do not drop the XQueue (its drop would wait forever): report and leave.
        std::mem::forget(xq);
        return Err(loop_err.map_or(why.clone(), |le| format!("{le}; then {why}")));
    }
    if let Some(e) = loop_err {
        drop(xq);
        return Err(e);
    }
    let submitted = xq.stats().submitted;
    let done: Vec<(u64, bool)> = completions.try_iter().map(|c| (c.id, c.outcome.is_ok())).collect();
    drop(xq);
    if let Some(pre) = &preemptor
        && let Err(e) = pre.teardown()
    {
        eprintln!("preempt-lat: WARNING: {}: teardown failed: {e}", pre.kind());
    }

    // The clock map over the whole run, HP start latencies, and the slot check.
    pairs.extend(clock_pairs(&probe, pairs_post_idx, CLOCK_PAIRS)?);
    let map = ClockMap::fit(&pairs, dev.info.wall_clock_khz).map_err(|e| e.to_string())?;
    let mut samples = Vec::with_capacity(raw.len());
    let mut negative = 0usize;
    for (i, r) in raw.iter().enumerate() {
        let tick = probe
            .stamp(r.probe)
            .ok_or_else(|| format!("HP probe {} completed without its start stamp", r.probe))?;
        let hp = verify::hp_start_ns(&map, tick, r.t_req).unwrap_or_else(|_| {
            negative += 1;
            0
        });
        if i >= p.warmup as usize {
            samples.push(Sample {
                suspend_ns: r.suspend_ns,
                hp_start_ns: hp,
                resume_ns: r.resume_ns,
            });
        }
    }
    if negative > 0 {
        eprintln!(
            "preempt-lat: WARNING: {negative} HP start(s) mapped before their request (clock map off by more than the \
             latency; uncertainty ±{:.0} ns): recorded as 0",
            map.uncertainty_ns
        );
    }
    let slots = lpq.read_slots(submitted).map_err(h("reading the LP slots"))?;
    let margin = map.uncertainty_ns + 2_000.0;
    let check = verify::check_slots(&slots, lpq.nblocks(), &windows, &map, margin, level == Level::Lv1);
    let correctness = Correctness::check(submitted, &done, &check.records, 1);
    if !check.problems.is_empty() {
        eprintln!(
            "preempt-lat: LP commands FAILED verification ({}):",
            check.problems.len()
        );
        for l in check.describe(20) {
            eprintln!("  {l}");
        }
    }
    if check.unchecked_windows > 0 {
        note(
            quiet,
            &format!(
                "{} of {} suspension windows were narrower than 2 x {:.0} ns and not checked",
                check.unchecked_windows,
                windows.len(),
                margin
            ),
        );
    }
    let interrupted = (samples.len() as u32) < p.samples;
    let detail = format!(
        "{} ({}), {} CUs, wave{}; HIP {}.{}.{} ({}); LP grid {}x{} ({} per CU); {t_note}; clock map ±{:.0} ns; \
         HP floor on an idle GPU p50 {:.1} us{}{}",
        dev.info.name,
        dev.info.pci_bus_id,
        dev.info.cu_count,
        dev.info.wave_size,
        hip_version.0,
        hip_version.1,
        hip_version.2,
        hip.library_path(),
        grid.blocks,
        grid.threads,
        lp_blocks_per_cu(),
        map.uncertainty_ns,
        floor as f64 / 1e3,
        target.map_or(String::new(), |t| format!(
            "; LP queue {} gpu 0x{:x}",
            t.queue_id, t.gpu_id
        )),
        corun.map_or(String::new(), |w| format!("; WARNING: {w}")),
    );
    Ok(RunResult {
        latency_ns: RunResult::summarize(&samples),
        params: p.clone(),
        env: environment(device_index, detail, &arch.offload_arch(), mech_name),
        correctness,
        samples,
        interrupted,
        wall_time_s: t_start.elapsed().as_secs_f64(),
    })
}

fn probe_stamps(p: &HpProbe) -> &hip_rt::HostBuffer {
    p.stamps()
}

/// The environment of a GPU run.
fn environment(index: u32, detail: String, gfx: &str, mechanism: &str) -> crate::env::Environment {
    crate::env::Environment {
        device: format!("hip:{index}"),
        device_detail: detail,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        kfd_version: Kfd::open().and_then(|k| k.version()).ok().map(|v| v.to_string()),
        gfx_target: Some(gfx.to_string()),
        mechanism: mechanism.into(),
        cores: crate::env::cores(),
        git_revision: option_env!("PREEMPT_GIT_REV").unwrap_or("unknown"),
        tool_version: env!("CARGO_PKG_VERSION"),
    }
}

/// Builds the Lv3 mechanism: `auto` in lv3's robustness order, or the one asked for.
fn build_mechanism(choice: MechanismChoice, quiet: bool) -> Result<Preemptor, String> {
    let facts = ProbeFacts::gather(&SysRoot::default());
    let m: Arc<dyn Preempt> = match choice {
        MechanismChoice::Auto => {
            let (m, skipped) = mechanism::build_auto(&facts, Kfd::open, GracePeriod::Default)
                .map_err(|why| format!("no Lv3 mechanism works here:\n  {}", why.join("\n  ")))?;
            for s in skipped {
                note(quiet, &format!("--mechanism auto: skipped {s}"));
            }
            m
        }
        MechanismChoice::Kind(kind) => {
            if let Some(v) = mechanism::probe_order(&facts)
                .into_iter()
                .find(|v| v.kind == kind && !v.usable())
            {
                return Err(format!("--mechanism {}: {v}", kind.name()));
            }
            let kfd = Kfd::open().map_err(|e| e.to_string())?;
            mechanism::build(kind, kfd, GracePeriod::Default).map_err(|e| e.to_string())?
        }
    };
    note(quiet, &format!("Lv3 mechanism: {}", m.kind()));
    Ok(Preemptor::from_arc(m))
}

/// Lv3: suspend through the guard, HP probe, resume. Returns the raw sample and the window.
fn preempt_lv3(pre: &Preemptor, t: &QueueTarget, probe: &HpProbe, i: u32) -> Result<(Raw, (u64, u64)), String> {
    let t_req = calib::host_ns(Instant::now());
    let guard = pre.suspend(t).map_err(|e| format!("sample {i}: suspend: {e}"))?;
    let t_s = calib::host_ns(Instant::now());
    // From here until `resume`, an early return drops the guard, which resumes the queue.
    probe.launch(i).map_err(h("HP probe"))?;
    if !probe.wait(PROBE_TIMEOUT).map_err(h("HP probe"))? {
        return Err(format!(
            "sample {i}: the HP probe did not finish within {PROBE_TIMEOUT:?} with the LP queue suspended"
        ));
    }
    let t_r = calib::host_ns(Instant::now());
    guard.resume().map_err(|e| format!("sample {i}: resume: {e}"))?;
    let resume_ns = calib::host_ns(Instant::now()) - t_r;
    Ok((
        Raw {
            t_req,
            suspend_ns: t_s - t_req,
            resume_ns,
            probe: i,
        },
        (t_s, t_r),
    ))
}

/// Lv1: drain the launcher, HP probe, resume (as the host device does).
fn preempt_lv1(xq: &XQueue<HipLpQueue>, probe: &HpProbe, i: u32) -> Result<(Raw, (u64, u64)), String> {
    let t_req = calib::host_ns(Instant::now());
    let drained = xq.suspend(SuspendMode::Drain);
    let t_s = calib::host_ns(Instant::now());
    let launched = drained.is_ok().then(|| probe.launch(i));
    let t_r = calib::host_ns(Instant::now());
    xq.resume();
    let resume_ns = calib::host_ns(Instant::now()) - t_r;
    drained.map_err(|e| format!("sample {i}: Lv1 suspend (drain): {e}"))?;
    launched.unwrap_or(Ok(())).map_err(h("HP probe"))?;
    if !probe.wait(PROBE_TIMEOUT).map_err(h("HP probe"))? {
        return Err(format!(
            "sample {i}: the HP probe did not finish within {PROBE_TIMEOUT:?}"
        ));
    }
    Ok((
        Raw {
            t_req,
            suspend_ns: t_s - t_req,
            resume_ns,
            probe: i,
        },
        (t_s, t_r),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(t_ms: f64, samples: u32) -> Params {
        Params {
            level: Level::Lv3,
            t_ms,
            samples,
            warmup: 10,
            threshold: 8,
            batch: 4,
            seed: 1,
            workers: 1,
            gap_t: Params::GAP_T,
        }
    }

    #[test]
    fn mechanism_names_parse() {
        assert_eq!(MechanismChoice::parse("auto"), Ok(MechanismChoice::Auto));
        assert_eq!(
            MechanismChoice::parse("dbg-trap"),
            Ok(MechanismChoice::Kind(MechanismKind::DbgTrap))
        );
        assert_eq!(
            MechanismChoice::parse("update-queue"),
            Ok(MechanismChoice::Kind(MechanismKind::UpdateQueue))
        );
        assert_eq!(
            MechanismChoice::parse("ioctl"),
            Ok(MechanismChoice::Kind(MechanismKind::Ioctl))
        );
        assert!(MechanismChoice::parse("sigstop").unwrap_err().contains("expected auto"));
    }

    #[test]
    fn budget_covers_samples_and_is_capped() {
        let b = command_budget(&params(0.5, 1000), 18);
        // 1010 samples x (3 + 8 + 2 + 4) x 2 + 72 + 1024
        assert_eq!(b, 2 * 1010 * 17 + 72 + 1024);
        assert_eq!(command_budget(&params(0.001, 100_000), 18), 1 << 22);
    }

    #[test]
    fn functional_without_a_gpu_is_a_skip() {
        if Hip::load().is_err() {
            return;
        }
        if let Err((skip, why)) = crate::gpu::functional(0, "auto", 0.5, 3) {
            assert!(skip, "no GPU must be a skip, not a failure: {why}");
        }
    }

    #[test]
    fn usable_without_a_gpu_says_why() {
        let Ok(hip) = Hip::load() else {
            eprintln!("SKIPPED: HIP is not installed here");
            return;
        };
        match usable(0) {
            Ok(()) => eprintln!("a GPU is usable here: {:?}", hip.device_count()),
            Err(e) => {
                eprintln!("usable(0): {e}");
                if hip.device_count().is_err_and(|d| d.is_no_device()) {
                    assert!(e.contains("hipGetDeviceCount failed: hipErrorNoDevice (100)"), "{e}");
                    assert!(e.contains("/dev/kfd"), "{e}");
                }
            }
        }
    }
}
