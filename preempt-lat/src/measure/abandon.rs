//! What a first Ctrl-C abandons, and when. A first stop request (SIGINT, SIGTERM, SIGHUP:
//! [`super::control`]) ends a run at its next boundary; the LP commands still in flight then get
//! the application API's bounded close, [`CLOSE_WAIT`] (docs/c-api.md#close), and what still runs
//! after it is abandoned: on the host device its worker processes are killed (a GPU cannot stop a
//! running kernel: its queue runs it out and the process's exit frees it). A run does that itself
//! once it is back from its sample ([`super::settle`]); this module is for when it is not, because
//! its thread is blocked in a wait of up to threshold x T (an Lv1 drain, an Lv2 hold, a direct
//! run's synchronize): a run registers how to kill the host workers it waits on
//! ([`kill_at_deadline`]), and once the stop is [`CLOSE_WAIT`] old they are killed, which ends the
//! wait with an error that the run reports as the interruption it is ([`happened`]).
//!
//! Each registration owns what it kills (the queue's or stream's `Arc`, so that the workers are
//! not reaped while it lives), and the kill runs under the registry's lock, which the
//! registration's drop takes before letting that go. Only host workers are registered, so
//! [`happened`] means workers were killed.
use nix::sys::signal::{Signal, kill as send};
use nix::unistd::Pid;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use preempt_api::CLOSE_WAIT;

/// How to kill a run's host workers.
type Kill = Box<dyn Fn() + Send>;

#[derive(Default)]
struct Registry {
    next: u64,
    entries: Vec<(u64, Kill)>,
}

impl Registry {
    fn add(&mut self, kill: Kill) -> u64 {
        self.next += 1;
        self.entries.push((self.next, kill));
        self.next
    }

    fn remove(&mut self, id: u64) -> Option<Kill> {
        let i = self.entries.iter().position(|(e, _)| *e == id)?;
        Some(self.entries.swap_remove(i).1)
    }

    /// Kills everything registered; `killed` is set first, so that an error the kill causes
    /// always finds it set.
    fn fire(&self, killed: &AtomicBool) {
        if !self.entries.is_empty() {
            killed.store(true, Ordering::SeqCst);
        }
        for (_, kill) in &self.entries {
            kill();
        }
    }
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next: 0,
    entries: Vec::new(),
});

/// Set (before any kill) once the deadline killed registered workers.
static KILLED: AtomicBool = AtomicBool::new(false);

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Host workers a run waits on, killed if a first stop's [`CLOSE_WAIT`] passes while they are
/// registered. Dropping it unregisters them.
#[must_use = "the workers are registered only while this lives"]
pub struct Registered(u64);

/// Registers `kill`, which kills the host workers a run waits on; it must own what keeps them
/// unreaped (the `Arc` of their queue or stream).
pub fn kill_at_deadline(kill: impl Fn() + Send + 'static) -> Registered {
    Registered(registry().add(Box::new(kill)))
}

impl Drop for Registered {
    fn drop(&mut self) {
        let entry = registry().remove(self.0);
        // Dropped outside the lock: the last handle of a host queue reaps its workers.
        drop(entry);
    }
}

/// SIGKILL to each of `pids`, for workers known only by pid (a stream of the application API,
/// whose queue is its own): safe while their owner is alive, since only their queue's drop reaps
/// them (this process never waits for any child but its own by pid). Never to a pid of 0 or
/// below, which would name a process group or every process.
pub fn kill_pids(pids: &[i32]) {
    for &p in pids.iter().filter(|&&p| p > 0) {
        let _ = send(Pid::from_raw(p), Signal::SIGKILL);
    }
}

/// Whether a stop's deadline killed registered workers: the errors of the waits on them are the
/// interruption, not a failure of the device.
pub fn happened() -> bool {
    KILLED.load(Ordering::SeqCst)
}

/// Called once, on the first stop request: kills whatever is registered [`CLOSE_WAIT`] later.
pub(super) fn arm() {
    let _ = std::thread::Builder::new().name("abandon".into()).spawn(|| {
        std::thread::sleep(CLOSE_WAIT);
        registry().fire(&KILLED);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    /// The deadline kills what is registered then, and only that: a registration dropped before
    /// (its workers let go, maybe reaped) is never acted on; nothing registered, nothing happened.
    #[test]
    fn the_deadline_kills_only_what_is_registered() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counting = |n: usize| -> Kill {
            let runs = Arc::clone(&runs);
            Box::new(move || {
                runs.fetch_add(n, Ordering::SeqCst);
            })
        };
        let mut r = Registry::default();
        let killed = AtomicBool::new(false);
        r.fire(&killed);
        assert!(!killed.load(Ordering::SeqCst), "nothing registered: nothing killed");
        let gone = r.add(counting(1));
        let live = r.add(counting(10));
        assert!(r.remove(gone).is_some() && r.remove(gone).is_none());
        r.fire(&killed);
        assert_eq!(runs.load(Ordering::SeqCst), 10);
        assert!(killed.load(Ordering::SeqCst));
        assert!(r.remove(live).is_some() && r.entries.is_empty());
    }
}
