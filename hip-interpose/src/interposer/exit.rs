//! The end of a process's scheduling: at exit everything is resumed and the exit line written;
//! in a fork child the interposer turns itself off (the parent's streams are not the child's).
use super::{ACTIVE, Interposer, forked, get, lock};
use crate::exit_line::ExitLine;
use std::sync::atomic::Ordering;

impl Interposer {
    /// Resumes everything and stops scheduling (process exit).
    pub fn release_all(&self) {
        ACTIVE.store(false, Ordering::Relaxed);
        if let Some(d) = &self.daemon {
            d.close();
        }
        let mut s = lock(&self.sched);
        let actions = s.release_all();
        self.carry_out(&mut s, actions);
        if self.cfg.log {
            let c = &self.counters;
            let line = ExitLine {
                pid: std::process::id(),
                marks: c.marks.load(Ordering::Relaxed),
                suspends: c.suspends.load(Ordering::Relaxed),
                resumes: c.resumes.load(Ordering::Relaxed),
                failures: c.failures.load(Ordering::Relaxed),
            };
            eprintln!("{line}");
        }
    }
}

pub(super) extern "C" fn child_after_fork() {
    forked();
}

pub(super) extern "C" fn at_exit() {
    if let Some(ip) = get() {
        ip.release_all();
    }
}
