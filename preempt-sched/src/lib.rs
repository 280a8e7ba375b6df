//! A per-node scheduler daemon and its client (docs/scheduler-daemon.md).
//!
//! - [`proto`]: the wire protocol (length-prefixed JSON frames, versioned, bounded, validated):
//!   the `sched-proto` crate, which preempt-api's client (inside applications: Rust, C, Python)
//!   speaks too. The daemon links it, hpf and nothing of the device stack.
//! - [`daemon`]: the daemon (`preempt-sched`): hpf's policy across processes in one `poll(2)`
//!   loop, each connection checked with `SO_PEERCRED`, one daemon per socket (a lock file).
//! - A process's side is `preempt_api::sched::client`: a session opened with
//!   `Options::scheduler` routes its helper calls to it; it registers the session's own
//!   `LpStream`s, carries out the daemon's orders on them, and resumes everything it suspended
//!   for the daemon when the daemon goes away. `preempt_api::sched::hop` measures what the
//!   daemon's hop costs on HP start (`examples/hop.rs`, `preempt-lat priority --processes`);
//!   `examples/preempt-sched-client.rs` is the tests' client process.
//!
//! No process ever touches another's queues: the daemon only decides, each client acts on its
//! own streams, so no new privilege is needed.
#![forbid(unsafe_code)]

pub use sched_proto as proto;
pub mod daemon;
