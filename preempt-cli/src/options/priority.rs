//! `priority`'s options: its modes, or with `--class` (or a time-driven policy) the class
//! experiment.
use super::preset::Preset;
use super::values::{self, Arrival, DeviceSpec, Format, Mode, PolicyKind};
use super::values::{parse_positive, parse_positive_f64, parse_shares, parse_t_ms};
use super::{Common, class};
use crate::error::{UsageError, usage};
use clap::Args;
use std::path::PathBuf;

/// `--duration-s` when neither it nor a preset says otherwise.
pub const DEFAULT_DURATION_S: f64 = 3.0;

/// `priority`: HP requests against a saturating LP stream, per mode.
#[derive(Debug, Clone, Args)]
pub struct PriorityOptions {
    /// Modes to run; they always run in the order listed here (the standalone ones first: the
    /// others are compared with them). Default: every mode the device has, all six on the host
    /// device, all but lv2 on a GPU (no per-queue Lv2 on gfx942 under HWS; lv2 asked for there is
    /// refused, docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub modes: Vec<Mode>,
    /// HP requests per second.
    #[arg(long, default_value = "20", value_parser = |s: &str| parse_positive_f64(s, "--hp-rate", 100_000.0), conflicts_with = "preset")]
    pub hp_rate: f64,
    /// How HP requests arrive: at a fixed rate, or as a Poisson process (seeded by --seed).
    #[arg(long, value_enum, default_value_t = Arrival::Poisson, conflicts_with = "preset")]
    pub arrival: Arrival,
    /// Execution time of one HP command, in ms.
    #[arg(long = "hp-t-ms", default_value = "2", value_parser = parse_t_ms, conflicts_with = "preset")]
    pub hp_t_ms: f64,
    /// HP commands per request (a request completes when its last command does), at most 10000.
    #[arg(long, default_value_t = 1, value_parser = values::parse_hp_cmds, conflicts_with = "preset")]
    pub hp_cmds: u32,
    /// T, the execution time of one LP command, in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    /// How long each mode (the class experiment: each run) runs, in seconds. Default 3, or the
    /// preset's own with --preset.
    #[arg(long = "duration-s", value_name = "SECONDS", value_parser = |s: &str| parse_positive_f64(s, "--duration-s", 3600.0))]
    pub duration_arg: Option<f64>,
    /// The duration in force: --duration-s, else the preset's, else 3 (set by [`Self::check`]).
    #[arg(skip = DEFAULT_DURATION_S)]
    pub duration_s: f64,
    /// One of the seeds' experiments in one flag (the MI308X test plan's sections): it sets the
    /// classes, the policy, the arrivals, --standalone (or, for 7.2.1, the HP load of the modes)
    /// and its own default --duration-s; --device, --duration-s, --out-dir, --format, --seed,
    /// --workers stay yours, and an option the preset sets is refused beside it.
    /// docs/priority.md#the-seeds-experiments-as-presets says what stands in for what.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Output format on stdout: text for people; json and csv carry every parameter and the environment.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Directory for priority.csv, priority.json, priority.svg and priority-cdf.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    /// Also write a timeline of every mode as Chrome trace-event JSON (Perfetto, chrome://tracing):
    /// at most 200000 events, shared by the modes (each keeps its first ones); it says how many it
    /// left out.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The policy. hpf without --class: the modes above (HP requests against one saturating LP
    /// stream). hpf with --class, up, kedf, laxity: the class experiment instead (every class an
    /// LP stream of one session, each with its own arrivals; --modes, --hp-* do not apply): hpf =
    /// while a class has work, the classes of lower prio= are suspended (Example 5's high,
    /// normal and low), up = utilization partition (one queue holds the device for a slice of
    /// --round-ms x its share; Fig. 9 bottom), kedf = the --k earliest deadlines run (Fig. 15b),
    /// laxity = a class runs at prio= until its laxity= is used up, then at crit= (8.2.1).
    /// Writes schedule.{csv,json}.
    #[arg(long, value_enum, default_value_t = PolicyKind::Hpf, conflicts_with = "preset")]
    pub policy: PolicyKind,
    /// up: saturating queues q0, q1, ... with these shares, T = --t-ms each (e.g. 75:25).
    #[arg(long, value_name = "A:B[:C...]", value_parser = parse_shares, conflicts_with = "preset")]
    pub shares: Option<values::Shares>,
    /// A class of the class experiment (repeat it): NAME:key=value:..., keys rate (requests/s;
    /// 0 = saturating, the default), t (ms per command, 0.5), cmds (per request, 1), share (up),
    /// deadline (ms, kedf), prio (hpf: larger runs first; laxity), laxity (ms) and crit (laxity).
    /// E.g. --class video:rate=100:t=1:deadline=10 --class bulk:t=1:deadline=1000, or --policy
    /// hpf --class high:rate=20:t=2:prio=2 --class normal:rate=20:t=2:prio=1 --class low:prio=0.
    #[arg(long = "class", value_name = "NAME:KEY=V:...", value_parser = class::parse, conflicts_with = "preset")]
    pub classes: Vec<class::ClassSpec>,
    /// kedf: how many classes run at once.
    #[arg(long, default_value_t = 1, value_parser = |s: &str| parse_positive(s).and_then(|k| if k <= 64 { Ok(k as usize) } else { Err(usage!("--k {k}: at most 64")) }), conflicts_with = "preset")]
    pub k: usize,
    /// up: the round the slices add up to, in ms.
    #[arg(long = "round-ms", default_value = "10", value_parser = |s: &str| parse_positive_f64(s, "--round-ms", 10_000.0), conflicts_with = "preset")]
    pub round_ms: f64,
    /// Instead of the modes (--policy hpf, no --class): the HP and LP sides in separate
    /// processes coordinated by the scheduler daemon (preempt-sched, beside preempt-lat), N LP
    /// processes of one stream each; reports what the daemon's hop costs on HP start (p50/p99
    /// against the in-process helper, with the same N streams in this process). Writes
    /// priority-processes.{csv,json}.
    #[arg(long, value_name = "N", value_parser = |s: &str| parse_positive(s).and_then(|n| if n <= 64 { Ok(n) } else { Err(usage!("--processes {n}: at most 64")) }), conflicts_with = "preset")]
    pub processes: Option<u32>,
    /// --processes: HP blocks timed on each side.
    #[arg(long, default_value_t = 1000, value_parser = parse_positive)]
    pub hop_samples: u32,
    /// --arrival lognormal: the shape of the log-normal gaps (mean gap 1/rate).
    #[arg(long, default_value_t = values::DEFAULT_SIGMA, value_parser = |s: &str| parse_positive_f64(s, "--sigma", 10.0), conflicts_with = "preset")]
    pub sigma: f64,
    /// The class experiment: run each class alone first (same arrivals, same duration), then report
    /// each class's P99 against alone and the combined throughput's loss against the classes
    /// alone (their sum, or the device's capacity where a class saturates).
    #[arg(long, conflicts_with = "preset")]
    pub standalone: bool,
    #[command(flatten)]
    pub common: Common,
}

impl PriorityOptions {
    /// Whether this is the class experiment (`--class`, `--shares`, or a policy other than hpf)
    /// rather than priority's modes (hpf and neither).
    pub fn runs_classes(&self) -> bool {
        self.policy != PolicyKind::Hpf || self.shares.is_some() || !self.classes.is_empty()
    }

    /// The classes of a class experiment: `--shares` makes saturating queues `q0`, `q1`, ...
    /// with those shares and T = `--t-ms`; otherwise the `--class` list.
    pub fn class_specs(&self) -> Vec<class::ClassSpec> {
        match &self.shares {
            Some(shares) => shares
                .0
                .iter()
                .enumerate()
                .map(|(i, &s)| class::ClassSpec::saturating(format!("q{i}"), self.t_ms, s))
                .collect(),
            None => self.classes.clone(),
        }
    }

    /// Cross-field checks of a class experiment (one line each, a usage error).
    fn check_classes(&self) -> Result<(), UsageError> {
        let p = self.policy.name();
        if self.shares.is_some() && self.policy != PolicyKind::Up {
            return Err(usage!(
                "--shares is for --policy up, not {p}: give the classes with --class, each with {}",
                class::needs(self.policy)
            ));
        }
        if self.shares.is_some() && !self.classes.is_empty() {
            return Err(UsageError::new("give --shares or --class, not both"));
        }
        let cs = self.class_specs();
        if cs.len() < 2 {
            return Err(usage!(
                "--policy {p} needs two classes or more: --shares 75:25, or --class twice"
            ));
        }
        class::check_set(self.policy, &cs)
    }

    /// The modes to run on `device` (`auto` resolved), in run order: those of `--modes`, else
    /// every mode the device has ([`Mode::on`]).
    pub fn modes_on(&self, device: DeviceSpec) -> Vec<Mode> {
        if self.modes.is_empty() {
            Mode::on(device)
        } else {
            self.modes.clone()
        }
    }

    /// HP work per second of wall time: rate x commands x HP T.
    pub fn hp_load(&self) -> f64 {
        self.hp_rate * f64::from(self.hp_cmds) * self.hp_t_ms / 1000.0
    }

    /// Expands `--preset` into the options it stands for (clap has already refused any of them
    /// given beside it) and settles the duration: `--duration-s`, else the preset's, else 3 s.
    pub fn apply_preset(&mut self) {
        let preset_s = self.preset.map(Preset::duration_s);
        self.duration_s = self.duration_arg.or(preset_s).unwrap_or(DEFAULT_DURATION_S);
        let Some(p) = self.preset else { return };
        if let Some(l) = p.hp_load() {
            (self.arrival, self.hp_rate, self.hp_cmds, self.hp_t_ms) = (l.arrival, l.hp_rate, l.hp_cmds, l.hp_t_ms);
        }
        if let Some(c) = p.class_set() {
            (self.policy, self.classes, self.arrival, self.standalone) = (c.policy, c.classes, c.arrival, c.standalone);
        }
    }

    /// The preset's name, as outputs record it.
    pub fn preset_name(&self) -> Option<&'static str> {
        self.preset.map(Preset::name)
    }

    /// Cross-field checks: the one-line reason a combination is refused (a usage error). Expands
    /// `--preset` first.
    pub fn check(&mut self) -> Result<(), UsageError> {
        self.apply_preset();
        if let Some(p) = self.preset
            && p.class_set().is_some()
            && !self.modes.is_empty()
        {
            return Err(usage!(
                "--modes is for priority's modes; --preset {} runs the class experiment (docs/priority.md)",
                p.name()
            ));
        }
        if self.processes.is_some() && self.policy != PolicyKind::Hpf {
            return Err(usage!("--processes is for --policy hpf, not {}", self.policy.name()));
        }
        if self.runs_classes() {
            if self.processes.is_some() {
                return Err(UsageError::new(
                    "--processes runs priority's modes (HP requests against LP processes), not the class experiment (--class, --shares)",
                ));
            }
            return self.check_classes();
        }
        if self.standalone {
            return Err(UsageError::new(
                "--standalone is for the class experiment (--class, or --policy up, kedf or laxity); priority's modes have standalone-hp and standalone-lp",
            ));
        }
        let load = self.hp_load();
        if load >= 0.9 {
            return Err(usage!(
                "--hp-rate x --hp-cmds x --hp-t-ms = {load:.2} s of HP work per second: the HP requests alone would \
                 (nearly) saturate the device; lower one of them"
            ));
        }
        // No --modes: the device's modes, which issue HP requests.
        let has_hp = self.modes.is_empty() || self.modes.iter().any(|m| m.has_hp());
        if self.duration_s * self.hp_rate < 1.0 && has_hp {
            // Debug: 1e-300 as 1e-300, not as 300 zeros.
            return Err(usage!(
                "--duration-s {:?} at --hp-rate {:?} makes no HP request: raise either",
                self.duration_s,
                self.hp_rate
            ));
        }
        Ok(())
    }
}
