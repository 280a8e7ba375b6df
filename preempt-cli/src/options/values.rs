//! The values an option takes, and their parsers: the single definition of what a valid T,
//! device, level, mechanism, LP state, format, mode or arrival is. The device, the level and the
//! mechanism are the application API's grammar (`preempt_api`, as C and Python read them, with
//! the same error text); `preempt-lat` refuses, with what to use instead, the two words it
//! cannot run: the device `kfd` and the level `auto`.
use crate::error::{UsageError, usage};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Arg, Command, ValueEnum};
pub use gpu_device::LpState;
pub use preempt_api::{DeviceSpec, Level};
use preempt_api::{MechanismChoice, MechanismKind};
use serde::Serialize;
use std::ffi::OsStr;

/// The output format of every subcommand: text for people, JSON and CSV for machines
/// (`crate::output` has one exporter per format).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
    Csv,
}

impl Format {
    /// The formats written into `--out-dir` beside a plot (`<stem>.<extension>`).
    pub const FILES: [Format; 2] = [Format::Csv, Format::Json];

    /// The file name extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Json => "json",
            Format::Csv => "csv",
        }
    }
}

/// How requests arrive: `fixed`, every 1/rate seconds; `poisson`, a Poisson process of the rate
/// (exponential gaps, seeded); `lognormal`, log-normal gaps of mean 1/rate and shape `--sigma`
/// (bursty: XSched's Fig. 15b uses sigma 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    Fixed,
    Poisson,
    Lognormal,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Fixed => "fixed",
            Arrival::Poisson => "poisson",
            Arrival::Lognormal => "lognormal",
        }
    }
}

/// `priority --policy`: `hpf`, the mode comparison (HP requests against one LP stream), or with
/// `--class` highest priority first over classes; or a time-driven policy over classes (see
/// `priority --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    Hpf,
    Up,
    Kedf,
    Laxity,
}

impl PolicyKind {
    /// The policy in the API's one table of policy words (its clap word is that table's word: a
    /// test checks it).
    pub fn policy(self) -> preempt_api::Policy {
        match self {
            PolicyKind::Hpf => preempt_api::Policy::HighestFirst,
            PolicyKind::Up => preempt_api::Policy::Partition,
            PolicyKind::Kedf => preempt_api::Policy::KEdf,
            PolicyKind::Laxity => preempt_api::Policy::Laxity,
        }
    }

    /// The name outputs write.
    pub fn name(self) -> &'static str {
        self.policy().name()
    }
}

/// The shape of log-normal gaps when none is given (XSched's Fig. 15b).
pub const DEFAULT_SIGMA: f64 = 2.0;

/// `--shares 75:25`: positive whole weights, two or more (one value to clap, hence the type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shares(pub Vec<u32>);

/// Parses `--shares`.
pub fn parse_shares(s: &str) -> Result<Shares, UsageError> {
    let v: Vec<u32> = s
        .split(':')
        .map(|x| match x.parse::<u32>() {
            Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
            _ => Err(usage!(
                "--shares {s}: each share is a whole number from 1 to 1000000, e.g. 75:25"
            )),
        })
        .collect::<Result<_, _>>()?;
    if v.len() < 2 {
        return Err(usage!("--shares {s}: two shares or more, separated by ':', e.g. 75:25"));
    }
    Ok(Shares(v))
}

/// A mode of `preempt-lat priority`: what runs, and which policy schedules it (the variants'
/// docs are `--modes`' help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// HP requests alone (the reference latency)
    StandaloneHp,
    /// LP commands alone (the reference throughput)
    StandaloneLp,
    /// both, no scheduling (host: two sets of workers sharing the CPUs)
    Native,
    /// highest priority first through Lv1 (stop launching LP commands)
    Lv1,
    /// highest priority first through Lv2 (the running LP command finishes, no new one starts; host device only:
    /// no per-queue Lv2 on gfx942 under HWS)
    Lv2,
    /// highest priority first through Lv3 (SIGSTOP on the host device)
    Lv3,
}

impl Mode {
    /// In run order: the standalone modes first (the others are compared with them), then the
    /// scheduled ones by level.
    pub const ALL: [Mode; 6] = [
        Mode::StandaloneHp,
        Mode::StandaloneLp,
        Mode::Native,
        Mode::Lv1,
        Mode::Lv2,
        Mode::Lv3,
    ];

    /// The modes `device` (`auto` resolved) can run, in run order: every one but lv2 where the
    /// device has no Lv2 (an AMD GPU: docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws).
    pub fn on(device: DeviceSpec) -> Vec<Mode> {
        Mode::ALL
            .into_iter()
            .filter(|&m| m.level() != Some(Level::Lv2) || device.has_lv2())
            .collect()
    }

    /// The level the LP stream is suspended at under highest priority first (`None`: the mode
    /// does not schedule it).
    pub fn level(self) -> Option<Level> {
        match self {
            Mode::StandaloneHp | Mode::StandaloneLp | Mode::Native => None,
            Mode::Lv1 => Some(Level::Lv1),
            Mode::Lv2 => Some(Level::Lv2),
            Mode::Lv3 => Some(Level::Lv3),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::StandaloneHp => "standalone-hp",
            Mode::StandaloneLp => "standalone-lp",
            Mode::Native => "native",
            Mode::Lv1 => "lv1",
            Mode::Lv2 => "lv2",
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

/// A value of the grammar: parsed, and its error worded, by `parse`; listed in `--help` as
/// `names`.
#[derive(Clone)]
pub struct Words<T> {
    parse: fn(&str) -> Result<T, UsageError>,
    names: Vec<PossibleValue>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Words<T> {
    type Value = T;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<T, clap::Error> {
        self.parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        (!self.names.is_empty()).then(|| Box::new(self.names.iter().cloned()) as Box<dyn Iterator<Item = _>>)
    }
}

/// Why `preempt-lat` refuses the device `kfd`.
pub const KFD_IS_FOR_APPLICATIONS: &str = "kfd binds KFD queue ids a scheduler already has, which is the C and \
    Python API's (preempt_queue_bind, Session.bind_queue); preempt-lat runs its LP work on a queue of its own: use \
    hip:N, host or auto";

/// Why `preempt-lat` refuses the level `auto`.
pub const AUTO_LEVEL_IS_FOR_APPLICATIONS: &str = "auto (Lv3 where the session has an Lv3 mechanism, else Lv1) is \
    the C and Python API's choice for applications; a measurement names the level it measures: use 3 \
    (interrupt/restore), 2 (deactivate, host device) or 1 (progressive launching)";

/// `--level 2` (`option`: the option that asked for it) on a device known to have no Lv2 (an AMD
/// GPU): the API's refusal, one line, before anything runs. `auto` is checked once it resolved
/// (`Device::check_level`).
pub fn check_level(option: &str, device: DeviceSpec, level: Level) -> Result<(), UsageError> {
    match level {
        Level::Lv2 => refuse_lv2(&format!("{option} 2"), device),
        _ => Ok(()),
    }
}

/// `asked` (an option and its value that want Lv2, e.g. `--modes lv2`) on a device known to have
/// no Lv2: the API's refusal after `asked`, one line; `auto` is checked once it resolved.
pub fn refuse_lv2(asked: &str, device: DeviceSpec) -> Result<(), UsageError> {
    if device != DeviceSpec::Auto && !device.has_lv2() {
        return Err(usage!("{asked}: {}", preempt_api::lv2_unavailable(device).message));
    }
    Ok(())
}

/// `--device`: the API's devices but `kfd`; `--help` lists them from the API's table with what
/// each is.
pub fn device() -> Words<DeviceSpec> {
    Words {
        parse: |s| match s.parse::<DeviceSpec>() {
            Ok(DeviceSpec::Kfd) => Err(UsageError::new(KFD_IS_FOR_APPLICATIONS)),
            other => other.map_err(|e| UsageError::new(e.to_string())),
        },
        names: DeviceSpec::WORDS
            .into_iter()
            .filter(|&d| d != DeviceSpec::Kfd)
            .map(|d| PossibleValue::new(d.word()).help(d.summary()))
            .collect(),
    }
}

/// `--level`/`--levels`: the API's levels but `auto`; `--help` lists the numbers.
pub fn level() -> Words<Level> {
    Words {
        parse: |s| match s.parse::<Level>() {
            Ok(Level::Auto) => Err(UsageError::new(AUTO_LEVEL_IS_FOR_APPLICATIONS)),
            other => other.map_err(|e| UsageError::new(e.to_string())),
        },
        names: vec![
            PossibleValue::new("1").help("progressive launching (at most --threshold commands in flight)"),
            PossibleValue::new("2").help(
                "deactivate: the running commands finish, no new one starts (host device only: no per-queue Lv2 on \
                 gfx942 under HWS)",
            ),
            PossibleValue::new("3").help("interrupt/restore: CWSR on a GPU, SIGSTOP on the host device"),
        ],
    }
}

/// `--mechanism`: auto or one of lv3's mechanisms, listed from lv3's own identity with what each
/// is (`MechanismKind::summary`).
pub fn mechanism() -> Words<MechanismChoice> {
    let auto = format!(
        "the first usable of {}",
        MechanismKind::names_where(|_| true).join(", ")
    );
    let names = std::iter::once(PossibleValue::new("auto").help(auto))
        .chain(
            MechanismKind::AUTO_ORDER
                .into_iter()
                .map(|k| PossibleValue::new(k.name()).help(k.summary())),
        )
        // Old names get past clap's list (hidden from help) so that lv3's parse refuses them
        // with one line naming the new name, instead of clap's bare "invalid value".
        .chain(
            MechanismKind::RENAMED
                .into_iter()
                .map(|(old, _)| PossibleValue::new(old).hide(true)),
        );
    Words {
        parse: |s| preempt_api::parse_mechanism(s).map_err(|e| UsageError::new(e.to_string())),
        names: names.collect(),
    }
}

/// `--lp-state light|heavy`, from gpu-device's own names.
pub fn lp_state() -> impl TypedValueParser<Value = LpState> {
    let names = LpState::ALL.into_iter().map(|s| {
        PossibleValue::new(s.name()).help(match s {
            LpState::Light => "delay_kernel: a few VGPRs per wave, no LDS",
            LpState::Heavy => "delay_kernel_heavy: all 512 VGPRs+AGPRs per lane, 64 KiB LDS per block, 1 block per CU",
        })
    });
    PossibleValuesParser::new(names).try_map(|s| s.parse::<LpState>())
}

/// The largest T accepted: one command of 10 s is a stuck queue, not a measurement.
pub const MAX_T_MS: f64 = 10_000.0;

/// T in milliseconds: finite, > 0, at least 1 ns, at most [`MAX_T_MS`].
pub fn parse_t_ms(s: &str) -> Result<f64, UsageError> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| usage!("{s:?} is not a number of milliseconds (e.g. 0.5)"))?;
    if !v.is_finite() {
        return Err(usage!("T must be a finite number of milliseconds, not {s}"));
    }
    if v <= 0.0 {
        return Err(usage!("T must be greater than 0 ms (got {})", s.trim()));
    }
    if v > MAX_T_MS {
        return Err(usage!(
            "T = {} ms is absurdly large: at most {MAX_T_MS} ms per command",
            s.trim()
        ));
    }
    if v * 1e6 < 1.0 {
        return Err(usage!("T = {} ms is below 1 ns", s.trim()));
    }
    Ok(v)
}

/// A rate or a duration: a finite number > 0, at most `max`.
pub fn parse_positive_f64(s: &str, what: &str, max: f64) -> Result<f64, UsageError> {
    let v: f64 = s.trim().parse().map_err(|_| usage!("{s:?} is not a number ({what})"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(usage!("{what} must be a finite number greater than 0 (got {s})"));
    }
    if v > max {
        // The input as given: 1e308 printed as a number is 309 digits.
        return Err(usage!("{what} = {} is too large: at most {max}", s.trim()));
    }
    Ok(v)
}

/// A whole number >= 1.
/// The most preemptions one run or point measures (and the most warm-up ones): its samples are
/// kept in memory (~100 bytes each), and a million at T = 0.5 ms already take hours. Larger
/// counts are refused up front instead of failing an allocation mid-run.
pub const MAX_SAMPLES: u32 = 1_000_000;

/// A number of samples: 1..=[`MAX_SAMPLES`].
pub fn parse_samples(s: &str) -> Result<u32, UsageError> {
    let n = parse_positive(s)?;
    if n > MAX_SAMPLES {
        return Err(usage!(
            "{n} samples are too many for one run (at most {MAX_SAMPLES}): run several and merge them with \
             `preempt-lat report`"
        ));
    }
    Ok(n)
}

/// A number of warm-up samples: 0..=[`MAX_SAMPLES`].
pub fn parse_warmup(s: &str) -> Result<u32, UsageError> {
    match s.parse::<u32>() {
        Ok(n) if n <= MAX_SAMPLES => Ok(n),
        Ok(n) => Err(usage!("{n} warm-up samples are too many (at most {MAX_SAMPLES})")),
        Err(_) => Err(usage!("{s:?} is not a whole number")),
    }
}

/// The most LP commands `--threshold` may keep in flight: the launcher keeps 2 x threshold + 2
/// submitted ahead of it (in memory) and an Lv1 suspend waits for all in flight; XSched's own
/// thresholds are tens.
pub const MAX_THRESHOLD: u32 = 65_536;

/// The most LP work, in seconds, an Lv1 suspend may wait for (threshold x T; a run's final drain
/// waits about twice that): a sample must end in a time a user waits for.
pub const MAX_IN_FLIGHT_S: f64 = 600.0;

/// The most commands one throughput or cost measurement submits (all at once: they are held
/// in memory until launched).
pub const MAX_COMMANDS: u32 = 1_000_000;

/// The most host worker processes: each is a process of its own, spinning a CPU.
pub const MAX_WORKERS: u32 = 1024;

/// The most HP commands per request (their records are held until the request completes).
pub const MAX_HP_CMDS: u32 = 10_000;

/// A whole number 1..=`max` of `what`, refused with the bound and why (`why`).
fn parse_at_most(s: &str, max: u32, what: &str, why: &str) -> Result<u32, UsageError> {
    let n = parse_positive(s)?;
    if n > max {
        return Err(usage!("{n} {what} are too many (at most {max}: {why})"));
    }
    Ok(n)
}

/// `--threshold`, `--thresholds`: 1..=[`MAX_THRESHOLD`].
pub fn parse_threshold(s: &str) -> Result<u32, UsageError> {
    parse_at_most(
        s,
        MAX_THRESHOLD,
        "LP commands in flight",
        "the launcher keeps twice as many submitted ahead",
    )
}

/// `--commands`: 1..=[`MAX_COMMANDS`].
pub fn parse_commands(s: &str) -> Result<u32, UsageError> {
    parse_at_most(s, MAX_COMMANDS, "commands", "they are submitted at once")
}

/// `--workers`: 1..=[`MAX_WORKERS`].
pub fn parse_workers(s: &str) -> Result<u32, UsageError> {
    parse_at_most(s, MAX_WORKERS, "worker processes", "each spins a CPU")
}

/// `--hp-cmds`: 1..=[`MAX_HP_CMDS`].
pub fn parse_hp_cmds(s: &str) -> Result<u32, UsageError> {
    parse_at_most(
        s,
        MAX_HP_CMDS,
        "HP commands per request",
        "their records wait for the request",
    )
}

/// `validate --cycles`: 1..=[`MAX_SAMPLES`] (each cycle is a sample of a run).
pub fn parse_cycles(s: &str) -> Result<u32, UsageError> {
    parse_at_most(s, MAX_SAMPLES, "cycles", "each is a sample of a run, kept in memory")
}

/// The most LP work, in seconds, of one throughput measurement of `sweep threshold` and
/// `overhead` (on a GPU a Ctrl-C waits for the direct launches under way: a running kernel
/// cannot be stopped; the host device's are killed after the bounded close).
pub const MAX_MEASUREMENT_S: f64 = 3600.0;

/// `commands` x `t_ms` of LP work in one measurement, at most [`MAX_MEASUREMENT_S`]: the
/// one-line reason otherwise.
pub fn check_measurement(commands: u32, t_ms: f64) -> Result<(), UsageError> {
    let s = f64::from(commands) * t_ms / 1000.0;
    if s > MAX_MEASUREMENT_S {
        return Err(usage!(
            "--commands {commands} x --t-ms {t_ms} = {s:.0} s of LP work per measurement (at most \
             {MAX_MEASUREMENT_S:.0} s: on a GPU Ctrl-C waits for the one under way); lower --commands or --t-ms"
        ));
    }
    Ok(())
}

/// `threshold` x `t_ms` of LP work in flight, at most [`MAX_IN_FLIGHT_S`]: the one-line reason
/// otherwise.
pub fn check_in_flight(threshold: u32, t_ms: f64) -> Result<(), UsageError> {
    let s = f64::from(threshold) * t_ms / 1000.0;
    if s > MAX_IN_FLIGHT_S {
        return Err(usage!(
            "--threshold {threshold} x --t-ms {t_ms} = {s:.0} s of LP work in flight: an Lv1 suspend waits for all of \
             it (at most {MAX_IN_FLIGHT_S:.0} s per sample); lower --threshold or --t-ms"
        ));
    }
    Ok(())
}

pub fn parse_positive(s: &str) -> Result<u32, UsageError> {
    match s.parse::<u32>() {
        Ok(0) => Err(UsageError::new("must be at least 1")),
        Ok(n) => Ok(n),
        Err(_) => Err(usage!("{s:?} is not a positive whole number")),
    }
}

#[cfg(test)]
mod tests;
