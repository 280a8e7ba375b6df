//! The line protocol between a host queue and its worker processes.
//!
//! Text lines, one message each, so a worker can be driven and debugged by hand:
//! ```text
//! parent -> worker:  run <id> <work_ns>
//!                    hold
//!                    release
//! worker -> parent:  ready <version> <pid>
//!                    start <id> <start_ns>
//!                    done <id> <start_ns> <end_ns> <work_ns> <result>
//!                    held <held_ns>
//! ```
//! Stamps are `CLOCK_MONOTONIC` nanoseconds. `result` is [`expected_result`] of the
//! command, so the parent can check that the right command completed.
//!
//! `hold` and `release` are host Lv2 (the `hold` module): the worker reads what has arrived
//! before it starts each command, so a `hold` sent while a command runs is seen when that
//! command ends, ahead of any `run` queued behind it; the worker then answers `held` (at once
//! when it is idle) and starts nothing until `release`. Each `hold` gets exactly one `held`.

use lv1::CommandId;

/// Bumped whenever a message changes; the parent checks it in `ready`. 2: `hold`, `release`
/// and `held` (host Lv2).
pub const PROTOCOL_VERSION: u32 = 2;

/// Environment variable carrying the parent's pid to the worker (see `worker_main`).
pub(crate) const PARENT_ENV: &str = "PREEMPT_HOST_WORKER_PARENT";

/// A message to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToWorker {
    Run {
        id: CommandId,
        work_ns: u64,
    },
    /// Finish the running command (if any), answer `held`, start nothing more until `release`.
    Hold,
    /// Take commands again after a `hold`.
    Release,
}

/// A message from a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FromWorker {
    Ready {
        version: u32,
        pid: i32,
    },
    Start {
        id: CommandId,
        start_ns: u64,
    },
    Done {
        id: CommandId,
        start_ns: u64,
        end_ns: u64,
        work_ns: u64,
        result: u64,
    },
    /// The worker runs nothing and starts nothing until `release` (the answer to one `hold`).
    Held {
        held_ns: u64,
    },
}

/// The checksum a worker returns for a command (splitmix64 of id and work): a completion
/// reporting any other value belongs to a different command or was corrupted.
pub fn expected_result(id: CommandId, work_ns: u64) -> u64 {
    let mut z = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ work_ns;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl ToWorker {
    pub fn encode(&self) -> String {
        match self {
            Self::Run { id, work_ns } => format!("run {id} {work_ns}\n"),
            Self::Hold => "hold\n".into(),
            Self::Release => "release\n".into(),
        }
    }

    pub fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["run", id, w] => Some(Self::Run {
                id: id.parse().ok()?,
                work_ns: w.parse().ok()?,
            }),
            ["hold"] => Some(Self::Hold),
            ["release"] => Some(Self::Release),
            _ => None,
        }
    }
}

impl FromWorker {
    pub fn encode(&self) -> String {
        match self {
            Self::Ready { version, pid } => format!("ready {version} {pid}\n"),
            Self::Start { id, start_ns } => format!("start {id} {start_ns}\n"),
            Self::Done {
                id,
                start_ns,
                end_ns,
                work_ns,
                result,
            } => {
                format!("done {id} {start_ns} {end_ns} {work_ns} {result}\n")
            }
            Self::Held { held_ns } => format!("held {held_ns}\n"),
        }
    }

    pub fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split_whitespace().collect();
        Some(match f.as_slice() {
            ["ready", v, p] => Self::Ready {
                version: v.parse().ok()?,
                pid: p.parse().ok()?,
            },
            ["start", id, s] => Self::Start {
                id: id.parse().ok()?,
                start_ns: s.parse().ok()?,
            },
            ["done", id, s, e, w, r] => Self::Done {
                id: id.parse().ok()?,
                start_ns: s.parse().ok()?,
                end_ns: e.parse().ok()?,
                work_ns: w.parse().ok()?,
                result: r.parse().ok()?,
            },
            ["held", h] => Self::Held {
                held_ns: h.parse().ok()?,
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        for to in [
            ToWorker::Run {
                id: 7,
                work_ns: 1_000_000,
            },
            ToWorker::Hold,
            ToWorker::Release,
        ] {
            assert_eq!(ToWorker::parse(&to.encode()), Some(to));
        }
        for m in [
            FromWorker::Ready {
                version: PROTOCOL_VERSION,
                pid: 42,
            },
            FromWorker::Start { id: 3, start_ns: 99 },
            FromWorker::Done {
                id: 3,
                start_ns: 99,
                end_ns: 150,
                work_ns: 40,
                result: expected_result(3, 40),
            },
            FromWorker::Held { held_ns: 77 },
        ] {
            assert_eq!(FromWorker::parse(&m.encode()), Some(m));
        }
    }

    #[test]
    fn garbage_is_rejected() {
        assert_eq!(ToWorker::parse("run 1"), None);
        assert_eq!(ToWorker::parse("run x 2"), None);
        assert_eq!(ToWorker::parse("hold 1"), None);
        assert_eq!(FromWorker::parse("held"), None);
        assert_eq!(FromWorker::parse("done 1 2 3"), None);
        assert_eq!(FromWorker::parse(""), None);
    }

    #[test]
    fn result_depends_on_command() {
        assert_ne!(expected_result(1, 5), expected_result(2, 5));
        assert_ne!(expected_result(1, 5), expected_result(1, 6));
    }
}
