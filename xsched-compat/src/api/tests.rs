use super::*;
use crate::priority::HIP_LOW;
use std::sync::Mutex as StdMutex;

/// The interposer, faked: loaded or not, and the priorities it was given.
#[derive(Default)]
struct Fake {
    loaded: bool,
    refuse: bool,
    calls: StdMutex<Vec<(usize, i32)>>,
}

impl Backend for Fake {
    fn loaded(&self) -> bool {
        self.loaded
    }
    fn set_priority(&self, stream: usize, hip_priority: i32) -> bool {
        self.calls.lock().unwrap().push((stream, hip_priority));
        !self.refuse
    }
}

fn queue(c: &Compat, stream: usize) -> Handle {
    let hwq = c.hip_queue_create(stream).unwrap();
    c.xqueue_create(hwq, PREEMPT_LEVEL_BLOCK, 0).unwrap()
}

#[test]
fn priorities_reach_the_interposer_negated() {
    let c = Compat::default();
    let b = Fake {
        loaded: true,
        ..Fake::default()
    };
    let (hp, lp) = (queue(&c, 0x100), queue(&c, 0x200));
    assert_eq!(c.hint_priority(&b, hp, 2), XResult::Success);
    assert_eq!(c.hint_priority(&b, lp, -1), XResult::Success);
    assert_eq!(*b.calls.lock().unwrap(), [(0x100, -2), (0x200, HIP_LOW)]);
    assert_eq!(c.xqueue(hp).unwrap().priority, Some(2));
}

#[test]
fn without_the_interposer_only_the_hint_is_refused() {
    let c = Compat::default();
    let b = Fake::default();
    let x = queue(&c, 0x100);
    assert_eq!(c.set_launch_config(x, 8, 4), XResult::Success);
    assert_eq!(c.hint_priority(&b, x, 1), XResult::ErrorNotSupported);
    assert!(b.calls.lock().unwrap().is_empty());
    assert_eq!(c.xqueue_destroy(x), XResult::Success);
}

#[test]
fn an_interposer_that_refuses_is_not_found() {
    let c = Compat::default();
    let b = Fake {
        loaded: true,
        refuse: true,
        ..Fake::default()
    };
    let x = queue(&c, 0x100);
    assert_eq!(c.hint_priority(&b, x, 1), XResult::ErrorNotFound);
    assert_eq!(c.xqueue(x).unwrap().priority, None);
}

#[test]
fn bad_values_and_handles_are_errors() {
    let c = Compat::default();
    let b = Fake {
        loaded: true,
        ..Fake::default()
    };
    assert_eq!(c.hip_queue_create(0), Err(XResult::ErrorNotSupported));
    let hwq = c.hip_queue_create(0x100).unwrap();
    assert_eq!(c.xqueue_create(hwq, 0, 0), Err(XResult::ErrorInvalidValue));
    assert_eq!(c.xqueue_create(hwq, 4, 0), Err(XResult::ErrorInvalidValue));
    assert_eq!(
        c.xqueue_create(hwq, 3, 1),
        Err(XResult::ErrorNotSupported),
        "blocking submit"
    );
    assert_eq!(c.xqueue_create(hwq + 7, 3, 0), Err(XResult::ErrorNotFound));
    let x = c.xqueue_create(hwq, PREEMPT_LEVEL_INTERRUPT, 2).unwrap();
    assert_eq!(
        c.xqueue_create(hwq, PREEMPT_LEVEL_BLOCK, 0),
        Ok(x),
        "one XQueue per HwQueue"
    );
    assert_eq!(c.xqueue_get(hwq), Ok(x));
    assert_eq!(c.xqueue_get(x), Err(XResult::ErrorNotFound));
    assert_eq!(c.set_launch_config(x, 8, 4), XResult::Success);
    assert_eq!(
        c.set_launch_config(x, 0, -1),
        XResult::Success,
        "0 or less keeps a setting"
    );
    assert_eq!(c.set_launch_config(x, 16, 0), XResult::Success);
    let q = c.xqueue(x).unwrap();
    assert_eq!((q.threshold, q.batch_size), (Some(16), Some(4)));
    assert_eq!(c.set_launch_config(x + 9, 8, 4), XResult::ErrorNotFound);
    assert_eq!(c.set_preempt_level(x, 9), XResult::ErrorInvalidValue);
    assert_eq!(c.set_preempt_level(x, 2), XResult::Success);
    assert_eq!(c.hint_priority(&b, x, 256), XResult::ErrorInvalidValue);
    assert_eq!(c.hint_priority(&b, x, -257), XResult::ErrorInvalidValue);
    assert_eq!(c.hint_priority(&b, hwq, 1), XResult::ErrorNotFound);
    assert_eq!(c.suspend_or_resume(x + 9), XResult::ErrorNotFound);
    assert_eq!(c.suspend_or_resume(x), XResult::ErrorNotSupported);
    assert_eq!(c.hw_queue_destroy(hwq), XResult::ErrorNotAllowed);
    assert_eq!(c.xqueue_destroy(x), XResult::Success);
    assert_eq!(c.xqueue_destroy(x), XResult::ErrorNotFound);
    assert_eq!(c.hw_queue_destroy(hwq), XResult::Success);
    assert_eq!(c.hw_queue_destroy(hwq), XResult::ErrorNotFound);
}

#[test]
fn schedulers() {
    let c = Compat::default();
    assert_eq!(
        c.set_scheduler(SCHEDULER_LOCAL, POLICY_HIGHEST_PRIORITY_FIRST),
        XResult::Success
    );
    assert_eq!(c.set_scheduler(SCHEDULER_GLOBAL, 0), XResult::Success);
    assert_eq!(c.set_scheduler(SCHEDULER_APP_MANAGED, 0), XResult::Success);
    assert_eq!(c.set_scheduler(SCHEDULER_LOCAL, 4), XResult::ErrorNotSupported);
    assert_eq!(c.set_scheduler(0, 1), XResult::ErrorInvalidValue);
    assert_eq!(c.set_scheduler(99, 1), XResult::ErrorInvalidValue);
}
