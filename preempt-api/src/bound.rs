//! `kfd` sessions: `/dev/kfd` alone, no HIP. Their only streams are explicit KFD queue ids of
//! this process ([`crate::Session::bind_queue`]), suspended at Lv3 by the session's mechanism;
//! the caller launches on them with its own runtime.
use crate::check::Verified;
use crate::device::{DeviceBackend, HpBody, Launcher, LpBody, Lv3Held};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{Level, Options};
use lv3::mechanism::{Preemptor, QueueTarget, SuspendedQueue};
use std::sync::Arc;

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
