//! Ctrl-C and progress. SIGINT/SIGTERM are blocked in every thread (set before any thread is
//! spawned) and taken by one thread with sigwait. The first signal only raises a flag: the
//! measurement loop stops at the next sample boundary, resumes whatever it suspended (guards),
//! and writes what it measured. A second signal means "now": every GPU queue still suspended
//! (lv3's registry, filled by the suspend guards) is resumed, then the process leaves with
//! `_exit` 130/143 ([`lv3::signals::exit_now`]: no atexit handlers, so HIP's teardown cannot
//! block on a debug mode the main thread still holds; the kernel's release path ends it).
//! No signal handler, hence no `unsafe`.
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nix::sys::signal::{SigSet, Signal};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Call first thing in `main`, before any thread exists.
pub fn install_stop_on_signals() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    if set.thread_block().is_err() {
        return; // Signals keep their default action: still nothing is left suspended for long.
    }
    let _ = std::thread::Builder::new().name("signals".into()).spawn(move || {
        while let Ok(sig) = set.wait() {
            let first = !STOP.swap(true, Ordering::SeqCst);
            if first {
                eprintln!("\npreempt-lat: {sig}: stopping after the current sample; results so far will be written");
            } else {
                for (label, r) in lv3::signals::resume_all_and_close() {
                    match r {
                        Ok(()) => eprintln!("preempt-lat: {sig}: resumed {label}"),
                        Err(e) => eprintln!("preempt-lat: {sig}: FAILED to resume {label}: {e}"),
                    }
                }
                eprintln!("preempt-lat: {sig} again: exiting now");
                lv3::signals::exit_now(lv3::signals::exit_code(sig));
            }
        }
    });
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
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
