//! `kfd` sessions: `/dev/kfd` alone, no HIP. Their only streams are explicit KFD queue ids of
//! this process ([`crate::Session::bind_queue`]), suspended at Lv3 by the session's mechanism;
//! the caller launches on them with its own runtime.
use crate::check::Verified;
use crate::device::{DeviceBackend, HpBody, Launcher, LpBody, Lv3Held};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{Level, Options};
use kfd::{Kfd, KfdOps};
use lv3::mechanism::{Preemptor, QueueTarget, SuspendedQueue};
use std::sync::Arc;

/// KFD priority ROCr gives a normal-priority queue (LOW 0, NORMAL 7, HIGH 11): what a bound
/// queue is restored with when its descriptor does not say.
pub const KFD_PRIORITY_NORMAL: u32 = 7;

/// An explicit KFD queue to bind ([`crate::Session::bind_queue`]). Zero ring fields: looked up in
/// GET_QUEUE_SNAPSHOT when this process's debug trap is on (dbg-trap sessions), else unknown,
/// which only update-queue needs (it restores the ring from them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueDesc {
    pub queue_id: u32,
    /// The KFD gpu id (`/sys/class/kfd/kfd/topology/nodes/N/gpu_id`); 0 = unknown.
    pub gpu_id: u32,
    pub ring_base_address: u64,
    /// Bytes, a power of two.
    pub ring_size: u32,
    /// KFD priority 0..=15; `None` = 7 (ROCr's normal).
    pub priority: Option<u32>,
}

/// The queue `desc` names, for `p`: the ring looked up in GET_QUEUE_SNAPSHOT where it was not
/// given, which only a mechanism that restores from the ring needs.
pub(crate) fn target(desc: QueueDesc, p: &Preemptor) -> Result<QueueTarget> {
    let priority = desc.priority.unwrap_or(KFD_PRIORITY_NORMAL);
    let mut target = QueueTarget {
        queue_id: desc.queue_id,
        gpu_id: desc.gpu_id,
        ring_base_address: desc.ring_base_address,
        ring_size: desc.ring_size,
        priority,
        percentage: 100,
    };
    if desc.ring_base_address == 0 {
        let snap = Kfd::open()
            .ok()
            .and_then(|k| k.queue_snapshot(0).ok())
            .and_then(|all| all.into_iter().find(|s| s.queue_id == desc.queue_id));
        match snap {
            Some(s) => target = QueueTarget::from_snapshot(&s, priority),
            None if p.kind().restores_from_ring() => {
                return Err(Error::invalid(format!(
                    "queue {}: {} restores the queue from its ring address and size, which were not \
                     given and are not in GET_QUEUE_SNAPSHOT (debugging is off, or no such queue)",
                    desc.queue_id,
                    p.kind()
                )));
            }
            // The others name the queue by id only; the ring fields are placeholders
            // that pass the target check and are never sent to the kernel.
            None => {
                target.ring_base_address = QueueTarget::NONEXISTENT.ring_base_address;
                target.ring_size = QueueTarget::NONEXISTENT.ring_size;
            }
        }
    }
    target.validate()?;
    Ok(target)
}

/// A `kfd` session's device: nothing to create streams with.
pub(crate) struct KfdBackend;

impl DeviceBackend for KfdBackend {
    fn lp_stream(&self, _level: Level, _lv3: Option<&Arc<Preemptor>>, _opts: &Options) -> Result<Box<dyn LpBody>> {
        Err(Error::unsupported(
            "a kfd session has no HIP runtime to create streams with: bind a KFD queue id instead",
        ))
    }
    fn hp_stream(&self, _opts: &Options) -> Result<Box<dyn HpBody>> {
        Err(Error::unsupported("a kfd session has no streams"))
    }
}

/// An explicit KFD queue: Lv3 only, nothing to submit.
pub(crate) struct BoundQueue(pub QueueTarget);

impl Lv3Held for SuspendedQueue {
    fn resume(self: Box<Self>) -> Result<()> {
        Ok(SuspendedQueue::resume(*self)?)
    }
}

impl LpBody for BoundQueue {
    fn launcher(&self) -> Option<&dyn Launcher> {
        None
    }
    fn submit_delay(&self, _ns: u64) -> Result<u64> {
        Err(Error::unsupported(
            "a bound KFD queue has no launcher: submit on its own stream",
        ))
    }
    fn suspend_lv3(&self, _label: &str, pre: Option<&Preemptor>) -> Result<Box<dyn Lv3Held>> {
        let pre = pre.ok_or_else(|| Error::new(ErrorKind::Unavailable, "no Lv3 mechanism or no known KFD queue"))?;
        Ok(Box::new(pre.suspend(&self.0)?))
    }
    fn verify(&self, _idle: bool) -> Result<Verified> {
        Err(Error::unsupported("a bound KFD queue has no delay commands to check"))
    }
    fn describe(&self, _id: u64, how: &str) -> String {
        format!(
            "bound KFD queue {} on gpu 0x{:x}, {how}",
            self.0.queue_id, self.0.gpu_id
        )
    }
    fn queue(&self) -> Option<QueueTarget> {
        Some(self.0)
    }
}
