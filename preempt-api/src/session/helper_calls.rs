//! The session's helper calls: the in-process helper (`crate::helper`), or with
//! [`crate::Options::scheduler`] the scheduler daemon's client (docs/scheduler-daemon.md), which
//! applies the same rule across the node's processes; and the helper's time-driven policy
//! (`crate::helper::timed`), which runs in this process either way.
use super::{Session, WeakSession};
use crate::error::{Error, Result};
use crate::helper::timed::{Driver, PolicyStatus};
use crate::options::{PolicyChoice, PolicyParams};
use crate::owner::Bound;
use crate::sched::{ClientError, ClientOptions, SchedClient};
use crate::stream::LpStream;
use hpf::Priority;
use std::path::Path;
use std::sync::Arc;

impl Session {
    /// Connects the session to its scheduler daemon ([`crate::Options::scheduler`]), waiting at most
    /// the client's reply timeout for the first connection: a daemon that cannot be reached
    /// (no socket, permission, refused) fails the open with `Scheduler` (a mistyped path never
    /// runs unscheduled unnoticed). Once connected, the client reconnects by itself.
    pub(super) fn scheduled(self) -> Result<Session> {
        let Some(path) = self.inner.opts.scheduler.clone() else {
            return Ok(self);
        };
        let opts = self.inner.opts.scheduler_client.clone();
        match SchedClient::connect_for(&path, Some(self.downgrade().owns_test()), self.sched_device(), opts) {
            Ok(c) => {
                let _ = self.inner.sched.set(Bound::new(self.inner.owner, c));
                Ok(self)
            }
            Err(e) => {
                let _ = self.close();
                Err(Error::from(e))
            }
        }
    }

    /// The device the scheduler daemon knows this session's blocks and streams by: `host:N`'s
    /// index, a `hip:N` session's GPU by its KFD gpu id (the topology node at the GPU's PCI
    /// address: the same in every process, where HIP's N depends on `HIP_VISIBLE_DEVICES` and
    /// `ROCR_VISIBLE_DEVICES`). `None` on a `kfd` session (its bound queues each name their own
    /// GPU) and on a GPU no single topology node matches (on gfx 9.4.3 a partition past the
    /// first: lv3's `discovery::gpu_ids_at` says why): its streams are then placed by their own KFD
    /// queues, and its blocks on the device of its first registered stream.
    pub fn sched_device(&self) -> Option<crate::sched::proto::Device> {
        self.inner.sched_device
    }

    pub(crate) fn downgrade(&self) -> WeakSession {
        WeakSession(Arc::downgrade(&self.inner))
    }

    /// The scheduler daemon's client of a session opened with [`crate::Options::scheduler`] (`None`
    /// otherwise, and in a fork child): its connection, the streams it holds suspended, its
    /// counters; [`SchedClient::enter`] returns what a block's suspends came to.
    pub fn scheduler(&self) -> Option<&SchedClient> {
        if !self.inner.owner.is_here() {
            return None;
        }
        self.inner.sched.get().map(|b| &**b)
    }

    /// Registers `stream` with the helper at `priority` (low-priority streams: 0). Scheduled by
    /// a daemon: registered with the daemon, which may suspend it for other processes' blocks.
    pub fn helper_register(&self, stream: &Arc<LpStream>, priority: Priority) -> Result<()> {
        self.live()?;
        self.owns(stream)?;
        match self.scheduler() {
            Some(c) => c.register(stream, priority).map_err(Error::from),
            None => self.inner.helper.register(stream, priority),
        }
    }

    /// Removes `stream` from the helper, its blocks and its policy (resuming it if either had
    /// suspended it).
    pub fn helper_unregister(&self, stream: &LpStream) -> Result<()> {
        self.live()?;
        self.owns(stream)?;
        let blocks = match self.scheduler() {
            Some(c) => c.unregister(stream).map_err(Error::from),
            None => self.inner.helper.unregister(stream.id()),
        };
        let policy = self.inner.timed.as_ref().map_or(Ok(()), |d| d.unschedule(stream.id()));
        blocks.and(policy)
    }

    /// The helper's time-driven policy ([`crate::Options::policy`]), `None`: blocks only.
    pub fn helper_policy(&self) -> Option<PolicyChoice> {
        self.inner.timed.as_ref().map(|d| d.choice())
    }

    /// The policy's driver, or the error for a session without one.
    fn timed(&self) -> Result<&Driver> {
        self.inner.timed.as_deref().ok_or_else(|| {
            Error::invalid(
                "the session's helper runs highest-priority-first blocks only: open the session with a policy \
                 (Options::policy: up, kedf or laxity) to schedule streams by share, deadline or laxity",
            )
        })
    }

    /// Schedules `stream` with the helper's policy ([`crate::Options::policy`]) at `params` (its
    /// share, deadline or laxity; again: new params), beside any registration for blocks. From now
    /// on the policy suspends and resumes it (a hold of its own, docs/c-api.md#the-helpers-policy):
    /// under a utilization partition every stream but the one whose turn it is stays suspended.
    /// A delay command submitted through the library makes the stream ready; work launched on its
    /// handle is announced with [`Session::helper_ready`]. `InvalidArgument` without a policy or
    /// with another policy's params.
    pub fn helper_schedule(&self, stream: &Arc<LpStream>, params: PolicyParams) -> Result<()> {
        self.live()?;
        self.owns(stream)?;
        self.timed()?.schedule(stream, params)
    }

    /// `stream` has work (launched on its handle, which the library does not see) from now on,
    /// until [`Session::helper_idle`]: call it before launching. `InvalidArgument` unless the
    /// stream is scheduled ([`Session::helper_schedule`]).
    pub fn helper_ready(&self, stream: &LpStream) -> Result<()> {
        self.live()?;
        self.owns(stream)?;
        self.timed()?.ready(stream)
    }

    /// All of `stream`'s work is done (after its synchronize). `InvalidArgument` unless the
    /// stream is scheduled.
    pub fn helper_idle(&self, stream: &LpStream) -> Result<()> {
        self.live()?;
        self.owns(stream)?;
        self.timed()?.idle(stream)
    }

    /// What the helper's policy knows now: each scheduled stream (ready, held suspended), the
    /// actions carried out, the failures and the last one. `None` without a policy and in a fork
    /// child.
    pub fn helper_policy_status(&self) -> Option<PolicyStatus> {
        if !self.inner.owner.is_here() {
            return None;
        }
        self.inner.timed.as_ref().map(|d| d.status())
    }

    /// A block of `priority` begins: every registered stream of lower priority is suspended at
    /// its level (all or none). Scheduled by a daemon: every lower stream of every process on
    /// the node, returning once their suspends were acknowledged or the daemon's ack timeout
    /// passed (what they came to: [`SchedClient::enter`]); without a daemon connected now it
    /// returns at once and the block is replayed when one connects. `Scheduler` if the daemon
    /// refused or did not answer (the block is then not active).
    pub fn helper_enter(&self, priority: Priority) -> Result<()> {
        self.live()?;
        let Some(c) = self.scheduler() else {
            return self.inner.helper.enter(priority);
        };
        match c.enter(priority) {
            Ok(_) => Ok(()),
            Err(e) => {
                // No answer: the daemon may still hold the block; leave it, so that an error
                // means no block (as the in-process helper's all or none).
                if matches!(e, ClientError::Timeout(_)) {
                    let _ = c.leave(priority);
                }
                Err(Error::from(e))
            }
        }
    }

    /// A block of `priority` ended; call it once the block's device work is done. `Closed`
    /// after close (which ended every block).
    pub fn helper_leave(&self, priority: Priority) -> Result<()> {
        self.live()?;
        match self.scheduler() {
            Some(c) => c.leave(priority).map_err(Error::from),
            None => self.inner.helper.leave(priority),
        }
    }

    /// Blocks inside the helper now (0 in a fork child).
    pub fn helper_active(&self) -> usize {
        if !self.inner.owner.is_here() {
            return 0;
        }
        match self.scheduler() {
            Some(c) => c.active_blocks(),
            None => self.inner.helper.active(),
        }
    }
}

/// The public constructors of [`SchedClient`] over a session (here: they need its handle).
impl SchedClient {
    /// Starts the client and waits (at most [`ClientOptions::reply_timeout`]) for its first
    /// connection; `Err` with the reason if that failed (no daemon, permission, refused). A
    /// session opened with [`crate::Options::scheduler`] has its client already
    /// ([`Session::scheduler`]): a second one is refused.
    pub fn connect(
        socket: impl AsRef<Path>,
        session: &Session,
        opts: ClientOptions,
    ) -> std::result::Result<Self, ClientError> {
        Self::not_scheduled(session)?;
        Self::connect_for(
            socket.as_ref(),
            Some(session.downgrade().owns_test()),
            session.sched_device(),
            opts,
        )
    }

    fn not_scheduled(session: &Session) -> std::result::Result<(), ClientError> {
        if session.scheduler().is_some() {
            return Err(ClientError::Invalid(
                "this session has its own scheduler client (Options::scheduler): use its helper calls".into(),
            ));
        }
        Ok(())
    }

    /// Starts the client without waiting: it connects in the background, and again whenever
    /// the daemon comes back; until then `enter` runs unscheduled. Refused as
    /// [`SchedClient::connect`] is on a session that has its own client.
    pub fn start(
        socket: impl AsRef<Path>,
        session: &Session,
        opts: ClientOptions,
    ) -> std::result::Result<Self, ClientError> {
        Self::not_scheduled(session)?;
        Ok(Self::start_for(
            socket.as_ref(),
            Some(session.downgrade().owns_test()),
            session.sched_device(),
            opts,
        ))
    }
}

impl WeakSession {
    fn owns_test(self) -> crate::sched::client::Owns {
        Box::new(move |s| self.owns(s))
    }
}
