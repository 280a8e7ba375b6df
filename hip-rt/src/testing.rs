//! For tests against the real HIP runtime (feature `test-util`; this crate's own unit tests get it
//! too): hip-rt's and gpu-device's. They run wherever libamdhip64 loads (Debian's HIP here and in
//! CI, where `scripts/test-all.sh` sets `PREEMPT_REQUIRE_HIP=1`) and skip visibly elsewhere.
use super::{Hip, HipError};

/// Whether `PREEMPT_REQUIRE_HIP=1`: the HIP runtime must load, a missing one fails the test.
pub fn hip_required() -> bool {
    std::env::var("PREEMPT_REQUIRE_HIP").is_ok_and(|v| v == "1")
}

/// The real HIP, or `None` with the reason on stderr (`SKIPPED: ...`) when it is not installed
/// and not [required](hip_required).
///
/// ```no_run
/// let Some(hip) = hip_rt::testing::real_hip() else { return };
/// println!("HIP from {}", hip.library_path());
/// ```
///
/// # Panics
/// When HIP is installed but does not load (a missing symbol, a broken library), or is required
/// and not found.
pub fn real_hip() -> Option<Hip> {
    match Hip::load() {
        Ok(h) => Some(h),
        Err(e @ HipError::LibraryNotFound { .. }) if !hip_required() => {
            eprintln!("SKIPPED: HIP is not installed here (set PREEMPT_REQUIRE_HIP=1 to fail instead): {e}");
            None
        }
        Err(e) => panic!("HIP failed to load: {e}"),
    }
}
