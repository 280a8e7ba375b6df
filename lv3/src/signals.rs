//! Resume suspended queues on SIGINT/SIGTERM, without `unsafe`.
//!
//! A queue left suspended when the process dies is not just idle: with debugging on, destroying
//! a suspended queue blocks until it is resumed, and HIP's exit-time teardown destroys queues.
//! So a Ctrl-C must resume before exiting.
//!
//! A signal handler would need `sigaction` (unsafe) and could only call async-signal-safe code.
//! Instead [`install_resume_on_signals`] blocks SIGINT and SIGTERM in the calling thread and
//! starts a thread that takes them with `sigwait` (`SigSet::wait`). Call it first thing in
//! `main`, before any thread exists: threads inherit the mask, and a thread that does not block
//! the signals would receive it with the default action and kill the process unresumed. The
//! waiting thread then runs ordinary Rust: it resumes every queue in the process-wide registry
//! and hands the outcome to the application's callback, which reports it and leaves with
//! [`exit_now`] and [`exit_code`] (130, 143). Applications with their own signal thread
//! (`preempt-lat`) call [`resume_all_and_close`] from it instead.
//!
//! Why [`exit_now`] and not `std::process::exit`: at that point a mechanism may still hold debug
//! mode on (the main thread owns it and is not unwinding). `exit` runs the atexit handlers, and
//! HIP's teardown in them reaches ROCr's runtime disable, which with debug mode on waits in the
//! kernel for a debugger acknowledgement that never comes; destroying a still-suspended queue
//! blocks the same way. `_exit` skips the handlers, and the kernel's release of `/dev/kfd` then
//! disables debugging and destroys the queues itself (docs/kfd-facts.md#dbg_trap-suspend-and-resume).
//!
//! The registry is filled by the guards of [`crate::mechanism`] (register on suspend, deregister
//! on a successful resume); anything else that must be undone on exit can register too.
use nix::sys::signal::{SigSet, Signal};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Resumes one registered queue; the error is printed by the signal thread.
pub type ResumeFn = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

struct Entry {
    id: u64,
    label: String,
    resume: ResumeFn,
}

struct Registry {
    next_id: u64,
    /// Set once the signal thread took the entries: later suspends are refused.
    closing: bool,
    entries: Vec<Entry>,
}

/// The tid of the waiting thread: inside `sigwait` the kernel lifts its block on the awaited
/// signals, so it must not be reported as a thread that fails to block them.
static WAITER_TID: OnceLock<u32> = OnceLock::new();

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next_id: 0,
    closing: false,
    entries: Vec::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    // A panic while holding the lock must not stop the exit path from resuming.
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A registered entry. Deliberately not deregistered on drop: forgetting it leaves the queue
/// to the signal handler, the safe default.
#[derive(Debug)]
#[must_use = "deregister() it once the queue is resumed"]
pub struct Registration {
    id: u64,
}

impl Registration {
    /// Removes the entry (after a successful resume).
    pub fn deregister(self) {
        registry().entries.retain(|e| e.id != self.id);
    }
}

/// Why [`register_around`] did not register.
#[derive(Debug)]
pub enum Refused<E> {
    /// The signal thread is resuming everything before exit; `act` was not run.
    ShuttingDown,
    /// `act` failed; nothing stays registered.
    Failed(E),
}

/// Runs `act` (the suspend) with the registry locked and registers `resume` if it succeeds.
/// Holding the lock across the kernel call closes the race with a signal: the signal thread
/// either runs before (and `act` is refused) or after (and sees the entry).
pub fn register_around<T, E>(
    label: String,
    resume: ResumeFn,
    act: impl FnOnce() -> Result<T, E>,
) -> Result<(T, Registration), Refused<E>> {
    let mut r = registry();
    if r.closing {
        return Err(Refused::ShuttingDown);
    }
    let out = act().map_err(Refused::Failed)?;
    let id = r.next_id;
    r.next_id += 1;
    r.entries.push(Entry { id, label, resume });
    Ok((out, Registration { id }))
}

/// Registers `resume` under `label`; `None` if the process is already exiting on a signal.
pub fn register(label: String, resume: ResumeFn) -> Option<Registration> {
    register_around(label, resume, || Ok::<(), ()>(()))
        .ok()
        .map(|((), reg)| reg)
}

/// The labels of what is registered now (for reports and tests).
pub fn registered() -> Vec<String> {
    registry().entries.iter().map(|e| e.label.clone()).collect()
}

/// Closes the registry (later registrations are refused) and runs every entry's resume once,
/// returning each label with its outcome. The lock is released before the resumes run, so a
/// guard resuming concurrently does not deadlock (a queue resumed twice is harmless).
pub fn resume_all_and_close() -> Vec<(String, Result<(), String>)> {
    let entries = {
        let mut r = registry();
        r.closing = true;
        std::mem::take(&mut r.entries)
    };
    entries.into_iter().map(|e| (e.label, (e.resume)())).collect()
}

/// SIGINT and SIGTERM.
fn exit_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set
}

/// What [`install_resume_on_signals`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// False if an earlier call already started the waiting thread.
    pub started_thread: bool,
    /// Threads (by tid) that do not block SIGINT/SIGTERM: the install came too late for them,
    /// and a signal delivered to one of them kills the process without resuming.
    pub unblocked_threads: Vec<u32>,
}

/// What the signal thread did: the signal, and each registered entry with its resume outcome.
#[derive(Debug)]
pub struct Resumed {
    pub signal: Signal,
    pub results: Vec<(String, Result<(), String>)>,
}

/// Blocks SIGINT/SIGTERM in the calling thread and starts the thread that, on either signal,
/// resumes every registered queue ([`resume_all_and_close`]) and then calls `then` with what it
/// did. `then` is the application's: it typically reports the [`Resumed`] lines and exits with
/// [`exit_code`] (the library itself never exits). Idempotent: a second call starts nothing and
/// drops its `then`. Check [`Installed::unblocked_threads`]: threads started before this call
/// take the signals with their default action.
pub fn install_resume_on_signals(then: impl FnOnce(Resumed) + Send + 'static) -> std::io::Result<Installed> {
    static STARTED: OnceLock<()> = OnceLock::new();
    let set = exit_signals();
    set.thread_block().map_err(std::io::Error::from)?;
    let mut started_thread = false;
    if STARTED.set(()).is_ok() {
        std::thread::Builder::new().name("lv3-signals".into()).spawn(move || {
            let _ = WAITER_TID.set(nix::unistd::gettid().as_raw().unsigned_abs());
            // Only an invalid set makes sigwait fail; then the signals stay blocked and the
            // thread ends (reported through `then` never being called).
            if let Ok(signal) = set.wait() {
                then(Resumed {
                    signal,
                    results: resume_all_and_close(),
                });
            }
        })?;
        started_thread = true;
    }
    Ok(Installed {
        started_thread,
        unblocked_threads: threads_not_blocking(),
    })
}

/// Ends the process at once with `code`, without atexit handlers or destructors (`_exit(2)`,
/// after flushing stdout and stderr): the way out of a signal path while a mechanism may still
/// hold debug mode on (see the module docs and [`kfd::exit_now`]).
pub fn exit_now(code: i32) -> ! {
    kfd::exit_now(code)
}

/// The shell's convention for death by a signal: 128 + signo (SIGINT 130, SIGTERM 143).
pub fn exit_code(sig: Signal) -> i32 {
    128 + sig as i32
}

/// Tids of this process's threads whose mask lacks SIGINT or SIGTERM (from
/// `/proc/self/task/*/status`, `SigBlk:` in hex, bit signo-1), except the waiting thread.
/// Empty if /proc is unreadable.
pub fn threads_not_blocking() -> Vec<u32> {
    let want = (1u64 << (Signal::SIGINT as u32 - 1)) | (1u64 << (Signal::SIGTERM as u32 - 1));
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out: Vec<u32> = dir
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse::<u32>().ok()?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let blk = status.lines().find_map(|l| l.strip_prefix("SigBlk:"))?;
            let mask = u64::from_str_radix(blk.trim(), 16).ok()?;
            // The waiter is asked for only after its mask was read: while it sits in sigwait the
            // kernel takes the awaited signals out of its mask, and it records its tid before
            // that. Asking first raced with a waiter that started between the two reads.
            (mask & want != want && WAITER_TID.get() != Some(&tid)).then_some(tid)
        })
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(Signal::SIGINT), 130);
        assert_eq!(exit_code(Signal::SIGTERM), 143);
    }

    #[test]
    fn registration_and_deregistration() {
        let reg = register("unit-test-label-1".into(), Box::new(|| Ok(()))).expect("not closing in unit tests");
        assert!(registered().contains(&"unit-test-label-1".to_string()));
        reg.deregister();
        assert!(!registered().contains(&"unit-test-label-1".to_string()));
        let e = register_around("unit-test-label-2".into(), Box::new(|| Ok(())), || Err::<(), _>("no")).unwrap_err();
        assert!(matches!(e, Refused::Failed("no")));
        assert!(!registered().contains(&"unit-test-label-2".to_string()));
    }
}
