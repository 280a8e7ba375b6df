//! A fence for calls on HIP's null stream while a blocking stream cannot progress.
//!
//! A stream with a hardware queue of its own ([`crate::Device::stream_own_queue`],
//! hipExtStreamCreateWithCUMask) is a *blocking* stream: work on the legacy null stream waits for
//! it, and hipMemcpy, hipDeviceSynchronize, hipFree and hipHostFree (which synchronize the device)
//! wait for it too. If something outside HIP holds that stream's queue stopped (a preempted LP
//! queue), each of those calls would wait until the queue is resumed, and a caller that resumes
//! only after the call returns deadlocks. So whoever stops such a stream holds a
//! [`NullStreamBlocked`] for as long as it is stopped, and this crate refuses those calls (an
//! error; a free in a destructor is skipped, leaking the allocation rather than hanging).
//! Work on non-blocking streams (every [`crate::Device::stream`]) and event polling are unaffected.
use crate::HipError;
use std::sync::atomic::{AtomicUsize, Ordering};

static BLOCKED: AtomicUsize = AtomicUsize::new(0);

/// Held while a blocking stream is stopped from outside HIP; see the module docs.
///
/// ```
/// let held = hip_rt::NullStreamBlocked::new();
/// assert!(hip_rt::NullStreamBlocked::active());
/// drop(held);
/// ```
#[derive(Debug)]
#[must_use = "the fence lasts as long as the value"]
pub struct NullStreamBlocked(());

impl NullStreamBlocked {
    pub fn new() -> Self {
        BLOCKED.fetch_add(1, Ordering::SeqCst);
        NullStreamBlocked(())
    }

    /// Whether any fence is held now.
    pub fn active() -> bool {
        BLOCKED.load(Ordering::SeqCst) > 0
    }
}

impl Default for NullStreamBlocked {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NullStreamBlocked {
    fn drop(&mut self) {
        BLOCKED.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `Err` if `func` (a call that waits on the null stream or the whole device) must not run now.
pub(crate) fn check(func: &'static str) -> Result<(), HipError> {
    if NullStreamBlocked::active() {
        return Err(HipError::Invalid(format!(
            "{func} refused: a blocking stream is held stopped (a suspended LP queue), and {func} would wait for \
             it forever; resume the queue first"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_that_wait_on_the_null_stream_are_refused_while_a_fence_is_held() {
        // Tests run in parallel and the fence is process-wide: only this test takes one.
        assert!(check("hipMemcpy").is_ok());
        let a = NullStreamBlocked::new();
        let b = NullStreamBlocked::new();
        let e = check("hipMemcpy").unwrap_err();
        assert!(
            e.to_string().contains("hipMemcpy refused") && e.to_string().contains("resume"),
            "{e}"
        );
        drop(a);
        assert!(check("hipDeviceSynchronize").is_err(), "still one fence");
        drop(b);
        assert!(check("hipDeviceSynchronize").is_ok());
    }
}
