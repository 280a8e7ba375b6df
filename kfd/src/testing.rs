//! For tests that need a real amdkfd (feature `test-util`): the `*_kernel` test binaries of kfd
//! and lv3, which run in the QEMU guest (`scripts/qemu/run-guest-tests.sh`) and skip elsewhere.
use super::Kfd;

/// Opens /dev/kfd, or explains on stderr why the test `test` does not run here (`SKIPPED <test>:
/// <reason>`) and returns `None`. In the QEMU guest the harness sets `PREEMPT_REQUIRE_KFD=1`, and
/// then a missing /dev/kfd fails the test.
///
/// ```no_run
/// let Some(kfd) = kfd::testing::kfd_or_skip("my_kernel_test") else { return };
/// ```
///
/// # Panics
/// With `PREEMPT_REQUIRE_KFD` set, when /dev/kfd does not open.
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
