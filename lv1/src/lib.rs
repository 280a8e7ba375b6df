//! Lv1 preemption (progressive launching).
//!
//! * [`XQueue`] is XSched's Lv1 launcher over any [`HwQueue`]: it keeps at most
//!   `threshold` commands in flight on the hardware queue, records a sync point every
//!   `batch` commands, and can be suspended (stop launching, optionally drain), resumed,
//!   resumed dropping what was pending, and reconfigured while running.
//! * [`NullQueue`] completes every command at launch: the launcher's own cost, which
//!   [`cost::measure`] reports per command (host CPU, context switches, wall time, `submit`).
//! * `fake` (feature `test-util`) is a deterministic hardware queue for tests: the test
//!   decides when commands complete, and it records launch order and the in-flight
//!   high-water mark.
//!
//! The devices behind [`HwQueue`] live in crates of their own: `host-device` (CPU worker
//! processes) and `gpu-device` (a HIP stream).
//!
//! All timestamps in this crate are nanoseconds on `CLOCK_MONOTONIC` ([`clock::now_ns`]),
//! which is one clock for every process on the machine, so stamps taken by a device's
//! worker processes and by the launcher can be subtracted from each other.
//!
//! This crate has no `unsafe` code (a project rule: `unsafe` lives only in the KFD ioctl
//! wrappers and the HIP FFI).
//!
//! ```
//! use lv1::{Config, NullQueue, SuspendMode, XQueue};
//! // At most 8 commands in flight, a sync point every 4 (XSched's defaults).
//! let xq = XQueue::new(NullQueue::shared(), Config::new(8, 4).unwrap()).unwrap();
//! for i in 0..100 {
//!     xq.submit(i);
//! }
//! xq.suspend(SuspendMode::Drain).unwrap(); // stop launching; what was in flight completes
//! // ... the high-priority work runs here ...
//! xq.resume();
//! xq.wait_idle().unwrap();
//! assert_eq!(xq.stats().completed, 100);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
mod config;
pub mod cost;
#[cfg(feature = "test-util")]
pub mod fake;
mod hwq;
mod null;
mod xqueue;

pub use config::{Config, ConfigError};
pub use hwq::{CommandId, HwQueue};
pub use null::NullQueue;
pub use xqueue::{Completion, Dropped, Stamps, Stats, SuspendMode, WaitIdleError, XQueue};
