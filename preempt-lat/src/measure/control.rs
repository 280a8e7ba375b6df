//! Ctrl-C and progress. SIGINT, SIGTERM and SIGHUP are blocked in every thread (set before any
//! thread is spawned) and taken by one thread with sigwait. The first signal raises a flag: the
//! measurement loop stops at the next sample boundary, resumes whatever it suspended (guards),
//! gives the LP commands in flight the API's bounded close and abandons the rest
//! ([`super::settle`]; [`super::abandon`] cuts a wait on the host workers that the loop is blocked
//! in once that close's time has passed), and writes what it measured. A second signal means
//! "now": every GPU queue still suspended (lv3's registry, filled by the suspend guards) is
//! resumed, then the process leaves with `_exit` 130/143/129 ([`lv3::signals::exit_now`]: no
//! atexit handlers, so HIP's teardown cannot block on a debug mode the main thread still holds;
//! the kernel's release path ends it).
//!
//! "Now" holds whatever the other threads hold: `exit_now` flushes stdout first, which waits for
//! the stdout lock, and a thread writing a result into a full pipe holds that lock for as long as
//! nobody reads. So the signal thread never prints or flushes itself: its lines and the `exit_now`
//! go to a thread of their own ([`Notices`]), and if the process still lives [`EXIT_GRACE`] later,
//! the signal thread ends it with the signal's default action (the shell reports the same
//! 130/143/129; like `_exit`, no atexit handler runs). The host device's workers die with the
//! process (`PR_SET_PDEATHSIG`, stopped or not). No signal handler, hence no `unsafe`.
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nix::sys::signal::{SigSet, Signal};
use std::io::IsTerminal;
use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

/// How long a second signal waits for the orderly `_exit` (its lines written, stdout flushed)
/// before it ends the process with the signal itself.
pub const EXIT_GRACE: Duration = Duration::from_millis(500);

/// The signals that stop a run: Ctrl-C, `kill`, and a terminal hanging up.
fn stop_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set
}

/// What the signal thread has written and done, by a thread that may block in its place.
enum Notice {
    Line(String),
    Exit(i32),
}

/// The signal thread's voice: a thread that writes its lines to stderr and makes its `exit_now`,
/// so that a blocked stderr or stdout blocks that thread, never the one that takes signals.
struct Notices(Option<Sender<Notice>>);

impl Notices {
    fn start() -> Notices {
        let (tx, rx) = channel::<Notice>();
        let started = std::thread::Builder::new().name("notices".into()).spawn(move || {
            for n in rx {
                match n {
                    Notice::Line(l) => eprintln!("{l}"),
                    Notice::Exit(code) => lv3::signals::exit_now(code),
                }
            }
        });
        Notices(started.is_ok().then_some(tx))
    }

    fn say(&self, line: String) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(Notice::Line(line));
        }
    }

    /// Exits with `code` after the lines said so far, or ends the process with `sig` if that
    /// has not happened within [`EXIT_GRACE`].
    fn exit(&self, sig: Signal) -> ! {
        if let Some(tx) = &self.0 {
            let _ = tx.send(Notice::Exit(lv3::signals::exit_code(sig)));
            std::thread::sleep(EXIT_GRACE);
        }
        die_by(sig)
    }
}

/// Ends the process with `sig`'s default action (termination): unblocked in this thread only,
/// then raised on it. Should something have installed a handler for it, SIGKILL follows.
fn die_by(sig: Signal) -> ! {
    let mut only = SigSet::empty();
    only.add(sig);
    let _ = only.thread_unblock();
    let _ = nix::sys::signal::raise(sig);
    let _ = nix::sys::signal::raise(Signal::SIGKILL);
    loop {
        std::thread::park();
    }
}

/// Call first thing in `main`, before any thread exists.
pub fn install_stop_on_signals() {
    let set = stop_signals();
    if set.thread_block().is_err() {
        return; // Signals keep their default action: still nothing is left suspended for long.
    }
    let _ = std::thread::Builder::new().name("signals".into()).spawn(move || {
        let notices = Notices::start();
        while let Ok(sig) = set.wait() {
            let first = preempt_cli::stop::request();
            if first {
                super::abandon::arm();
                notices.say(format!(
                    "\npreempt-lat: {sig}: stopping after the current sample; results so far will be written"
                ));
            } else {
                for (label, r) in lv3::signals::resume_all_and_close() {
                    notices.say(match r {
                        Ok(()) => format!("preempt-lat: {sig}: resumed {label}"),
                        Err(e) => format!("preempt-lat: {sig}: FAILED to resume {label}: {e}"),
                    });
                }
                notices.say(format!("preempt-lat: {sig} again: exiting now"));
                notices.exit(sig);
            }
        }
    });
}

/// Whether a stop was asked for (preempt-cli's flag, which the signal thread raises).
pub use preempt_cli::stop::requested as stop_requested;

/// Sleeps until `t_ns` (`CLOCK_MONOTONIC`, as [`preempt_api::now_ns`]) or until a stop is
/// requested, whichever comes first (a wait of up to an hour must not outlast Ctrl-C); true if a
/// stop cut it short.
pub fn sleep_until_or_stop(t_ns: u64) -> bool {
    const SLICE_NS: u64 = 10_000_000;
    loop {
        if stop_requested() {
            return true;
        }
        let now = preempt_api::now_ns();
        if now >= t_ns {
            return false;
        }
        lv1::clock::sleep_until(t_ns.min(now + SLICE_NS));
    }
}

/// A progress bar on stderr, hidden when stderr is not a terminal or with --quiet.
pub fn progress(total: u64, quiet: bool, what: &str) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}
