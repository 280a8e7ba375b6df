//! What the host-device tests of this crate share: a body run under a time limit, and a bounded
//! wait for a condition (a hang fails the test, never stalls the suite).
#![allow(dead_code)] // each test file uses its part

use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

/// How long a test body may take on a loaded 2-core machine.
pub const LIMIT: Duration = Duration::from_secs(60);

/// `body` on a thread of its own, failed after [`LIMIT`].
pub fn bounded(body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(()) => {}
        // The body panicked (its assertion is on stderr) or hung.
        Err(e) => panic!("the test body did not finish ({e:?}); see its panic above, if any"),
    }
}

/// Polls `f` until it holds, at most `limit`; whether it did.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while !f() {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}
