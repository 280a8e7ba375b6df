//! What the daemon's orders act on: anything a process can suspend and resume itself
//! ([`Schedulable`]). A session's low-priority streams are one kind (`SessionStream`); a program
//! without a session registers its own (an interposer's HIP streams with queues of their own),
//! and the client's order handling, fail-safe and replay treat both alike.
use crate::LpStream;
use crate::error::{ErrorKind, Result};
use crate::sched::proto::Device;
use std::sync::Arc;

/// An object the scheduler daemon may suspend and resume through its client
/// ([`super::SchedClient::register_obj`]): the client calls [`Schedulable::daemon_suspend`] when
/// the daemon orders it suspended and [`Schedulable::daemon_resume`] when the daemon orders it
/// resumed, when the daemon dies or its lease lapses (the fail-safe), when it is unregistered and
/// when the client closes.
///
/// **The daemon's hold is a hold of its own.** The client calls `daemon_resume` only after a
/// `daemon_suspend` of its own succeeded (never for a suspension it did not make), and never
/// calls `daemon_suspend` twice without a `daemon_resume` between. The object must keep the
/// daemon's hold apart from any other reason it is suspended (its own program's, an in-process
/// rule's): `daemon_resume` releases the daemon's hold only, and the object runs again only when
/// no hold is left. An object whose hold went away meanwhile (closed, destroyed) answers
/// `daemon_resume` with `Ok` (or an error of kind [`ErrorKind::NotSuspended`], which the client
/// takes as done).
///
/// **Called with the client's lock held**, from its link thread (orders, the fail-safe) or the
/// calling thread (`unregister_obj`, `close`): neither method may call into the client, and a
/// thread that calls the client (`enter`, `leave`, `register_obj`, ...) must not hold a lock
/// these methods take, or the two threads wait for each other. Return promptly: the daemon waits
/// for the order's acknowledgement (up to its ack timeout) before an HP block starts.
///
/// ```
/// use preempt_api::sched::{Schedulable, proto::Device};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// struct Queue { id: u64, held: AtomicBool }
/// impl Schedulable for Queue {
///     fn sched_id(&self) -> u64 { self.id }
///     fn sched_device(&self) -> Option<Device> { Some(Device::host(0)) }
///     fn daemon_suspend(&self) -> preempt_api::Result<()> {
///         self.held.store(true, Ordering::SeqCst); // and stop the queue if no other hold has
///         Ok(())
///     }
///     fn daemon_resume(&self) -> preempt_api::Result<()> {
///         self.held.store(false, Ordering::SeqCst); // and restart it if no other hold is left
///         Ok(())
///     }
/// }
/// ```
pub trait Schedulable: Send + Sync {
    /// Its id with its client: unique among the objects registered with one client (a second
    /// object with a registered id is refused) and the name the daemon's orders use.
    fn sched_id(&self) -> u64;

    /// The device it runs on, for the daemon (only blocks on this device suspend it); `None`: the
    /// client's own device ([`super::SchedClient::device`]).
    fn sched_device(&self) -> Option<Device> {
        None
    }

    /// How messages name it.
    fn sched_label(&self) -> String {
        format!("object {}", self.sched_id())
    }

    /// Suspends it on the daemon's behalf (the daemon's hold). An error is the order's failure:
    /// its text goes back to the daemon (which logs it and treats the object as running).
    fn daemon_suspend(&self) -> Result<()>;

    /// Releases the daemon's hold (other holds stay).
    fn daemon_resume(&self) -> Result<()>;
}

/// A session's low-priority stream as the daemon's object: the stream's scheduler hold
/// (docs/c-api.md#who-holds-a-suspension), beside the user's and the in-process helper's.
pub(super) struct SessionStream(pub Arc<LpStream>);

impl Schedulable for SessionStream {
    fn sched_id(&self) -> u64 {
        self.0.id()
    }

    /// Its KFD queue's GPU where it has a queue: the gpu id its target carries, else the one this
    /// process's queue list in sysfs gives its queue id (KFD queue ids are per process); else
    /// (no queue, or one whose GPU is known neither way) the session's device.
    fn sched_device(&self) -> Option<Device> {
        let q = self.0.queue()?;
        let gpu = if q.gpu_id != 0 {
            Some(q.gpu_id)
        } else {
            kfd::sysfs::proc_queues(&kfd::sysfs::SysRoot::default(), std::process::id())
                .ok()
                .and_then(|all| all.into_iter().find(|p| p.queue_id == q.queue_id))
                .map(|p| p.gpu_id)
                .filter(|&g| g != 0)
        };
        gpu.map(Device::kfd)
    }

    fn sched_label(&self) -> String {
        self.0.label().to_owned()
    }

    fn daemon_suspend(&self) -> Result<()> {
        self.0.sched_suspend()
    }

    fn daemon_resume(&self) -> Result<()> {
        self.0.sched_resume()
    }
}

/// Releases the daemon's hold of `o`. Not held any more counts as done: the object was closed
/// meanwhile, which released every hold.
pub(super) fn release(o: &dyn Schedulable) -> Result<()> {
    match o.daemon_resume() {
        Err(e) if e.kind == ErrorKind::NotSuspended => Ok(()),
        r => r,
    }
}
