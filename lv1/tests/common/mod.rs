//! Shared by the launcher test binaries.
#![allow(dead_code)] // each test binary uses its own subset
use lv1::Config;
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
