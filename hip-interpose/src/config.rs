//! The interposer's settings, from the environment, read once per process.
use std::fmt;
use std::path::PathBuf;

/// HIP's priority range as clr reports it: 1 is the least urgent, -1 the most (a lower number
/// is more urgent); a priority outside it is clamped, as clr clamps it
/// (docs/interposer.md#priority-the-programs-own-words).
pub const LEAST: i32 = 1;
pub const GREATEST: i32 = -1;

/// The range of priorities a library layered on the interposer may set
/// (`preempt_hip_set_stream_priority`): HIP's sense (smaller is more urgent) with more levels
/// than HIP's three, for APIs that have them (XSched's -255 to 255, negated). A priority from
/// HIP's own calls stays within [`GREATEST`]..=[`LEAST`].
pub const API_GREATEST: i32 = -255;
pub const API_LEAST: i32 = 255;

/// The most streams given a queue of their own by default (KFD queues are a per-process
/// resource; past this a stream is created as the program asked and never suspended; why a
/// preemptible stream needs one: docs/interposer.md#the-rule).
pub const DEFAULT_MAX_OWN_QUEUES: usize = 64;

/// What is scheduled as one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// A stream of lower priority is suspended while a stream of higher priority of the same
    /// process has work in flight.
    Stream,
    /// The process's streams are one unit: none suspends another.
    Process,
}

/// How a preemptible stream is suspended (`PREEMPT_LEVEL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Lv3 where the device has it, else Lv1 (the reason is logged once).
    Auto,
    /// Lv3 only: where the device has no Lv3 mechanism, streams are created as the program
    /// asked and never suspended.
    Lv3,
    /// Lv1 always: a suspended stream's launches wait on the host, and at most
    /// [`Config::lv1_threshold`] of its commands are on the device at once.
    Lv1,
}

/// Commands of one Lv1 stream on the device at once by default: the launcher's default
/// threshold, also what the seeds' XSched runs set.
pub const DEFAULT_LV1_THRESHOLD: u32 = 8;
const _: () = assert!(DEFAULT_LV1_THRESHOLD as usize == preempt_api::Lv1Config::DEFAULT_THRESHOLD);

/// Where the null stream's work goes (`PREEMPT_NULL_STREAM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullStream {
    /// To the null stream, never suspended (the runtime's own queue).
    Keep,
    /// To a stream of the interposer's, created at the first null-stream submission with the
    /// process's priority, blocking (so the null stream's legacy ordering holds), preemptible
    /// like any other (docs/interposer.md#the-null-stream).
    Own,
}

/// Which streams get a queue of their own (and so can be suspended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnQueues {
    /// Low-priority streams (HIP priority 1), and normal ones (0) created while a
    /// high-priority stream exists.
    Lower,
    /// Every stream below the greatest priority.
    Always,
    /// None: the interposer only passes calls on.
    Never,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `PREEMPT_INTERPOSE=0|off`: everything passes through untouched.
    pub enabled: bool,
    /// `PREEMPT_PRIORITY`: the priority of streams the program creates without one.
    pub default_priority: i32,
    /// `PREEMPT_GRANULARITY=stream|process`.
    pub granularity: Granularity,
    /// `PREEMPT_OWN_QUEUES=lower|always|never`.
    pub own_queues: OwnQueues,
    /// `PREEMPT_MAX_OWN_QUEUES`.
    pub max_own_queues: usize,
    /// `PREEMPT_INTERPOSE_LOG=1`: one stderr line per stream, suspension failure and at exit.
    pub log: bool,
    /// `PREEMPT_NULL_STREAM=keep|own`; unset, `own` when `PREEMPT_PRIORITY` gives the program a
    /// priority below the greatest (a whole program declared less urgent: its default-stream
    /// work, PyTorch's, is what must yield), else `keep`.
    pub null_stream: NullStream,
    /// `PREEMPT_LEVEL=auto|3|1` (also `lv3`, `lv1`).
    pub level: Level,
    /// `PREEMPT_LV1_THRESHOLD`: at Lv1, how many of a preemptible stream's commands may be on
    /// the device at once (what a suspension waits for at most).
    pub lv1_threshold: u32,
    /// `PREEMPT_SCHEDULER=unix:PATH|none` (the project's one grammar): the scheduler daemon's
    /// socket; unset, the daemon's default socket (a program nobody rewrites cannot ask for the
    /// node's daemon, so it gets it); `none`: scheduled within the process only.
    pub scheduler: Option<PathBuf>,
}

/// A setting that does not parse: the interposer stays out of the way and says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSetting {
    pub name: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl fmt::Display for BadSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}: expected {}", self.name, self.value, self.expected)
    }
}

impl Config {
    /// From `get` (the environment in the library, a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, BadSetting> {
        let bad = |name: &'static str, value: &str, expected: &'static str| BadSetting {
            name,
            value: value.to_string(),
            expected,
        };
        let enabled = match get("PREEMPT_INTERPOSE").as_deref() {
            None | Some("" | "1" | "on") => true,
            Some("0" | "off") => false,
            Some(v) => return Err(bad("PREEMPT_INTERPOSE", v, "1, on, 0 or off")),
        };
        let default_priority = match get("PREEMPT_PRIORITY") {
            None => 0,
            Some(v) => v
                .trim()
                .parse::<i32>()
                .map_err(|_| {
                    bad(
                        "PREEMPT_PRIORITY",
                        &v,
                        "a HIP priority: -1 (high), 0 (normal) or 1 (low)",
                    )
                })?
                .clamp(GREATEST, LEAST),
        };
        let granularity = match get("PREEMPT_GRANULARITY").as_deref() {
            None | Some("" | "stream") => Granularity::Stream,
            Some("process") => Granularity::Process,
            Some(v) => return Err(bad("PREEMPT_GRANULARITY", v, "stream or process")),
        };
        let own_queues = match get("PREEMPT_OWN_QUEUES").as_deref() {
            None | Some("" | "lower") => OwnQueues::Lower,
            Some("always") => OwnQueues::Always,
            Some("never") => OwnQueues::Never,
            Some(v) => return Err(bad("PREEMPT_OWN_QUEUES", v, "lower, always or never")),
        };
        let max_own_queues = match get("PREEMPT_MAX_OWN_QUEUES") {
            None => DEFAULT_MAX_OWN_QUEUES,
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= 1024)
                .ok_or_else(|| bad("PREEMPT_MAX_OWN_QUEUES", &v, "a number from 0 to 1024"))?,
        };
        let null_stream = match get("PREEMPT_NULL_STREAM").as_deref() {
            None | Some("") if get("PREEMPT_PRIORITY").is_some() && default_priority > GREATEST => NullStream::Own,
            None | Some("" | "keep") => NullStream::Keep,
            Some("own") => NullStream::Own,
            Some(v) => return Err(bad("PREEMPT_NULL_STREAM", v, "keep or own")),
        };
        let level = match get("PREEMPT_LEVEL").as_deref() {
            None | Some("" | "auto") => Level::Auto,
            Some("3" | "lv3") => Level::Lv3,
            Some("1" | "lv1") => Level::Lv1,
            Some(v) => return Err(bad("PREEMPT_LEVEL", v, "auto, 3 (Lv3 only) or 1 (Lv1)")),
        };
        let lv1_threshold = match get("PREEMPT_LV1_THRESHOLD") {
            None => DEFAULT_LV1_THRESHOLD,
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=1024).contains(n))
                .ok_or_else(|| bad("PREEMPT_LV1_THRESHOLD", &v, "a number from 1 to 1024"))?,
        };
        let log = matches!(get("PREEMPT_INTERPOSE_LOG").as_deref(), Some("1" | "on"));
        let scheduler = match get("PREEMPT_SCHEDULER").as_deref() {
            None | Some("") => Some(preempt_api::sched::default_socket()),
            Some(v) => preempt_api::sched::parse_scheduler(v)
                .map_err(|_| bad("PREEMPT_SCHEDULER", v, "unix:PATH (the daemon's socket) or none"))?,
        };
        Ok(Config {
            enabled,
            default_priority,
            granularity,
            own_queues,
            max_own_queues,
            null_stream,
            level,
            lv1_threshold,
            log,
            scheduler,
        })
    }

    pub fn from_env() -> Result<Config, BadSetting> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Whether a stream of `priority` created now gets a queue of its own, given whether a
    /// stream of the greatest priority exists: only if something can suspend it (the process's
    /// own more urgent streams, at stream granularity, or the scheduler daemon).
    pub fn wants_own_queue(&self, priority: i32, high_exists: bool) -> bool {
        let suspender = self.granularity == Granularity::Stream || self.scheduler.is_some();
        if !suspender || priority <= GREATEST {
            return false;
        }
        match self.own_queues {
            OwnQueues::Never => false,
            OwnQueues::Always => true,
            OwnQueues::Lower => priority >= LEAST || high_exists,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, BadSetting> {
        Config::from_lookup(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn defaults_schedule_streams_and_give_low_ones_their_own_queue() {
        let c = cfg(&[]).unwrap();
        assert!(c.enabled && !c.log);
        assert_eq!((c.level, c.lv1_threshold), (Level::Auto, 8));
        assert_eq!(c.null_stream, NullStream::Keep);
        assert_eq!(
            (c.default_priority, c.granularity, c.max_own_queues),
            (0, Granularity::Stream, 64)
        );
        assert!(c.wants_own_queue(1, false), "a low stream always");
        assert!(
            !c.wants_own_queue(0, false),
            "a normal stream only once a high one exists"
        );
        assert!(c.wants_own_queue(0, true));
        assert!(
            !c.wants_own_queue(-1, true),
            "the most urgent streams are never suspended"
        );
    }

    #[test]
    fn settings_parse_and_clamp_as_documented() {
        let c = cfg(&[
            ("PREEMPT_PRIORITY", "-5"),
            ("PREEMPT_GRANULARITY", "process"),
            ("PREEMPT_INTERPOSE", "off"),
            ("PREEMPT_SCHEDULER", "none"),
        ])
        .unwrap();
        assert_eq!(c.default_priority, -1, "clamped into HIP's range as clr does");
        let own = |pairs: &[(&str, &str)]| cfg(pairs).unwrap().null_stream == NullStream::Own;
        assert!(
            own(&[("PREEMPT_PRIORITY", "1")]),
            "a program declared low: its null stream too"
        );
        assert!(own(&[("PREEMPT_PRIORITY", "0")]));
        assert!(
            !own(&[("PREEMPT_PRIORITY", "-1")]),
            "the most urgent is never suspended"
        );
        assert!(!own(&[("PREEMPT_PRIORITY", "1"), ("PREEMPT_NULL_STREAM", "keep")]));
        assert!(own(&[("PREEMPT_NULL_STREAM", "own")]));
        assert!(cfg(&[("PREEMPT_NULL_STREAM", "legacy")]).is_err());
        let l = cfg(&[("PREEMPT_LEVEL", "lv1"), ("PREEMPT_LV1_THRESHOLD", " 2 ")]).unwrap();
        assert_eq!((l.level, l.lv1_threshold), (Level::Lv1, 2));
        assert_eq!(cfg(&[("PREEMPT_LEVEL", "3")]).unwrap().level, Level::Lv3);
        assert!(!c.enabled);
        assert!(
            !c.wants_own_queue(1, true),
            "process granularity, no daemon: nothing can suspend it"
        );
        let c = cfg(&[
            ("PREEMPT_GRANULARITY", "process"),
            ("PREEMPT_SCHEDULER", "unix:/run/s.sock"),
        ])
        .unwrap();
        assert!(c.wants_own_queue(1, false), "the daemon can");
        assert!(
            cfg(&[("PREEMPT_OWN_QUEUES", "always")])
                .unwrap()
                .wants_own_queue(0, false)
        );
    }

    #[test]
    fn a_bad_setting_names_itself_and_what_is_expected() {
        let e = cfg(&[("PREEMPT_GRANULARITY", "thread")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "PREEMPT_GRANULARITY=\"thread\": expected stream or process"
        );
        assert!(cfg(&[("PREEMPT_PRIORITY", "high")]).is_err());
        assert!(cfg(&[("PREEMPT_MAX_OWN_QUEUES", "5000")]).is_err());
        assert_eq!(
            cfg(&[("PREEMPT_LEVEL", "2")]).unwrap_err().to_string(),
            "PREEMPT_LEVEL=\"2\": expected auto, 3 (Lv3 only) or 1 (Lv1)",
            "there is no Lv2 for a program's own launches"
        );
        assert!(
            cfg(&[("PREEMPT_LV1_THRESHOLD", "0")]).is_err(),
            "zero would never launch"
        );
        assert!(
            cfg(&[("PREEMPT_SCHEDULER", "/run/s.sock")]).is_err(),
            "the project's grammar: unix:PATH"
        );
    }

    #[test]
    fn the_scheduler_is_the_nodes_daemon_unless_told_otherwise() {
        assert_eq!(cfg(&[("PREEMPT_SCHEDULER", "none")]).unwrap().scheduler, None);
        assert_eq!(
            cfg(&[("PREEMPT_SCHEDULER", "unix:/run/s.sock")]).unwrap().scheduler,
            Some(PathBuf::from("/run/s.sock"))
        );
        assert_eq!(
            cfg(&[]).unwrap().scheduler,
            Some(preempt_api::sched::default_socket()),
            "unset: the node's daemon, where one runs"
        );
    }
}
