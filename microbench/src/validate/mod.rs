//! `preempt-lat validate`: a suite a driver engineer (or a CI system) runs on a machine to check
//! the preemption paths: lv3's conformance probes (capability and error paths, which run
//! anywhere /dev/kfd opens, including the QEMU guest without a GPU), and, per GPU and mechanism, functional
//! preempt/resume cycles on a running delay-kernel workload with the correctness check and a
//! latency summary (hardware only: skipped with the reason where there is no GPU).
//! Exit status: 0 when no check failed (skips do not fail), 3 when a check failed, 1 when the
//! suite itself could not run.
use clap::Args;
use lv3::MechanismKind;
use lv3::conformance::{self, Category, Check, Status};
use serde::Serialize;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Output: text for people, json for CI systems (the exit status gates either way).
    #[arg(long, value_enum, default_value_t = crate::doctor::DoctorFormat::Text)]
    pub format: crate::doctor::DoctorFormat,
    /// Run the hardware checks on every HIP device, not only hip:0.
    #[arg(long)]
    pub all_gpus: bool,
    /// T of the functional workload, in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = crate::cli::parse_t_ms)]
    pub t_ms: f64,
    /// Preempt/resume cycles per GPU and mechanism.
    #[arg(long, default_value_t = 50)]
    pub cycles: u32,
}

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

pub fn run(a: &ValidateArgs, hip: crate::doctor::facts::Fact<crate::doctor::facts::HipInfo>) -> Result<bool, String> {
    let mut checks = conformance::run();
    checks.extend(functional(a, &hip));
    let count = |s| checks.iter().filter(|c| c.status == s).count();
    let (passed, failed, skipped) = (count(Status::Pass), count(Status::Fail), count(Status::Skip));
    let r = Report {
        tool: "preempt-lat validate",
        version: env!("CARGO_PKG_VERSION"),
        git_revision: option_env!("PREEMPT_LAT_GIT_REV").unwrap_or("unknown"),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default(),
        ok: failed == 0,
        checks,
        passed,
        failed,
        skipped,
    };
    match a.format {
        crate::doctor::DoctorFormat::Json => println!("{}", serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?),
        crate::doctor::DoctorFormat::Text => {
            println!("preempt-lat validate {} (rev {}), kernel {}", r.version, r.git_revision, r.kernel);
            for c in &r.checks {
                let s = match c.status {
                    Status::Pass => "PASS",
                    Status::Fail => "FAIL",
                    Status::Skip => "SKIP",
                };
                println!("{s} {:<11} {:<44} {}", c.category, c.name, c.detail);
            }
            println!("{} passed, {} failed, {} skipped", r.passed, r.failed, r.skipped);
        }
    }
    Ok(r.ok)
}

/// The hardware part: preempt/resume cycles with the correctness check, per GPU and mechanism.
fn functional(a: &ValidateArgs, hip: &crate::doctor::facts::Fact<crate::doctor::facts::HipInfo>) -> Vec<Check> {
    let facts = crate::doctor::facts::gather(&kfd::sysfs::SysRoot::default(), hip.clone());
    if let Err(why) = crate::doctor::verdict::gpu_path(&facts) {
        return vec![Check::new(Category::Functional, "preempt/resume cycles with correctness check", Status::Skip, format!("skipped: no GPU ({why})"))];
    }
    let devices = match hip.ok().map(|h| &h.devices) {
        Some(crate::doctor::facts::Fact::Ok(n)) if a.all_gpus => (0..*n as u32).collect::<Vec<_>>(),
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

fn functional_one(a: &ValidateArgs, device: u32, mechanism: MechanismKind) -> Check {
    let name = format!("hip:{device} Lv3 {mechanism}: {} cycles at T={} ms", a.cycles, a.t_ms);
    crate::gpu::functional(device, mechanism.name(), a.t_ms, a.cycles).map_or_else(
        |(skip, why)| Check::new(Category::Functional, &name, if skip { Status::Skip } else { Status::Fail }, why),
        |detail| Check::new(Category::Functional, &name, Status::Pass, detail),
    )
}
