//! The null stream's work on a stream of the interposer's (`PREEMPT_NULL_STREAM=own`), so that
//! a program whose work is all on the default stream (PyTorch's, by default) can be suspended.
//!
//! Every call that names the null stream and that the interposer intercepts goes to one
//! *substitute* stream instead: made at the first such call, at the process's priority, and
//! blocking. Blocking keeps HIP's legacy ordering with what still reaches the null stream (the
//! calls not intercepted, a synchronous copy): null-stream work waits for blocking streams and
//! blocking streams wait for null-stream work, so the substitute and the null stream stay in
//! order both ways. Another blocking stream the program makes would expect its work to follow
//! the null stream's, which now runs on the substitute: from then on the null stream's work
//! stays on the null stream, and the new stream first waits for the substitute's work so far.
//! A program that makes blocking streams from one thread while another submits to the null
//! stream has no order between those calls anyway.
use super::{Interposer, get, quietly};
use crate::config::{GREATEST, Granularity, NullStream, OwnQueues};
use crate::device::NON_BLOCKING;
use crate::ffi::next;
use crate::sched::Key;
use std::sync::atomic::{AtomicU8, Ordering};

const UNDECIDED: u8 = 0;
const KEEP: u8 = 1;
const OWN: u8 = 2;
/// Where null-stream calls go, once decided (per process; a fork child's interposer is off).
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The stream a call naming `key` goes to: `key`, except the null stream (0) while its work
/// goes to the substitute. A compare for any other stream, a load for the null stream.
pub fn route(key: Key) -> Key {
    if key != 0 || MODE.load(Ordering::Relaxed) == KEEP {
        return key;
    }
    quietly(|| get().map(Interposer::null_route)).unwrap_or_else(|| {
        // The interposer is off (or failed): the null stream stays the null stream.
        MODE.store(KEEP, Ordering::Relaxed);
        0
    })
}

impl Interposer {
    fn null_route(&self) -> Key {
        let sub = *self.null_sub.get_or_init(|| {
            let made = self.make_null_substitute();
            MODE.store(if made.is_some() { OWN } else { KEEP }, Ordering::Relaxed);
            made
        });
        match (MODE.load(Ordering::Relaxed), sub) {
            (OWN, Some(k)) => k,
            _ => 0,
        }
    }

    fn make_null_substitute(&self) -> Option<Key> {
        let c = &self.cfg;
        let p = c.default_priority;
        let suspender = c.granularity == Granularity::Stream || c.scheduler.is_some();
        if c.null_stream != NullStream::Own || p <= GREATEST || !suspender || c.own_queues == OwnQueues::Never {
            return None;
        }
        match self.take_over(0, p) {
            Some(Ok(k)) => {
                if c.log {
                    eprintln!("preempt-hip: the null stream's work goes to stream {k:#x} (priority {p})");
                }
                Some(k)
            }
            // take_over said why.
            Some(Err(_)) => None,
            None => {
                eprintln!("preempt-hip: PREEMPT_MAX_OWN_QUEUES reached: the null stream's work stays on it");
                None
            }
        }
    }

    /// The program made stream `key` with `flags` (whoever made it): a blocking one ends the
    /// substitute's use, after making `key` wait for its work so far.
    pub fn program_stream_created(&self, key: Key, flags: u32) {
        if flags & NON_BLOCKING != 0 || MODE.load(Ordering::Relaxed) != OWN {
            return;
        }
        let Some(Some(sub)) = self.null_sub.get().copied() else {
            return;
        };
        MODE.store(KEEP, Ordering::Relaxed);
        let waited = next::create_event().and_then(|e| {
            let r = next::record_event(e, sub).and_then(|()| next::stream_wait_event(key, e));
            // The wait is enqueued: the event may be recorded again.
            self.recycle(e);
            r
        });
        let failed = match waited {
            Ok(()) => String::new(),
            Err(c) => format!(" (its wait for the work so far failed: {})", next::error_name(c)),
        };
        eprintln!(
            "preempt-hip: a blocking stream was made: the null stream's work goes to the null stream again, for HIP's legacy ordering{failed}"
        );
    }
}
