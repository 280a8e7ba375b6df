//! `--mechanism auto`: which mechanism to use here, and why not the others.
//!
//! The order is the robustness order: `preempt-queues` (a patched kernel: one queue, a flag nothing else
//! undoes), then `dbg-trap` (`is_suspended`, which ROCr's scratch reclaim cannot undo), then
//! `update-queue` (works everywhere, but ROCr's scratch reclaim may re-enable the queue behind
//! our back when its kernels use scratch, and an application's LP kernels are arbitrary).
//! `preempt-queues` is usable only where the kernel answers its probe (`Kfd::has_preempt_ioctl`):
//! every stock kernel says ENOTTY.
//!
//! [`probe_order`] is pure (facts in, verdicts out) so every rule has a unit test; the facts are
//! gathered once by [`ProbeFacts::gather`]. Facts cannot see everything: dbg-trap's setup can
//! still fail at run time (EALREADY when rocgdb debugs the process), so [`build_auto`] falls
//! back to the next usable mechanism and reports why.
use super::{DbgTrap, MechError, MechanismKind, Preempt, PreemptQueues, UpdateQueue};
use kfd::sysfs::{self, AmdgpuParams, SysRoot};
use kfd::{GracePeriod, Kfd, KfdError, KfdOps, KfdVersion};
use std::fmt;
use std::sync::Arc;

/// What the choice depends on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeFacts {
    /// GET_VERSION, or why /dev/kfd could not be asked.
    pub kfd: Option<Result<KfdVersion, String>>,
    /// amdgpu's `sched_policy` (2 = no HWS: the debugger API refuses with EINVAL).
    pub sched_policy: Option<i32>,
    /// amdgpu's `cwsr_enable` (0 = waves are drained, not saved: not Lv3).
    pub cwsr_enable: Option<i32>,
    /// GPU nodes in the KFD topology.
    pub gpu_nodes: usize,
    /// Every GPU node has TRAP_DEBUG_SUPPORT (capability 0x8000).
    pub trap_debug_support: bool,
    /// Every GPU node has TRAP_DEBUG_FIRMWARE_SUPPORTED (0x20000000); without it ROCr does not
    /// enable the runtime, and a HIP process can then never enable it (EEXIST once queues exist).
    pub trap_debug_firmware: bool,
    /// Whether the patched-kernel ioctl answered a probe (`None`: not probed, or the probe
    /// failed for another reason than ENOTTY).
    pub patched_ioctl: Option<bool>,
}

impl ProbeFacts {
    /// Reads the facts of this machine: GET_VERSION, the module parameters, the topology.
    pub fn gather(root: &SysRoot) -> Self {
        let handle = Kfd::open();
        let patched_ioctl = handle.as_ref().ok().and_then(|k| k.has_preempt_ioctl().ok());
        let kfd = Some(handle.and_then(|k| k.version()).map_err(|e: KfdError| e.to_string()));
        let params = AmdgpuParams::read(root).ok();
        let gpus: Vec<_> = sysfs::topology_nodes(root)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.is_gpu())
            .collect();
        ProbeFacts {
            kfd,
            sched_policy: params.as_ref().and_then(|p| p.sched_policy),
            cwsr_enable: params.as_ref().and_then(|p| p.cwsr_enable),
            gpu_nodes: gpus.len(),
            trap_debug_support: !gpus.is_empty() && gpus.iter().all(|n| n.capability.trap_debug_support),
            trap_debug_firmware: !gpus.is_empty() && gpus.iter().all(|n| n.capability.trap_debug_firmware_supported),
            patched_ioctl,
        }
    }
}

/// One mechanism's verdict: usable, or one line saying why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub kind: MechanismKind,
    pub why_not: Option<String>,
}

impl Verdict {
    pub fn usable(&self) -> bool {
        self.why_not.is_none()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.why_not {
            None => write!(f, "{}: usable", self.kind),
            Some(w) => write!(f, "{}: not usable: {w}", self.kind),
        }
    }
}

/// Why no Lv3 mechanism can work here at all, if so.
fn common_obstacle(f: &ProbeFacts) -> Option<String> {
    match &f.kfd {
        None => return Some("KFD not probed".into()),
        Some(Err(e)) => return Some(format!("no KFD: {e}")),
        Some(Ok(_)) => {}
    }
    if f.gpu_nodes == 0 {
        return Some("no GPU node in the KFD topology (no queues can exist)".into());
    }
    if f.cwsr_enable == Some(0) {
        return Some("cwsr_enable=0: preemption drains waves instead of saving them, which is not Lv3".into());
    }
    None
}

fn why_not(kind: MechanismKind, f: &ProbeFacts) -> Option<String> {
    if let Some(w) = common_obstacle(f) {
        return Some(w);
    }
    match kind {
        MechanismKind::PreemptQueues => match f.patched_ioctl {
            Some(true) => None,
            Some(false) => Some("needs the project's patched kernel (patches/): this kernel answers ENOTTY".into()),
            None => Some("needs the project's patched kernel (patches/); not probed".into()),
        },
        MechanismKind::DbgTrap => {
            let v = f.kfd.as_ref().and_then(|r| r.as_ref().ok()).copied()?;
            if !v.has_debugger_api() {
                Some(format!("KFD {v} predates the debugger API (needs 1.13, Linux 6.5)"))
            } else if f.sched_policy == Some(2) {
                Some("sched_policy=2 (no HWS): the kernel refuses the debugger API with EINVAL".into())
            } else if !f.trap_debug_support {
                Some("a GPU node lacks TRAP_DEBUG_SUPPORT (topology capability 0x8000)".into())
            } else if !f.trap_debug_firmware {
                Some(
                    "a GPU node's firmware is not debug-capable (capability 0x20000000): ROCr skips RUNTIME_ENABLE"
                        .into(),
                )
            } else {
                None
            }
        }
        MechanismKind::UpdateQueue => None,
    }
}

/// Every mechanism in `auto` order with its verdict.
pub fn probe_order(f: &ProbeFacts) -> Vec<Verdict> {
    MechanismKind::AUTO_ORDER
        .into_iter()
        .map(|kind| Verdict {
            kind,
            why_not: why_not(kind, f),
        })
        .collect()
}

/// The first usable mechanism, or every verdict (all unusable) to print one line each.
pub fn choose(f: &ProbeFacts) -> Result<MechanismKind, Vec<Verdict>> {
    let all = probe_order(f);
    all.iter().find(|v| v.usable()).map(|v| v.kind).ok_or(all)
}

/// Builds one mechanism over `kfd` (dbg-trap runs its setup now).
pub fn build<K: KfdOps + Send + Sync + 'static>(
    kind: MechanismKind,
    kfd: K,
    grace: GracePeriod,
) -> Result<Arc<dyn Preempt>, MechError> {
    Ok(match kind {
        MechanismKind::PreemptQueues => Arc::new(PreemptQueues::new(kfd, grace)?),
        MechanismKind::DbgTrap => Arc::new(DbgTrap::setup(kfd, grace)?),
        MechanismKind::UpdateQueue => Arc::new(UpdateQueue::new(kfd)),
    })
}

/// A built mechanism and one line per mechanism skipped before it.
pub type Built = (Arc<dyn Preempt>, Vec<String>);

/// `--mechanism auto`: builds the first usable mechanism whose setup succeeds, opening a KFD
/// handle per attempt. Returns it with one line per mechanism skipped (facts or setup failure);
/// if none works, all those lines.
pub fn build_auto<K, O>(f: &ProbeFacts, mut open: O, grace: GracePeriod) -> Result<Built, Vec<String>>
where
    K: KfdOps + Send + Sync + 'static,
    O: FnMut() -> Result<K, KfdError>,
{
    let mut skipped = Vec::new();
    for v in probe_order(f) {
        if !v.usable() {
            skipped.push(v.to_string());
            continue;
        }
        match open()
            .map_err(|e| e.to_string())
            .and_then(|k| build(v.kind, k, grace).map_err(|e| e.to_string()))
        {
            Ok(m) => return Ok((m, skipped)),
            Err(e) => skipped.push(format!("{}: setup failed: {e}", v.kind)),
        }
    }
    Err(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mi300() -> ProbeFacts {
        ProbeFacts {
            kfd: Some(Ok(KfdVersion { major: 1, minor: 17 })),
            sched_policy: Some(0),
            cwsr_enable: Some(1),
            gpu_nodes: 1,
            trap_debug_support: true,
            trap_debug_firmware: true,
            patched_ioctl: None,
        }
    }

    #[test]
    fn a_stock_mi300_picks_dbg_trap_and_says_why_not_preempt_queues() {
        assert_eq!(choose(&mi300()), Ok(MechanismKind::DbgTrap));
        let v = probe_order(&mi300());
        assert_eq!(v.iter().map(|v| v.kind).collect::<Vec<_>>(), MechanismKind::AUTO_ORDER);
        assert!(
            v[0].to_string()
                .starts_with("preempt-queues: not usable: needs the project's patched kernel"),
            "{}",
            v[0]
        );
        assert_eq!(v[1].to_string(), "dbg-trap: usable");
        assert!(v[2].usable());
    }

    #[test]
    fn a_patched_kernel_picks_preempt_queues_even_where_dbg_trap_cannot() {
        let patched = ProbeFacts {
            patched_ioctl: Some(true),
            ..mi300()
        };
        assert_eq!(choose(&patched), Ok(MechanismKind::PreemptQueues));
        assert_eq!(probe_order(&patched)[0].to_string(), "preempt-queues: usable");
        // No HWS and no debug firmware: the ioctl still works (per-queue dequeue), dbg-trap not.
        let nohws = ProbeFacts {
            sched_policy: Some(2),
            trap_debug_firmware: false,
            ..patched.clone()
        };
        assert_eq!(choose(&nohws), Ok(MechanismKind::PreemptQueues));
        let stock = ProbeFacts {
            patched_ioctl: Some(false),
            ..mi300()
        };
        assert!(
            probe_order(&stock)[0].to_string().contains("answers ENOTTY"),
            "{}",
            probe_order(&stock)[0]
        );
        // Common obstacles still win: a patched kernel without a GPU has nothing to preempt.
        let qemu = ProbeFacts {
            gpu_nodes: 0,
            ..patched
        };
        assert!(choose(&qemu).is_err());
    }

    #[test]
    fn dbg_trap_rules_fall_back_to_update_queue() {
        type Tweak = (fn(&mut ProbeFacts), &'static str);
        let cases: [Tweak; 4] = [
            (
                |f| f.kfd = Some(Ok(KfdVersion { major: 1, minor: 11 })),
                "predates the debugger API",
            ),
            (|f| f.sched_policy = Some(2), "sched_policy=2"),
            (|f| f.trap_debug_support = false, "TRAP_DEBUG_SUPPORT"),
            (|f| f.trap_debug_firmware = false, "not debug-capable"),
        ];
        for (tweak, want) in cases {
            let mut f = mi300();
            tweak(&mut f);
            assert_eq!(choose(&f), Ok(MechanismKind::UpdateQueue), "{want}");
            let line = probe_order(&f)[1].to_string();
            assert!(line.contains(want) && !line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn nothing_usable_lists_every_mechanism_once() {
        let mut qemu = mi300();
        qemu.gpu_nodes = 0;
        let all = choose(&qemu).unwrap_err();
        assert_eq!(all.len(), MechanismKind::AUTO_ORDER.len());
        assert!(all.iter().all(|v| v.to_string().contains("no GPU node")), "{all:?}");
        let no_kfd = ProbeFacts {
            kfd: Some(Err("open(/dev/kfd): ENOENT".into())),
            ..mi300()
        };
        assert!(
            choose(&no_kfd)
                .unwrap_err()
                .iter()
                .all(|v| v.to_string().contains("no KFD: open(/dev/kfd)"))
        );
        let drain = ProbeFacts {
            cwsr_enable: Some(0),
            ..mi300()
        };
        assert!(choose(&drain).is_err());
        assert!(choose(&ProbeFacts::default()).is_err(), "unprobed facts choose nothing");
    }

    #[test]
    fn names_round_trip() {
        use super::super::MechanismChoice;
        for k in MechanismKind::AUTO_ORDER {
            assert_eq!(MechanismKind::from_name(k.name()), Some(k));
            assert_eq!(k.to_string().parse::<MechanismKind>(), Ok(k));
            assert_eq!(k.to_string().parse::<MechanismChoice>(), Ok(MechanismChoice::Only(k)));
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
        }
        assert_eq!(MechanismKind::from_name("auto"), None);
        assert_eq!("auto".parse::<MechanismChoice>(), Ok(MechanismChoice::Auto));
        assert_eq!(MechanismChoice::Auto.to_string(), "auto");
        // MechanismChoice refuses with MechanismKind's wording (every mechanism listed).
        let e = "sigstop".parse::<MechanismChoice>().unwrap_err();
        assert_eq!(e, super::super::UnknownMechanism("sigstop".into()));
        for k in MechanismKind::AUTO_ORDER {
            assert!(e.to_string().contains(k.name()), "{e}");
        }
    }
}
