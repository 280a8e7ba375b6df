//! What the bystander worker writes on stdout: one JSON object per line, tagged by `line`.
//! All times are `CLOCK_MONOTONIC` ns ([`preempt_api::now_ns`]), comparable across processes.
//!
//! ```text
//! {"line":"ready","device":"hip:0 (...)","kernel_ns":200000,"pid":1234}
//! {"line":"kernel","start_ns":...,"end_ns":...}          one per kernel, in order
//! {"line":"done","kernels":9000,"stopped_ns":...,"reason":"stdin closed"}
//! ```
//!
//! The worker stops when its stdin reaches end of file (the parent closed it, or died) or after
//! its `--max-duration-ms`, whichever comes first, and then writes `done`. A worker that dies
//! writes no `done`: the analysis then refuses its timeline.
use crate::error::{Error, failed};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "snake_case")]
pub enum Line {
    /// Set up: kernels follow.
    Ready { device: String, kernel_ns: u64, pid: u32 },
    /// One kernel: host stamps just before its launch and just after its completion was seen.
    Kernel { start_ns: u64, end_ns: u64 },
    /// Stopped normally.
    Done {
        kernels: u64,
        stopped_ns: u64,
        reason: String,
    },
}

impl Line {
    pub fn parse(s: &str) -> Result<Line, Error> {
        serde_json::from_str(s).map_err(|e| failed!("unreadable line from the bystander ({e}): {s:?}"))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_garbage_is_named() {
        for l in [
            Line::Ready {
                device: "host".into(),
                kernel_ns: 5,
                pid: 7,
            },
            Line::Kernel { start_ns: 1, end_ns: 2 },
            Line::Done {
                kernels: 1,
                stopped_ns: 3,
                reason: "stdin closed".into(),
            },
        ] {
            assert_eq!(Line::parse(&l.to_json()).ok(), Some(l));
        }
        assert_eq!(
            Line::parse(r#"{"line":"kernel","start_ns":10,"end_ns":20}"#).ok(),
            Some(Line::Kernel {
                start_ns: 10,
                end_ns: 20
            })
        );
        let e = Line::parse("hipErrorNoDevice").unwrap_err().to_string();
        assert!(e.contains("unreadable line") && e.contains("hipErrorNoDevice"), "{e}");
    }
}
