//! What a first Ctrl-C abandons, and when. A first stop request (SIGINT, SIGTERM, SIGHUP:
//! [`super::control`]) ends a run at its next boundary; the LP commands still in flight then get
//! the application API's bounded close, [`CLOSE_WAIT`] (docs/c-api.md#close), and what still runs
//! after it is abandoned: on the host device its worker processes are killed (a GPU cannot stop a
//! running kernel: its queue runs it out and the process's exit frees it). A run does that itself
//! once it is back from its sample; this module is for when it is not, because its thread is
//! blocked in a wait of up to threshold x T (an Lv1 drain, an Lv2 hold, a direct run's
//! synchronize): a run registers the host workers it waits on ([`kill_at_deadline`]), and once the
//! stop is [`CLOSE_WAIT`] old they get SIGKILL, which ends the wait with an error that the run
//! reports as the interruption it is ([`happened`]).
//!
//! The pids are safe to signal: each registration owns what keeps its workers unreaped (only a
//! host queue's drop reaps them), and the kill runs under the registry's lock, which the
//! registration's drop takes before letting that go.
use nix::sys::signal::{Signal, kill as send};
use nix::unistd::Pid;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use preempt_api::CLOSE_WAIT;

/// Where a registration's workers are found (it owns what keeps them unreaped).
type Workers = Box<dyn Fn() -> Vec<i32> + Send>;

struct Registry {
    next: u64,
    entries: Vec<(u64, Workers)>,
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
/// registered. Dropping it unregisters them (before they are reaped: drop it before, or with,
/// what owns them).
#[must_use = "the workers are registered only while this lives"]
pub struct Registered(u64);

/// Registers the host workers that `workers` lists; it must own what keeps them unreaped (an
/// `Arc` of their queue or stream).
pub fn kill_at_deadline(workers: impl Fn() -> Vec<i32> + Send + 'static) -> Registered {
    let mut r = registry();
    r.next += 1;
    let id = r.next;
    r.entries.push((id, Box::new(workers)));
    Registered(id)
}

impl Drop for Registered {
    fn drop(&mut self) {
        let entry = {
            let mut r = registry();
            let i = r.entries.iter().position(|(id, _)| *id == self.0);
            i.map(|i| r.entries.swap_remove(i))
        };
        // Dropped outside the lock: the last handle of a host queue reaps its workers.
        drop(entry);
    }
}

/// SIGKILL to each of `pids` (host workers whose owner is alive, so the pids are theirs); never
/// to a pid of 0 or below, which would name a process group or every process.
pub fn kill(pids: &[i32]) {
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
        let r = registry();
        let pids: Vec<i32> = r.entries.iter().flat_map(|(_, workers)| workers()).collect();
        if !pids.is_empty() {
            KILLED.store(true, Ordering::SeqCst);
            kill(&pids);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registration is listed while it lives and gone after its drop, so the deadline never
    /// signals workers whose owner has let them go (and reaped them).
    #[test]
    fn a_registration_ends_with_its_drop() {
        // Above any pid_max: no process has them (and nothing here kills).
        let (p, q) = (i32::MAX - 1, i32::MAX - 2);
        let listed = |pid: i32| registry().entries.iter().any(|(_, w)| w().contains(&pid));
        let a = kill_at_deadline(move || vec![p]);
        let b = kill_at_deadline(move || vec![q]);
        assert!(listed(p) && listed(q));
        drop(a);
        assert!(!listed(p) && listed(q));
        drop(b);
        assert!(!listed(q));
    }
}
