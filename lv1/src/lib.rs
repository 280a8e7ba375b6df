//! Lv1 preemption (progressive launching) and the host device.
//!
//! * [`XQueue`] is XSched's Lv1 launcher over any [`HwQueue`]: it keeps at most
//!   `threshold` commands in flight on the hardware queue, records a sync point every
//!   `batch` commands, and can be suspended (stop launching, optionally drain), resumed,
//!   resumed dropping what was pending, and reconfigured while running.
//! * [`host`] is the host device that stands in for a GPU: worker subprocesses run delay
//!   "kernels", a [`host::HostQueue`] implements [`HwQueue`] for the launcher, and
//!   [`host::HostQueue::suspend`] is a real asynchronous Lv3 (SIGSTOP/SIGCONT) whose
//!   latency does not depend on T.
//! * [`fake`] is a deterministic hardware queue for tests: the test decides when commands
//!   complete, and it records launch order and the in-flight high-water mark.
//!
//! All timestamps in this crate are nanoseconds on `CLOCK_MONOTONIC` ([`clock::now_ns`]),
//! which is one clock for every process on the machine, so stamps taken by the host
//! workers and by the launcher can be subtracted from each other.
//!
//! This crate has no `unsafe` code (a project rule: `unsafe` lives only in the KFD ioctl
//! wrappers and the HIP FFI).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
mod config;
pub mod fake;
pub mod host;
mod hwq;
mod xqueue;

pub use config::{Config, ConfigError};
pub use hwq::{CommandId, HwQueue};
pub use xqueue::{Completion, Dropped, Stamps, Stats, SuspendMode, WaitIdleError, XQueue};
