//! The crate's one time base: nanoseconds on `CLOCK_MONOTONIC`.
//!
//! `std::time::Instant` is also `CLOCK_MONOTONIC` on Linux, but it cannot be built from,
//! or turned into, a raw number, and the host workers are separate processes that must
//! send their stamps over a pipe. Raw `CLOCK_MONOTONIC` nanoseconds are comparable across
//! processes, so every stamp in this crate uses them.

use nix::time::{ClockId, clock_gettime};
use std::time::Duration;

/// Now, in nanoseconds on `CLOCK_MONOTONIC`.
pub fn now_ns() -> u64 {
    read(ClockId::CLOCK_MONOTONIC)
}

/// Sleeps until `t`, a [`now_ns`] stamp; returns at once if `t` has passed.
pub fn sleep_until(t: u64) {
    let now = now_ns();
    if t > now {
        std::thread::sleep(Duration::from_nanos(t - now));
    }
}

/// CPU time consumed so far by the calling thread, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`). It does not advance while the thread is stopped or
/// descheduled, which is what makes the host delay kernel preemption-transparent.
pub fn thread_cpu_ns() -> u64 {
    read(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

fn read(id: ClockId) -> u64 {
    // clock_gettime can only fail for an invalid clock id; both ids are always valid on Linux.
    let ts = clock_gettime(id).expect("clock_gettime on a standard clock");
    u64::try_from(Duration::from(ts).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_cpu_clocks_advance() {
        let a = now_ns();
        let c0 = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() < c0 + 1_000_000 {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        assert!(now_ns() >= a + 1_000_000, "1 ms of CPU work takes >= 1 ms of wall time");
    }

    #[test]
    fn sleep_until_reaches_its_stamp_and_skips_the_past() {
        let t = now_ns() + 2_000_000;
        sleep_until(t);
        assert!(now_ns() >= t);
        let before = now_ns();
        sleep_until(0);
        assert!(now_ns() - before < 1_000_000_000, "a past stamp must not sleep");
    }
}
