//! `preempt-lat validate`: a suite a driver engineer (or a CI system) runs on a machine to check
//! the preemption paths: lv3's conformance probes (capability and error paths, which run
//! anywhere /dev/kfd opens, including the QEMU guest without a GPU), and, per GPU and mechanism, functional
//! preempt/resume cycles on a running delay-kernel workload with the correctness check and a
//! latency summary (hardware only: skipped with the reason where there is no GPU).
//! Exit status: 0 when no check failed (skips do not fail), 3 when a check failed, 1 when the
//! suite itself could not run.
use crate::doctor::facts::{self, Fact, HipInfo};
use crate::exit::{Outcome, Verdict};
use crate::options::{Format, ValidateOptions};
use lv3::MechanismKind;
use lv3::conformance::{self, Category, Check, Status};
use serde::Serialize;
use std::io::Write;

#[derive(Debug, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub version: &'static str,
    pub git_revision: &'static str,
    pub kernel: String,
    pub checks: Vec<Check>,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub ok: bool,
}

/// Runs every check and writes the report; `CheckFailed` (exit 3) when a check failed.
pub fn run(a: &ValidateOptions, hip: Fact<HipInfo>, w: &mut dyn Write) -> Outcome {
    let mut checks = conformance::run();
    checks.extend(functional(a, &hip));
    let count = |s| checks.iter().filter(|c| c.status == s).count();
    let (passed, failed, skipped) = (count(Status::Pass), count(Status::Fail), count(Status::Skip));
    let r = Report {
        tool: "preempt-lat validate",
        version: env!("CARGO_PKG_VERSION"),
        git_revision: crate::env::git_revision(),
        kernel: crate::env::kernel_release(),
        ok: failed == 0,
        checks,
        passed,
        failed,
        skipped,
    };
    let written = match a.format {
        Format::Json => crate::output::json(&r, w),
        Format::Csv => crate::output::csv(&r.checks, w),
        Format::Text => text(&r, w),
    };
    written.map_err(|e| format!("writing the report: {e}"))?;
    Ok(Verdict::from_ok(r.ok))
}

fn text(r: &Report, w: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        w,
        "preempt-lat validate {} (rev {}), kernel {}",
        r.version, r.git_revision, r.kernel
    )?;
    for c in &r.checks {
        let s = match c.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        };
        writeln!(w, "{s} {:<11} {:<44} {}", c.category, c.name, c.detail)?;
    }
    writeln!(w, "{} passed, {} failed, {} skipped", r.passed, r.failed, r.skipped)
}

/// The hardware part: preempt/resume cycles with the correctness check, per GPU and mechanism.
fn functional(a: &ValidateOptions, hip: &Fact<HipInfo>) -> Vec<Check> {
    let facts = facts::gather(&kfd::sysfs::SysRoot::default(), hip.clone());
    if let Err(why) = crate::doctor::verdict::gpu_path(&facts) {
        return vec![Check::new(
            Category::Functional,
            "preempt/resume cycles with correctness check",
            Status::Skip,
            format!("skipped: no GPU ({why})"),
        )];
    }
    let devices = match hip.ok().map(|h| &h.devices) {
        Some(Fact::Ok(n)) if a.all_gpus => (0..*n).collect::<Vec<_>>(),
        _ => vec![0],
    };
    let mut out = Vec::new();
    for d in devices {
        for m in MechanismKind::AUTO_ORDER {
            out.push(functional_one(a, d, m));
        }
    }
    out
}

fn functional_one(a: &ValidateOptions, device: u32, mechanism: MechanismKind) -> Check {
    let name = format!("hip:{device} Lv3 {mechanism}: {} cycles at T={} ms", a.cycles, a.t_ms);
    crate::gpu::functional(device, lv3::MechanismChoice::Only(mechanism), a.t_ms, a.cycles).map_or_else(
        |(skip, why)| {
            Check::new(
                Category::Functional,
                &name,
                if skip { Status::Skip } else { Status::Fail },
                why,
            )
        },
        |detail| Check::new(Category::Functional, &name, Status::Pass, detail),
    )
}
