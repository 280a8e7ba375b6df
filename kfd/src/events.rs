//! What the library has to say but cannot return: a failure inside a `Drop` (a debug session
//! that could not be closed, a queue whose resume-on-drop failed), or a recovery that worked after
//! retries. Libraries of this workspace never print or exit; they hand such events to the
//! handler the application installs with [`set_handler`] (`preempt-lat` prints them on stderr).
//!
//! Until a handler is installed, events are kept (the newest [`KEPT`]) and can be read with
//! [`take_unhandled`], so that nothing is lost silently in a program that never installs one.
use std::sync::{Mutex, MutexGuard, OnceLock};

/// How much an event matters to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Something worked after a retry or a detour: worth a line, nothing to do.
    Note,
    /// Something was left in a state the user may have to repair (a queue that may stay
    /// suspended, debug mode that may stay on).
    Warning,
}

/// One event: where it comes from (`"dbg-trap"`, `"debug session"`, ...) and one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub severity: Severity,
    pub origin: &'static str,
    pub message: String,
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tag = match self.severity {
            Severity::Note => "",
            Severity::Warning => "WARNING: ",
        };
        write!(f, "{tag}{}: {}", self.origin, self.message)
    }
}

type Handler = Box<dyn Fn(&Event) + Send + Sync>;

static HANDLER: OnceLock<Handler> = OnceLock::new();
static UNHANDLED: Mutex<Vec<Event>> = Mutex::new(Vec::new());

/// Events kept while no handler is installed (older ones are dropped first).
pub const KEPT: usize = 64;

fn unhandled() -> MutexGuard<'static, Vec<Event>> {
    UNHANDLED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Installs the process-wide handler (once; later calls return `false` and change nothing).
/// Events kept before it was installed are passed to it at once, in order.
pub fn set_handler(handler: impl Fn(&Event) + Send + Sync + 'static) -> bool {
    if HANDLER.set(Box::new(handler)).is_err() {
        return false;
    }
    let kept = std::mem::take(&mut *unhandled());
    if let Some(h) = HANDLER.get() {
        kept.iter().for_each(h);
    }
    true
}

/// Reports an event to the handler, or keeps it.
pub fn emit(severity: Severity, origin: &'static str, message: impl Into<String>) {
    let e = Event {
        severity,
        origin,
        message: message.into(),
    };
    match HANDLER.get() {
        Some(h) => h(&e),
        None => {
            let mut v = unhandled();
            if v.len() == KEPT {
                v.remove(0);
            }
            v.push(e);
        }
    }
}

/// The events kept while no handler was installed (empties the store).
pub fn take_unhandled() -> Vec<Event> {
    std::mem::take(&mut *unhandled())
}
