//! The safe face of `/dev/kfd`: what the preemption mechanisms, queue discovery and
//! `preempt-lat doctor` need from amdkfd, with no GPU runtime involved.
//!
//! - [`Kfd`]: an open `/dev/kfd` with one typed method per call; [`KfdOps`] is the same API as a
//!   trait so that mechanisms can be tested against a recording fake. All `unsafe` of this crate
//!   is in its private `ioctl` module: one wrapper per ioctl, each with its `SAFETY` argument.
//! - [`KfdError`]: which ioctl (and DBG_TRAP op), which queue, the errno and what that errno
//!   means for that call in Linux 6.12's amdkfd.
//! - [`DebugSession`]: the debugger API enabled on this process, closed on drop.
//! - [`sysfs`]: readers for the KFD topology, the amdgpu module parameters and the per-process
//!   queue list; they take a root path so that tests run on checked-in fixture trees.
//! - [`events`]: what the library reports from places that cannot return an error (drops).
//!
//! The kernel behaviour every call relies on is written down in the repository's
//! `docs/kfd-facts.md`; the docs here cite its sections.
//!
//! ```no_run
//! use kfd::{Kfd, KfdOps};
//! let kfd = Kfd::open()?; // ENOENT: no amdgpu/amdkfd on this machine
//! let v = kfd.version()?;
//! println!("KFD ioctl {v}, debugger API: {}", v.has_debugger_api());
//! # Ok::<(), kfd::KfdError>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod debug_session;
mod error;
pub mod events;
mod handle;
mod ioctl;
mod probe;
pub mod sysfs;
#[cfg(feature = "test-util")]
pub mod testing;
mod types;

pub use debug_session::{DebugSession, SessionError};
pub use error::{DbgOp, KfdError, Op, Result, meaning};
pub use handle::{KFD_DEVICE, Kfd, KfdOps, MAX_QUEUE_IDS};
pub use probe::PreemptProbe;
pub use types::*;

/// Ends the process with `code` at once (`_exit(2)`), after flushing stdout and stderr: no
/// atexit handlers, no destructors. The way out of a signal path while this process may hold
/// debug mode on: HIP's atexit teardown would reach ROCr's runtime disable, which with debug mode
/// on waits in the kernel for a debugger acknowledgement that never comes; the kernel's own
/// release of `/dev/kfd` instead turns debugging off and destroys the queues
/// (docs/kfd-facts.md#dbg_trap-suspend-and-resume).
pub fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    ioctl::exit_now(code)
}

/// The uapi header the bindings come from, its KFD version, and the ABI of the patched
/// preempt ioctls this build speaks (for reports).
pub mod header {
    pub use kfd_sys::preempt::{HEADER_HAS_PREEMPT, KFD_PREEMPT_QUEUES_VERSION};
    pub use kfd_sys::{KFD_HEADER_MAJOR, KFD_HEADER_MINOR, KFD_HEADER_SOURCE};
}
