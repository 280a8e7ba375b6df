//! A hardware queue with no device behind it: every command completes the moment it is
//! launched. What is left when [`XQueue`](crate::XQueue) runs over it is the launcher's own
//! cost per command (`preempt-lat launcher-cost` measures it).
use crate::{CommandId, HwQueue};
use std::convert::Infallible;
use std::sync::Arc;

/// See the module docs. Commands are plain numbers, ignored.
#[derive(Debug, Default)]
pub struct NullQueue;

impl NullQueue {
    /// A shared queue, as [`XQueue::new`](crate::XQueue::new) takes it.
    pub fn shared() -> Arc<Self> {
        Arc::new(NullQueue)
    }
}

impl HwQueue for NullQueue {
    type Command = u64;
    type SyncPoint = ();
    type Error = Infallible;

    fn launch(&self, _id: CommandId, _cmd: u64) -> Result<(), Infallible> {
        Ok(())
    }
    fn record(&self) -> Result<(), Infallible> {
        Ok(())
    }
    fn wait(&self, _sp: &()) -> Result<(), Infallible> {
        Ok(())
    }
    fn synchronize(&self) -> Result<(), Infallible> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, XQueue};

    #[test]
    fn every_command_completes_through_the_launcher() {
        let xq = XQueue::new(NullQueue::shared(), Config::new(4, 2).unwrap()).unwrap();
        let done = xq.take_completions().unwrap();
        for i in 0..100 {
            xq.submit(i);
        }
        xq.wait_idle().unwrap();
        let ids: Vec<u64> = done.try_iter().map(|c| c.id).collect();
        assert_eq!(ids, (0..100).collect::<Vec<u64>>());
    }
}
