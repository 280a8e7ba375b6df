//! The kfd crate against a real amdkfd. These run wherever `/dev/kfd` opens: in the project's
//! QEMU guest (Linux 6.12, amdgpu+amdkfd built in, no GPU), where the harness sets
//! `PREEMPT_REQUIRE_KFD=1` so that a missing /dev/kfd fails instead of skipping, and
//! `PREEMPT_EXPECT_KFD_VERSION` to the version of the booted kernel's own header.
//!
//! KFD state is per process and these tests change it (runtime enable, debug trap), so the
//! stateful sequence is one test, and the harness runs the binary with --test-threads=1.
//!
//! `PREEMPT_EXPECT_DKMS=1` (the guest of `scripts/qemu/run-guest-tests-dkms.sh`): the driver is
//! ROCm's amdgpu-dkms, whose own answers differ where noted.
use kfd::sysfs::{self, SysRoot};
use kfd::{DbgOp, EC_QUEUE_NEW_MASK, GracePeriod, KfdOps, Op, QueueState};
use nix::errno::Errno;

use kfd::testing::kfd_or_skip;

/// ROCm's out-of-tree amdgpu (amdgpu-dkms) rather than an upstream kernel.
fn dkms() -> bool {
    std::env::var_os("PREEMPT_EXPECT_DKMS").is_some()
}

#[test]
fn version_is_the_booted_kernels() {
    let Some(kfd) = kfd_or_skip("version_is_the_booted_kernels") else {
        return;
    };
    let v = kfd.version().unwrap();
    assert!(v.has_debugger_api(), "KFD {v} predates the debugger API");
    if let Ok(want) = std::env::var("PREEMPT_EXPECT_KFD_VERSION") {
        assert_eq!(v.to_string(), want);
    }
    eprintln!("observed: GET_VERSION -> {v}");
}

#[test]
fn topology_is_cpu_only_without_a_gpu() {
    let Some(_kfd) = kfd_or_skip("topology_is_cpu_only_without_a_gpu") else {
        return;
    };
    let nodes = sysfs::topology_nodes(&SysRoot::default()).unwrap();
    assert!(!nodes.is_empty());
    if std::env::var_os("PREEMPT_REQUIRE_KFD").is_some() {
        // The QEMU guest has no GPU: amdkfd publishes a virtual CRAT with CPU nodes only.
        assert!(nodes.iter().all(|n| !n.is_gpu()), "{nodes:?}");
    }
    eprintln!(
        "observed: {} topology node(s), {} GPU(s)",
        nodes.len(),
        nodes.iter().filter(|n| n.is_gpu()).count()
    );
}

/// nr 0x7f (ENOTTY), the forked child (EBADF) and UPDATE_QUEUE's argument checks are kernel
/// facts in lv3's conformance probes (lv3/tests/conformance_kernel.rs); here: the probe API.
#[test]
fn probe_api_refuses_real_ioctl_numbers() {
    let Some(kfd) = kfd_or_skip("probe_api_refuses_real_ioctl_numbers") else {
        return;
    };
    // Upstream's kfd_ioctl() answers a number outside its table ENOTTY; amdgpu-dkms's EINVAL.
    let unknown = if dkms() { Errno::EINVAL } else { Errno::ENOTTY };
    assert_eq!(
        kfd.probe_nr_errno(0).unwrap(),
        Some(unknown),
        "nr 0 is below AMDKFD_COMMAND_START"
    );
    assert!(!kfd.probe_nr(0x7f).unwrap(), "nr 0x7f must probe as absent");
    let e = kfd.probe_nr(0x07).unwrap_err();
    assert!(
        e.to_string().contains("refused"),
        "a real ioctl must never be probed with zeroes: {e}"
    );
    assert!(
        kfd.probe_nr_errno(0x26).is_err(),
        "DBG_TRAP (0x26) is this header's own: refused, not sent"
    );
    eprintln!("observed: nr 0x00 -> {unknown}; real numbers refused without a call");
}

#[test]
fn debugger_api_sequence_on_self() {
    let Some(kfd) = kfd_or_skip("debugger_api_sequence_on_self") else {
        return;
    };
    let (_rd, wr) = nix::unistd::pipe().unwrap();

    // Any op before ENABLE: EINVAL.
    let e = kfd.suspend_queues(&[0xdead], GracePeriod::Default, 0).unwrap_err();
    assert_eq!((e.op, e.errno), (Op::DbgTrap(DbgOp::SuspendQueues), Errno::EINVAL));
    eprintln!("observed: SUSPEND_QUEUES before ENABLE -> {}", e.errno);

    // Runtime first: after a debug ENABLE it would block until a debugger acknowledges.
    let caps = kfd.runtime_enable(0).unwrap();
    eprintln!("observed: RUNTIME_ENABLE -> ok, capabilities 0x{caps:x}");
    let e = kfd.runtime_enable(0).unwrap_err();
    assert_eq!(e.errno, Errno::EBUSY, "{e}");
    eprintln!("observed: RUNTIME_ENABLE again -> {}", e.errno);

    let info = kfd.dbg_enable(!0, std::os::fd::AsFd::as_fd(&wr)).unwrap();
    assert_eq!(
        info.runtime_state, 1,
        "DEBUG_RUNTIME_STATE_ENABLED after RUNTIME_ENABLE: {info:?}"
    );
    eprintln!("observed: DBG_TRAP ENABLE (self) -> ok, {info:?}");

    let e = kfd.dbg_enable(!0, std::os::fd::AsFd::as_fd(&wr)).unwrap_err();
    assert_eq!((e.op, e.errno), (Op::DbgTrap(DbgOp::Enable), Errno::EALREADY));
    assert!(e.to_string().contains("already on"), "{e}");
    eprintln!("observed: DBG_TRAP ENABLE again -> {}", e.errno);

    let snap = kfd.queue_snapshot(EC_QUEUE_NEW_MASK).unwrap();
    assert!(snap.is_empty(), "no GPU, no queues: {snap:?}");
    eprintln!("observed: GET_QUEUE_SNAPSHOT -> {} queues", snap.len());

    let st = kfd
        .suspend_queues(&[0xdead, 7], GracePeriod::Clocks1k(1), EC_QUEUE_NEW_MASK)
        .unwrap();
    assert_eq!(
        st.iter().map(|s| (s.id, s.state)).collect::<Vec<_>>(),
        vec![(0xdead, QueueState::Invalid), (7, QueueState::Invalid)]
    );
    eprintln!("observed: SUSPEND_QUEUES bogus ids -> ok, all INVALID");
    let st = kfd.resume_queues(&[0xdead]).unwrap();
    assert_eq!(st[0].state, QueueState::Invalid);
    eprintln!("observed: RESUME_QUEUES bogus id -> ok, INVALID");

    let too_many: Vec<u32> = (0..1025).collect();
    if dkms() {
        // amdgpu-dkms 6.4.1's get_queue_ids() lacks upstream's KFD_MAX_NUM_OF_QUEUES_PER_PROCESS
        // limit: the ids are copied whatever their number, and none names a queue here.
        let st = kfd.suspend_queues(&too_many, GracePeriod::Default, 0).unwrap();
        assert!(st.len() == 1025 && st.iter().all(|s| s.state == QueueState::Invalid));
        eprintln!("observed: SUSPEND_QUEUES 1025 ids -> ok, all INVALID (amdgpu-dkms: no limit)");
    } else {
        let e = kfd.suspend_queues(&too_many, GracePeriod::Default, 0).unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL);
        eprintln!("observed: SUSPEND_QUEUES 1025 ids -> {}", e.errno);
    }

    let e = kfd.query_debug_event(!0).unwrap_err();
    eprintln!("observed: QUERY_DEBUG_EVENT with nothing pending -> {}", e.errno);
    assert_eq!(e.errno, Errno::EAGAIN);

    kfd.dbg_disable().unwrap();
    eprintln!("observed: DBG_TRAP DISABLE -> ok");
    let e = kfd.queue_snapshot(0).unwrap_err();
    assert_eq!(e.errno, Errno::EINVAL);
    eprintln!("observed: GET_QUEUE_SNAPSHOT after DISABLE -> {}", e.errno);
}
