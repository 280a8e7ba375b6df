//! A per-node scheduler daemon and its client (docs/scheduler-daemon.md).
//!
//! - [`proto`]: the wire protocol (length-prefixed JSON frames, versioned, bounded, validated);
//!   `preempt_api::sched::proto`, re-exported: one copy, which the clients inside applications
//!   (Rust, C, Python) speak too.
//! - [`daemon`]: the daemon (`preempt-sched`): hpf's policy across processes in one `poll(2)`
//!   loop, each connection checked with `SO_PEERCRED`, one daemon per socket (a lock file).
//! - [`client`]: a process's side, `preempt_api::sched::client`, re-exported: a session opened
//!   with `Options::scheduler` routes its helper calls to it; it registers the session's own
//!   `LpStream`s, carries out the daemon's orders on them, and resumes everything it suspended
//!   for the daemon when the daemon goes away.
//! - [`hop`]: what the daemon's hop costs on HP start (`examples/hop.rs`, `preempt-lat priority
//!   --processes`).
//!
//! No process ever touches another's queues: the daemon only decides, each client acts on its
//! own streams, so no new privilege is needed.
#![forbid(unsafe_code)]

pub use preempt_api::sched::{client, proto};
pub mod daemon;
pub mod hop;
