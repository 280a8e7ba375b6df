//! [`OwnQueueStream`]: a stream a program launches its own work on, with a hardware queue of
//! its own whose KFD queue discovery proved, so that Lv3 suspends exactly that work. The HIP
//! interposer (`hip-interpose`) hands one to an unmodified program for each low-priority
//! stream it creates.
use super::{GpuDevice, GpuSuspension, lock};
use crate::error::{Error, ErrorKind, Result};
use hip_rt::Stream;
use lv3::binding::QueueBinding;
use lv3::mechanism::Preemptor;
use std::sync::{Arc, Mutex};

/// A stream on a queue of its own, bound to its KFD queue; suspended at most once at a time.
/// Dropping it resumes it first, then destroys the stream.
pub struct OwnQueueStream {
    held: Mutex<Option<GpuSuspension>>,
    binding: QueueBinding,
    stream: Stream,
    notes: Vec<String>,
}

impl GpuDevice {
    /// A stream with a queue of its own and its KFD queue found for `lv3`'s mechanism (the
    /// set-up of [`GpuDevice::lp_queue`] without the delay kernel and its slots).
    pub fn own_queue_stream(&self, lv3: &Arc<Preemptor>) -> Result<OwnQueueStream> {
        let (stream, binding, notes) = self.queue_of_its_own(Some(lv3))?;
        let binding = binding.ok_or_else(|| Error::new(ErrorKind::Unavailable, "discovery found no KFD queue"))?;
        Ok(OwnQueueStream {
            held: Mutex::new(None),
            binding,
            stream,
            notes,
        })
    }
}

impl OwnQueueStream {
    /// The `hipStream_t`, as a number.
    pub fn handle(&self) -> usize {
        self.stream.handle()
    }

    /// How discovery went.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The KFD queue id it is bound to.
    pub fn queue_id(&self) -> u32 {
        self.binding.target().queue_id
    }

    /// Suspends its queue through `lv3` (nothing if it is suspended already).
    pub fn suspend(&self, lv3: &Preemptor) -> Result<()> {
        let mut held = lock(&self.held);
        if held.is_none() {
            *held = Some(GpuSuspension::suspend(lv3, &self.binding)?);
        }
        Ok(())
    }

    /// Resumes its queue (nothing if it is not suspended).
    pub fn resume(&self) -> Result<()> {
        match lock(&self.held).take() {
            Some(s) => s.resume(),
            None => Ok(()),
        }
    }

    /// Whether it is suspended.
    pub fn is_suspended(&self) -> bool {
        lock(&self.held).is_some()
    }
}

impl Drop for OwnQueueStream {
    fn drop(&mut self) {
        // The guard resumes on drop too; resuming here first keeps the order explicit: the
        // queue runs again before its stream is destroyed.
        let _ = self.resume();
    }
}
