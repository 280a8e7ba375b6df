//! Shared by the real-kernel test binaries (kfd_kernel, mechanism_kernel, preempt_ioctl_kernel).
use kfd::Kfd;

/// Opens /dev/kfd, or explains on stderr why the test does not run here. In the QEMU guest the
/// harness sets `PREEMPT_REQUIRE_KFD=1`, and then a missing /dev/kfd fails the test.
pub fn kfd_or_skip(test: &str) -> Option<Kfd> {
    match Kfd::open() {
        Ok(k) => Some(k),
        Err(e) => {
            assert!(
                std::env::var_os("PREEMPT_REQUIRE_KFD").is_none(),
                "{test}: PREEMPT_REQUIRE_KFD is set but /dev/kfd does not open: {e}"
            );
            // Written straight to stderr: the test harness captures eprintln! of passing tests,
            // and a skip must be visible.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: needs /dev/kfd ({e}); runs in the QEMU guest (scripts/qemu/run-guest-tests.sh)"
            );
            None
        }
    }
}
