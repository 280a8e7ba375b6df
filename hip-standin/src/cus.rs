//! The device's compute units when kernels fill them (`PREEMPT_STANDIN_CUS=exclusive`): at most
//! one stream's kernel runs at a time, as on a GPU where a delay kernel occupies every CU. A
//! kernel of another stream waits for the CUs, so a high-priority kernel waits behind a running
//! low-priority one unless that one is suspended: a suspension (SIGSTOP of the stream's workers)
//! gives the CUs up, as CWSR saves the waves and frees them, and the resume waits until the CUs
//! are free again before the workers continue.
//!
//! Without it (the default, `shared`) every stream's workers run side by side and the host's
//! scheduler shares the CPUs: a model in which a woken high-priority worker is rarely kept
//! waiting, so the interposer has little to remove there.
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The environment variable that selects the model.
pub const CUS_ENV: &str = "PREEMPT_STANDIN_CUS";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
struct State {
    /// The stream whose kernel holds the CUs.
    owner: Option<u64>,
    /// Streams waiting for the CUs, first come first served (a GPU's dispatcher serves its queues
    /// in turn: a kernel waits for the running one, not for every kernel queued behind it).
    waiting: VecDeque<u64>,
    /// Streams suspended (none of their kernels may take the CUs).
    suspended: BTreeSet<u64>,
    /// Streams suspended in the middle of a kernel, which gave the CUs up and need them back.
    preempted: BTreeSet<u64>,
}

impl State {
    /// Whether `stream` is served next: the CUs are free and it is the first waiter not
    /// suspended.
    fn next_is(&self, stream: u64) -> bool {
        self.owner.is_none() && self.waiting.iter().find(|w| !self.suspended.contains(w)) == Some(&stream)
    }

    fn leave_queue(&mut self, stream: u64) {
        self.waiting.retain(|w| *w != stream);
    }
}

/// The one set of CUs of the device.
#[derive(Default)]
pub struct Cus {
    state: Mutex<State>,
    cv: Condvar,
}

impl Cus {
    fn wait<'a>(&self, s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cv.wait(s).unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for `stream`'s turn (the CUs free, it not suspended), then takes them for a kernel.
    pub fn acquire(&self, stream: u64) {
        let mut s = lock(&self.state);
        s.waiting.push_back(stream);
        while !s.next_is(stream) {
            s = self.wait(s);
        }
        s.leave_queue(stream);
        s.owner = Some(stream);
    }

    /// `stream`'s kernel completed: the CUs are free (if it still held them).
    pub fn done(&self, stream: u64) {
        let mut s = lock(&self.state);
        if s.owner == Some(stream) {
            s.owner = None;
        }
        s.preempted.remove(&stream);
        self.cv.notify_all();
    }

    /// `stream` was suspended (its workers are stopped): a kernel of it running gives the CUs up.
    pub fn suspended(&self, stream: u64) {
        let mut s = lock(&self.state);
        s.suspended.insert(stream);
        if s.owner == Some(stream) {
            s.owner = None;
            s.preempted.insert(stream);
        }
        self.cv.notify_all();
    }

    /// `stream` is resumed: `true` if its workers may continue at once, `false` if its kernel was
    /// preempted and must first take the CUs back ([`Cus::reacquire`]).
    pub fn resumed(&self, stream: u64) -> bool {
        let mut s = lock(&self.state);
        s.suspended.remove(&stream);
        self.cv.notify_all();
        !s.preempted.contains(&stream)
    }

    /// Waits for a preempted kernel's turn and gives it the CUs back. Returns without them if the
    /// kernel completed meanwhile, or the stream was suspended again (it stays preempted: the
    /// next resume waits again).
    pub fn reacquire(&self, stream: u64) {
        let mut s = lock(&self.state);
        if !s.preempted.contains(&stream) {
            return;
        }
        s.waiting.push_back(stream);
        loop {
            if s.suspended.contains(&stream) || !s.preempted.contains(&stream) {
                s.leave_queue(stream);
                return;
            }
            if s.next_is(stream) {
                s.leave_queue(stream);
                s.preempted.remove(&stream);
                s.owner = Some(stream);
                return;
            }
            s = self.wait(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_kernel_waits_for_the_cus_until_the_holder_is_suspended_and_gets_them_back_after() {
        let cus = Arc::new(Cus::default());
        cus.acquire(1); // LP's kernel runs
        let (c, (tx, rx)) = (Arc::clone(&cus), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            c.acquire(2); // HP's kernel
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "HP waits behind LP"
        );
        cus.suspended(1);
        rx.recv_timeout(Duration::from_secs(10)).expect("LP suspended: HP runs");
        assert!(
            !cus.resumed(1),
            "LP was preempted mid-kernel: it must take the CUs back first"
        );
        let (c, (tx, rx)) = (Arc::clone(&cus), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            c.reacquire(1);
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "LP waits for HP's kernel"
        );
        cus.done(2);
        rx.recv_timeout(Duration::from_secs(10)).expect("HP done: LP continues");
        cus.done(1);
        cus.acquire(3);
    }

    #[test]
    fn a_suspended_stream_takes_no_cus_and_a_kernel_done_while_stopped_needs_none_back() {
        let cus = Cus::default();
        cus.suspended(5);
        assert!(cus.resumed(5), "nothing was running: continue at once");
        cus.acquire(5);
        cus.suspended(5);
        cus.done(5); // completed just before the stop
        assert!(cus.resumed(5), "its kernel completed: nothing to take back");
        cus.reacquire(5);
        cus.acquire(6); // the CUs are free
    }

    #[test]
    fn waiting_kernels_are_served_in_turn_not_the_holders_next_one_first() {
        let cus = Arc::new(Cus::default());
        cus.acquire(1);
        let (c, (tx, rx)) = (Arc::clone(&cus), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            c.acquire(2);
            tx.send(()).unwrap();
        });
        std::thread::sleep(Duration::from_millis(100)); // 2 is waiting
        cus.done(1);
        let (c, (tx1, rx1)) = (Arc::clone(&cus), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            c.acquire(1); // the holder's next kernel
            tx1.send(()).unwrap();
        });
        rx.recv_timeout(Duration::from_secs(10)).expect("2 came first");
        assert!(
            rx1.recv_timeout(Duration::from_millis(200)).is_err(),
            "1 waits for 2's kernel"
        );
        cus.done(2);
        rx1.recv_timeout(Duration::from_secs(10)).expect("then 1");
    }
}
