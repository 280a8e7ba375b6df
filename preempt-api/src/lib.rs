//! The application API of this toolkit's preemption, behind the C ABI (`preempt-capi`) and the
//! Python package (`preempt-py`): everything those bindings do is done here, in safe Rust.
//!
//! - [`Session`] on a device ([`DeviceSpec`]: `host`, `hip:N`, `kfd`, `auto`) with its Lv3
//!   mechanism ([`MechanismInfo`]: which one and why), its low-priority streams and one
//!   high-priority stream.
//! - [`LpStream`]: created by the session (host: a queue of worker processes; GPU: a HIP stream
//!   with a queue of its own, whose KFD queue is discovered, its `hipStream_t` handed out) or
//!   bound to an explicit KFD queue id; suspended and resumed at its [`Level`] (Lv3: the
//!   mechanism, or SIGSTOP on the host; Lv2, host device only: its workers finish the command
//!   they run and start no new one, [`lv2_unavailable`] on a GPU; Lv1: the launcher's drain).
//! - The highest-priority-first helper ([`Session::helper_enter`] / [`Session::helper_leave`]):
//!   `hpf`'s policy over the session's streams, or with [`Options::scheduler`] over every
//!   process of the node through the `preempt-sched` daemon ([`sched`]: its protocol and client);
//!   with [`Options::policy`] also a time-driven policy (utilization partition, K-EDF, laxity)
//!   over the streams scheduled with it ([`Session::helper_schedule`]).
//! - [`SharedDevice`]: a device opened once for the sessions a run opens in turn (a GPU's
//!   compiled kernel and calibration shared).
//! - [`latency`]: what a preemption-latency measurement needs of a device (its LP hardware queue
//!   for the caller's launcher, the HP probe and when it started, the Lv3/Lv2 suspension, the
//!   device's records), implemented once per device: the host device's workers and `hip:N`
//!   through [`gpu::prepare`].
//! - [`Error`]: a kind with a stable code, a message, and errno plus meaning where a system call
//!   failed.
//!
//! Guarantees (the lv3 guards' rules, kept through every binding): a suspended queue is held by
//! a guard that resumes it on drop and during a panic's unwinding; closing a session (or
//! dropping its last handle) resumes everything; every Lv3 suspension is in lv3's signal
//! registry, so [`resume_on_signals`] (or [`resume_all_and_close`] from an application's own
//! signal handling) resumes it before the process dies. Nothing here prints or exits.
#![deny(unsafe_code)]

mod bound;
mod check;
mod device;
mod error;
pub mod gpu;
mod helper;
pub mod host;
mod host_records;
mod hp;
pub mod latency;
mod limits;
mod mech;
mod mechanism;
mod options;
mod owner;
mod policy;
pub mod sched;
mod session;
mod shared;
mod stream;

pub use bound::{KFD_PRIORITY_NORMAL, QueueDesc};
pub use check::{Check, DeviceRecord, LpCompletion, Verified, WorkerSpan};
pub use error::{Error, ErrorKind, Result};
pub use helper::timed::{IDLE_POLL, PolicyStatus};
pub use hp::HpStream;
/// The highest-priority-first rule the helper runs, for a program that drives it itself and
/// carries its actions out (`preempt-lat priority` times each of them for its trace).
pub use hpf;
pub use hpf::Priority;
pub use limits::{CLOSE_WAIT, MAX_DELAY_NS, MAX_POLICY_SPAN};
pub use mech::{Lv3Request, Lv3Setup, MechanismInfo, probe};
pub use mechanism::{Lv1Suspend, Mechanism};
pub use options::{
    DeviceSpec, LV2_ON_GPU_DOC, LV2_ON_GPU_WHY, LaxityParams, Level, MAX_POLICY_K, MAX_POLICY_ROUND, Options,
    PolicyChoice, PolicyParams, grace_from_units, lv2_unavailable, mechanism_names, parse_mechanism, policy_choice,
};
pub use policy::Policy;
pub use session::Session;
pub use shared::{Share, SharedDevice};
pub use stream::{LpStream, SuspendInfo};

// What users of the API name in their own code, re-exported so that they depend on this crate
// alone for it: the mechanism grammar, the preemptor a GPU stream of its own is suspended
// through, and the grace period (lv3, kfd), the launcher's settings and the clock every host
// stamp is on (lv1), the host device's worker program.
pub use host_device::{WorkerExe, worker_main};
pub use kfd::GracePeriod;
pub use lv1::Config as Lv1Config;
pub use lv1::clock::now_ns;
pub use lv3::mechanism::Preemptor;
pub use lv3::{MechanismChoice, MechanismKind};
pub use nix::errno::Errno;

use nix::sys::signal::{SigSet, kill};
use nix::unistd::getpid;

/// Resumes every queue in lv3's signal registry (every Lv3 suspension of every session) and
/// refuses later suspends: for an application's own SIGINT/SIGTERM handling, before it exits.
/// Returns each queue's label with its outcome.
pub fn resume_all_and_close() -> Vec<(String, std::result::Result<(), String>)> {
    lv3::signals::resume_all_and_close()
}

/// Blocks SIGINT and SIGTERM in the calling thread and starts a thread that, on either, resumes
/// every registered queue and then lets the signal take its course (it unblocks it in that
/// thread and sends it to the process again: the default action, or the application's own
/// handler, runs). Resume failures are reported through `kfd::events`. Call it first in `main`,
/// before any other thread exists (threads inherit the mask); returns the threads that do not
/// block the signals (the install came too late for them).
pub fn resume_on_signals() -> Result<Vec<u32>> {
    let installed = lv3::signals::install_resume_on_signals(|r| {
        for (label, res) in &r.results {
            if let Err(e) = res {
                kfd::events::emit(
                    kfd::events::Severity::Warning,
                    "preempt signals",
                    format!("{label}: resume on {:?} failed: {e}", r.signal),
                );
            }
        }
        let mut set = SigSet::empty();
        set.add(r.signal);
        let _ = set.thread_unblock();
        let _ = kill(getpid(), r.signal);
    })
    .map_err(|e| Error::new(ErrorKind::Device, format!("installing the signal thread: {e}")))?;
    Ok(installed.unblocked_threads)
}

/// What the library reported but could not return (a resume-on-drop that failed, a debug
/// session that could not be closed), oldest first; taking them empties the list.
pub fn take_events() -> Vec<String> {
    kfd::events::take_unhandled().iter().map(ToString::to_string).collect()
}

/// A mutex's guard whether or not a panic poisoned it: every lock here guards state that each
/// holder leaves whole between statements, and a suspension must still be released after a
/// panic elsewhere (the guards' rule).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
