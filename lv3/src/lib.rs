//! Lv3 preemption on AMD GPUs: CWSR suspend/resume of one KFD queue of this process.
//!
//! - [`mechanism`]: the three ways to ask the kernel (`preempt-queues` on the project's patched kernel,
//!   `dbg-trap`, `update-queue`) behind one trait, identified by [`MechanismKind`]; the guard
//!   that resumes a suspended queue on drop; the `--mechanism auto` chooser.
//! - [`discovery`]: which KFD queue a freshly created stream got (pure: sysfs and snapshot sets
//!   in, one queue or a refusal out).
//! - [`binding`]: a stream's binding to the queue discovery found, checked before every suspend
//!   (the queue may have been destroyed and its id given to another queue).
//! - [`conformance`]: what the kernel must answer, through this API, wherever `/dev/kfd` opens;
//!   `preempt-lat validate` and the real-kernel tests run the same probes.
//! - [`signals`]: the process-wide registry of suspended queues, and a SIGINT/SIGTERM thread that
//!   resumes them before the application decides how to exit.
//!
//! Built on the safe KFD layer in the `kfd` crate. The kernel behaviour it relies on is written
//! down in `docs/kfd-facts.md`. Nothing here prints or exits: errors are returned, and what a
//! drop has to report goes to [`kfd::events`].
//!
//! ```no_run
//! use kfd::{GracePeriod, Kfd};
//! use lv3::mechanism::{DbgTrap, Preemptor, QueueTarget};
//! # fn target() -> QueueTarget { QueueTarget::NONEXISTENT }
//! let mech = DbgTrap::setup(Kfd::open()?, GracePeriod::Clocks1k(1))?;
//! let preemptor = Preemptor::new(mech);
//! let suspended = preemptor.suspend(&target())?; // the waves are saved, the queue unmapped
//! // ... run the high-priority work ...
//! suspended.resume()?; // dropping the guard would resume too
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]

pub mod binding;
pub mod conformance;
pub mod discovery;
pub mod mechanism;
pub mod signals;

pub use mechanism::{MechanismChoice, MechanismKind};
