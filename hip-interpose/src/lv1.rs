//! Lv1 for programs nobody rewrites, where a device has no Lv3 mechanism (or `PREEMPT_LEVEL=1`):
//! a preemptible stream's launches are held on the host, in the program's own thread, and at
//! most a threshold of its commands are on the device at once (progressive launching).
//!
//! Why the caller's thread waits instead of a launcher thread taking the command: a launch's
//! arguments are an array of pointers whose sizes only the runtime knows (clr reads them from
//! the code object's metadata), so the interposer cannot copy a launch to submit it later. The
//! program's call returns once its command is on the device, as it would without the
//! interposer; only its timing changes. A suspension never waits for the device: the commands
//! already there (at most the threshold) run to completion, which bounds the preemption latency
//! by the threshold times the command time (docs/interposer.md#lv1-where-there-is-no-lv3).
//!
//! Commands are followed in batches: one event of the interposer's behind every
//! [`Lv1::batch`]-th launch stands for the batch, so a launch costs an event record only once
//! per batch. Fewer than a batch of commands are ever left without an event, and the batch is at
//! most half the threshold, so a full gate always has an event that will complete to open it.
use crate::device::{Created, NON_BLOCKING, Streams};
use crate::ffi::next;
use crate::sched::Key;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One stream's gate: whether it is suspended, and how many of its commands are on the device.
#[derive(Default)]
pub struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    suspended: bool,
    /// Commands counted onto the device and not yet known to have left it.
    in_flight: u32,
    /// Of those, the ones no event of ours follows yet.
    uncovered: u32,
}

impl Gate {
    /// Waits until the stream runs and has room on the device, then counts one command in;
    /// `Some(n)`: an event must follow this launch, standing for its last `n` commands.
    pub fn enter(&self, threshold: u32, batch: u32) -> Option<u32> {
        let mut s = lock(&self.state);
        while s.suspended || s.in_flight >= threshold {
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.in_flight += 1;
        s.uncovered += 1;
        (s.uncovered >= batch).then(|| std::mem::take(&mut s.uncovered))
    }

    /// The launch just counted in failed, and no event stands for it: it never reached the
    /// device.
    pub fn withdraw(&self) {
        let mut s = lock(&self.state);
        s.in_flight = s.in_flight.saturating_sub(1);
        s.uncovered = s.uncovered.saturating_sub(1);
        self.cv.notify_all();
    }

    /// `n` of its commands left the device (the event standing for them completed, or could not
    /// be recorded).
    pub fn left(&self, n: u32) {
        let mut s = lock(&self.state);
        s.in_flight = s.in_flight.saturating_sub(n);
        self.cv.notify_all();
    }

    fn set_suspended(&self, suspended: bool) {
        lock(&self.state).suspended = suspended;
        self.cv.notify_all();
    }

    /// Whether it is suspended and how many commands it has on the device.
    pub fn state(&self) -> (bool, u32) {
        let s = lock(&self.state);
        (s.suspended, s.in_flight)
    }
}

/// The process's Lv1 streams: created by the runtime as the program asked (no queue of their
/// own is needed: nothing stops the device's queue), each with its gate.
pub struct Lv1 {
    pub threshold: u32,
    /// Commands one event of ours stands for: half the threshold, at least one.
    pub batch: u32,
    gates: Mutex<HashMap<Key, Arc<Gate>>>,
}

impl Lv1 {
    pub fn new(threshold: u32) -> Lv1 {
        Lv1 {
            threshold,
            batch: (threshold / 2).max(1),
            gates: Mutex::new(HashMap::new()),
        }
    }

    /// Before a launch on `key`: waits at its gate when it is an Lv1 stream (`None` when not);
    /// then the gate and how many commands an event behind this launch must stand for.
    pub fn enter(&self, key: Key) -> Option<(Arc<Gate>, Option<u32>)> {
        let g = self.gate(key)?;
        let cover = g.enter(self.threshold, self.batch);
        Some((g, cover))
    }

    /// `key`'s gate, when it is an Lv1 stream.
    pub fn gate(&self, key: Key) -> Option<Arc<Gate>> {
        lock(&self.gates).get(&key).cloned()
    }

    fn with_gate(&self, key: Key, f: impl FnOnce(&Gate)) -> Result<(), String> {
        let g = self.gate(key).ok_or("not an interposer stream")?;
        f(&g);
        Ok(())
    }
}

fn hip(what: &str, c: i32) -> String {
    format!("{what}: {}", next::error_name(c))
}

impl Streams for Lv1 {
    fn create(&self, flags: u32, priority: i32) -> Result<Created, String> {
        let key = next::create_stream(flags, priority).map_err(|c| hip("hipStreamCreateWithPriority", c))?;
        lock(&self.gates).insert(key, Arc::default());
        Ok(Created {
            key,
            blocking: flags & NON_BLOCKING == 0,
        })
    }
    fn destroy(&self, key: Key) -> Result<(), String> {
        // A thread still waiting at the gate (a program bug: destroying a stream it launches
        // on) is let through rather than left waiting for good.
        if let Some(g) = lock(&self.gates).remove(&key) {
            g.set_suspended(false);
        }
        next::destroy_stream(key).map_err(|c| hip("hipStreamDestroy", c))
    }
    fn suspend(&self, key: Key) -> Result<(), String> {
        self.with_gate(key, |g| g.set_suspended(true))
    }
    fn resume(&self, key: Key) -> Result<(), String> {
        self.with_gate(key, |g| g.set_suspended(false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// Runs `n` launches through `gate` on another thread; returns how many got through.
    fn launcher(gate: Arc<Gate>, threshold: u32, n: u32) -> (Arc<AtomicU32>, std::thread::JoinHandle<()>) {
        let through = Arc::new(AtomicU32::new(0));
        let t = through.clone();
        let h = std::thread::spawn(move || {
            for _ in 0..n {
                gate.enter(threshold, 1);
                t.fetch_add(1, Ordering::SeqCst);
            }
        });
        (through, h)
    }

    fn settle() {
        std::thread::sleep(Duration::from_millis(50));
    }

    #[test]
    fn at_most_the_threshold_is_on_the_device_and_each_completion_lets_one_more_in() {
        let g = Arc::new(Gate::default());
        let (through, h) = launcher(g.clone(), 3, 5);
        settle();
        assert_eq!(through.load(Ordering::SeqCst), 3, "the fourth waits for room");
        g.left(1);
        settle();
        assert_eq!(through.load(Ordering::SeqCst), 4);
        g.left(1);
        h.join().unwrap();
        assert_eq!(g.state(), (false, 3));
    }

    #[test]
    fn a_suspended_stream_launches_nothing_until_resumed() {
        let g = Arc::new(Gate::default());
        g.set_suspended(true);
        let (through, h) = launcher(g.clone(), 8, 2);
        settle();
        assert_eq!(through.load(Ordering::SeqCst), 0, "held on the host");
        g.set_suspended(false);
        h.join().unwrap();
        assert_eq!(g.state(), (false, 2));
        g.left(3);
        assert_eq!(g.state(), (false, 0), "never below zero");
    }

    #[test]
    fn one_event_stands_for_each_batch_and_a_failed_launch_is_taken_back() {
        let g = Gate::default();
        let covers: Vec<_> = (0..6).map(|_| g.enter(16, 3)).collect();
        assert_eq!(covers, [None, None, Some(3), None, None, Some(3)]);
        assert_eq!(g.enter(16, 3), None);
        g.withdraw();
        assert_eq!(g.state(), (false, 6), "the failed launch is not on the device");
        assert_eq!(
            (g.enter(16, 3), g.enter(16, 3), g.enter(16, 3)),
            (None, None, Some(3)),
            "and not in the next batch"
        );
    }

    #[test]
    fn a_full_gate_always_has_an_event_coming_to_open_it() {
        // Whatever the threshold, the commands without an event stay below it.
        for threshold in 1..=64 {
            let l = Lv1::new(threshold);
            let g = Gate::default();
            let mut followed = 0;
            for _ in 0..threshold {
                if let Some(n) = g.enter(threshold, l.batch) {
                    followed += n;
                }
            }
            assert!(
                followed >= 1,
                "threshold {threshold}: a full gate with no event to open it"
            );
        }
    }
}
