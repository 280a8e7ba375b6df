//! The line protocol between a host queue and its worker processes.
//!
//! Text lines, one message each, so a worker can be driven and debugged by hand:
//! ```text
//! parent -> worker:  run <id> <work_ns>
//! worker -> parent:  ready <version> <pid>
//!                    start <id> <start_ns>
//!                    done <id> <start_ns> <end_ns> <work_ns> <result>
//! ```
//! Stamps are `CLOCK_MONOTONIC` nanoseconds. `result` is [`expected_result`] of the
//! command, so the parent can check that the right command completed.

use lv1::CommandId;

/// Bumped whenever a message changes; the parent checks it in `ready`.
pub const PROTOCOL_VERSION: u32 = 1;

/// Environment variable carrying the parent's pid to the worker (see `worker_main`).
pub(crate) const PARENT_ENV: &str = "PREEMPT_HOST_WORKER_PARENT";

/// A message to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToWorker {
    Run { id: CommandId, work_ns: u64 },
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
        }
    }

    pub fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["run", id, w] => Some(Self::Run {
                id: id.parse().ok()?,
                work_ns: w.parse().ok()?,
            }),
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
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let to = ToWorker::Run {
            id: 7,
            work_ns: 1_000_000,
        };
        assert_eq!(ToWorker::parse(&to.encode()), Some(to));
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
        ] {
            assert_eq!(FromWorker::parse(&m.encode()), Some(m));
        }
    }

    #[test]
    fn garbage_is_rejected() {
        assert_eq!(ToWorker::parse("run 1"), None);
        assert_eq!(ToWorker::parse("run x 2"), None);
        assert_eq!(FromWorker::parse("done 1 2 3"), None);
        assert_eq!(FromWorker::parse(""), None);
    }

    #[test]
    fn result_depends_on_command() {
        assert_ne!(expected_result(1, 5), expected_result(2, 5));
        assert_ne!(expected_result(1, 5), expected_result(1, 6));
    }
}
