//! A per-node scheduler daemon and its client (docs/scheduler-daemon.md).
//!
//! - [`proto`]: the wire protocol (length-prefixed JSON frames, versioned, bounded, validated).
//! - [`daemon`]: the daemon (`preempt-sched`): hpf's policy across processes in one `poll(2)`
//!   loop, each connection checked with `SO_PEERCRED`, one daemon per socket (a lock file).
//! - [`client`]: a process's side, over `preempt-api`'s [`preempt_api::Session`]: it registers
//!   its own `LpStream`s, carries out the daemon's orders on them with `LpStream::suspend` and
//!   `resume`, and resumes everything it suspended for the daemon when the daemon goes away.
//!
//! No process ever touches another's queues: the daemon only decides, each client acts on its
//! own streams, so no new privilege is needed.
#![forbid(unsafe_code)]

pub mod client;
pub mod daemon;
pub mod proto;
