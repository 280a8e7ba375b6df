//! `preempt-lat validate`: a suite a driver engineer (or a CI system) runs on a machine to check
//! the preemption paths: lv3's conformance probes (capability and error paths, which run
//! anywhere /dev/kfd opens, including the QEMU guest without a GPU), and, per GPU and mechanism, functional
//! preempt/resume cycles on a running delay-kernel workload with the correctness check and a
//! latency summary, and the bystander check: what our preemptions cost another process's
//! kernels on the same GPU, per mechanism ([`crate::bystander`]; hardware only: skipped with the
//! reason where there is no GPU).
//! Exit status: 0 when no check failed (skips do not fail), 3 when a check failed, 1 when the
//! suite itself could not run.
use crate::doctor::facts::{self, Fact, HipInfo};
use crate::error::Context;
use crate::exit::{Outcome, Verdict};
use crate::options::ValidateOptions;
use crate::output::Export;
use lv3::conformance::{self, Category, Check, Status};
use preempt_api::{MechanismChoice, MechanismKind};
use serde::Serialize;
use std::io::Write;

#[derive(Debug, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub version: &'static str,
    pub git_revision: &'static str,
    pub kernel: String,
    pub checks: Vec<Check>,
    /// The bystander check's figures, one per GPU and mechanism that ran (empty without a GPU).
    pub bystander: Vec<crate::bystander::Measured>,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub ok: bool,
}

/// Runs every check and writes the report; `CheckFailed` (exit 3) when a check failed.
pub fn run(a: &ValidateOptions, hip: Fact<HipInfo>, w: &mut dyn Write) -> Outcome {
    let mut checks = conformance::run();
    let (hw, bystander) = functional(a, &hip);
    checks.extend(hw);
    let count = |s| checks.iter().filter(|c| c.status == s).count();
    let (passed, failed, skipped) = (count(Status::Pass), count(Status::Fail), count(Status::Skip));
    let r = Report {
        tool: "preempt-lat validate",
        version: env!("CARGO_PKG_VERSION"),
        git_revision: crate::env::git_revision(),
        kernel: crate::env::kernel_release(),
        ok: failed == 0,
        checks,
        bystander,
        passed,
        failed,
        skipped,
    };
    crate::output::export(a.format, &r, w).context("writing the report")?;
    Ok(Verdict::from_ok(r.ok))
}

/// JSON: the report whole; CSV: one row per check.
impl Export for Report {
    type Whole = Self;
    type Row<'a> = &'a Check;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<&Check> {
        self.checks.iter().collect()
    }
    fn text(&self, w: &mut dyn Write) -> std::io::Result<()> {
        text(self, w)
    }
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
    crate::bystander::text(&r.bystander, w)?;
    writeln!(w, "{} passed, {} failed, {} skipped", r.passed, r.failed, r.skipped)
}

/// The name of the bystander check's skip where there is no GPU.
const BYSTANDER: &str = "bystander cost of our preemptions";

/// The hardware part: preempt/resume cycles with the correctness check, per GPU and mechanism,
/// then the bystander check per GPU and mechanism.
fn functional(a: &ValidateOptions, hip: &Fact<HipInfo>) -> (Vec<Check>, Vec<crate::bystander::Measured>) {
    let facts = facts::gather(&kfd::sysfs::SysRoot::default(), hip.clone());
    if let Err(why) = crate::doctor::verdict::gpu_path(&facts) {
        let skip = |name: &str| {
            Check::new(
                Category::Functional,
                name,
                Status::Skip,
                format!("skipped: no GPU ({why})"),
            )
        };
        return (
            vec![skip("preempt/resume cycles with correctness check"), skip(BYSTANDER)],
            Vec::new(),
        );
    }
    let devices = match hip.ok().map(|h| &h.devices) {
        Some(Fact::Ok(n)) if a.all_gpus => (0..*n).collect::<Vec<_>>(),
        _ => vec![0],
    };
    let mut out = Vec::new();
    let mut figures = Vec::new();
    for &d in &devices {
        for m in MechanismKind::AUTO_ORDER {
            out.push(functional_one(a, d, m));
        }
    }
    for &d in &devices {
        for m in MechanismKind::AUTO_ORDER {
            let (check, measured) = bystander_one(d, m);
            out.push(check);
            figures.extend(measured);
        }
    }
    (out, figures)
}

/// The bystander check of one GPU and mechanism; the bystander is this executable.
fn bystander_one(device: u32, mechanism: MechanismKind) -> (Check, Option<crate::bystander::Measured>) {
    let plan = crate::bystander::Plan::VALIDATE;
    let name = format!("hip:{device} Lv3 {mechanism}: bystander cost");
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            let why = format!("cannot find this executable to start the bystander: {e}");
            return (Check::new(Category::Functional, name, Status::Fail, why), None);
        }
    };
    match crate::gpu::bystander(device, mechanism, &plan, &program) {
        Ok(m) => (outcome(&name, Ok(m.summary())), Some(m)),
        Err(e) => (outcome(&name, Err(e)), None),
    }
}

fn functional_one(a: &ValidateOptions, device: u32, mechanism: MechanismKind) -> Check {
    let name = format!("hip:{device} Lv3 {mechanism}: {} cycles at T={} ms", a.cycles, a.t_ms);
    // After a stop, no new run: its set-up alone calibrates T with kernels of T.
    if crate::measure::control::stop_requested() {
        return outcome(&name, Err((true, "skipped: interrupted (Ctrl-C/SIGTERM)".into())));
    }
    outcome(
        &name,
        crate::gpu::functional(device, MechanismChoice::Only(mechanism), a.t_ms, a.cycles),
    )
}

/// A hardware check's line from its outcome: Ok(detail) passes; Err((true, why)) could not run
/// here (skip), Err((false, why)) ran and failed.
fn outcome(name: &str, r: Result<String, (bool, String)>) -> Check {
    match r {
        Ok(detail) => Check::new(Category::Functional, name, Status::Pass, detail),
        Err((true, why)) => Check::new(Category::Functional, name, Status::Skip, why),
        Err((false, why)) => Check::new(Category::Functional, name, Status::Fail, why),
    }
}
