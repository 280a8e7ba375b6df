//! The environment a result was measured in: written into every JSON/CSV output.
use preempt_api::{GracePeriod, Mechanism, MechanismKind};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// `host` or `hip:N`: host figures are never GPU figures.
    pub device: String,
    /// What the device is (CPU model for the host device, GPU name otherwise).
    pub device_detail: String,
    pub kernel: String,
    /// KFD ioctl version, if /dev/kfd opened.
    pub kfd_version: Option<String>,
    pub gfx_target: Option<String>,
    pub mechanism: String,
    /// The grace period that applied to Lv3's suspends: a number of ~1K GPU clocks, `default`
    /// (the firmware's), or `n/a (why)` where the mechanism has none (update-queue, SIGSTOP, Lv1).
    pub grace_period: String,
    pub cores: usize,
    pub git_revision: &'static str,
    pub tool_version: &'static str,
    /// Whether the figures are host figures (CPU worker processes), never GPU figures: set by
    /// [`host`], for every text, plot title and trace note that says so. Not written (the JSON
    /// says it through `device`; `output::is_host_device` reads it back from there).
    #[serde(skip)]
    pub host_figures: bool,
}

/// The git revision the binary was built from (set by the build, `unknown` otherwise).
pub fn git_revision() -> &'static str {
    option_env!("PREEMPT_GIT_REV").unwrap_or("unknown")
}

/// The running kernel's release (`uname -r`), empty if /proc is unreadable.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

impl Environment {
    /// The record of a run on `device` (`host` or `hip:N`); the kernel, KFD version, core count
    /// and revisions are read here, once for every device.
    pub fn new(
        device: String,
        device_detail: String,
        gfx_target: Option<String>,
        mechanism: &str,
        grace_period: String,
    ) -> Self {
        use kfd::{Kfd, KfdOps};
        Environment {
            device,
            device_detail,
            kernel: kernel_release(),
            kfd_version: Kfd::open().and_then(|k| k.version()).ok().map(|v| v.to_string()),
            gfx_target,
            mechanism: mechanism.into(),
            grace_period,
            cores: cores(),
            git_revision: git_revision(),
            tool_version: env!("CARGO_PKG_VERSION"),
            host_figures: false,
        }
    }
}

/// The environment of a host-device run.
pub fn host(mechanism: Mechanism) -> Environment {
    let detail = format!(
        "CPU worker processes on {} ({} cores); host figures, not GPU figures",
        cpu_model(),
        cores()
    );
    Environment {
        host_figures: true,
        ..Environment::new(
            "host".into(),
            detail,
            None,
            mechanism.name(),
            mechanism.grace_applied(GracePeriod::SHORTEST),
        )
    }
}

/// The record of a latency run, from what its device said of itself: a GPU's own words, or the
/// host device's record (the CPU this process runs on).
pub fn of_run(f: &preempt_api::latency::RunFacts) -> Environment {
    match &f.gpu {
        None => host(f.mechanism),
        Some(g) => Environment::new(
            g.device.clone(),
            g.detail.clone(),
            Some(g.gfx_target.clone()),
            f.mechanism.name(),
            f.grace_applied.clone(),
        ),
    }
}

/// The record of a run whose Lv3 mechanism is per session, on `d` (`priority`: the lv3 mode's;
/// Lv1 stops launching).
pub fn of_sessions(d: &preempt_api::SharedDevice) -> Environment {
    use preempt_api::{Lv1Suspend, MechanismChoice};
    let (mechanism, grace) = d.mechanism();
    match d.gpu() {
        None => {
            let mut env = host(Mechanism::Sigstop);
            env.mechanism = format!(
                "per mode: {} (lv3), {} (lv2), {} (lv1)",
                Mechanism::Sigstop,
                Mechanism::Lv2Hold,
                Lv1Suspend::Stop.name()
            );
            env
        }
        Some(gpu) => Environment::new(
            format!("hip:{}", gpu.device().info.index),
            format!(
                "{}; LP and HP commands are the light delay kernel over the whole grid",
                gpu.describe()
            ),
            Some(gpu.arch().offload_arch()),
            &format!(
                "per mode: lv3 {mechanism} (mechanism per mode row), lv1 {}",
                Lv1Suspend::Stop.name()
            ),
            match mechanism {
                MechanismChoice::Only(k) => gpu_grace(Some(k), grace),
                // auto: the mode rows say which mechanism ran.
                MechanismChoice::Auto => gpu_grace_auto(grace),
            },
        ),
    }
}

/// The grace period that applied on a GPU, for [`Environment::grace_period`]: the Lv3
/// mechanism's (`None`: an Lv1 run, which preempts nothing).
pub fn gpu_grace(mechanism: Option<MechanismKind>, asked: GracePeriod) -> String {
    mechanism
        .map_or(Mechanism::Launcher, Mechanism::Kfd)
        .grace_applied(asked)
}

/// [`gpu_grace`] before `auto` has chosen (the rows say which mechanism ran): what applies to
/// each mechanism, the lists built from lv3's own answer.
pub fn gpu_grace_auto(asked: GracePeriod) -> String {
    format!(
        "{asked} for {}; n/a for {}",
        MechanismKind::names_where(MechanismKind::sets_grace_period).join(" and "),
        MechanismKind::names_where(|k| !k.sets_grace_period()).join(" and ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::is_host_device;

    #[test]
    fn host_figures_are_data_and_not_written() {
        let h = host(Mechanism::Sigstop);
        assert!(h.host_figures && is_host_device(&h.device));
        let gpu = Environment::new("hip:0".into(), String::new(), None, "dbg-trap", String::new());
        assert!(!gpu.host_figures && !is_host_device(&gpu.device));
        assert!(!is_host_device("not a device"));
        let v = serde_json::to_value(&h).unwrap();
        assert!(v.get("host_figures").is_none(), "the JSON schema is unchanged: {v}");
    }

    #[test]
    fn the_grace_period_is_what_the_mechanism_applied() {
        let asked = GracePeriod::Clocks1k(1);
        assert_eq!(gpu_grace(None, asked), "n/a (Lv1: nothing is preempted)");
        for k in MechanismKind::AUTO_ORDER {
            let g = gpu_grace(Some(k), asked);
            if k.sets_grace_period() {
                assert_eq!(g, asked.to_string());
            } else {
                assert!(g.starts_with(&format!("n/a ({k} cannot set it")), "{g}");
            }
        }
        // Before auto chose, every mechanism is named once, on its side.
        let auto = gpu_grace_auto(asked);
        let (applies, na) = auto.split_once("; n/a for ").unwrap();
        for k in MechanismKind::AUTO_ORDER {
            let side = if k.sets_grace_period() { applies } else { na };
            assert!(side.contains(k.name()), "{k}: {auto}");
        }
    }
}
