//! The interposer stage: an unmodified HIP program with two streams at two priorities
//! (examples/hip/two_priorities.c, [`program`]) compiled with the system's C compiler, then run
//! three times, each bounded in time: alone (no LP work), beside its busy LP stream without the
//! interposer, and the same under it (`LD_PRELOAD` of `libpreempt_hip.so`, built by the same
//! cargo profile as this executable). It passes when every run exits 0 with every LP command
//! done exactly once, the interposer suspended the LP stream and resumed it as often, with no
//! failure, and the HP P99 under it is below the P99 without it (P50 on the host device, whose
//! few requests make P99 their maximum). docs/hardware-validation.md section 12 has the commands
//! to run the same by hand.
//!
//! On `hip:N` the program links the libamdhip64 the device layer loads (with the headers of its
//! install), runs on that GPU alone (`HIP_VISIBLE_DEVICES`), and loads the delay kernels that
//! gpu-device compiles with hiprtc. On the host device it runs on the stand-in runtime
//! (hip-standin, under libamdhip64's names) with kernels that fill the device
//! (`PREEMPT_STANDIN_CUS=exclusive`): only there does a request wait for the running LP kernel,
//! which is what the interposer removes; with the host's scheduler sharing the CPUs instead, a
//! run without the interposer can be as fast as one under it (docs/interposer.md's benchmarks).
//! Host figures are labelled as such.
//!
//! Every run is in-process scheduling only (`PREEMPT_SCHEDULER=none`): a node's scheduler daemon,
//! if one runs, would add its round trip to each request and mix other processes into the
//! figures; section 12 runs the daemon case by hand.
//!
//! A prerequisite that is missing (the interposer or, on the host, the stand-in and host worker
//! not built; `cc` or HIP's headers not installed) is SKIP on the host device, where the stage
//! is a convenience of a development machine, and FAIL on a GPU, where this stage is the
//! interposer's only hardware check and a green run without it would claim what was not
//! measured; either way its line names what provides it.
pub mod program;
pub mod setup;

use super::StageResult;
use crate::acceptance::runner;
use crate::acceptance::summary::Status;
use crate::error::{Context, Error, failed};
use crate::measure::control::stop_requested;
use preempt_api::DeviceSpec;
use program::{ExitLine, Invocation, Mode, ProgramLine, Workload};
use serde::Serialize;
use serde_json::json;
use setup::{Compile, Link, Problem};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Each child's bound (the compile, each run), `--quick`'s and the full run's: a run takes about
/// a second on the host device and a few on a GPU; what runs over is a hang (a dependency the
/// interposer's rule does not know, a stream left suspended), killed and reported.
fn child_bound(quick: bool) -> Duration {
    Duration::from_secs(if quick { 30 } else { 60 })
}

/// The interposer lines kept per run.
const LINES_KEPT: usize = 8;

/// The program's environment, apart from `LD_PRELOAD` (set for [`Mode::With`] only, removed
/// otherwise: one set by the user would be in every run).
#[derive(Debug, Clone, Default)]
struct ProgramEnv {
    set: Vec<(&'static str, OsString)>,
    unset: Vec<&'static str>,
}

/// One run as it went.
#[derive(Debug, Clone, Serialize)]
struct RunRecord {
    mode: Mode,
    /// The command line, environment first, to run it again by hand.
    command: String,
    /// How it ended (exit status, or what stopped it).
    ended: String,
    exit: Option<i32>,
    seconds: f64,
    #[serde(flatten)]
    line: Option<ProgramLine>,
    /// Why there is no line.
    #[serde(skip_serializing_if = "Option::is_none")]
    line_error: Option<String>,
    /// The interposer's exit line (under it only).
    #[serde(skip_serializing_if = "Option::is_none")]
    interposer: Option<ExitLine>,
    interposer_lines: Vec<String>,
    /// The last line of its stderr that is not the interposer's (a HIP error says why).
    stderr_last: String,
}

/// Runs the stage for `device` (`hip:N` or the host device), writing into `dir`.
pub fn run(device: DeviceSpec, quick: bool, dir: &Path) -> StageResult {
    let host = device.is_host();
    let mut facts = json!({ "host_figures": host });
    let r = steps(device, quick, dir, &mut facts);
    result(r, host, facts)
}

/// The stage's result from its steps: a missing prerequisite is SKIP on the host device and FAIL
/// on a GPU (the module's docs say why).
fn result(r: Result<String, Problem>, host: bool, facts: serde_json::Value) -> StageResult {
    match r {
        Err(Problem::Missing(m)) => StageResult {
            status: if host { Status::Skip } else { Status::Fail },
            reason: m.to_string(),
            facts,
        },
        Err(Problem::Failed(e)) => super::outcome(Err(e), facts),
        Ok(reason) => super::outcome(Ok::<_, Error>(reason), facts),
    }
}

fn steps(device: DeviceSpec, quick: bool, dir: &Path, facts: &mut serde_json::Value) -> Result<String, Problem> {
    let host = device.is_host();
    for (name, text) in program::SOURCES {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    let scratch = setup::Scratch::new()?;
    let b = Build {
        profile: setup::profile_dir()?,
        scratch: scratch.0.clone(),
        source: dir.join(program::PROGRAM_SOURCE),
        exe: scratch.0.join("two_priorities"),
        log: dir.join("compile.txt"),
        bound: child_bound(quick),
    };
    let ready = match device {
        DeviceSpec::Hip(index) => gpu_side(index, &b, facts)?,
        _ => host_side(&b, facts)?,
    };
    let work = Workload::of(host, quick);
    facts["workload"] = json!(work);
    let mut runs = Vec::new();
    for mode in Mode::ALL {
        super::interrupted()?;
        let inv = Invocation {
            program: b.exe.clone(),
            code_object: ready.code_object.clone(),
            mode,
            work,
        };
        let r = run_once(&inv, &ready.env, dir, b.bound)?;
        facts["runs"][mode.name()] = json!(r);
        runs.push(r);
    }
    let judged = judge(&runs, &work, host);
    if let (Some(with), Some(without)) = (line_of(&runs, Mode::With), line_of(&runs, Mode::Without))
        && without.hp_p99_us > 0.0
    {
        facts["hp_p99_with_over_without"] = json!(with.hp_p99_us / without.hp_p99_us);
    }
    judged.map_err(|why| Problem::Failed(Error::msg(why)))
}

/// Where the program is built from and into, and each child's bound.
struct Build {
    /// This executable's `target/<profile>/`.
    profile: PathBuf,
    scratch: PathBuf,
    source: PathBuf,
    exe: PathBuf,
    /// `compile.txt`, in the stage's directory.
    log: PathBuf,
    bound: Duration,
}

impl Build {
    /// Compiles the program with `cc` (headers in `include`, else cc's own path), linked as
    /// `link`; `looked` and `provides` for the line of a missing compiler or header.
    fn compile(
        &self,
        include: Option<PathBuf>,
        link: Link,
        looked: &str,
        provides: (&'static str, &'static str),
    ) -> Result<(), Problem> {
        Compile {
            source: self.source.clone(),
            output: self.exe.clone(),
            include,
            link,
        }
        .run(&self.log, self.bound, looked, provides)
    }
}

/// What the runs need once the program is built: its environment and the code object it loads.
struct Ready {
    env: ProgramEnv,
    code_object: PathBuf,
}

/// The interposer and what every run shares: in-process scheduling only, the interposer's lines
/// on.
fn with_common(mut env: ProgramEnv, interposer: PathBuf) -> ProgramEnv {
    env.set.push(("PREEMPT_SCHEDULER", "none".into()));
    env.set.push(("PREEMPT_INTERPOSE_LOG", "1".into()));
    env.set.push(("LD_PRELOAD", interposer.into()));
    env
}

/// On the host device: the interposer, the stand-in and the host worker as cargo built them, the
/// stand-in under libamdhip64's names (the program is linked against it there and finds it there
/// again), and kernels that fill the device.
fn host_side(b: &Build, facts: &mut serde_json::Value) -> Result<Ready, Problem> {
    let mut wanted = vec![
        (setup::INTERPOSER_LIB, "hip-interpose"),
        (setup::STANDIN_LIB, "hip-standin"),
    ];
    let worker_env = std::env::var_os(preempt_api::host::WORKER_ENV).filter(|w| !w.is_empty());
    if worker_env.is_none() {
        wanted.push((preempt_api::host::WORKER_NAME, "host-device"));
    }
    let found = setup::built(&b.profile, &wanted)?;
    let (interposer, standin) = (found[0].clone(), &found[1]);
    let worker = worker_env.unwrap_or_else(|| found[2].clone().into());
    let standin_dir = setup::standin_dir(&b.scratch, standin)?;
    facts["interposer_library"] = json!(interposer);
    facts["runtime"] = json!(format!(
        "the stand-in HIP runtime ({}), kernels filling the device (PREEMPT_STANDIN_CUS=exclusive)",
        standin.display()
    ));
    b.compile(
        None,
        Link::Dir(standin_dir.clone()),
        "cc's own search path",
        (setup::HOST_PROVIDES, setup::HOST_PROVIDES),
    )?;
    // The stand-in reads no code object; the program wants a file all the same.
    let code_object = b.scratch.join("standin.co");
    std::fs::write(&code_object, b"the stand-in runtime reads no code object\n")
        .context("the stand-in's code object")?;
    let env = ProgramEnv {
        set: vec![
            ("LD_LIBRARY_PATH", standin_dir.into()),
            (preempt_api::host::WORKER_ENV, worker),
            ("PREEMPT_STANDIN_CUS", "exclusive".into()),
        ],
        unset: Vec::new(),
    };
    Ok(Ready {
        env: with_common(env, interposer),
        code_object,
    })
}

/// On `hip:index`: the interposer as cargo built it; the device made the program's device 0; the
/// delay kernels compiled by gpu-device (hiprtc, for the device's own target) into a code object
/// file; the program linked against the very libamdhip64 file the device layer loaded, with the
/// headers of its install.
fn gpu_side(index: u32, b: &Build, facts: &mut serde_json::Value) -> Result<Ready, Problem> {
    let interposer = setup::built(&b.profile, &[(setup::INTERPOSER_LIB, "hip-interpose")])?.remove(0);
    facts["interposer_library"] = json!(interposer);
    let var = |k: &str| std::env::var(k).ok();
    let visible = setup::visible_device(
        index,
        var("HIP_VISIBLE_DEVICES").as_deref(),
        var("CUDA_VISIBLE_DEVICES").as_deref(),
    )
    .map_err(Error::msg)?;
    let hip = gpu_device::hip_rt::Hip::load().context("loading HIP")?;
    let dev = hip.device(index).with_context(|| format!("opening hip:{index}"))?;
    let arch = gpu_device::gfx_target(&dev.info).context("its gfx target")?;
    let code = gpu_device::kernel::compile(&hip, &arch).context("compiling the delay kernels with hiprtc")?;
    let code_object = b.scratch.join("delay.co");
    std::fs::write(&code_object, &code.image).context("writing the code object")?;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let file = setup::mapped_hip(&maps)
        .or_else(|| Some(PathBuf::from(hip.library_path())).filter(|p| p.is_absolute()))
        .ok_or_else(|| failed!("cannot tell which libamdhip64 file was loaded ({})", hip.library_path()))?;
    let looked = setup::include_candidates(&file, var("ROCM_PATH").as_deref());
    let include = setup::include_dir(&looked);
    facts["runtime"] = json!(file);
    facts["include"] = json!(include);
    facts["gfx"] = json!(arch.offload_arch());
    facts["code_object_bytes"] = json!(code.image.len());
    facts["hip_visible_devices"] = json!(visible);
    let looked: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
    b.compile(
        include,
        Link::File(file),
        &format!("{} and cc's own search path", looked.join(", ")),
        (setup::GPU_PROVIDES_CC, setup::GPU_PROVIDES_HEADERS),
    )?;
    let env = ProgramEnv {
        set: vec![("HIP_VISIBLE_DEVICES", visible.into())],
        unset: vec!["CUDA_VISIBLE_DEVICES"],
    };
    Ok(Ready {
        env: with_common(env, interposer),
        code_object,
    })
}

/// One run of the program, bounded; its output in `dir` as `<mode>.stdout.txt` and
/// `<mode>.stderr.txt`.
fn run_once(inv: &Invocation, env: &ProgramEnv, dir: &Path, bound: Duration) -> Result<RunRecord, Error> {
    let name = inv.mode.name();
    let (out_path, err_path) = (
        dir.join(format!("{name}.stdout.txt")),
        dir.join(format!("{name}.stderr.txt")),
    );
    let out = std::fs::File::create(&out_path).with_context(|| out_path.display().to_string())?;
    let err = std::fs::File::create(&err_path).with_context(|| err_path.display().to_string())?;
    let vars: Vec<(&str, OsString)> = env
        .set
        .iter()
        .filter(|(k, _)| *k != "LD_PRELOAD" || inv.mode.preloaded())
        .cloned()
        .collect();
    let args = inv.args();
    let mut cmd = Command::new(&inv.program);
    cmd.args(&args).stdout(out).stderr(err);
    for k in env
        .unset
        .iter()
        .chain(["LD_PRELOAD"].iter().filter(|_| !inv.mode.preloaded()))
    {
        cmd.env_remove(k);
    }
    cmd.envs(vars.iter().map(|(k, v)| (k, v)));
    let ended = runner::run(cmd, bound, &stop_requested, setup::QUICK_STOP)
        .with_context(|| format!("starting {}", inv.program.display()))?;
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let line = ProgramLine::parse(&stdout);
    Ok(RunRecord {
        mode: inv.mode,
        command: program::shell_line(&vars, &inv.program, &args),
        ended: ended.describe(),
        exit: ended.status.and_then(|s| s.code()),
        seconds: ended.seconds,
        line: line.as_ref().ok().copied(),
        line_error: line.err().map(|e| e.to_string()),
        interposer: ExitLine::find(&stderr),
        interposer_lines: program::interposer_lines(&stderr, LINES_KEPT),
        stderr_last: stderr
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("preempt-hip: "))
            .unwrap_or("")
            .to_string(),
    })
}

fn line_of(runs: &[RunRecord], mode: Mode) -> Option<&ProgramLine> {
    runs.iter().find(|r| r.mode == mode).and_then(|r| r.line.as_ref())
}

/// The verdict on the three runs: PASS's line, or the first check that failed.
fn judge(runs: &[RunRecord], work: &Workload, host: bool) -> Result<String, String> {
    for r in runs {
        let m = r.mode.name();
        let said = if r.stderr_last.is_empty() {
            String::new()
        } else {
            format!("; its stderr: {}", r.stderr_last)
        };
        if r.exit != Some(0) {
            return Err(format!("{m}: the program ended {}{said}", r.ended));
        }
        let l = r
            .line
            .as_ref()
            .ok_or_else(|| format!("{m}: {}{said}", r.line_error.as_deref().unwrap_or("no line")))?;
        let lp = if r.mode == Mode::Alone { 0 } else { u64::from(work.lp) };
        if l.lp_bad != 0 || l.lp_exactly_once != lp {
            return Err(format!(
                "{m}: {} of {lp} LP commands completed exactly once, {} did not",
                l.lp_exactly_once, l.lp_bad
            ));
        }
    }
    let with = runs
        .iter()
        .find(|r| r.mode == Mode::With)
        .ok_or("internal: no run under the interposer")?;
    let x = with.interposer.ok_or_else(|| {
        format!(
            "with: no exit line of the interposer on its stderr (PREEMPT_INTERPOSE_LOG=1): was it loaded? {}",
            with.interposer_lines
                .first()
                .map_or("(no line of it at all)", String::as_str)
        )
    })?;
    if x.suspends == 0 || x.suspends != x.resumes || x.failures != 0 {
        return Err(format!(
            "with: the interposer made {} suspends, {} resumes, {} failures (want as many resumes as suspends, \
             at least one, and no failure); {}",
            x.suspends,
            x.resumes,
            x.failures,
            with.interposer_lines.join(" | ")
        ));
    }
    let fig = |m: Mode| line_of(runs, m).map_or((0.0, 0.0), |l| (l.hp_p50_us, l.hp_p99_us));
    let ((a50, a99), (o50, o99), (w50, w99)) = (fig(Mode::Alone), fig(Mode::Without), fig(Mode::With));
    let figures = format!(
        "HP P50/P99 us alone {a50:.0}/{a99:.0}, without the interposer {o50:.0}/{o99:.0}, with it {w50:.0}/{w99:.0}"
    );
    let label = if host {
        "host figures (stand-in runtime, kernels filling the device): "
    } else {
        ""
    };
    // The statistic compared: P99 on a GPU; P50 on the host device, whose quick run has 15
    // requests (its P99 is their maximum, decided by one hiccup of the CPUs the host worker
    // shares with everything else) and whose figures show the mechanism, never a target.
    let (stat, with_it, without_it) = if host { ("P50", w50, o50) } else { ("P99", w99, o99) };
    if with_it >= without_it {
        return Err(format!(
            "{label}HP {stat} with the interposer is not below the run without it: {figures}"
        ));
    }
    Ok(format!(
        "{label}{figures} ({stat} {:.2}x without); {} suspends, as many resumes, 0 failures, {} marks; every LP command \
         exactly once ({} of {} ms)",
        with_it / without_it,
        x.suspends,
        x.marks,
        work.lp,
        work.lp_ms
    ))
}

#[cfg(test)]
mod tests;
