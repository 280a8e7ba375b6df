//! Doctor on fixture trees and made-up facts.
use super::facts::{Fact, HipInfo};
use super::{report, verdict};
use kfd::sysfs::SysRoot;
use std::path::PathBuf;

fn fixture(name: &str) -> SysRoot {
    SysRoot::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../kfd/tests/fixtures")
            .join(name),
    )
}

fn hip(devices: Fact<u32>) -> Fact<HipInfo> {
    Fact::Ok(HipInfo {
        library: "libamdhip64.so.6".into(),
        origin: gpu_device::hip_rt::Origin::Opened {
            candidate: "libamdhip64.so.6".into(),
        }
        .to_string(),
        runtime_version: 60_342_134,
        devices,
    })
}

fn no_device() -> Fact<u32> {
    Fact::Err {
        error: "hipGetDeviceCount: hipErrorNoDevice (100)".into(),
    }
}

#[test]
fn empty_machine_says_host_device_plainly() {
    let r = report(&fixture("empty"), hip(no_device()));
    assert!(!r.gpu_usable);
    assert!(!r.facts.kfd_device_present);
    assert!(
        r.summary.contains("no usable AMD GPU here (no /dev/kfd"),
        "{}",
        r.summary
    );
    assert!(r.summary.contains("runs on the host device"), "{}", r.summary);
    let host: Vec<_> = r.levels.iter().filter(|l| l.device == "host").collect();
    assert_eq!(host.iter().map(|l| l.level).collect::<Vec<_>>(), [3, 2, 1]);
    assert!(host.iter().all(|l| l.available));
    for l in r.levels.iter().filter(|l| l.device == "hip") {
        assert!(!l.available);
        assert!(
            !l.reason.is_empty() && !l.reason.contains('\n'),
            "one line: {:?}",
            l.reason
        );
    }
    let lv3: Vec<_> = r
        .levels
        .iter()
        .filter(|l| l.device == "hip" && l.level == 3)
        .map(|l| l.mechanism)
        .collect();
    assert_eq!(
        lv3,
        preempt_api::MechanismKind::AUTO_ORDER.map(preempt_api::MechanismKind::name),
        "auto's probe order"
    );
}

#[test]
fn gfx942_fixture_without_dev_kfd_reports_the_node_but_no_gpu_path() {
    let r = report(&fixture("gfx942"), hip(no_device()));
    let gpus = r.facts.gpu_nodes();
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0].gfx_target.as_deref(), Some("gfx942"));
    assert_eq!(gpus[0].cu_count, 80);
    assert!(!r.gpu_usable, "no /dev/kfd in the fixture");
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["facts"]["nodes"][1]["gfx_target"], "gfx942");
    assert_eq!(v["facts"]["amdgpu_params"]["queue_preemption_timeout_ms"], 9000);
    assert_eq!(
        v["facts"]["kfd_version"]["error"]
            .as_str()
            .map(|s| s.contains("ENOENT")),
        Some(true)
    );
}

#[test]
fn verdict_names_the_first_missing_prerequisite() {
    let mut f = report(&fixture("gfx942"), hip(Fact::Ok(1))).facts;
    // Pretend /dev/kfd opened on this gfx942 node.
    f.kfd_device_present = true;
    f.kfd_version = Fact::Ok("1.17".into());
    f.kfd_minor = Some(17);
    assert!(verdict::gpu_path(&f).is_ok());

    let find = |f: &super::facts::Facts, m: &str| {
        verdict::availability(f)
            .into_iter()
            .find(|a| a.mechanism == m && a.device == "hip")
            .unwrap()
    };
    if let Fact::Ok(p) = &mut f.amdgpu_params {
        p.sched_policy = Some(2);
    }
    assert!(find(&f, "dbg-trap").reason.contains("sched_policy=2"));
    if let Fact::Ok(p) = &mut f.amdgpu_params {
        p.sched_policy = Some(0);
        p.cwsr_enable = Some(0);
    }
    assert!(find(&f, "update-queue").reason.contains("cwsr_enable=0"));
    f.hip = hip(no_device());
    assert!(find(&f, "update-queue").reason.contains("hipErrorNoDevice"));
    f.kfd_version = Fact::Err {
        error: "open(/dev/kfd): EACCES".into(),
    };
    assert!(verdict::gpu_path(&f).unwrap_err().to_string().contains("does not open"));
}

#[test]
fn a_usable_gpu_makes_the_stock_mechanisms_available_and_says_unverified() {
    let mut f = report(&fixture("gfx942"), hip(Fact::Ok(1))).facts;
    f.kfd_device_present = true;
    f.kfd_version = Fact::Ok("1.17".into());
    f.kfd_minor = Some(17);
    f.patched_ioctl = Some(false);
    let levels = verdict::availability(&f);
    let get = |m: &str| levels.iter().find(|a| a.device == "hip" && a.mechanism == m).unwrap();
    for m in ["dbg-trap", "update-queue", "progressive-launch"] {
        assert!(get(m).available, "{m}: {}", get(m).reason);
        assert!(get(m).reason.contains("not yet on hardware"), "{m}: {}", get(m).reason);
    }
    assert!(
        !get("preempt-queues").available,
        "stock kernel: the patched ioctl is absent"
    );
    // A usable GPU still has no Lv2: the row says why and where, in the API's words.
    let lv2 = levels.iter().find(|a| a.device == "hip" && a.level == 2).unwrap();
    assert!(!lv2.available && lv2.reason == preempt_api::LV2_ON_GPU_WHY, "{lv2:?}");
    f.patched_ioctl = Some(true);
    assert!(
        verdict::availability(&f)
            .iter()
            .any(|a| a.mechanism == "preempt-queues" && a.available)
    );
}

/// On ROCm's DKMS driver the probe of nr 0x40 answers EINVAL (a hole in its command table); doctor
/// must call that "absent" and say which answer it saw.
#[test]
fn doctor_says_which_absent_answer_the_kernel_gave() {
    use kfd::PreemptProbe;
    use lv3::mechanism::preempt_queues::availability_of;
    let mut r = report(&fixture("gfx942"), hip(no_device()));
    for (probe, want) in [
        (PreemptProbe::AbsentEnotty, "ENOTTY"),
        (PreemptProbe::AbsentEinval, "DKMS"),
    ] {
        r.facts.preempt_ioctl = Some(availability_of(Ok(probe)));
        r.facts.patched_ioctl = Some(false);
        let mut out = Vec::new();
        super::render::text(&r, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let line = out.lines().find(|l| l.starts_with("preempt ioctl:")).unwrap();
        assert!(line.contains(want), "{probe:?}: {line}");
        assert!(line.contains("not the project's patched kernel"), "{line}");
    }
}

/// Doctor says which libamdhip64 hip-rt uses and why (joined the runtime in the process, or opened
/// a candidate).
#[test]
fn doctor_says_which_hip_library_and_why() {
    let mut r = report(&fixture("empty"), hip(no_device()));
    let joined = gpu_device::hip_rt::Origin::InProcess {
        probe: "libamdhip64.so.6".into(),
    };
    if let Fact::Ok(h) = &mut r.facts.hip {
        h.library = "/env/torch/lib/libamdhip64.so".into();
        h.origin = joined.to_string();
    }
    let mut out = Vec::new();
    super::render::text(&r, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let line = out.lines().find(|l| l.starts_with("HIP runtime:")).unwrap();
    assert!(line.contains("/env/torch/lib/libamdhip64.so"), "{line}");
    assert!(line.ends_with(&joined.to_string()), "{line}");
}

/// With several GPUs every debug enable/disable refreshes all their runlists.
#[test]
fn multi_gpu_note_only_when_the_process_is_not_restricted() {
    use super::verdict::multi_gpu_note;
    assert!(multi_gpu_note(1, None, None).is_none());
    let n = multi_gpu_note(8, None, None).unwrap();
    assert!(n.contains("8 GPUs") && n.contains("ROCR_VISIBLE_DEVICES"), "{n}");
    assert!(multi_gpu_note(8, Some("3"), None).is_none());
    assert!(multi_gpu_note(8, None, Some("0")).is_none());
    assert!(
        multi_gpu_note(8, Some(""), None).is_some(),
        "an empty variable restricts nothing"
    );
}
