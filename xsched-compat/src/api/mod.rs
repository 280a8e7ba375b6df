//! The calls' meaning, in safe Rust: the C entry points (src/ffi/) read and write the caller's
//! pointers and call these. The interposer is reached through [`Backend`], so that this layer
//! is tested without it.
//!
//! Unlike the project's other libraries this one prints (one line per kind of refusal, once per
//! process): a program written for XSched checks codes it expects to be 0, and the line is the
//! only place that says why a call was refused and what to do.
use crate::priority;
use crate::table::{Tables, XQueue};
use crate::types::{
    Handle, POLICY_HIGHEST_PRIORITY_FIRST, PREEMPT_LEVEL_BLOCK, PREEMPT_LEVEL_INTERRUPT,
    QUEUE_CREATE_FLAG_BLOCKING_SUBMIT, SCHEDULER_APP_MANAGED, SCHEDULER_GLOBAL, SCHEDULER_LOCAL, XResult,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// What this library needs of the HIP interposer (`libpreempt_hip.so`).
pub trait Backend {
    /// The interposer is loaded (preloaded) in this process.
    fn loaded(&self) -> bool;
    /// `preempt_hip_set_stream_priority`: true when the interposer took the new priority.
    fn set_priority(&self, stream: usize, hip_priority: i32) -> bool;
}

/// The process's queues and the lines already printed.
#[derive(Default)]
pub struct Compat {
    tables: Mutex<Tables>,
    said_no_interposer: AtomicBool,
    said_no_suspend: AtomicBool,
}

/// The process's one state (XSched's handles are process-wide).
pub fn global() -> &'static Compat {
    static G: OnceLock<Compat> = OnceLock::new();
    G.get_or_init(Compat::default)
}

fn code(r: Result<(), XResult>) -> XResult {
    r.err().unwrap_or(XResult::Success)
}

impl Compat {
    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic while holding the lock (caught at the C boundary) leaves consistent tables:
        // every change is one insert or remove.
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn say_once(flag: &AtomicBool, line: &str) {
        if !flag.swap(true, Ordering::Relaxed) {
            eprintln!("xsched-compat: {line}");
        }
    }

    /// `XHintSetScheduler`: the interposer always runs highest priority first (in the process,
    /// and across processes through its daemon), so every scheduler type is accepted with that
    /// policy; another policy asked of the local scheduler is not supported.
    pub fn set_scheduler(&self, scheduler: i32, policy: i32) -> XResult {
        match scheduler {
            SCHEDULER_APP_MANAGED | SCHEDULER_GLOBAL => XResult::Success,
            SCHEDULER_LOCAL if policy == POLICY_HIGHEST_PRIORITY_FIRST => XResult::Success,
            SCHEDULER_LOCAL => {
                eprintln!(
                    "xsched-compat: XHintSetScheduler: policy {policy} is not supported; the HIP interposer runs highest priority first ({POLICY_HIGHEST_PRIORITY_FIRST})"
                );
                XResult::ErrorNotSupported
            }
            _ => XResult::ErrorInvalidValue,
        }
    }

    /// `HipQueueCreate`: wraps a stream the program created. The null stream is refused, as
    /// XSched refuses it (the interposer never suspends it either).
    pub fn hip_queue_create(&self, stream: usize) -> Result<Handle, XResult> {
        if stream == 0 {
            eprintln!("xsched-compat: HipQueueCreate: the default (null) stream is not supported, as in XSched");
            return Err(XResult::ErrorNotSupported);
        }
        self.tables().add_hwq(stream)
    }

    pub fn hw_queue_destroy(&self, hwq: Handle) -> XResult {
        code(self.tables().remove_hwq(hwq))
    }

    /// `XQueueCreate`: the level is checked and recorded; the queue is preempted at Lv3 by the
    /// interposer whatever was asked (XSched's HIP platform has Lv1 only). A blocking submit is
    /// not supported, as in XSched; other flag bits are ignored, as there.
    pub fn xqueue_create(&self, hwq: Handle, level: i64, flags: i64) -> Result<Handle, XResult> {
        if !(PREEMPT_LEVEL_BLOCK..=PREEMPT_LEVEL_INTERRUPT).contains(&level) {
            return Err(XResult::ErrorInvalidValue);
        }
        if flags & QUEUE_CREATE_FLAG_BLOCKING_SUBMIT != 0 {
            return Err(XResult::ErrorNotSupported);
        }
        self.tables().add_xq(hwq, level, flags)
    }

    /// `XQueueGet`: the XQueue built on `hwq`.
    pub fn xqueue_get(&self, hwq: Handle) -> Result<Handle, XResult> {
        self.tables().xq_of(hwq)
    }

    /// `XQueueDestroy`. The stream keeps the priority it was last given.
    pub fn xqueue_destroy(&self, xq: Handle) -> XResult {
        code(self.tables().remove_xq(xq).map(drop))
    }

    /// `XQueueSetPreemptLevel`: checked and recorded, as at creation.
    pub fn set_preempt_level(&self, xq: Handle, level: i64) -> XResult {
        if !(PREEMPT_LEVEL_BLOCK..=PREEMPT_LEVEL_INTERRUPT).contains(&level) {
            return XResult::ErrorInvalidValue;
        }
        code(self.tables().xq_mut(xq).map(|q| q.level = level))
    }

    /// `XQueueSetLaunchConfig`: recorded only. It sizes XSched's Lv1 launch window (how many
    /// commands are in flight); at Lv3 every command goes to the device at once and is
    /// suspended in place, so there is no window to size. A value of 0 or less leaves that
    /// setting as it was, as XSched reads it.
    pub fn set_launch_config(&self, xq: Handle, threshold: i64, batch_size: i64) -> XResult {
        code(self.tables().xq_mut(xq).map(|q| {
            if threshold > 0 {
                q.threshold = Some(threshold);
            }
            if batch_size > 0 {
                q.batch_size = Some(batch_size);
            }
        }))
    }

    /// `XHintPriority`: the stream's new HIP priority ([`priority::to_hip`]) given to the
    /// interposer, which from then on suspends it while more urgent streams have work in
    /// flight (or lets it suspend less urgent ones).
    pub fn hint_priority(&self, b: &dyn Backend, xq: Handle, prio: i32) -> XResult {
        if !priority::valid(prio) {
            return XResult::ErrorInvalidValue;
        }
        let stream = match self.tables().stream(xq) {
            Ok(s) => s,
            Err(e) => return e,
        };
        if !b.loaded() {
            Self::say_once(
                &self.said_no_interposer,
                "XHintPriority has no effect without the HIP interposer: run the program with LD_PRELOAD=.../libpreempt_hip.so (scripts/install-xsched-compat.sh installs it beside this library)",
            );
            return XResult::ErrorNotSupported;
        }
        // The interposer printed why when it refuses (it is off, or never saw the stream made).
        if !b.set_priority(stream, priority::to_hip(prio)) {
            return XResult::ErrorNotFound;
        }
        code(self.tables().xq_mut(xq).map(|q| q.priority = Some(prio)))
    }

    /// `XQueueSuspend` and `XQueueResume`: not supported. The interposer suspends and resumes
    /// streams by its rule (and its daemon's holds); a program's own suspension beside that
    /// would need a third owner of the same suspension, which it does not offer.
    pub fn suspend_or_resume(&self, xq: Handle) -> XResult {
        if let Err(e) = self.tables().xq(xq) {
            return e;
        }
        Self::say_once(
            &self.said_no_suspend,
            "XQueueSuspend/XQueueResume are not supported: the HIP interposer suspends a queue while more urgent work runs (set priorities with XHintPriority)",
        );
        XResult::ErrorNotSupported
    }

    /// What is recorded of an XQueue (for tests and diagnostics).
    pub fn xqueue(&self, xq: Handle) -> Option<XQueue> {
        self.tables().xq(xq).ok().cloned()
    }
}

#[cfg(test)]
mod tests;
