//! The in-process highest-priority-first helper: hpf's [`Policy`] over a session's low-priority
//! streams. While a block of higher priority runs, every registered stream of lower priority is
//! suspended at its own level (Lv3, or Lv1 where the session has no Lv3 mechanism), and it is
//! resumed when the last such block leaves (the caller leaves once the block's device work is
//! done). Decisions and their execution happen under one lock, so concurrent blocks from several
//! threads see one consistent state.
//!
//! With [`crate::Options::policy`] the helper also runs a time-driven policy ([`timed`]: utilization
//! partition, K-EDF, laxity) over the streams scheduled with it, between and beside the blocks:
//! its suspensions are a hold of their own, so a stream runs only when neither wants it stopped.
pub(crate) mod timed;

use crate::error::{Error, ErrorKind, Result};
use crate::stream::LpStream;
use hpf::{Action, Policy, Priority};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

#[derive(Default)]
struct State {
    policy: Policy<u64>,
    streams: BTreeMap<u64, Arc<LpStream>>,
}

/// See the [module documentation](self).
#[derive(Default)]
pub(crate) struct Helper {
    state: Mutex<State>,
}

impl State {
    /// Carries `actions` out; a failed one is reported to the policy (so its record stays true)
    /// and the first failure is returned. The helper's suspension is its own hold beside the
    /// user's (docs/c-api.md#who-holds-a-suspension): a stream the user suspended by hand is
    /// held by both and stays suspended after the block; a resume releases only the helper's
    /// hold (one it no longer has counts as done).
    fn apply(&mut self, actions: Vec<Action<u64>>) -> Result<()> {
        let mut first = None;
        for a in actions {
            let Some(s) = self.streams.get(&a.queue()) else {
                continue;
            };
            let r = match a {
                Action::Suspend(_) => s.helper_suspend(),
                Action::Resume(_) => match s.helper_resume() {
                    Err(e) if e.kind == ErrorKind::NotSuspended => Ok(()),
                    r => r,
                },
            };
            if let Err(e) = r {
                self.policy.failed(a);
                first.get_or_insert(e.context("helper"));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Helper {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn register(&self, s: &Arc<LpStream>, priority: Priority) -> Result<()> {
        let mut st = self.state();
        st.streams.insert(s.id(), Arc::clone(s));
        let actions = st.policy.register(s.id(), priority);
        st.apply(actions)
    }

    pub fn unregister(&self, id: u64) -> Result<()> {
        let mut st = self.state();
        let actions = st.policy.unregister(id);
        let r = st.apply(actions);
        st.streams.remove(&id);
        r
    }

    /// A block of `priority` begins. Either every stream the rule wants suspended is suspended,
    /// or nothing changed and the error says which stream failed.
    pub fn enter(&self, priority: Priority) -> Result<()> {
        let mut st = self.state();
        let actions = st.policy.enter(priority);
        if let Err(e) = st.apply(actions) {
            let undo = st.policy.leave(priority).unwrap_or_default();
            let _ = st.apply(undo);
            return Err(e);
        }
        Ok(())
    }

    /// A block of `priority` ended (its device work is done).
    pub fn leave(&self, priority: Priority) -> Result<()> {
        let mut st = self.state();
        let actions = st
            .policy
            .leave(priority)
            .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("helper: {e}")))?;
        st.apply(actions)
    }

    /// Active blocks.
    pub fn active(&self) -> usize {
        self.state().policy.active_blocks()
    }

    /// Ends every block and resumes what the helper suspended (session close).
    pub fn clear(&self) -> Result<()> {
        let mut st = self.state();
        let actions = st.policy.clear_blocks();
        let r = st.apply(actions);
        st.streams.clear();
        st.policy = Policy::new();
        r
    }
}
