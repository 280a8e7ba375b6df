//! The stages of one device, in order, with what each needs, its time bound and the child's
//! command line (`command`). Every stage is an existing subcommand (`preempt-lat --level ...`,
//! `sweep`, `priority`, `priority --policy up`, `overhead`) or, for what no subcommand does alone,
//! the hidden `__acceptance-stage` (which opens the device through the same device layer,
//! preempt-api's `gpu` module and `Session`): there is one GPU set-up path, and `acceptance` only
//! runs it.
use crate::options::{HOST_HAS_NO_LP_STATE, InternalStage, Level, Preset, RatePreset};
use preempt_api::{DeviceSpec, MechanismKind};
use std::time::Duration;

mod command;
pub(crate) mod flag;
mod sizes;
pub use command::{args, result_files, stdout_file};
pub use sizes::Sizes;

/// How a Lv3 stage suspends: the host device's SIGSTOP, or a KFD mechanism on a GPU (the API's
/// one table of mechanism words).
pub use preempt_api::Mechanism as Mech;

/// `--mechanism NAME`, which the host device does not take (its one mechanism is `auto`).
fn mechanism_arg(m: Mech) -> Vec<String> {
    match m {
        Mech::Kfd(k) => vec![flag::flag!(crate::options::Common, mechanism), k.name().into()],
        _ => Vec::new(),
    }
}

/// The Lv3 mechanisms of a device: SIGSTOP on the host, every KFD mechanism in `auto`'s order on
/// a GPU (one this kernel does not offer is skipped by its stage, with the reason).
pub fn mechanisms_of(device: DeviceSpec) -> Vec<Mech> {
    if device.is_host() {
        vec![Mech::Sigstop]
    } else {
        MechanismKind::AUTO_ORDER.into_iter().map(Mech::Kfd).collect()
    }
}

/// What a stage runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// `__acceptance-stage <stage>` (with the mechanism of a per-mechanism stage).
    Internal(InternalStage, Option<Mech>),
    /// A latency run at T = 0.5 ms: Lv3 with a mechanism, or Lv1.
    Latency(Level, Option<Mech>),
    SweepT,
    SweepThreshold,
    SweepState,
    Priority,
    /// `priority --policy up --shares` [`SHARES`]: the class experiment's bandwidth partition
    /// (Fig. 9 bottom), through the application API's helper policy.
    Partition,
    /// `priority --preset`: one of the seeds' experiments of chapters 7 and 8 (7.2.1's HP load,
    /// 7.2.2's native row, the case studies 8.1.1, 8.2.1 and its baselines, 8.3.1).
    Preset(Preset),
    /// `sweep rate --preset 8.3.2`: Fig. 15b's curve and its comparison point.
    RatePreset(RatePreset),
    /// `overhead`: native against scheduled, nothing preempted (Fig. 12a/b); its stdout is its
    /// JSON result ([`stdout_file`]).
    Overhead,
    /// `soak`: priority and the class experiment in turn for this long (`--long` only).
    Soak(Duration),
    /// The kernel log lines of the device's run, read by `acceptance` itself.
    KernelLog,
}

/// One stage of a device's plan.
#[derive(Debug, Clone)]
pub struct Stage {
    pub id: String,
    pub title: String,
    pub work: Work,
    /// Each must have passed.
    pub needs: Vec<String>,
    /// At least one must have passed; the first that did names the Lv3 mechanism the stage uses.
    pub needs_any: Vec<String>,
    pub bound: Duration,
    /// Why the stage cannot apply to this device (a GPU-only stage on the host device).
    pub not_here: Option<String>,
}

/// The T of the latency runs and of the per-mechanism stages (the seeds' test 4.1.1).
pub const T_MS: &str = "0.5";

/// The partition stage's shares: Fig. 9 bottom's two queues (test 7.2.2).
pub const SHARES: &str = "75:25";

/// The dynamic-queues stage's bound (s, before `--quick` halves it): its own steps take about
/// 5 s (the 2 s idle, a 350 ms held command, two LP queue set-ups), plus the delay kernel's
/// compile with hiprtc, which the HIP smoke stage has already shown to work.
const DYNAMIC_QUEUES_BOUND_S: u64 = 60;

/// The Example 5 stage's bound (s, before `--quick` halves it): the Python's import check and
/// the example's own bound (the stage's module says how long), with room for their stops.
pub const EXAMPLE5_BOUND_S: u64 = 1200;

/// The interposer stage's bound (s, before `--quick` halves it): a compile and three bounded runs
/// of the program, each well inside its own bound (the stage's module says how long).
pub const INTERPOSER_BOUND_S: u64 = 300;

/// What the soak stage's bound adds to its length: a window's worth of stop, the sessions'
/// closes, and room for a loaded machine; not scaled by `--quick` (the soak's length is the point
/// of `--long`).
pub const LONG_MARGIN: Duration = Duration::from_secs(15 * 60);

/// The library-kernels stage's bound (s, before `--quick` halves it): its script's, and a stop.
pub const LIBRARY_KERNELS_BOUND_S: u64 = 500;

fn secs(s: u64, sizes: &Sizes) -> Duration {
    Duration::from_secs_f64(s as f64 * sizes.bound_scale)
}

/// The stages of `device`, in the order they run (with `long`, a soak that long before the kernel
/// log).
pub fn stages(device: DeviceSpec, quick: bool, long: Option<Duration>) -> Vec<Stage> {
    let z = Sizes::of(quick);
    let host = device.is_host();
    let gpu_only = |why: &str| host.then(|| format!("GPU only: {why}"));
    let s = |id: &str, title: &str, work: Work, needs: &[&str], bound: u64| Stage {
        id: id.into(),
        title: title.into(),
        work,
        needs: needs.iter().map(|n| n.to_string()).collect(),
        needs_any: Vec::new(),
        bound: secs(bound, &z),
        not_here: None,
    };
    let mechs = mechanisms_of(device);
    let mut v = vec![s(
        "environment",
        "kernel, amdgpu/KFD versions and parameters, ROCm/HIP, GPUs and visibility, doctor",
        Work::Internal(InternalStage::Environment, None),
        &[],
        120,
    )];
    for (id, title, stage, needs, why) in [
        (
            "hip-smoke",
            "HIP loads, the delay kernels compile for the target, one runs; clock rates",
            InternalStage::HipSmoke,
            "environment",
            "the host device runs CPU worker processes, no HIP kernels",
        ),
        (
            "calibration",
            "T calibrated at 0.5 ms on the GPU's wall clock and checked",
            InternalStage::Calibration,
            "hip-smoke",
            "the host device's commands spin on thread CPU time, which needs no calibration",
        ),
        (
            "discovery",
            "the LP stream's KFD queue found (auto mechanism)",
            InternalStage::Discovery,
            "hip-smoke",
            "the host device has no KFD queue to find (its Lv3 is SIGSTOP)",
        ),
    ] {
        v.push(Stage {
            not_here: gpu_only(why),
            ..s(id, title, Work::Internal(stage, None), &[needs], 600)
        });
    }
    v.push(Stage {
        not_here: gpu_only("no KFD queues on the host device"),
        ..s(
            "dynamic-queues",
            "ordinary streams idled past GPU_MAX_HW_QUEUES: the LP stream's queue binding holds and suspends \
             exactly once; a dropped stream's binding is refused",
            Work::Internal(InternalStage::DynamicQueues, None),
            &["discovery"],
            DYNAMIC_QUEUES_BOUND_S,
        )
    });
    let (sr_needs, lat_needs): (&[&str], &[&str]) = if host {
        (&["environment"], &[])
    } else {
        (&["discovery"], &["calibration"])
    };
    for &m in &mechs {
        v.push(s(
            &format!("suspend-resume-{}", m.name()),
            &format!(
                "{}: suspend/resume of an idle queue, then of a running LP command; exactly once",
                m.name()
            ),
            Work::Internal(InternalStage::SuspendResume, Some(m)),
            sr_needs,
            300,
        ));
    }
    let lv3_ids: Vec<String> = mechs.iter().map(|m| format!("latency-lv3-{}", m.name())).collect();
    for (&m, id) in mechs.iter().zip(&lv3_ids) {
        let sr = format!("suspend-resume-{}", m.name());
        let needs: Vec<&str> = lat_needs.iter().copied().chain([sr.as_str()]).collect();
        v.push(s(
            id,
            &format!("Lv3 latency at T = {T_MS} ms through {}", m.name()),
            Work::Latency(Level::Lv3, Some(m)),
            &needs,
            900,
        ));
    }
    let lv1_needs: &[&str] = if host { &["environment"] } else { &["calibration"] };
    v.push(s(
        "latency-lv1",
        &format!("Lv1 latency at T = {T_MS} ms (threshold 8, batch 4)"),
        Work::Latency(Level::Lv1, None),
        lv1_needs,
        900,
    ));
    // Lv2 where the device has it (the host device); a GPU's plan lists it as skipped with the
    // API's one-line reason (docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws), never a failure.
    let lv2 = device.has_lv2();
    v.push(Stage {
        not_here: (!lv2).then(|| preempt_api::lv2_unavailable(device).message),
        ..s(
            "latency-lv2",
            &format!("Lv2 latency at T = {T_MS} ms (the rest of the running command)"),
            Work::Latency(Level::Lv2, None),
            lv1_needs,
            900,
        )
    });
    // The sweeps and priority need the latency stages of the levels they run.
    let level_needs: &[&str] = if lv2 {
        &["latency-lv1", "latency-lv2"]
    } else {
        &["latency-lv1"]
    };
    let with_lv3 = |st: Stage| Stage {
        needs_any: lv3_ids.clone(),
        ..st
    };
    v.push(with_lv3(s(
        "sweep-t",
        if lv2 {
            "sweep t: Lv1, Lv2 and Lv3 P99 against T"
        } else {
            "sweep t: Lv1 and Lv3 P99 against T"
        },
        Work::SweepT,
        level_needs,
        3600,
    )));
    v.push(s(
        "sweep-threshold",
        "sweep threshold: Lv1 overhead against the threshold",
        Work::SweepThreshold,
        &["latency-lv1"],
        3600,
    ));
    v.push(Stage {
        not_here: host.then(|| HOST_HAS_NO_LP_STATE.replace("{what}", "sweep state")),
        ..with_lv3(s(
            "sweep-state",
            "sweep state: Lv1 and Lv3 P99 against the LP kernel's wave state",
            Work::SweepState,
            &["latency-lv1"],
            1800,
        ))
    });
    v.push(with_lv3(s(
        "priority",
        "priority: HP requests against a saturating LP stream, per mode",
        Work::Priority,
        level_needs,
        1800,
    )));
    // The helper's policy suspends and resumes the queues at Lv3 only (its streams' level is
    // auto: the session's mechanism), so one Lv3 latency that passed is all it needs.
    v.push(with_lv3(s(
        "partition",
        &format!(
            "priority --policy up --shares {SHARES} --standalone: the application helper's bandwidth partition, and its cost against each queue alone"
        ),
        Work::Partition,
        &[],
        600,
    )));
    v.push(with_lv3(s(
        "overhead",
        "overhead: native against scheduled (every level), nothing preempted",
        Work::Overhead,
        level_needs,
        900,
    )));
    // The seeds' experiments as presets (docs/priority.md#the-seeds-experiments-as-presets),
    // each a class experiment (7.2.1: priority's modes) with the mechanism priority uses.
    // 7.2.2's native row beside the partition; 7.2.1's HP load needs what priority needs.
    v.push(with_lv3(s(
        "partition-native",
        "priority --preset 7.2.2-native: two saturating queues with no scheduling against each alone, the native row beside 75:25",
        Work::Preset(Preset::PartitionNative),
        &[],
        300,
    )));
    v.push(with_lv3(s(
        "priority-fig9",
        "priority --preset 7.2.1: priority's modes with HP at 20 % of the device (the seeds' Fig. 9 load)",
        Work::Preset(Preset::Fig9),
        level_needs,
        1800,
    )));
    // 8.2.1's baselines before laxity, as the seeds' Fig. 14 lists them.
    for (id, preset, title) in [
        (
            "case-8.1.1",
            Preset::Harvest,
            "priority --preset 8.1.1: a production job over an opportunistic one (hpf), each against alone",
        ),
        (
            "case-8.2.1-native",
            Preset::VideoconfNative,
            "priority --preset 8.2.1-native: video frames and a speech job with no scheduling",
        ),
        (
            "case-8.2.1-fixed",
            Preset::VideoconfFixed,
            "priority --preset 8.2.1-fixed: video frames above a speech job (fixed priority)",
        ),
        (
            "case-8.2.1",
            Preset::Videoconf,
            "priority --preset 8.2.1: video frames and a speech job under laxity",
        ),
        (
            "case-8.3.1",
            Preset::Fig15a,
            "priority --preset 8.3.1: an HP client at 10 req/s against an LP client back to back, each against alone",
        ),
    ] {
        v.push(with_lv3(s(id, title, Work::Preset(preset), &[], 300)));
    }
    v.push(with_lv3(s(
        "case-8.3.2",
        "sweep rate --preset 8.3.2: K-EDF (K = 16) P99 against the request rate, and the clients unscheduled at 1000 req/s",
        Work::RatePreset(RatePreset::Fig15b),
        &[],
        900,
    )));
    // Example 5 opens its sessions as a user would (the package's `auto` mechanism, as
    // discovery finds it); its Phase 2 at Lv3 needs a Lv3 mechanism that works, as the session
    // stages above do, and on the host device its Lv1 and Lv2 runs the levels' latency stages.
    v.push(with_lv3(s(
        "example5",
        "XSched's Example 5 through the Python package: three inference replicas at three priorities, Phase 2 at every level",
        Work::Internal(InternalStage::Example5, None),
        if host { &["environment"] } else { &["discovery"] },
        EXAMPLE5_BOUND_S,
    )));
    // The interposer picks its Lv3 mechanism with `auto`, as discovery does, and compiles the
    // delay kernels with hiprtc, which hip-smoke has shown to work (discovery needs it). On the
    // host device it runs on the stand-in runtime, whose suspension is the host's SIGSTOP.
    v.push(s(
        "interposer",
        "the HIP interposer: an unmodified two-priority HIP program alone, without it and under it (LD_PRELOAD)",
        Work::Internal(InternalStage::Interposer, None),
        if host { &["environment"] } else { &["discovery"] },
        INTERPOSER_BOUND_S,
    ));
    // Library kernels at Lv3: a GPU's through the package's Lv3 stream (as Example 5's); the host
    // device's on the stand-in runtime, whose suspension is its own SIGSTOP of the workers.
    let library = s(
        "library-kernels",
        "library kernels (GEMM, conv2d) suspended and resumed mid-run at Lv3, every result against an unpreempted reference",
        Work::Internal(InternalStage::LibraryKernels, None),
        if host { &["environment"] } else { &["discovery"] },
        LIBRARY_KERNELS_BOUND_S,
    );
    v.push(if host { library } else { with_lv3(library) });
    for &m in &mechs {
        let id = if host {
            "bystander".to_string()
        } else {
            format!("bystander-{}", m.name())
        };
        v.push(Stage {
            not_here: gpu_only(
                "the bystander cost is what our preemptions cost another process's kernels on the same GPU; \
                 the host device's SIGSTOP stops only our own workers",
            ),
            ..s(
                &id,
                &format!("what {}'s preemptions cost another process's kernels", m.name()),
                Work::Internal(InternalStage::Bystander, Some(m)),
                &[&format!("suspend-resume-{}", m.name())],
                900,
            )
        });
    }
    // Last before the kernel log: the long run of priority and the class experiment, through the
    // Lv3 mechanism its lv3 windows use, once every shorter stage has had its say.
    if let Some(length) = long {
        v.push(Stage {
            bound: length + LONG_MARGIN,
            ..with_lv3(s(
                "soak",
                &format!(
                    "soak: {} min of priority (7.2.1, lv3) and the class experiment (8.3.1) in turn; P99 drift, RSS, \
                     descriptors and threads over time",
                    length.as_secs_f64() / 60.0
                ),
                Work::Soak(length),
                &[],
                0,
            ))
        });
    }
    v.push(s(
        "kernel-log",
        "the kernel log lines logged while this device's stages ran",
        Work::KernelLog,
        &[],
        60,
    ));
    v
}

/// The Lv3 mechanism of the stage `id` (a Lv3 latency stage), for a stage that needs any of them.
pub fn mechanism_of(stages: &[Stage], id: &str) -> Option<Mech> {
    stages.iter().find(|s| s.id == id).and_then(|s| match s.work {
        Work::Latency(Level::Lv3, m) => m,
        _ => None,
    })
}

#[cfg(test)]
mod tests;
