//! The helper's time-driven policy ([`crate::Options::policy`]): one of the `policies` crate's
//! state machines over the streams scheduled with it ([`crate::Session::helper_schedule`]),
//! driven by their readiness and the time (docs/c-api.md#the-helpers-policy).
//!
//! Readiness comes two ways. A delay command submitted through the library makes its stream
//! ready before it is submitted (the stream's submit hook), and the stream goes idle once its
//! launcher holds nothing (seen by the policy thread, which looks every [`IDLE_POLL`] while such
//! a stream is ready). Work the library does not see (kernels launched on the stream's handle,
//! e.g. by PyTorch) is announced with [`Driver::ready`] and ended with [`Driver::idle`]: a stream
//! made ready that way stays ready until it is said idle.
//!
//! One thread per session (started with the first scheduled stream) calls the policy's tick when
//! it asks ([`policies::TimedPolicy::next_wakeup`]) and carries the actions out; every call from
//! the application does the same at once, under the same lock. The suspensions are the policy's
//! own hold on each stream (beside the user's, the blocks' and the daemon's). A failed action is
//! reported to the policy, which retries it at its next decision, and is kept for
//! [`Driver::status`]. When the thread ends (close, or a panic) every stream it holds is resumed.
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{LpStream, SubmitHook};
use policies::Action;
use policies::any::{AnyPolicy, Choice, Params};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the policy thread looks whether a stream made ready by a submit has drained.
pub const IDLE_POLL: Duration = Duration::from_micros(500);

/// The longest the thread sleeps with nothing to decide (a wake-up costs nothing then).
const IDLE_SLEEP: Duration = Duration::from_secs(1);

/// How a stream became ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ready {
    Idle,
    /// A submit through the library: idle again once its launcher is drained.
    Submitted,
    /// [`Driver::ready`]: idle only when said so.
    Said,
}

struct Member {
    stream: Arc<LpStream>,
    ready: Ready,
    /// Commands of the stream announced to the policy (counted from the launcher's own count at
    /// scheduling): the stream is drained only once the launcher has had them all, since a
    /// command is announced before it reaches the launcher.
    announced: u64,
}

struct State {
    policy: AnyPolicy<u64>,
    members: BTreeMap<u64, Member>,
    stop: bool,
    /// Suspends and resumes carried out, actions that failed, the first failures and the last.
    suspends: u64,
    resumes: u64,
    failed: u64,
    failure_log: Vec<String>,
    last_error: Option<String>,
}

/// How many failures [`PolicyStatus::failure_log`] keeps (the first ones: a failure that repeats
/// at every decision would otherwise push out what started it).
pub const FAILURE_LOG: usize = 20;

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    epoch: Instant,
}

/// What [`crate::Session::helper_policy_status`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyStatus {
    /// The policy's name (`utilization-partition`, `k-edf`, `laxity`).
    pub policy: &'static str,
    /// Each scheduled stream: its id, whether it is ready (has work), whether the policy holds
    /// it suspended.
    pub streams: Vec<(u64, bool, bool)>,
    /// Suspends and resumes carried out.
    pub actions: u64,
    /// Of which suspends.
    pub suspends: u64,
    /// Of which resumes.
    pub resumes: u64,
    /// Suspends and resumes that failed (each retried at the policy's next decision).
    pub failures: u64,
    /// The last failure's message.
    pub last_error: Option<String>,
    /// The first failures (at most 20), each naming the action and the stream.
    pub failure_log: Vec<String>,
}

/// See the [module documentation](self).
pub(crate) struct Driver {
    choice: Choice,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

use crate::lock;

impl State {
    /// Carries `actions` out; a failed one is reported to the policy and kept. Returns the
    /// first failure.
    /// Suspends go first, so that no more streams run at any moment than the rule allows.
    fn apply(&mut self, mut actions: Vec<Action<u64>>) -> Result<()> {
        actions.sort_by_key(|a| matches!(a, Action::Resume(_)));
        let mut first = None;
        for a in actions {
            let Some(m) = self.members.get(&a.queue()) else {
                continue;
            };
            let r = match a {
                Action::Suspend(_) => m.stream.policy_suspend(),
                Action::Resume(_) => m.stream.policy_resume(),
            };
            match r {
                Err(e) if !matches!(e.kind, ErrorKind::AlreadySuspended | ErrorKind::NotSuspended) => {
                    self.policy.failed(a);
                    self.failed += 1;
                    let what = if matches!(a, Action::Suspend(_)) {
                        "suspend"
                    } else {
                        "resume"
                    };
                    let e = e.context(&format!("helper policy {}: {what}", self.policy.name()));
                    if self.failure_log.len() < FAILURE_LOG {
                        self.failure_log.push(e.message.clone());
                    }
                    self.last_error = Some(e.message.clone());
                    first.get_or_insert(e);
                }
                _ if matches!(a, Action::Suspend(_)) => self.suspends += 1,
                _ => self.resumes += 1,
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Streams made ready by a submit whose launcher is drained go idle.
    fn drained(&mut self, now: Duration) -> Vec<Action<u64>> {
        let done: Vec<u64> = self
            .members
            .iter()
            .filter(|(_, m)| m.ready == Ready::Submitted && m.stream.drained(m.announced))
            .map(|(&id, _)| id)
            .collect();
        let mut out = Vec::new();
        for id in done {
            if let Some(m) = self.members.get_mut(&id) {
                m.ready = Ready::Idle;
            }
            out.extend(self.policy.idle(id, now));
        }
        out
    }

    /// Resumes every stream the policy holds and forgets them all (close, the thread's end).
    fn release_all(&mut self, now: Duration) -> Result<()> {
        let ids: Vec<u64> = self.members.keys().copied().collect();
        let mut first = None;
        for id in ids {
            let actions = self.policy.unregister(id, now);
            if let Err(e) = self.apply(actions) {
                first.get_or_insert(e);
            }
            if let Some(m) = self.members.remove(&id) {
                m.stream.set_submit_hook(None);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// `id` is ready from now on, as `how` says (a stream already ready by a submit and now said
    /// ready stays ready until said idle). Unknown streams: nothing.
    fn mark_ready(&self, id: u64, how: Ready) -> Result<()> {
        let mut st = self.state();
        let Some(m) = st.members.get_mut(&id) else {
            return Ok(());
        };
        let was = m.ready;
        if was == Ready::Said || was == how {
            return Ok(());
        }
        m.ready = how;
        let actions = if was == Ready::Idle {
            st.policy.ready(id, self.now())
        } else {
            Vec::new()
        };
        let r = st.apply(actions);
        drop(st);
        self.wake.notify_one();
        r
    }

    /// The policy thread: ticks when the policy asks, sees drained streams go idle.
    fn run(self: &Arc<Self>) {
        struct ReleaseOnExit<'a>(&'a Shared);
        impl Drop for ReleaseOnExit<'_> {
            fn drop(&mut self) {
                let now = self.0.now();
                let _ = self.0.state().release_all(now);
            }
        }
        let _release = ReleaseOnExit(self);
        let mut st = self.state();
        while !st.stop {
            let now = self.now();
            let mut actions = st.drained(now);
            actions.extend(st.policy.tick(now));
            let _ = st.apply(actions);
            let polling = st.members.values().any(|m| m.ready == Ready::Submitted);
            let until_tick = st.policy.next_wakeup().map(|t| t.saturating_sub(self.now()));
            let wait = match (until_tick, polling) {
                (Some(t), true) => t.min(IDLE_POLL),
                (Some(t), false) => t,
                (None, true) => IDLE_POLL,
                (None, false) => IDLE_SLEEP,
            };
            st = self
                .wake
                .wait_timeout(st, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl SubmitHook for Shared {
    fn submitted(&self, stream: u64) {
        if let Some(m) = self.state().members.get_mut(&stream) {
            m.announced += 1;
        }
        // A failed action is kept in the status and retried; the submit itself goes on.
        let _ = self.mark_ready(stream, Ready::Submitted);
    }

    fn withdrawn(&self, stream: u64) {
        if let Some(m) = self.state().members.get_mut(&stream) {
            m.announced = m.announced.saturating_sub(1);
        }
        self.wake.notify_one();
    }
}

impl Driver {
    /// The chosen policy with no stream and no thread yet; `k` = 0 is refused.
    pub fn new(choice: Choice) -> Result<Self> {
        let policy = AnyPolicy::new(choice).map_err(|e| Error::invalid(format!("the helper's policy: {e}")))?;
        Ok(Driver {
            choice,
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    policy,
                    members: BTreeMap::new(),
                    stop: false,
                    suspends: 0,
                    resumes: 0,
                    failed: 0,
                    failure_log: Vec::new(),
                    last_error: None,
                }),
                wake: Condvar::new(),
                epoch: Instant::now(),
            }),
            thread: Mutex::new(None),
        })
    }

    pub fn choice(&self) -> Choice {
        self.choice
    }

    /// Starts the policy thread unless it runs (or the driver was stopped).
    fn start(&self) -> Result<()> {
        let mut t = lock(&self.thread);
        if t.is_some() || self.shared.state().stop {
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name("preempt-policy".into())
            .spawn(move || shared.run())
            .map_err(|e| Error::new(ErrorKind::Device, format!("starting the helper's policy thread: {e}")))?;
        *t = Some(handle);
        Ok(())
    }

    /// Schedules `s` with `params` (or changes them). `InvalidArgument` if the params are
    /// another policy's.
    pub fn schedule(&self, s: &Arc<LpStream>, params: Params) -> Result<()> {
        crate::limits::check_policy_params(&params).map_err(|e| e.context(s.label()))?;
        self.start()?;
        let mut st = self.shared.state();
        if st.stop {
            return Err(Error::closed());
        }
        let now = self.shared.now();
        let actions = st
            .policy
            .register(s.id(), params, now)
            .map_err(|e| Error::invalid(format!("{}: {e}", s.label())))?;
        st.members.entry(s.id()).or_insert_with(|| Member {
            stream: Arc::clone(s),
            ready: Ready::Idle,
            announced: s.submitted_count(),
        });
        let hook: Weak<dyn SubmitHook> = Arc::downgrade(&self.shared) as Weak<dyn SubmitHook>;
        s.set_submit_hook(Some(hook));
        let r = st.apply(actions);
        drop(st);
        self.shared.wake.notify_one();
        r
    }

    /// Whether `id` is scheduled by the policy.
    pub fn is_scheduled(&self, id: u64) -> bool {
        self.shared.state().members.contains_key(&id)
    }

    /// Forgets `id`, resuming it if the policy held it. Unknown streams: nothing.
    pub fn unschedule(&self, id: u64) -> Result<()> {
        let mut st = self.shared.state();
        if !st.members.contains_key(&id) {
            return Ok(());
        }
        let actions = st.policy.unregister(id, self.shared.now());
        let r = st.apply(actions);
        if let Some(m) = st.members.remove(&id) {
            m.stream.set_submit_hook(None);
        }
        drop(st);
        self.shared.wake.notify_one();
        r
    }

    /// `s` has work from now on, until [`Driver::idle`]. `InvalidArgument` if not scheduled.
    pub fn ready(&self, s: &LpStream) -> Result<()> {
        self.scheduled(s)?;
        self.shared.mark_ready(s.id(), Ready::Said)
    }

    /// All of `s`'s work is done. `InvalidArgument` if not scheduled.
    pub fn idle(&self, s: &LpStream) -> Result<()> {
        self.scheduled(s)?;
        let mut st = self.shared.state();
        let Some(m) = st.members.get_mut(&s.id()) else {
            return Ok(());
        };
        if m.ready == Ready::Idle {
            return Ok(());
        }
        m.ready = Ready::Idle;
        let actions = st.policy.idle(s.id(), self.shared.now());
        let r = st.apply(actions);
        drop(st);
        self.shared.wake.notify_one();
        r
    }

    fn scheduled(&self, s: &LpStream) -> Result<()> {
        if self.is_scheduled(s.id()) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "{} is not scheduled by the helper's policy: schedule it with the helper's policy first",
                s.label()
            )))
        }
    }

    pub fn status(&self) -> PolicyStatus {
        let st = self.shared.state();
        PolicyStatus {
            policy: st.policy.name(),
            streams: st
                .members
                .iter()
                .map(|(&id, m)| (id, m.ready != Ready::Idle, st.policy.is_suspended(id)))
                .collect(),
            actions: st.suspends + st.resumes,
            suspends: st.suspends,
            resumes: st.resumes,
            failures: st.failed,
            last_error: st.last_error.clone(),
            failure_log: st.failure_log.clone(),
        }
    }

    /// Stops the thread (it finishes the action it carries out) and resumes every stream the
    /// policy holds (session close). Later calls are refused as `Closed`.
    pub fn clear(&self) -> Result<()> {
        self.shared.state().stop = true;
        self.shared.wake.notify_all();
        let handle = lock(&self.thread).take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
        let now = self.shared.now();
        self.shared.state().release_all(now)
    }
}
