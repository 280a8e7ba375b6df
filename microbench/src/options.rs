//! What a user asked for, typed and checked: the CLI (`cli.rs`) parses arguments into these
//! once, and nothing below `main` sees clap. The parsers here are the single definition of
//! what a valid T, device or format is; `cli.rs` hands them to clap.
pub use gpu_device::LpState;
use kfd::GracePeriod;
use lv3::{MechanismChoice, MechanismKind};
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Preemption level: 1 = progressive launching, 3 = interrupt/restore (CWSR on a GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    Lv1,
    Lv3,
}

impl Level {
    pub const ALL: [Level; 2] = [Level::Lv1, Level::Lv3];

    pub fn number(self) -> u8 {
        match self {
            Level::Lv1 => 1,
            Level::Lv3 => 3,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

impl FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "1" => Ok(Level::Lv1),
            "3" => Ok(Level::Lv3),
            _ => Err(format!(
                "invalid level {s:?}: 1 (progressive launching) or 3 (interrupt/restore)"
            )),
        }
    }
}

/// Written as the number, as every output always has.
impl Serialize for Level {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.number())
    }
}

/// The output format of every subcommand: text for people, JSON and CSV for machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Text,
    Json,
    Csv,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Text, Format::Json, Format::Csv];

    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Csv => "csv",
        }
    }
}

/// How HP requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Every 1/rate seconds.
    Fixed,
    /// A Poisson process of the rate: exponential gaps (seeded).
    Poisson,
}

impl Arrival {
    pub const ALL: [Arrival; 2] = [Arrival::Fixed, Arrival::Poisson];

    pub fn name(self) -> &'static str {
        match self {
            Arrival::Fixed => "fixed",
            Arrival::Poisson => "poisson",
        }
    }
}

/// A mode of `preempt-lat priority`: what runs, and which policy schedules it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// HP requests alone: the reference latency.
    StandaloneHp,
    /// LP commands alone: the reference throughput.
    StandaloneLp,
    /// Both, no scheduling.
    Native,
    /// Both; highest priority first through Lv1 (stop launching LP commands).
    Lv1,
    /// Both; highest priority first through Lv3 (suspend the LP queue where its work stands).
    Lv3,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::StandaloneHp,
        Mode::StandaloneLp,
        Mode::Native,
        Mode::Lv1,
        Mode::Lv3,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::StandaloneHp => "standalone-hp",
            Mode::StandaloneLp => "standalone-lp",
            Mode::Native => "native",
            Mode::Lv1 => "lv1",
            Mode::Lv3 => "lv3",
        }
    }

    /// Whether HP requests are issued / LP commands run in this mode.
    pub fn has_hp(self) -> bool {
        self != Mode::StandaloneLp
    }
    pub fn has_lp(self) -> bool {
        self != Mode::StandaloneHp
    }
}

/// Where to run: `auto` (an AMD GPU if usable, else the host device), `host`, or `hip:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceSpec {
    Auto,
    Host,
    Hip(u32),
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Host => f.write_str("host"),
            DeviceSpec::Hip(n) => write!(f, "hip:{n}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DeviceSpec::Auto),
            "host" => Ok(DeviceSpec::Host),
            _ => match s.strip_prefix("hip:").map(str::parse::<u32>) {
                Some(Ok(n)) => Ok(DeviceSpec::Hip(n)),
                _ => Err(format!(
                    "unknown device {s:?}: use auto, host, or hip:N (N = HIP device index, e.g. hip:0)"
                )),
            },
        }
    }
}

/// The largest T accepted: one command of 10 s is a stuck queue, not a measurement.
pub const MAX_T_MS: f64 = 10_000.0;

/// T in milliseconds: finite, > 0, at least 1 ns, at most [`MAX_T_MS`].
pub fn parse_t_ms(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds (e.g. 0.5)"))?;
    if !v.is_finite() {
        return Err(format!("T must be a finite number of milliseconds, not {s}"));
    }
    if v <= 0.0 {
        return Err(format!("T must be greater than 0 ms (got {v})"));
    }
    if v > MAX_T_MS {
        return Err(format!(
            "T = {v} ms is absurdly large: at most {MAX_T_MS} ms per command"
        ));
    }
    if v * 1e6 < 1.0 {
        return Err(format!("T = {v} ms is below 1 ns"));
    }
    Ok(v)
}

/// A rate or a duration: a finite number > 0, at most `max`.
pub fn parse_positive_f64(s: &str, what: &str, max: f64) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number ({what})"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("{what} must be a finite number greater than 0 (got {s})"));
    }
    if v > max {
        return Err(format!("{what} = {v} is too large: at most {max}"));
    }
    Ok(v)
}

/// A whole number >= 1.
pub fn parse_positive(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a positive whole number")),
    }
}

/// Options shared by measurements and sweeps.
#[derive(Debug, Clone)]
pub struct Common {
    /// Lv1: at most this many LP commands in flight.
    pub threshold: u32,
    /// Lv1: a sync point every this many commands.
    pub batch: u32,
    pub device: DeviceSpec,
    /// Seed of the random gaps between HP requests.
    pub seed: u64,
    pub mechanism: MechanismChoice,
    /// `--grace`, if given: the CP's wave-save grace period for dbg-trap and ioctl.
    pub grace: Option<GracePeriod>,
    /// Host device: LP worker processes (`None`: cores - 1, at least 1).
    pub workers: Option<u32>,
    /// No progress bar.
    pub quiet: bool,
}

impl Common {
    /// The grace period Lv3 asks for: `--grace`, else [`GracePeriod::SHORTEST`] (ROCdbgapi's
    /// choice; see docs/kfd-facts.md#grace-period).
    pub fn grace(&self) -> GracePeriod {
        self.grace.unwrap_or(GracePeriod::SHORTEST)
    }

    /// Cross-field checks: the one-line reason a combination is refused (a usage error).
    pub fn check(&self) -> Result<(), String> {
        if let Some(g) = self.grace {
            if self.device == DeviceSpec::Host {
                return Err(format!(
                    "--grace {g} applies to Lv3 on an AMD GPU (dbg-trap, ioctl); the host device's SIGSTOP has no grace period"
                ));
            }
            if self.mechanism == MechanismChoice::Only(MechanismKind::UpdateQueue) {
                return Err(format!(
                    "--grace {g}: update-queue cannot set a grace period (UPDATE_QUEUE has no such argument; the \
                     device's setting applies): drop --grace or use --mechanism dbg-trap|ioctl"
                ));
            }
        }
        if self.device == DeviceSpec::Host && self.mechanism != MechanismChoice::Auto {
            return Err(format!(
                "--mechanism {} needs an AMD GPU (--device hip:N); the host device's Lv3 is SIGSTOP/SIGCONT (use --mechanism auto)",
                self.mechanism
            ));
        }
        if self.threshold < self.batch {
            return Err(format!(
                "--threshold ({}) must be >= --batch ({}): a batch larger than the threshold could never complete",
                self.threshold, self.batch
            ));
        }
        Ok(())
    }
}

/// `--lp-state heavy` with `--device host` (or `sweep state` there): refused, because the host
/// device's LP commands are CPU worker processes with no GPU wave state for a save to move.
/// `light` on the host device is accepted and recorded as not applicable.
pub fn check_lp_state(device: DeviceSpec, state: LpState) -> Result<(), String> {
    if device == DeviceSpec::Host && state == LpState::Heavy {
        return Err(HOST_HAS_NO_LP_STATE.replace("{what}", "--lp-state heavy"));
    }
    Ok(())
}

/// Why the host device has no LP state (`{what}` = the option refused).
pub const HOST_HAS_NO_LP_STATE: &str = "{what} needs an AMD GPU (--device hip:N): the LP state is how much wave \
    state (VGPRs, AGPRs, LDS) the GPU's LP kernel leaves for CWSR to save, and the host device's LP commands are CPU \
    worker processes with none (its Lv3 is SIGSTOP/SIGCONT)";

/// One measurement (the default command).
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub level: Level,
    pub t_ms: f64,
    /// The LP kernel on a GPU (n.a. on the host device).
    pub lp_state: LpState,
    pub samples: u32,
    pub warmup: u32,
    pub format: Format,
    /// Write here instead of stdout.
    pub out: Option<PathBuf>,
    /// A Chrome trace-event timeline of the run.
    pub trace: Option<PathBuf>,
    pub common: Common,
}

/// `sweep t`: levels x T.
#[derive(Debug, Clone)]
pub struct SweepTOptions {
    pub levels: Vec<Level>,
    pub t_ms: Vec<f64>,
    pub lp_state: LpState,
    pub samples: u32,
    pub warmup: u32,
    pub out_dir: PathBuf,
    pub common: Common,
}

/// `sweep state`: levels x LP states at one T (GPU only).
#[derive(Debug, Clone)]
pub struct SweepStateOptions {
    pub levels: Vec<Level>,
    pub states: Vec<LpState>,
    pub t_ms: f64,
    pub samples: u32,
    pub warmup: u32,
    pub out_dir: PathBuf,
    pub common: Common,
}

/// `sweep threshold`: Lv1 overhead against the threshold for several T.
#[derive(Debug, Clone)]
pub struct SweepThresholdOptions {
    pub thresholds: Vec<u32>,
    pub t_ms: Vec<f64>,
    pub lp_state: LpState,
    pub commands: u32,
    pub out_dir: PathBuf,
    pub common: Common,
}

/// `launcher-cost`.
#[derive(Debug, Clone)]
pub struct LauncherCostOptions {
    pub commands: u32,
    pub common: Common,
}

/// `doctor`.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    pub format: Format,
    /// Read sysfs/procfs/dev under this root instead of `/` (fixtures).
    pub root: PathBuf,
}

/// `validate`.
#[derive(Debug, Clone)]
pub struct ValidateOptions {
    pub format: Format,
    /// The hardware checks on every HIP device, not only hip:0.
    pub all_gpus: bool,
    pub t_ms: f64,
    pub cycles: u32,
}

/// `priority`: HP requests against a saturating LP stream, per mode.
#[derive(Debug, Clone)]
pub struct PriorityOptions {
    /// In run order (standalone modes first: the others are compared with them).
    pub modes: Vec<Mode>,
    /// HP requests per second.
    pub hp_rate: f64,
    pub arrival: Arrival,
    /// One HP command, in ms.
    pub hp_t_ms: f64,
    /// HP commands per request.
    pub hp_cmds: u32,
    /// One LP command (T), in ms.
    pub t_ms: f64,
    /// How long each mode runs, in seconds.
    pub duration_s: f64,
    /// Text, JSON or CSV on stdout (the files in `out_dir` are written either way).
    pub format: Format,
    /// priority.{csv,json,svg} go here.
    pub out_dir: PathBuf,
    /// A Chrome trace-event timeline of every mode.
    pub trace: Option<PathBuf>,
    pub common: Common,
}

impl PriorityOptions {
    /// HP work per second of wall time: rate x commands x HP T.
    pub fn hp_load(&self) -> f64 {
        self.hp_rate * f64::from(self.hp_cmds) * self.hp_t_ms / 1000.0
    }

    /// Cross-field checks: the one-line reason a combination is refused (a usage error).
    pub fn check(&self) -> Result<(), String> {
        let load = self.hp_load();
        if load >= 0.9 {
            return Err(format!(
                "--hp-rate x --hp-cmds x --hp-t-ms = {load:.2} s of HP work per second: the HP requests alone would \
                 (nearly) saturate the device; lower one of them"
            ));
        }
        if self.duration_s * self.hp_rate < 1.0 && self.modes.iter().any(|m| m.has_hp()) {
            return Err(format!(
                "--duration-s {} at --hp-rate {} makes no HP request: raise either",
                self.duration_s, self.hp_rate
            ));
        }
        Ok(())
    }
}

/// `report`: JSON results merged into one table and one plot.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub files: Vec<PathBuf>,
    pub format: Format,
    /// report.{csv,json,svg} go here.
    pub out_dir: PathBuf,
}

/// The command to run, as parsed.
#[derive(Debug, Clone)]
pub enum Command {
    Run(RunOptions),
    Doctor(DoctorOptions),
    Validate(ValidateOptions),
    SweepT(SweepTOptions),
    SweepState(SweepStateOptions),
    SweepThreshold(SweepThresholdOptions),
    LauncherCost(LauncherCostOptions),
    Priority(PriorityOptions),
    Report(ReportOptions),
    /// Internal: be `validate`'s bystander process.
    BystanderWorker(BystanderWorkerOptions),
}

/// `__bystander-worker`: delay kernels one after another until stdin closes.
#[derive(Debug, Clone, Copy)]
pub struct BystanderWorkerOptions {
    /// `host` (a CPU spin, for tests) or `hip:N`.
    pub device: DeviceSpec,
    /// One kernel, in us.
    pub kernel_us: f64,
    /// Stop after this long even if stdin stays open.
    pub max_duration_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_is_checked_with_a_reason() {
        assert_eq!(parse_t_ms("0.5"), Ok(0.5));
        for (s, want) in [
            ("0", "greater than 0"),
            ("-1", "greater than 0"),
            ("NaN", "finite"),
            ("1e9", "absurdly large"),
            ("x", "not a number"),
            ("1e-7", "below 1 ns"),
        ] {
            assert!(parse_t_ms(s).unwrap_err().contains(want), "{s}");
        }
    }

    #[test]
    fn devices_levels_and_formats_round_trip() {
        for d in [DeviceSpec::Auto, DeviceSpec::Host, DeviceSpec::Hip(3)] {
            assert_eq!(d.to_string().parse::<DeviceSpec>(), Ok(d));
        }
        assert!("gpu7".parse::<DeviceSpec>().unwrap_err().contains("unknown device"));
        for l in Level::ALL {
            assert_eq!(l.to_string().parse::<Level>(), Ok(l));
        }
        assert!("2".parse::<Level>().is_err());
        assert_eq!(serde_json::to_string(&Level::Lv3).unwrap(), "3");
        assert_eq!(serde_json::to_string(&Format::Csv).unwrap(), "\"csv\"");
    }

    #[test]
    fn common_cross_checks() {
        let ok = Common {
            threshold: 8,
            batch: 4,
            device: DeviceSpec::Auto,
            seed: 1,
            mechanism: MechanismChoice::Auto,
            grace: None,
            workers: None,
            quiet: true,
        };
        assert!(ok.check().is_ok());
        assert_eq!(
            ok.grace(),
            GracePeriod::Clocks1k(1),
            "ROCdbgapi's shortest grace by default"
        );
        assert!(
            Common {
                threshold: 2,
                ..ok.clone()
            }
            .check()
            .unwrap_err()
            .contains("--threshold (2) must be >= --batch (4)")
        );
        let host_dbg = Common {
            device: DeviceSpec::Host,
            mechanism: "dbg-trap".parse().unwrap(),
            ..ok
        };
        assert!(host_dbg.check().unwrap_err().contains("needs an AMD GPU"));
        let uq_grace = Common {
            device: DeviceSpec::Hip(0),
            mechanism: "update-queue".parse().unwrap(),
            grace: Some(GracePeriod::Clocks1k(4)),
            ..ok.clone()
        };
        assert!(
            uq_grace
                .check()
                .unwrap_err()
                .contains("update-queue cannot set a grace period")
        );
        let host_grace = Common {
            device: DeviceSpec::Host,
            grace: Some(GracePeriod::Default),
            ..ok.clone()
        };
        assert!(host_grace.check().unwrap_err().contains("SIGSTOP has no grace period"));
        let dbg_grace = Common {
            device: DeviceSpec::Hip(0),
            mechanism: "dbg-trap".parse().unwrap(),
            grace: Some(GracePeriod::Default),
            ..ok
        };
        assert!(dbg_grace.check().is_ok());
        assert_eq!(dbg_grace.grace(), GracePeriod::Default);
    }

    #[test]
    fn grace_parses_numbers_and_default() {
        assert_eq!("default".parse::<GracePeriod>(), Ok(GracePeriod::Default));
        assert_eq!("0".parse::<GracePeriod>(), Ok(GracePeriod::Clocks1k(0)));
        assert_eq!("255".parse::<GracePeriod>(), Ok(GracePeriod::Clocks1k(255)));
        assert!("256".parse::<GracePeriod>().unwrap_err().contains("0-255"));
        assert_eq!(GracePeriod::Clocks1k(7).to_string(), "7");
    }

    #[test]
    fn heavy_lp_state_is_refused_on_the_host_device_only() {
        let e = check_lp_state(DeviceSpec::Host, LpState::Heavy).unwrap_err();
        assert!(
            e.starts_with("--lp-state heavy needs an AMD GPU") && e.contains("processes with none"),
            "{e}"
        );
        assert!(check_lp_state(DeviceSpec::Host, LpState::Light).is_ok());
        for d in [DeviceSpec::Auto, DeviceSpec::Hip(0)] {
            assert!(check_lp_state(d, LpState::Heavy).is_ok(), "{d}");
        }
    }
}
