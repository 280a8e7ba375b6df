//! The launcher's counts never show a queue with work as empty: while a launch is under way
//! (the launcher holds the commands it took, without the lock) they still count as pending.
//! A policy that decides a stream is idle from these counts (preempt-api's time-driven helper)
//! would otherwise leave a stream with work suspended for good.
use lv1::{CommandId, Config, HwQueue, XQueue};
use std::convert::Infallible;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A queue whose first launch blocks until the test lets it go.
#[derive(Default)]
struct Gated {
    /// (a launch is inside `launch`, it may return)
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl HwQueue for Gated {
    type Command = ();
    type SyncPoint = ();
    type Error = Infallible;

    fn launch(&self, _id: CommandId, _cmd: ()) -> Result<(), Infallible> {
        let mut s = self.state.lock().unwrap();
        s.0 = true;
        self.cv.notify_all();
        while !s.1 {
            s = self.cv.wait(s).unwrap();
        }
        Ok(())
    }
    fn record(&self) -> Result<(), Infallible> {
        Ok(())
    }
    fn wait(&self, _sp: &()) -> Result<(), Infallible> {
        Ok(())
    }
    fn synchronize(&self) -> Result<(), Infallible> {
        Ok(())
    }
}

impl Gated {
    fn release(&self) {
        let mut s = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        s.1 = true;
        self.cv.notify_all();
    }
}

/// Lets the blocked launch return however the test ends (a failed assertion included), so that
/// dropping the launcher does not wait for it forever.
struct ReleaseOnDrop(Arc<Gated>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[test]
fn a_command_being_launched_counts_as_pending() {
    let q = Arc::new(Gated::default());
    let xq = XQueue::new(Arc::clone(&q), Config::new(4, 1).unwrap()).unwrap();
    let _release = ReleaseOnDrop(Arc::clone(&q));
    xq.submit(());
    // The launcher took the command and is inside `launch`, without the lock.
    {
        let s = q.state.lock().unwrap();
        let (s, timeout) = q.cv.wait_timeout_while(s, Duration::from_secs(10), |s| !s.0).unwrap();
        assert!(!timeout.timed_out() && s.0, "the launcher never launched");
    }
    let st = xq.stats();
    assert_eq!(
        (st.submitted, st.pending + st.in_flight),
        (1, 1),
        "a launch under way must not look like an empty queue: {st:?}"
    );
    q.release();
    xq.wait_idle_for(Duration::from_secs(10)).unwrap();
    let st = xq.stats();
    assert_eq!((st.pending, st.in_flight, st.completed), (0, 0, 1), "{st:?}");
}
