//! Lv3 preemption of one KFD queue, behind one small trait ([`Preempt`]).
//!
//! Three layers, each usable alone:
//! - **Mechanisms** ([`UpdateQueue`], [`DbgTrap`]): the raw suspend/resume of one queue, generic
//!   over [`KfdOps`](kfd::KfdOps) so the same code runs on the real [`Kfd`](kfd::Kfd)
//!   and on a recording fake. They keep no per-queue state: `resume` of a queue that is not
//!   suspended is passed to the kernel, which treats it as a no-op (dbg-trap: `resume_single_queue`
//!   returns 0 for a queue that is not suspended; update-queue: re-sends the queue's own
//!   properties). That raw path exists for recovery; normal code goes through the guard layer.
//! - **Guards** ([`Preemptor`], [`SuspendedQueue`]): `Preemptor::suspend` returns a guard that owns
//!   the obligation to resume. A resume without a suspend cannot be written with this API, and a
//!   second suspend of a queue that is already held fails with [`MechError::AlreadySuspended`]
//!   before any kernel call. The guard resumes on drop and therefore on panic (the workspace
//!   builds with `panic = "unwind"`; `panic = "abort"` would skip every drop and leave the queue
//!   suspended until the process exits).
//! - **Choice** ([`mod@choose`]): the `--mechanism auto` order and, for each mechanism, why it cannot
//!   be used here, computed from facts gathered once (pure, unit-tested).
//!
//! Every suspended queue is also registered with [`crate::signals`], so SIGINT/SIGTERM resume it
//! before the process exits (see [`crate::signals::install_resume_on_signals`]).
//!
//! Long because it is the one table of mechanisms: the kind, its order and every property as
//! exhaustive matches, side by side, so that a new mechanism is this file and its own.
pub mod choose;
mod dbg_trap;
mod guard;
pub mod preempt_queues;
mod update_queue;

pub use choose::{Built, ProbeFacts, Verdict, build, build_auto, choose, probe_order};
pub use dbg_trap::DbgTrap;
pub use guard::{Preemptor, RetryPolicy, SuspendedQueue};
pub use preempt_queues::{IoctlAvailability, PreemptQueues};
pub use update_queue::UpdateQueue;

use kfd::{DbgOp, KfdError, Op, QueueId, QueueSnapshot, QueueState, SessionError};
use serde::{Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Which Lv3 mechanism: the one identity the CLI (`--mechanism`), doctor, validate and every
/// JSON output use. `Display`/`FromStr` speak the CLI names (`preempt-queues`, `dbg-trap`,
/// `update-queue`), each named after the ioctl it preempts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MechanismKind {
    /// The patched-kernel ioctl (AMDKFD_IOC_PREEMPT_QUEUES, `patches/`): usable only where the
    /// kernel answers the probe ([`PreemptQueues::new`]); every stock kernel says ENOTTY. Called
    /// `ioctl` until it was named after its ioctl as the others are ([`MechanismKind::RENAMED`]).
    PreemptQueues,
    /// DBG_TRAP SUSPEND_QUEUES / RESUME_QUEUES on this process itself ([`DbgTrap`]).
    DbgTrap,
    /// AMDKFD_IOC_UPDATE_QUEUE to an inactive queue and back ([`UpdateQueue`]).
    UpdateQueue,
}

impl MechanismKind {
    /// The `--mechanism auto` order: the most robust first (see [`mod@choose`]).
    pub const AUTO_ORDER: [MechanismKind; 3] = [
        MechanismKind::PreemptQueues,
        MechanismKind::DbgTrap,
        MechanismKind::UpdateQueue,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MechanismKind::PreemptQueues => "preempt-queues",
            MechanismKind::DbgTrap => "dbg-trap",
            MechanismKind::UpdateQueue => "update-queue",
        }
    }

    /// What the mechanism does, in one line (`preempt-lat --mechanism`'s help for its name).
    pub const fn summary(self) -> &'static str {
        match self {
            MechanismKind::PreemptQueues => "the patched kernel's PREEMPT_QUEUES (formerly `ioctl`)",
            MechanismKind::DbgTrap => "self-debug SUSPEND_QUEUES",
            MechanismKind::UpdateQueue => "UPDATE_QUEUE to inactive and back",
        }
    }

    /// Names mechanisms were once called by, with what they are called now. An old name is
    /// refused as input, with an error that names the new one ([`UnknownMechanism`]), rather than
    /// accepted: every output then carries one name per mechanism.
    pub const RENAMED: [(&'static str, MechanismKind); 1] = [("ioctl", MechanismKind::PreemptQueues)];

    /// What an old name ([`MechanismKind::RENAMED`]) is called now.
    pub fn renamed(old: &str) -> Option<Self> {
        Self::RENAMED.into_iter().find(|(o, _)| *o == old).map(|(_, k)| k)
    }

    /// Parses a CLI name; `None` for anything else (including `auto`: see [`MechanismChoice`], and
    /// an old name: see [`MechanismKind::RENAMED`]).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::AUTO_ORDER.into_iter().find(|k| k.name() == s)
    }

    // What each mechanism is like, for callers outside this crate: they ask these instead of
    // comparing kinds, so that a new mechanism is one more arm here (every match is exhaustive)
    // and every caller and message follows. `names_where` builds the lists messages print.

    /// Whether this process is in debug mode for as long as the mechanism exists (dbg-trap: its
    /// setup enables DBG_TRAP on the process, its teardown disables it). Queue discovery then
    /// reads GET_QUEUE_SNAPSHOT through that debug mode, knowing it is ours (not rocgdb's), instead
    /// of opening a temporary self-debug session of its own.
    pub const fn turns_debug_mode_on(self) -> bool {
        match self {
            MechanismKind::DbgTrap => true,
            MechanismKind::PreemptQueues | MechanismKind::UpdateQueue => false,
        }
    }

    /// Whether the mechanism passes the CP's wave-save grace period (`--grace`) to the kernel:
    /// DBG_TRAP SUSPEND_QUEUES and the patched PREEMPT_QUEUES take one; UPDATE_QUEUE has no such
    /// argument, so update-queue's unmap waits the device's own setting
    /// (docs/kfd-facts.md#grace-period).
    pub const fn sets_grace_period(self) -> bool {
        match self {
            MechanismKind::PreemptQueues | MechanismKind::DbgTrap => true,
            MechanismKind::UpdateQueue => false,
        }
    }

    /// Whether resuming re-sends the queue's ring address and size (and priority, percentage), so
    /// a [`QueueTarget`] must carry the real ones: update-queue restores the queue with
    /// UPDATE_QUEUE, which overwrites them (docs/kfd-facts.md#update_queue-disable-and-restore).
    /// The others name the queue by id only and never send the ring fields to the kernel.
    pub const fn restores_from_ring(self) -> bool {
        match self {
            MechanismKind::UpdateQueue => true,
            MechanismKind::PreemptQueues | MechanismKind::DbgTrap => false,
        }
    }

    /// Whether ROCr's asynchronous scratch reclaim can undo a suspend behind our back: on gfx94x
    /// it toggles UPDATE_QUEUE 0 -> 100 on queues whose dispatches use scratch, which re-enables a
    /// queue update-queue disabled (docs/kfd-facts.md#scratch-reclaim-undoes-update_queue).
    /// dbg-trap's `is_suspended` and the patched ioctl's own flag survive it.
    pub const fn undone_by_scratch_reclaim(self) -> bool {
        match self {
            MechanismKind::UpdateQueue => true,
            MechanismKind::PreemptQueues | MechanismKind::DbgTrap => false,
        }
    }

    /// The names of the mechanisms that have a property, in `auto` order, for messages that list
    /// them (e.g. `names_where(MechanismKind::sets_grace_period)`): the list follows the
    /// mechanisms instead of being typed into each message.
    pub fn names_where(has: impl Fn(MechanismKind) -> bool) -> Vec<&'static str> {
        Self::AUTO_ORDER
            .into_iter()
            .filter(|&k| has(k))
            .map(MechanismKind::name)
            .collect()
    }
}

impl fmt::Display for MechanismKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// An unknown mechanism name; `Display` is one line listing the accepted ones (from
/// [`MechanismKind::AUTO_ORDER`]) and, for an old name, what it was renamed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMechanism(pub String);

impl fmt::Display for UnknownMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = std::iter::once("auto")
            .chain(MechanismKind::AUTO_ORDER.map(MechanismKind::name))
            .collect();
        let expected = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        match MechanismKind::renamed(&self.0) {
            Some(now) => write!(f, "unknown mechanism {:?}: renamed {now}; expected {expected}", self.0),
            None => write!(f, "unknown mechanism {:?}: expected {expected}", self.0),
        }
    }
}

impl std::error::Error for UnknownMechanism {}

impl FromStr for MechanismKind {
    type Err = UnknownMechanism;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| UnknownMechanism(s.to_string()))
    }
}

impl Serialize for MechanismKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What a user asks for: `auto` (the first usable mechanism in [`MechanismKind::AUTO_ORDER`],
/// see [`mod@choose`]) or one mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MechanismChoice {
    #[default]
    Auto,
    Only(MechanismKind),
}

impl fmt::Display for MechanismChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MechanismChoice::Auto => f.write_str("auto"),
            MechanismChoice::Only(k) => k.fmt(f),
        }
    }
}

impl FromStr for MechanismChoice {
    type Err = UnknownMechanism;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            Ok(MechanismChoice::Auto)
        } else {
            s.parse().map(MechanismChoice::Only)
        }
    }
}

impl Serialize for MechanismChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The queue to preempt: what discovery found. The ring address and size come from
/// GET_QUEUE_SNAPSHOT (the only stock source); the priority from the stream's HSA priority
/// (LOW 0, NORMAL 7, HIGH 11). update-queue needs all of them to restore the queue exactly;
/// dbg-trap needs only the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueTarget {
    pub queue_id: QueueId,
    pub gpu_id: u32,
    pub ring_base_address: u64,
    /// In bytes, as the kernel stores it (a power of two).
    pub ring_size: u32,
    /// KFD priority, 0..=15.
    pub priority: u32,
    /// 1..=100; ROCr creates every queue with 100.
    pub percentage: u32,
}

impl QueueTarget {
    /// A queue no process has (KFD hands out small ids) with a restorable-looking ring: what
    /// error-path checks (`preempt-lat validate`, the real-kernel tests) aim the mechanisms at,
    /// so that the kernel's "no such queue" answer is what comes back.
    pub const NONEXISTENT: QueueTarget = QueueTarget {
        queue_id: 0xdead,
        gpu_id: 0,
        ring_base_address: 0x7f00_0000_0000,
        ring_size: 4096,
        priority: 7,
        percentage: 100,
    };

    /// A target from a snapshot entry, with ROCr's percentage (100) and the given KFD priority.
    /// (The snapshot carries no priority; ROCr's queues also use PM4 target XCC 0, which restore
    /// keeps.)
    pub fn from_snapshot(s: &QueueSnapshot, priority: u32) -> Self {
        QueueTarget {
            queue_id: s.queue_id,
            gpu_id: s.gpu_id,
            ring_base_address: s.ring_base_address,
            ring_size: s.ring_size,
            priority,
            percentage: 100,
        }
    }

    /// Refuses targets that could not be restored: checked before the suspend, because a queue
    /// suspended with a target that cannot bring it back stays off.
    pub fn validate(&self) -> Result<(), MechError> {
        let why = if self.ring_base_address == 0 {
            "ring_base_address is 0 (a NULL ring disables the queue instead of restoring it)"
        } else if !self.ring_size.is_power_of_two() {
            "ring_size is not a power of two (the kernel refuses it with EINVAL)"
        } else if self.percentage == 0 || self.percentage > 100 {
            "percentage must be 1..=100 (0 leaves the queue inactive, >100 is EINVAL)"
        } else if self.priority > 15 {
            "priority must be 0..=15"
        } else {
            return Ok(());
        };
        Err(MechError::BadTarget {
            queue: self.queue_id,
            why,
        })
    }

    /// A short label for logs and the signal registry.
    pub fn label(&self, mechanism: MechanismKind) -> String {
        format!("{mechanism} gpu 0x{:x} queue {}", self.gpu_id, self.queue_id)
    }
}

/// What one suspend did, for measurement and reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspendReport {
    pub mechanism: MechanismKind,
    pub queue_id: QueueId,
    /// Wall time of the whole `suspend` call (all ioctls).
    pub total: Duration,
    /// Wall time of the preempting ioctl alone (PREEMPT_QUEUES, SUSPEND_QUEUES or UPDATE_QUEUE): the
    /// unmap, the CWSR save and the new runlist happen inside it.
    pub preempt_call: Duration,
    /// dbg-trap: the queue still carried EC_QUEUE_NEW and the pre-suspend snapshot cleared it.
    pub cleared_queue_new: bool,
    /// preempt-queues: the kernel's own time in the unmap and fence wait (`kernel_ns`), so that the
    /// user-space share of `preempt_call` can be told apart. `None` for the other mechanisms.
    pub kernel: Option<Duration>,
}

/// Why a mechanism could not suspend or resume. `Display` is one line naming the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MechError {
    /// A KFD call failed; the error names the ioctl, the queue and the errno's meaning.
    Kfd { mechanism: MechanismKind, source: KfdError },
    /// SUSPEND_QUEUES / RESUME_QUEUES succeeded as a call but refused this queue.
    QueueRefused {
        op: DbgOp,
        queue: QueueId,
        state: QueueState,
    },
    /// The patched PREEMPT_QUEUES / RESUME_QUEUES (`op`) succeeded as a call but refused this queue.
    PreemptRefused { op: Op, queue: QueueId, state: QueueState },
    /// The self-debug session (dbg-trap's setup) could not be opened; `DebuggerPresent` when
    /// rocgdb or ROCr's core dump owns this process.
    Session(SessionError),
    /// The target cannot be restored; nothing was sent to the kernel.
    BadTarget { queue: QueueId, why: &'static str },
    /// A guard for this queue exists already; nothing was sent to the kernel.
    AlreadySuspended { queue: QueueId, gpu_id: u32 },
    /// Every try to resume failed; `last` is the final error. The queue may still be suspended.
    ResumeFailed {
        queue: QueueId,
        tries: u32,
        last: Box<MechError>,
    },
    /// A SIGINT/SIGTERM is resuming every queue before exit: no new suspend is started.
    ShuttingDown { queue: QueueId },
    /// The mechanism cannot run here (setup refused, torn down, guards still held, ...).
    Unavailable { mechanism: MechanismKind, why: String },
}

impl MechError {
    pub(crate) fn kfd(mechanism: MechanismKind) -> impl FnOnce(KfdError) -> MechError {
        move |source| MechError::Kfd { mechanism, source }
    }

    /// The errno, where the failure came from a KFD call.
    pub fn errno(&self) -> Option<nix::errno::Errno> {
        match self {
            MechError::Kfd { source, .. } => Some(source.errno),
            MechError::Session(e) => e.errno(),
            MechError::ResumeFailed { last, .. } => last.errno(),
            _ => None,
        }
    }
}

impl fmt::Display for MechError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MechError::Kfd { mechanism, source } => write!(f, "{mechanism}: {source}"),
            MechError::QueueRefused { op, queue, state } => {
                let why = match state {
                    QueueState::Invalid => {
                        "INVALID: no such queue in this process, a queue still flagged EC_QUEUE_NEW, or one \
                         being destroyed"
                    }
                    QueueState::Error => "ERROR: the unmap/map failed (a hung HWS; a GPU reset may follow)",
                    QueueState::Ok => "ok",
                };
                write!(f, "dbg-trap: {} refused queue {queue}: {why}", op.name())
            }
            MechError::PreemptRefused { op, queue, state } => {
                let why = match state {
                    QueueState::Invalid => "INVALID: no such queue in this process, or one being destroyed",
                    QueueState::Error => "ERROR: the unmap/map failed (a hung scheduler; a GPU reset may follow)",
                    QueueState::Ok => "ok",
                };
                write!(f, "{}: {op} refused queue {queue}: {why}", MechanismKind::PreemptQueues)
            }
            MechError::Session(e @ SessionError::DebuggerPresent(_)) => {
                write!(f, "dbg-trap: {e}; use --mechanism update-queue")
            }
            MechError::Session(e) => write!(f, "dbg-trap: self-debug session: {e}"),
            MechError::BadTarget { queue, why } => write!(f, "queue {queue}: cannot be restored: {why}"),
            MechError::AlreadySuspended { queue, gpu_id } => {
                write!(
                    f,
                    "queue {queue} on gpu 0x{gpu_id:x} is already suspended by this process"
                )
            }
            MechError::ResumeFailed { queue, tries, last } => {
                write!(
                    f,
                    "queue {queue} NOT resumed after {tries} tries (it may stay suspended): {last}"
                )
            }
            MechError::ShuttingDown { queue } => {
                write!(f, "queue {queue}: not suspended, the process is exiting on a signal")
            }
            MechError::Unavailable { mechanism, why } => write!(f, "{mechanism}: unavailable: {why}"),
        }
    }
}

impl std::error::Error for MechError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MechError::Kfd { source, .. } => Some(source),
            MechError::Session(e) => Some(e),
            MechError::ResumeFailed { last, .. } => Some(&**last),
            _ => None,
        }
    }
}

/// Lv3 preemption of one KFD queue of this process.
///
/// `Send + Sync` because the signal thread ([`crate::signals`]) resumes through it.
pub trait Preempt: Send + Sync {
    /// Which mechanism this is.
    fn kind(&self) -> MechanismKind;
    /// Preempts the queue: its waves are CWSR-saved and it leaves the runlist.
    fn suspend(&self, q: &QueueTarget) -> Result<SuspendReport, MechError>;
    /// Maps the queue back; its waves restore and continue.
    fn resume(&self, q: &QueueTarget) -> Result<(), MechError>;
    /// Undoes the mechanism's process-wide setup (dbg-trap: debug mode). Idempotent.
    fn teardown(&self) -> Result<(), MechError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::MechanismChoice;
    use super::MechanismKind::{self, DbgTrap, PreemptQueues, UpdateQueue};

    /// Each property is true for exactly these kinds, in `auto` order.
    fn having(has: fn(MechanismKind) -> bool) -> Vec<MechanismKind> {
        MechanismKind::AUTO_ORDER.into_iter().filter(|&k| has(k)).collect()
    }

    #[test]
    fn only_dbg_trap_keeps_the_process_in_debug_mode() {
        assert_eq!(having(MechanismKind::turns_debug_mode_on), [DbgTrap]);
    }

    #[test]
    fn update_queue_alone_cannot_set_the_grace_period() {
        // UPDATE_QUEUE has no grace argument; SUSPEND_QUEUES and PREEMPT_QUEUES have one.
        assert_eq!(having(MechanismKind::sets_grace_period), [PreemptQueues, DbgTrap]);
    }

    #[test]
    fn only_update_queue_needs_the_ring_to_restore() {
        assert_eq!(having(MechanismKind::restores_from_ring), [UpdateQueue]);
    }

    #[test]
    fn only_update_queue_is_undone_by_scratch_reclaim() {
        assert_eq!(having(MechanismKind::undone_by_scratch_reclaim), [UpdateQueue]);
    }

    #[test]
    fn an_old_name_is_refused_with_its_new_one() {
        for (old, now) in MechanismKind::RENAMED {
            assert_eq!(MechanismKind::from_name(old), None, "{old} must not be accepted");
            assert_eq!(MechanismKind::renamed(old), Some(now));
            let e = old.parse::<MechanismChoice>().unwrap_err().to_string();
            assert!(e.contains(&format!("renamed {now};")) && !e.contains('\n'), "{e}");
        }
        // Every mechanism listed once, in auto's order, the last after "or".
        let names = MechanismKind::AUTO_ORDER.map(MechanismKind::name);
        let (last, rest) = names.split_last().unwrap();
        assert_eq!(
            "ioctl".parse::<MechanismKind>().unwrap_err().to_string(),
            format!(
                "unknown mechanism \"ioctl\": renamed preempt-queues; expected auto, {} or {last}",
                rest.join(", ")
            )
        );
        assert_eq!(MechanismKind::renamed("dbg-trap"), None, "a current name is no old one");
        let e = "sigstop".parse::<MechanismKind>().unwrap_err().to_string();
        assert!(!e.contains("renamed"), "{e}");
    }

    #[test]
    fn every_mechanism_has_a_one_line_summary() {
        for k in MechanismKind::AUTO_ORDER {
            let s = k.summary();
            assert!(!s.is_empty() && !s.contains('\n'), "{k}: {s:?}");
        }
        assert!(PreemptQueues.summary().contains("PREEMPT_QUEUES"));
        assert!(DbgTrap.summary().contains("SUSPEND_QUEUES"));
        assert!(UpdateQueue.summary().contains("UPDATE_QUEUE"));
    }

    #[test]
    fn names_where_lists_in_auto_order() {
        assert_eq!(
            MechanismKind::names_where(MechanismKind::sets_grace_period),
            [PreemptQueues.name(), DbgTrap.name()]
        );
        assert_eq!(
            MechanismKind::names_where(|_| true),
            MechanismKind::AUTO_ORDER.map(MechanismKind::name)
        );
        assert!(MechanismKind::names_where(|_| false).is_empty());
    }
}
