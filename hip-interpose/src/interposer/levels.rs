//! Which mechanism suspends the process's preemptible streams (the device's Lv3, or Lv1 where
//! it has none, decided once), and the Lv1 path of a submission.
use super::{Interposer, lock};
use crate::config::Level;
use crate::device::Streams;
use crate::ffi::next;
use crate::lv1::{Gate, Lv1};
use crate::sched::Key;
use crate::watch::{Done, Pending};
use std::sync::Arc;

impl Interposer {
    /// Where the watcher reports completed events: this interposer (one closure per interposer,
    /// made at its first event).
    pub(super) fn on_done(&'static self) -> &'static (dyn Fn(Vec<Done>) + Sync) {
        *self
            .done
            .get_or_init(|| Box::leak(Box::new(move |d: Vec<Done>| self.completed(d))))
    }

    /// The level this process's preemptible streams are suspended at, decided at the first one
    /// (`PREEMPT_LEVEL`; under `auto`, Lv1 only where the device has no Lv3, with one line
    /// saying why).
    pub(super) fn new_streams(&self) -> &dyn Streams {
        let lv1 = self.lv1.get_or_init(|| {
            let why = match self.cfg.level {
                Level::Lv3 => return None,
                Level::Lv1 => "PREEMPT_LEVEL=1".to_string(),
                Level::Auto => match self.device.lv3_ready() {
                    Ok(()) => return None,
                    Err(e) => {
                        eprintln!("preempt-hip: no Lv3 here ({e}); lower-priority streams are held at Lv1");
                        e
                    }
                },
            };
            if self.cfg.log {
                eprintln!(
                    "preempt-hip: Lv1 ({why}): a suspended stream's launches wait on the host, at most {} of its commands on the device",
                    self.cfg.lv1_threshold
                );
            }
            Some(Lv1::new(self.cfg.lv1_threshold))
        });
        match lv1 {
            Some(l) => l,
            None => &*self.device,
        }
    }

    pub(super) fn lv1(&self) -> Option<&Lv1> {
        self.lv1.get().and_then(Option::as_ref)
    }

    /// What suspends the preemptible streams that exist.
    pub(super) fn streams(&self) -> &dyn Streams {
        match self.lv1() {
            Some(l) => l,
            None => &*self.device,
        }
    }

    /// Before a submission on an Lv1 stream: waits until it runs and has room on the device.
    pub(super) fn lv1_enter(&self, key: Key) -> Option<(Arc<Gate>, Option<u32>)> {
        self.lv1()?.enter(key)
    }

    /// After it: when its batch is complete, one event of ours follows its commands until they
    /// leave the device; a failed launch is taken back, and commands that cannot be followed
    /// count as left at once.
    pub(super) fn lv1_launched(&'static self, key: Key, (gate, cover): (Arc<Gate>, Option<u32>), code: i32) {
        let Some(n) = cover else {
            if code != 0 {
                gate.withdraw();
            }
            return;
        };
        let ev = lock(&self.pool).pop().map_or_else(next::create_event, Ok);
        match ev.and_then(|e| next::record_event(e, key).map(|()| e).inspect_err(|_| self.recycle(e))) {
            Ok(e) => self.watch.add(e, Pending::Flight { key, n }, true, self.on_done()),
            Err(_) => gate.left(n),
        }
    }
}
