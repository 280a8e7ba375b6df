//! A process's side of the daemon: [`SchedClient`] registers a session's own low-priority
//! streams with the daemon, reports its high-priority blocks ([`SchedClient::enter`],
//! [`SchedClient::leave`]), and carries out the daemon's orders on its own streams through the
//! session's mechanisms (no process touches another's queues). The daemon's suspension is a
//! holder of its own beside the user's and the in-process helper's
//! (docs/c-api.md#who-holds-a-suspension): a stream suspended by hand stays suspended after the
//! daemon's block, and the daemon never resumes what it did not suspend.
//!
//! A session opened with [`crate::Options::scheduler`] makes one and routes its helper calls to
//! it; a program may also make one over a session of its own ([`SchedClient::connect`]).
//!
//! **Without a session.** A program that suspends and resumes queues of its own by other means
//! (an LD_PRELOAD interposer over a HIP program's own streams) connects with
//! [`SchedClient::connect_standalone`] (or [`SchedClient::start_standalone`]) on a device, and
//! registers its objects with [`SchedClient::register_obj`]: anything implementing
//! [`Schedulable`]. The orders, the holds, the fail-safe and the replay are the same as for a
//! session's streams (which are registered as `Schedulable`s too); so is the check of who the
//! daemon is ([`trust`]): a client never talks to a daemon it does not trust, whoever made it.
//!
//! **Devices.** The daemon schedules each device apart: a block suspends only the streams on its
//! own device. A stream is on its KFD queue's GPU where it has one (an Lv3 GPU stream's queue
//! found by discovery; a bound queue's gpu id as given, else as this process's queue list in
//! sysfs says), else on its session's device; the client's blocks are on its session's device
//! ([`crate::Session::sched_device`]: the KFD gpu id of a `hip:N` session's GPU, `host:N`'s
//! index), or, for a `kfd` session, which has no device of its own, on the device of the first
//! stream it registered. A block entered before the client knows its device runs unscheduled.
//! A client without a session is on the device it was given; an object it registers is on the
//! device the object names ([`Schedulable::sched_device`]), else on the client's; and
//! [`SchedClient::enter_on`] enters a block on any device (a process with streams on several
//! GPUs).
//!
//! **Fail-safe.** A thread of its own (`link`) owns the connection. When the daemon goes away
//! (its end of the socket closes: death, SIGKILL, restart) or stays silent past the lease
//! ([`ClientOptions::lease`]) while streams are suspended on its behalf, every such stream is
//! resumed at once, and the client reconnects (with a backoff) and replays its streams and
//! active blocks to the new daemon. Without a daemon, `enter` returns at once, unscheduled: the
//! high-priority work runs, nothing is suspended.
//!
//! Long because the connection, the replay after a reconnect and the fail-safe share one state
//! (streams, blocks held) whose consistency across a daemon's death is the point.
use super::proto::{Code, Device, Notice, Request};
use crate::LpStream;
use hpf::Priority;
pub use object::Schedulable;
use object::SessionStream;
pub(crate) use shared::Owns;
use shared::{Registered, Shared, State};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

mod link;
mod object;
mod shared;
pub mod trust;

pub use crate::options::{ClientOptions, DEFAULT_LEASE, DEFAULT_REPLY_TIMEOUT, REPLY_TIMEOUT_ENV};
pub use shared::LinkStats;

/// What [`SchedClient::enter`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entered {
    /// Whether a daemon scheduled the block (false: no daemon now; nothing was suspended).
    pub scheduled: bool,
    /// Suspends the daemon waited for that were carried out.
    pub suspended: u32,
    /// ... that failed (or whose client went away).
    pub failed: u32,
    /// ... that were not acknowledged in time (the daemon did not wait for them).
    pub late: u32,
}

impl Entered {
    const UNSCHEDULED: Entered = Entered {
        scheduled: false,
        suspended: 0,
        failed: 0,
        late: 0,
    };
}

/// A client's failure.
#[derive(Debug)]
pub enum ClientError {
    /// The first connection failed ([`SchedClient::connect`]).
    Connect(String),
    /// The daemon refused the request.
    Refused {
        /// Its code.
        code: Code,
        /// Its text.
        message: String,
    },
    /// No reply within [`ClientOptions::reply_timeout`] (a call that cannot go on without one).
    Timeout(String),
    /// A misuse: a stream of another session, a leave without its enter, a second object with a
    /// registered id.
    Invalid(String),
    /// The application API failed (a resume of a stream being unregistered).
    Api(crate::Error),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect(m) => write!(f, "scheduler: {m}"),
            ClientError::Refused { code, message } => write!(f, "scheduler refused ({code:?}): {message}"),
            ClientError::Timeout(m) => write!(f, "scheduler: no reply: {m}"),
            ClientError::Invalid(m) => write!(f, "scheduler: {m}"),
            ClientError::Api(e) => write!(f, "scheduler: {e}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Api(e) => Some(e),
            _ => None,
        }
    }
}

/// See the [module documentation](self). Dropping it (or [`SchedClient::close`]) resumes what
/// it holds for the daemon and disconnects.
///
/// ```no_run
/// use preempt_api::sched::{ClientOptions, SchedClient};
/// use preempt_api::{DeviceSpec, Level, Options, Session};
/// let s = Session::open(DeviceSpec::HOST, Options::default())?;
/// let lp = s.create_lp_stream(Level::Auto)?;
/// let sched = SchedClient::connect("/run/preempt-sched/preempt-sched.sock", &s, ClientOptions::default())?;
/// sched.register(&lp, 0)?; // the daemon may now suspend it while other processes' HP blocks run
/// let e = sched.enter(1)?; // this process's own HP block: lower streams everywhere are suspended
/// // ... HP work, then wait for it ...
/// sched.leave(1)?;
/// # let _ = e;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SchedClient {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for SchedClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedClient")
            .field("socket", &self.shared.path)
            .field("connected", &self.connected())
            .finish_non_exhaustive()
    }
}

impl SchedClient {
    /// [`SchedClient::connect`]'s body: `owns` says whether a stream is one of its session's
    /// open streams (the session's side: `crate::session`, which a scheduled session also opens
    /// its client through); `None` for a client without a session.
    pub(crate) fn connect_for(
        socket: &Path,
        owns: Option<Owns>,
        device: Option<Device>,
        opts: ClientOptions,
    ) -> Result<Self, ClientError> {
        let c = Self::start_for(socket, owns, device, opts);
        let deadline = Instant::now() + c.shared.opts.reply_timeout;
        let mut st = c.shared.state();
        while !st.attempted {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = c
                .shared
                .attempt
                .wait_timeout(st, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        if st.writer.is_some() {
            drop(st);
            return Ok(c);
        }
        let why = st
            .last_error
            .clone()
            .unwrap_or_else(|| "no connection within the reply timeout".into());
        drop(st);
        c.close();
        Err(ClientError::Connect(why))
    }

    /// [`SchedClient::start`]'s body.
    pub(crate) fn start_for(socket: &Path, owns: Option<Owns>, device: Option<Device>, opts: ClientOptions) -> Self {
        let shared = Arc::new(Shared {
            path: PathBuf::from(socket),
            opts,
            owns,
            default_device: device,
            state: Mutex::new(State {
                device,
                ..State::default()
            }),
            attempt: Condvar::new(),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("preempt-sched link".into())
            .spawn(move || link::run(&s))
            .ok();
        SchedClient {
            shared,
            thread: Mutex::new(thread),
        }
    }

    /// A client without a session, on `device` (its blocks' device, and its objects' unless they
    /// name another): starts it and waits (at most [`ClientOptions::reply_timeout`]) for its first
    /// connection; `Err` with the reason if that failed (no daemon, permission, refused, a daemon
    /// of a user this process does not trust: [`trust`]). Once connected, it reconnects by itself.
    /// Its objects are registered with [`SchedClient::register_obj`]. Where the daemon is: the
    /// caller's setting, else [`crate::sched::scheduler_or_default`] (`PREEMPT_SCHEDULER`, else
    /// [`crate::sched::default_socket`], where the daemon listens when told nothing).
    ///
    /// ```no_run
    /// use preempt_api::sched::{ClientOptions, SchedClient, default_socket, proto::Device};
    /// let sched = SchedClient::connect_standalone(default_socket(), Device::host(0), ClientOptions::default())?;
    /// // sched.register_obj(Arc::new(my_queue), 0)?;  (any preempt_api::sched::Schedulable)
    /// let e = sched.enter(1)?; // lower objects everywhere on host:0 are suspended
    /// // ... HP work, then wait for it ...
    /// sched.leave(1)?;
    /// # let _ = e;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect_standalone(
        socket: impl AsRef<Path>,
        device: Device,
        opts: ClientOptions,
    ) -> Result<Self, ClientError> {
        valid_device(device)?;
        Self::connect_for(socket.as_ref(), None, Some(device), opts)
    }

    /// [`SchedClient::connect_standalone`] without waiting: it connects in the background, and
    /// again whenever the daemon comes back; until then `enter` runs unscheduled and
    /// registrations are recorded (and sent on connecting). For a program that must not wait for,
    /// or fail on, a daemon that is not there (an interposer starting inside its host program).
    pub fn start_standalone(
        socket: impl AsRef<Path>,
        device: Device,
        opts: ClientOptions,
    ) -> Result<Self, ClientError> {
        valid_device(device)?;
        Ok(Self::start_for(socket.as_ref(), None, Some(device), opts))
    }

    /// The daemon's socket.
    pub fn socket(&self) -> &Path {
        &self.shared.path
    }

    /// Whether a daemon is connected now.
    pub fn connected(&self) -> bool {
        self.shared.state().writer.is_some()
    }

    /// The connected daemon's pid.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.shared.state().daemon_pid
    }

    /// Why the last connection ended or the last attempt failed.
    pub fn last_error(&self) -> Option<String> {
        self.shared.state().last_error.clone()
    }

    /// The link's counters.
    pub fn stats(&self) -> LinkStats {
        self.shared.state().stats
    }

    /// The ids of the streams suspended for the daemon now.
    pub fn held(&self) -> Vec<u64> {
        self.shared.state().held.iter().copied().collect()
    }

    /// Blocks entered and not yet left by this client.
    pub fn active_blocks(&self) -> usize {
        let st = self.shared.state();
        st.blocks.values().sum::<usize>() + st.unplaced.values().sum::<usize>()
    }

    /// The device this client's blocks are on (see the [module documentation](self)); `None`
    /// on a `kfd` session that has registered no stream yet.
    pub fn device(&self) -> Option<Device> {
        self.shared.state().device
    }

    /// Whether `id` is registered with this client.
    pub fn is_registered(&self, id: u64) -> bool {
        self.shared.state().streams.contains_key(&id)
    }

    /// Sends `msg` and waits for its reply; `Ok(None)`: no daemon (or it went away meanwhile).
    fn call(&self, st: &mut State, msg: Request) -> Option<Receiver<Notice>> {
        let (tx, rx) = channel();
        st.send(msg, Some(tx)).map(|_| rx)
    }

    fn wait(&self, rx: Option<Receiver<Notice>>, what: &str) -> Result<Option<Notice>, ClientError> {
        let Some(rx) = rx else { return Ok(None) };
        match rx.recv_timeout(self.shared.opts.reply_timeout) {
            Ok(Notice::Refused { code, message, .. }) => Err(ClientError::Refused { code, message }),
            Ok(n) => Ok(Some(n)),
            // The connection went away: its replacement gets the state replayed.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Ok(None),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ClientError::Timeout(format!(
                "{what}: nothing within {:?}",
                self.shared.opts.reply_timeout
            ))),
        }
    }

    /// Registers one of the session's own streams at `priority` (or changes its priority).
    /// Without a daemon it is recorded and registered on the next connection. A client without a
    /// session has no streams of its own: it registers objects ([`SchedClient::register_obj`]).
    pub fn register(&self, stream: &Arc<LpStream>, priority: Priority) -> Result<(), ClientError> {
        let Some(owns) = &self.shared.owns else {
            return Err(ClientError::Invalid(format!(
                "{} is a session's stream and this client has no session: register objects with register_obj",
                stream.label()
            )));
        };
        if !owns(stream) {
            return Err(ClientError::Invalid(format!(
                "{} is not an open stream of this client's session",
                stream.label()
            )));
        }
        self.register_any(Arc::new(SessionStream(Arc::clone(stream))), priority)
    }

    /// Registers `obj` at `priority` (or, registered already, changes its priority) with a client
    /// without a session ([`SchedClient::connect_standalone`]): from now on the daemon may
    /// suspend it ([`Schedulable::daemon_suspend`]) while higher blocks on its device run, in any
    /// process. Without a daemon it is recorded and registered on the next connection. Refused
    /// ([`ClientError::Invalid`]) on a session's client (whose streams are its session's: use
    /// [`SchedClient::register`]) and for a second object with the id of a registered one.
    pub fn register_obj(&self, obj: Arc<dyn Schedulable>, priority: Priority) -> Result<(), ClientError> {
        if self.shared.owns.is_some() {
            return Err(ClientError::Invalid(format!(
                "{}: this client is its session's: register the session's streams with register",
                obj.sched_label()
            )));
        }
        self.register_any(obj, priority)
    }

    fn register_any(&self, obj: Arc<dyn Schedulable>, priority: Priority) -> Result<(), ClientError> {
        let Some(device) = obj.sched_device().or(self.shared.default_device) else {
            return Err(ClientError::Invalid(format!(
                "the GPU of {} is not known (its KFD queue's gpu id was not given and this process's queue list \
                 does not have the queue): the daemon schedules each GPU apart and cannot place it",
                obj.sched_label()
            )));
        };
        valid_device(device)?;
        let id = obj.sched_id();
        let rx = {
            let mut st = self.shared.state();
            if let Some(r) = st.streams.get(&id) {
                if r.device != device {
                    return Err(ClientError::Invalid(format!(
                        "{} is registered on {}, not {device}",
                        obj.sched_label(),
                        r.device
                    )));
                }
                // The held set names objects by id: another object under that id would be resumed
                // for a suspension it never had. (A session's stream comes wrapped anew each time:
                // its session vouched for it.)
                if self.shared.owns.is_none() && !std::ptr::addr_eq(Arc::as_ptr(&r.obj), Arc::as_ptr(&obj)) {
                    return Err(ClientError::Invalid(format!(
                        "{}: another object is registered with id {id}",
                        obj.sched_label()
                    )));
                }
            }
            st.streams.insert(id, Registered { obj, priority, device });
            st.device.get_or_insert(device);
            self.call(
                &mut st,
                Request::Register {
                    stream: id,
                    priority,
                    device,
                },
            )
        };
        self.sent(self.wait(rx, "register"))
    }

    /// Removes a stream; if the daemon had it suspended, it is resumed here first.
    pub fn unregister(&self, stream: &LpStream) -> Result<(), ClientError> {
        self.unregister_id(stream.id(), stream.label())
    }

    /// Removes the object registered as `id` ([`SchedClient::register_obj`]); if the daemon had
    /// it suspended, it is resumed here first (a failure of that resume is
    /// [`ClientError::Api`], the object unregistered all the same).
    pub fn unregister_obj(&self, id: u64) -> Result<(), ClientError> {
        self.unregister_id(id, &format!("object {id}"))
    }

    /// [`SchedClient::unregister`] by id (a stream being closed).
    pub(crate) fn unregister_id(&self, id: u64, label: &str) -> Result<(), ClientError> {
        let (rx, resumed) = {
            let mut st = self.shared.state();
            let Some(r) = st.streams.remove(&id) else {
                return Err(ClientError::Invalid(format!("{label} is not registered")));
            };
            let resumed = if st.held.remove(&id) {
                object::release(&*r.obj)
            } else {
                Ok(())
            };
            (self.call(&mut st, Request::Unregister { stream: id }), resumed)
        };
        let r = self.sent(self.wait(rx, "unregister"));
        resumed.map_err(ClientError::Api)?;
        r
    }

    /// A block of `priority` starts in this process: returns once every stream the daemon
    /// suspends for it (in every process) acknowledged, or the daemon's ack timeout passed.
    /// Without a daemon: at once, [`Entered::scheduled`] false (recorded, and replayed if one
    /// connects while the block is active). Whatever it returns but a refusal, the block is
    /// active (a [`ClientError::Timeout`] included: the daemon may still carry it out), so
    /// [`SchedClient::leave`] follows.
    pub fn enter(&self, priority: Priority) -> Result<Entered, ClientError> {
        let device = {
            let mut st = self.shared.state();
            let Some(device) = st.device else {
                // A kfd session with no stream registered: no device to schedule the block on.
                *st.unplaced.entry(priority).or_insert(0) += 1;
                return Ok(Entered::UNSCHEDULED);
            };
            device
        };
        self.enter_placed(device, priority)
    }

    /// [`SchedClient::enter`] on `device` rather than the client's own: a block of this process
    /// on another GPU (a program with streams on several). Left with [`SchedClient::leave_on`]
    /// on the same device.
    pub fn enter_on(&self, device: Device, priority: Priority) -> Result<Entered, ClientError> {
        valid_device(device)?;
        self.enter_placed(device, priority)
    }

    fn enter_placed(&self, device: Device, priority: Priority) -> Result<Entered, ClientError> {
        let rx = {
            let mut st = self.shared.state();
            *st.blocks.entry((device, priority)).or_insert(0) += 1;
            self.call(&mut st, Request::Enter { priority, device })
        };
        match self.wait(rx, "enter") {
            Ok(Some(Notice::Entered {
                suspended,
                failed,
                late,
                ..
            })) => Ok(Entered {
                scheduled: true,
                suspended,
                failed,
                late,
            }),
            Ok(_) => Ok(Entered::UNSCHEDULED),
            // The HP work must not pay for a sick scheduler: past the bound the block goes on
            // unscheduled (the daemon, if it wakes, still has it, and ends it if this process
            // leaves it or falls silent).
            Err(ClientError::Timeout(why)) => {
                self.timed_out(&why);
                Ok(Entered::UNSCHEDULED)
            }
            Err(e) => {
                if matches!(e, ClientError::Refused { .. }) {
                    // Refused: the daemon holds no such block, so neither does this client.
                    take_one(&mut self.shared.state().blocks, (device, priority));
                }
                Err(e)
            }
        }
    }

    /// A reply did not come within the bound: counted, and said once per client on stderr (an
    /// application's HP requests now run unscheduled: its operator must learn why).
    fn timed_out(&self, why: &str) {
        let mut st = self.shared.state();
        st.stats.timeouts += 1;
        st.last_error = Some(format!("no reply: {why}"));
        if !std::mem::replace(&mut st.warned, true) {
            drop(st);
            let _ = writeln!(
                std::io::stderr().lock(),
                "preempt-kfd: the scheduler daemon at {} did not answer within {:?} ({why}); blocks run \
                 unscheduled while it does not (said once)",
                self.shared.path.display(),
                self.shared.opts.reply_timeout
            );
        }
    }

    /// Forgets one block of `priority`: `Some(device)` for one the daemon has, `Some(None)` for
    /// one entered unscheduled for want of a device, `None` if there is none.
    fn forget_block(&self, priority: Priority) -> Option<Option<Device>> {
        let mut st = self.shared.state();
        if let Some(device) = st.device
            && take_one(&mut st.blocks, (device, priority))
        {
            return Some(Some(device));
        }
        take_one(&mut st.unplaced, priority).then_some(None)
    }

    /// A block of `priority` that this process entered is done (call it once its device work
    /// completed).
    pub fn leave(&self, priority: Priority) -> Result<(), ClientError> {
        let Some(placed) = self.forget_block(priority) else {
            return Err(ClientError::Invalid(format!("no active block of priority {priority}")));
        };
        let Some(device) = placed else { return Ok(()) };
        self.send_leave(device, priority)
    }

    /// A block of `priority` this process entered on `device` ([`SchedClient::enter_on`]) is
    /// done.
    pub fn leave_on(&self, device: Device, priority: Priority) -> Result<(), ClientError> {
        if !take_one(&mut self.shared.state().blocks, (device, priority)) {
            return Err(ClientError::Invalid(format!(
                "no active block of priority {priority} on {device}"
            )));
        }
        self.send_leave(device, priority)
    }

    fn send_leave(&self, device: Device, priority: Priority) -> Result<(), ClientError> {
        let rx = {
            let mut st = self.shared.state();
            self.call(&mut st, Request::Leave { priority, device })
        };
        self.sent(self.wait(rx, "leave"))
    }

    /// The result of a request whose reply the process need not wait for: it was sent and the
    /// state is recorded here (replayed to the next daemon), so past the bound it goes on.
    fn sent(&self, r: Result<Option<Notice>, ClientError>) -> Result<(), ClientError> {
        match r {
            Err(ClientError::Timeout(why)) => {
                self.timed_out(&why);
                Ok(())
            }
            r => r.map(drop),
        }
    }

    /// Stops the link, resumes what it holds for the daemon and disconnects (the daemon drops
    /// this client's streams and blocks); later calls run unscheduled. Returns the resumes that
    /// failed. Idempotent.
    pub fn close(&self) -> Vec<String> {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(w) = self.shared.state().socket.as_ref() {
            // Wakes the link thread's read at once, before the welcome too (its socket is this
            // one); its connect never blocks and its sleeps look at the stop flag.
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        let mut st = self.shared.state();
        st.writer = None;
        st.resume_held()
    }
}

/// A device the daemon accepts (a KFD gpu id is never 0: that is a CPU node's); checked here so
/// that a bad one is the caller's error at once, not a refusal on every reconnect.
fn valid_device(device: Device) -> Result<(), ClientError> {
    device.validate().map_err(|e| ClientError::Invalid(e.to_string()))
}

/// Takes one count of `key` from `m`; false if it had none.
fn take_one<K: Ord>(m: &mut std::collections::BTreeMap<K, usize>, key: K) -> bool {
    match m.get_mut(&key) {
        None => false,
        Some(1) => {
            m.remove(&key);
            true
        }
        Some(n) => {
            *n -= 1;
            true
        }
    }
}

impl Drop for SchedClient {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
