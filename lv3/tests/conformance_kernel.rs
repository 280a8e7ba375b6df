//! lv3's conformance probes (the ones `preempt-lat validate` runs) against a real amdkfd: in the
//! project's QEMU guest (Linux 6.12, no GPU; `PREEMPT_REQUIRE_KFD=1`, and `PREEMPT_EXPECT_PATCHED=1` on
//! the patched kernel) every probe must pass, and the patched ioctl's checks must run exactly on
//! the patched kernel. Without /dev/kfd the test says SKIPPED.
use lv3::conformance::{self, Category, Status};

use kfd::testing::kfd_or_skip;

#[test]
fn every_conformance_probe_passes() {
    let Some(_kfd) = kfd_or_skip("every_conformance_probe_passes") else {
        return;
    };
    let checks = conformance::run();
    for c in &checks {
        eprintln!("observed: {:?} {} {}: {}", c.status, c.category, c.name, c.detail);
    }
    let failed: Vec<_> = checks.iter().filter(|c| c.status == Status::Fail).collect();
    assert!(failed.is_empty(), "failed: {failed:#?}");
    let error_paths = checks
        .iter()
        .filter(|c| c.category == Category::ErrorPath && c.status == Status::Pass)
        .count();
    assert!(error_paths >= 6, "too few error paths ran: {checks:#?}");
    let patched = checks
        .iter()
        .find(|c| c.name == conformance::PATCHED_IOCTL)
        .expect("the patched-ioctl capability check");
    if std::env::var_os("PREEMPT_EXPECT_PATCHED").is_some() {
        assert_eq!(patched.status, Status::Pass, "{patched:?}");
        assert!(
            checks
                .iter()
                .filter(|c| c.name.starts_with("preempt ioctl:") && c.status == Status::Pass)
                .count()
                >= 6,
            "{checks:#?}"
        );
    } else if std::env::var_os("PREEMPT_REQUIRE_KFD").is_some() {
        assert!(
            patched.status == Status::Skip && patched.detail.contains("ENOTTY"),
            "{patched:?}"
        );
    }
}
