//! The dynamic-queues stage: does the LP stream's queue binding hold while the HIP runtime is given
//! every reason to move queues around, and is a binding that went stale refused?
//!
//! clr releases an idle stream's pooled hardware queue once a priority has more streams than
//! `GPU_MAX_HW_QUEUES` (with `DEBUG_HIP_DYNAMIC_QUEUES` on, the default in the newest clr); a
//! CU-mask stream, which every LP stream is, is exempt (docs/kfd-facts.md#dynamic-queues). So the
//! stage opens the LP queue the way every Lv3 run does (preempt-api's `gpu::prepare` and
//! `Prepared::lp`), then creates `GPU_MAX_HW_QUEUES` + 2 ordinary streams, uses each once,
//! lets them idle [`IDLE`] and synchronizes them again (clr tries the release at each
//! synchronize). Then: the LP binding must still check Ok, and a running LP command must be
//! suspended, held and resumed through it, exactly once. A `Stale` there is a finding to report.
//!
//! Detection: a second LP queue whose stream is dropped while its binding is kept must check as
//! `Gone` (or `Replaced`, should another queue have taken its id), and a suspend through it must
//! be refused (`QueueRefused`) with nothing suspended.
//!
//! Written for hardware and NOT yet run on a GPU; docs/hardware-validation.md says what it should
//! print. The pure pieces (the stream count, the settings, the verdicts) are tested here.
use super::StageResult;
use crate::error::{Context, Error, failed};
use gpu_device::hip_rt::StreamPriority;
use gpu_device::{DelayCmd, SlotStatus, calib};
use kfd::sysfs::SysRoot;
use lv1::HwQueue;
use lv3::binding::{Change, QueueBinding, Stale};
use preempt_api::Preemptor;
use preempt_api::gpu::{self, GpuDevice, GpuSuspension, KernelChoice, LpQueue, LpRequest, Prepare, PreparedLp};
use preempt_api::{ErrorKind, GracePeriod, Lv3Request, MechanismChoice};
use serde::Serialize;
use serde_json::json;
use std::time::{Duration, Instant};

/// clr's `GPU_MAX_HW_QUEUES` when unset: pooled queues per priority and device
/// (docs/kfd-facts.md#streams-to-queues).
pub const CLR_DEFAULT_MAX_HW_QUEUES: usize = 4;
/// Ordinary streams beyond the pool's size: past it, clr releases idle streams' queues.
pub const EXTRA_STREAMS: usize = 2;
/// At most this many ordinary streams, whatever `GPU_MAX_HW_QUEUES` says (the stage is bounded).
pub const MAX_STREAMS: usize = 64;
/// How long the ordinary streams idle before they are synchronized again.
pub const IDLE: Duration = Duration::from_secs(2);
/// The running LP command, the moment it is suspended and how long it is held (as the
/// suspend-resume stage's: the hold outlasts the rest of the command).
const LONG_MS: u64 = 200;
const SUSPEND_AT: Duration = Duration::from_millis(50);
const HOLD: Duration = Duration::from_millis(300);
const _: () = assert!(SUSPEND_AT.as_millis() + HOLD.as_millis() > LONG_MS as u128);
/// How long a dropped stream's queue may take to leave sysfs.
const GONE_WITHIN: Duration = Duration::from_secs(2);
/// Slots of the kept LP queue (one command runs on it).
const SLOTS: usize = 4;

/// The two variables that decide whether and when clr releases queues, as this process sees
/// them (`None`: unset; clr reads them when HIP loads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Settings {
    #[serde(rename = "DEBUG_HIP_DYNAMIC_QUEUES")]
    pub dynamic_queues: Option<String>,
    #[serde(rename = "GPU_MAX_HW_QUEUES")]
    pub max_hw_queues: Option<String>,
}

impl Settings {
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Settings {
        Settings {
            dynamic_queues: get("DEBUG_HIP_DYNAMIC_QUEUES"),
            max_hw_queues: get("GPU_MAX_HW_QUEUES"),
        }
    }

    /// `NAME=value` or `NAME unset`, both variables.
    pub fn describe(&self) -> String {
        let one = |name: &str, v: &Option<String>| match v {
            Some(v) => format!("{name}={v}"),
            None => format!("{name} unset"),
        };
        format!(
            "{}, {}",
            one("DEBUG_HIP_DYNAMIC_QUEUES", &self.dynamic_queues),
            one("GPU_MAX_HW_QUEUES", &self.max_hw_queues)
        )
    }

    /// How many ordinary streams to create: the pool's size plus [`EXTRA_STREAMS`], at most
    /// [`MAX_STREAMS`]; with a note where the variable was not used as it is.
    pub fn streams(&self) -> (usize, Option<String>) {
        let (pool, note) = match self.max_hw_queues.as_deref().map(str::trim) {
            None => (CLR_DEFAULT_MAX_HW_QUEUES, None),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => (n, None),
                _ => (
                    CLR_DEFAULT_MAX_HW_QUEUES,
                    Some(format!(
                        "GPU_MAX_HW_QUEUES={v:?} is not a positive number: sized for clr's default of \
                         {CLR_DEFAULT_MAX_HW_QUEUES}"
                    )),
                ),
            },
        };
        let want = pool.saturating_add(EXTRA_STREAMS);
        if want > MAX_STREAMS {
            let note =
                format!("{want} streams asked by GPU_MAX_HW_QUEUES={pool}: {MAX_STREAMS} created (the stage's bound)");
            return (MAX_STREAMS, Some(note));
        }
        (want, note)
    }
}

/// The kept LP binding after the ordinary streams idled: Ok, or a FAIL worth reporting.
pub fn judge_kept(check: Result<(), Stale>) -> Result<(), Error> {
    check.map_err(|stale| {
        failed!(
            "the LP stream's queue binding went stale while ordinary streams idled: {stale}. This is a \
             finding: please send the archive (and a rerun with AMD_LOG_LEVEL=4 in stderr.txt)"
        )
    })
}

/// The dropped stream's binding: it must no longer check Ok. The word for the summary.
pub fn judge_dropped(check: Result<(), Stale>) -> Result<&'static str, Error> {
    match check {
        Ok(()) => Err(failed!(
            "a dropped LP stream's binding still checks Ok after {GONE_WITHIN:?}: its KFD queue was not \
             destroyed with the stream, so the stale-binding refusal could not be exercised"
        )),
        Err(Stale {
            change: Change::Gone, ..
        }) => Ok("Gone"),
        Err(Stale {
            change: Change::Replaced { .. },
            ..
        }) => Ok("Replaced"),
        Err(
            stale @ Stale {
                change: Change::Unverifiable(_),
                ..
            },
        ) => Err(stale).context("the dropped LP stream's binding"),
    }
}

/// A suspend through the stale binding: refused as `QueueRefused`, and nothing suspended
/// (`suspended`: whether the mechanism holds any of the stage's queues afterwards).
pub fn judge_refusal(r: Result<(), preempt_api::Error>, suspended: bool) -> Result<(), Error> {
    if suspended {
        return Err(failed!("a suspend through a stale binding left a queue suspended"));
    }
    match r {
        Err(e) if e.kind == ErrorKind::QueueRefused => Ok(()),
        Err(e) => Err(e).context("a suspend through a stale binding failed, but not as QueueRefused"),
        Ok(()) => Err(failed!(
            "a suspend through a stale binding was not refused (it went to the kernel)"
        )),
    }
}

/// The held command: it ran exactly once and stood still while suspended (a command whose
/// suspend did not take effect ends [`LONG_MS`] after its start, inside the hold; a saved one
/// ends after the resume).
pub fn judge_held(status: SlotStatus, span_ms: f64) -> Result<(), Error> {
    if status != SlotStatus::Complete {
        return Err(failed!(
            "the held LP command did not run exactly once: its slot says {status:?}"
        ));
    }
    #[allow(clippy::cast_precision_loss)] // milliseconds: a few hundred
    let (long, end) = (LONG_MS as f64, (SUSPEND_AT + HOLD).as_secs_f64() * 1e3);
    let want = long + (end - long) / 2.0;
    if span_ms < want {
        return Err(failed!(
            "the held LP command lasted {span_ms:.1} ms for {LONG_MS} ms of work held {HOLD:?} from {SUSPEND_AT:?}: \
             it did not stand still while suspended (expected >= {want:.0} ms)"
        ));
    }
    Ok(())
}

/// Runs the stage on `hip:index`.
pub fn run(index: u32) -> StageResult {
    let mut facts = json!({});
    let r = steps(index, &mut facts);
    super::outcome(r, facts)
}

/// This process's KFD queues on the GPU `gpu_id` (id, type, ring size), for the record.
fn queues(gpu_id: u32) -> serde_json::Value {
    match kfd::sysfs::proc_queues(&SysRoot::default(), std::process::id()) {
        Ok(qs) => json!(qs.iter().filter(|q| q.gpu_id == gpu_id).collect::<Vec<_>>()),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

fn count(v: &serde_json::Value) -> String {
    v.as_array().map_or("?".into(), |a| a.len().to_string())
}

fn steps(index: u32, facts: &mut serde_json::Value) -> Result<String, Error> {
    let settings = Settings::read(|k| std::env::var(k).ok());
    let (n, note) = settings.streams();
    facts["settings"] = json!(settings);
    facts["streams"] = json!(n);
    facts["note"] = json!(note);
    let prepared = gpu::prepare(&Prepare {
        device: index,
        kernel: KernelChoice::default(),
        t_ms: None,
        hp_stream: false,
    })
    .with_context(|| format!("preparing hip:{index}"))?;
    let gpu = &prepared.gpu;
    let v = gpu.hip().runtime_version().context("hipRuntimeGetVersion")?;
    let (a, b, c) = gpu_device::hip_rt::decode_version(v);
    let hip = format!("{a}.{b}.{c}");
    facts["hip_version"] = json!(hip);
    facts["hip_library"] = json!(gpu.hip().library_path());
    let PreparedLp { lv3, queue: lp } = prepared
        .lp(LpRequest {
            lv3: Some(Lv3Request::required(MechanismChoice::Auto, GracePeriod::SHORTEST)),
            slots: SLOTS,
        })
        .context("the Lv3 mechanism and the LP queue")?;
    let setup = lv3.ok_or_else(|| failed!("no Lv3 mechanism was built"))?;
    let pre = setup
        .preemptor
        .ok_or_else(|| failed!("no Lv3 mechanism works here: {}", setup.info.why))?;
    facts["mechanism"] = json!(pre.kind().name());
    let binding = lp
        .binding
        .clone()
        .ok_or_else(|| failed!("the LP queue was set up without its binding"))?;
    let t = *binding.target();
    facts["lp_queue"] = json!({"queue_id": t.queue_id, "gpu_id": t.gpu_id, "ring_base_address": t.ring_base_address});
    facts["queues_before"] = queues(t.gpu_id);
    super::interrupted()?;

    let streams = ordinary_streams(gpu, n)?;
    facts["queues_with_streams"] = queues(t.gpu_id);
    idle_then_synchronize(&streams)?;
    // The LP stream idled too: its synchronize is where clr would release it, were it not exempt.
    lp.queue
        .synchronize()
        .with_context(|| format!("the LP stream: synchronize after {IDLE:?} idle"))?;
    facts["queues_after"] = queues(t.gpu_id);
    judge_kept(binding.check())?;
    let (suspend_us, span_ms) = held_command(gpu, &lp, &pre, &binding)?;
    facts["running_suspend_us"] = json!(suspend_us);
    facts["held_command_ms"] = json!(span_ms);
    super::interrupted()?;

    let word = detection(gpu, &pre, &binding, facts)?;
    drop(streams);
    let note = note.map_or(String::new(), |n| format!(" ({n})"));
    Ok(format!(
        "{}: LP queue {} kept its binding through {n} ordinary streams idled {IDLE:?}{note} (HIP {hip}; {}; \
         this process's KFD queues on its GPU {} -> {}); a running {LONG_MS} ms command suspended in {suspend_us:.1} us, \
         held {HOLD:?}, ran exactly once ({span_ms:.1} ms); a dropped stream's binding checks {word} and its \
         suspend is refused (QueueRefused), nothing suspended",
        pre.kind(),
        t.queue_id,
        settings.describe(),
        count(&facts["queues_before"]),
        count(&facts["queues_after"]),
    ))
}

/// An ordinary stream and the buffer its one command wrote.
type Ordinary = (gpu_device::hip_rt::Stream, gpu_device::hip_rt::DeviceBuffer);

/// `n` ordinary (pooled) streams, each used once (a memset) and synchronized. They live until
/// the stage ends.
fn ordinary_streams(gpu: &GpuDevice, n: usize) -> Result<Vec<Ordinary>, Error> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let s = gpu
            .stream(StreamPriority::Normal)
            .with_context(|| format!("ordinary stream {i} of {n}"))?;
        let b = gpu
            .device()
            .alloc_device(4096)
            .with_context(|| format!("ordinary stream {i}: a buffer"))?;
        b.zero_async(&s)
            .with_context(|| format!("ordinary stream {i}: memset"))?;
        s.synchronize()
            .with_context(|| format!("ordinary stream {i}: synchronize"))?;
        v.push((s, b));
    }
    Ok(v)
}

/// The streams left idle for [`IDLE`], then synchronized again: clr tries to release an idle
/// pooled queue at each synchronize (docs/kfd-facts.md#dynamic-queues).
fn idle_then_synchronize(streams: &[Ordinary]) -> Result<(), Error> {
    let until = Instant::now() + IDLE;
    while Instant::now() < until {
        super::interrupted()?;
        std::thread::sleep(Duration::from_millis(100));
    }
    for (i, (s, _)) in streams.iter().enumerate() {
        s.synchronize()
            .with_context(|| format!("ordinary stream {i}: synchronize after {IDLE:?} idle"))?;
    }
    Ok(())
}

/// One LP command of [`LONG_MS`] on the kept queue, suspended [`SUSPEND_AT`] in through the
/// binding, held [`HOLD`], resumed; its suspend time (us) and its span on the GPU wall clock (ms).
fn held_command(gpu: &GpuDevice, lp: &LpQueue, pre: &Preemptor, binding: &QueueBinding) -> Result<(f64, f64), Error> {
    let khz = gpu.device().info.wall_clock_khz;
    // The nominal wall clock, as hip-smoke's 1 ms command: no calibration needed for 200 ms.
    let ticks = u64::from(khz) * LONG_MS;
    lp.queue
        .launch(0, DelayCmd { ticks })
        .context("running: launching the LP command")?;
    std::thread::sleep(SUSPEND_AT);
    let held = GpuSuspension::suspend(pre, binding).context("running: suspend")?;
    let suspend_us = held.report().total.as_secs_f64() * 1e6;
    std::thread::sleep(HOLD);
    held.resume().context("running: resume")?;
    lp.queue.synchronize().context("running: waiting for the LP command")?;
    let slot = lp
        .queue
        .read_slots(1)
        .context("running: reading its slot")?
        .first()
        .copied()
        .ok_or_else(|| failed!("running: no slot read back"))?;
    let span_ms = calib::ticks_to_ms(slot.wall_ticks(), khz);
    judge_held(slot.status(0, lp.queue.nblocks()), span_ms)?;
    Ok((suspend_us, span_ms))
}

/// A second LP queue, dropped with its binding kept: the binding must no longer check Ok, and a
/// suspend through it must be refused with nothing suspended. The word of its check.
fn detection(
    gpu: &GpuDevice,
    pre: &Preemptor,
    kept: &QueueBinding,
    facts: &mut serde_json::Value,
) -> Result<&'static str, Error> {
    let second = gpu.lp_queue(Some(pre), 1).context("detection: a second LP queue")?;
    let stale = second
        .binding
        .clone()
        .ok_or_else(|| failed!("detection: the second LP queue was set up without its binding"))?;
    let t = *stale.target();
    facts["dropped_queue"] = json!({"queue_id": t.queue_id, "gpu_id": t.gpu_id});
    drop(second);
    // hipStreamDestroy destroys a CU-mask stream's queue; give sysfs a moment to follow.
    let until = Instant::now() + GONE_WITHIN;
    let check = loop {
        let c = stale.check();
        if c.is_err() || Instant::now() >= until {
            break c;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Err(s) = &check {
        facts["dropped_check"] = json!(s.to_string());
    }
    let word = judge_dropped(check).context("detection")?;
    let r = match GpuSuspension::suspend(pre, &stale) {
        // Not refused (a bug): resume at once, then judge.
        Ok(held) => held.resume(),
        Err(e) => Err(e),
    };
    let suspended = pre.is_suspended(&t) || pre.is_suspended(kept.target());
    if let Err(e) = &r {
        facts["refusal"] = json!(e.to_string());
    }
    judge_refusal(r, suspended).context("detection")?;
    Ok(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd::sysfs::{QueueNode, SysfsError, SysfsErrorKind};
    use std::path::PathBuf;

    fn settings(q: Option<&str>, m: Option<&str>) -> Settings {
        Settings::read(|k| match k {
            "DEBUG_HIP_DYNAMIC_QUEUES" => q.map(str::to_string),
            "GPU_MAX_HW_QUEUES" => m.map(str::to_string),
            _ => None,
        })
    }

    #[test]
    fn the_streams_outnumber_clrs_pool() {
        assert_eq!(
            settings(None, None).streams(),
            (CLR_DEFAULT_MAX_HW_QUEUES + EXTRA_STREAMS, None)
        );
        assert_eq!(settings(None, Some("8")).streams(), (8 + EXTRA_STREAMS, None));
        for bad in ["0", "-1", "many", ""] {
            let (n, note) = settings(None, Some(bad)).streams();
            assert_eq!(n, CLR_DEFAULT_MAX_HW_QUEUES + EXTRA_STREAMS, "{bad:?}");
            assert!(note.is_some_and(|n| n.contains("GPU_MAX_HW_QUEUES")), "{bad:?}");
        }
        let (n, note) = settings(None, Some("1000")).streams();
        assert_eq!(n, MAX_STREAMS);
        assert!(note.is_some_and(|n| n.contains("bound")));
    }

    #[test]
    fn the_settings_say_value_or_unset() {
        let s = settings(Some("1"), None);
        assert_eq!(s.describe(), "DEBUG_HIP_DYNAMIC_QUEUES=1, GPU_MAX_HW_QUEUES unset");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v, json!({"DEBUG_HIP_DYNAMIC_QUEUES": "1", "GPU_MAX_HW_QUEUES": null}));
    }

    fn stale(change: Change) -> Stale {
        Stale {
            queue_id: 3,
            gpu_id: 0xbeef,
            path: PathBuf::from("/sys/class/kfd/kfd/proc/1/queues/3"),
            change,
            queues_now: Some(vec![]),
        }
    }

    #[test]
    fn a_stale_kept_binding_fails_and_says_so() {
        assert!(judge_kept(Ok(())).is_ok());
        let e = judge_kept(Err(stale(Change::Gone))).unwrap_err().to_string();
        assert!(e.contains("went stale") && e.contains("no longer exists"), "{e}");
    }

    #[test]
    fn a_dropped_binding_must_be_gone_or_replaced() {
        let (a, b) = (QueueNode { dev: 1, ino: 10 }, QueueNode { dev: 1, ino: 11 });
        assert_eq!(judge_dropped(Err(stale(Change::Gone))).ok(), Some("Gone"));
        assert_eq!(
            judge_dropped(Err(stale(Change::Replaced { was: a, now: b }))).ok(),
            Some("Replaced")
        );
        assert!(
            judge_dropped(Ok(()))
                .unwrap_err()
                .to_string()
                .contains("still checks Ok")
        );
        let unreadable = SysfsError {
            path: PathBuf::from("/sys/class/kfd/kfd/proc/1/queues"),
            kind: SysfsErrorKind::Missing,
        };
        assert!(judge_dropped(Err(stale(Change::Unverifiable(unreadable)))).is_err());
    }

    #[test]
    fn a_stale_suspend_must_be_refused_with_nothing_suspended() {
        let refused = || Err(preempt_api::Error::new(ErrorKind::QueueRefused, "stale"));
        assert!(judge_refusal(refused(), false).is_ok());
        assert!(judge_refusal(refused(), true).is_err(), "left suspended");
        assert!(judge_refusal(Ok(()), false).is_err(), "not refused");
        let other = Err(preempt_api::Error::new(ErrorKind::Device, "EIO"));
        assert!(
            judge_refusal(other, false)
                .unwrap_err()
                .to_string()
                .contains("not as QueueRefused")
        );
    }

    #[test]
    fn the_held_command_must_complete_once_and_stand_still() {
        let end = (SUSPEND_AT + HOLD).as_secs_f64() * 1e3;
        assert!(judge_held(SlotStatus::Complete, end).is_ok());
        #[allow(clippy::cast_precision_loss)]
        let long = LONG_MS as f64;
        assert!(
            judge_held(SlotStatus::Complete, long)
                .unwrap_err()
                .to_string()
                .contains("stand still")
        );
        assert!(judge_held(SlotStatus::Duplicated { done: 2, blocks: 4 }, end).is_err());
        assert!(judge_held(SlotStatus::NotRun, end).is_err());
    }
}
