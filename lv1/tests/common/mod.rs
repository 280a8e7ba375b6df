//! Shared by the launcher test binaries.
#![allow(dead_code)] // each test binary uses its own subset
use lv1::fake::{FakeError, FakeQueue, ReleaseOnDrop};
use lv1::{Completion, Config, SuspendMode, XQueue};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// Bounds every wait; no assertion is about how fast anything is.
pub const LONG: Duration = Duration::from_secs(20);
/// How long we watch for something that must *not* happen.
pub const QUIET: Duration = Duration::from_millis(150);

pub fn cfg(t: usize, b: usize) -> Config {
    Config::new(t, b).unwrap()
}

pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// See [`manual`].
pub type ManualRig = (
    Arc<FakeQueue>,
    Arc<XQueue<FakeQueue>>,
    ReleaseOnDrop,
    Receiver<Completion<FakeError>>,
);

/// What a launcher test over a manual fake needs: the fake, the queue (shared, so that it can
/// be handed to a background thread), the guard that switches the fake to auto mode, and the
/// completion receiver. Bind them in this order, `let (fake, xq, _release, rx) = manual(t, b);`:
/// locals drop in reverse, so the guard releases the fake before the queue's drop waits for it,
/// and a failing assertion unwinds instead of hanging.
pub fn manual(threshold: usize, batch: usize) -> ManualRig {
    let fake = FakeQueue::manual();
    let xq = Arc::new(XQueue::new(fake.clone(), cfg(threshold, batch)).unwrap());
    let release = fake.release_on_drop();
    let rx = xq.take_completions().unwrap();
    (fake, xq, release, rx)
}

/// Exactly `n` completions, ids in launch (= id) order from `first`.
pub fn expect_completions<E: std::fmt::Debug>(rx: &Receiver<Completion<E>>, first: u64, n: u64) -> Vec<Completion<E>> {
    let got: Vec<_> = (0..n).map(|_| rx.recv_timeout(LONG).expect("a completion")).collect();
    let ids: Vec<u64> = got.iter().map(|c| c.id).collect();
    assert_eq!(ids, (first..first + n).collect::<Vec<_>>());
    for c in &got {
        let s = c.stamps;
        assert!(
            s.submitted_ns <= s.launched_ns && s.launched_ns <= s.completed_ns,
            "{s:?}"
        );
    }
    got
}

/// Start `suspend(Drain)` on a detached thread; its result arrives on the receiver. Detached
/// so that a test failing while the drain blocks ends instead of joining it forever.
pub fn drain_in_background(xq: &Arc<XQueue<FakeQueue>>) -> Receiver<Result<(), FakeError>> {
    let (tx, rx) = mpsc::channel();
    let xq = Arc::clone(xq);
    std::thread::spawn(move || tx.send(xq.suspend(SuspendMode::Drain)));
    rx
}

/// A small deterministic generator (xorshift64*), so that a failing seed can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Uniform in `0..n` (n > 0), close enough for tests.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}
