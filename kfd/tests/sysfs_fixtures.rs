//! The sysfs readers on checked-in fixture trees (see fixtures/README.md).
use kfd::sysfs::{self, AmdgpuParams, SysRoot, SysfsErrorKind};
use std::path::PathBuf;

fn root(name: &str) -> SysRoot {
    SysRoot::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
}

#[test]
fn gfx942_node_is_decoded() {
    let nodes = sysfs::topology_nodes(&root("gfx942")).unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(!nodes[0].is_gpu());
    let g = &nodes[1];
    assert!(g.is_gpu());
    assert_eq!(g.gpu_id, 48063);
    assert_eq!(g.name, "aqua_vanjaram");
    let t = g.gfx_target.unwrap();
    assert_eq!(t.name(), "gfx942");
    assert!(t.is_gfx94x());
    assert_eq!((g.num_xcc, g.simd_count, g.simd_per_cu, g.cu_count()), (4, 320, 4, 80));
    assert_eq!(g.drm_render_minor, 128);
    assert!(g.capability.trap_debug_support);
    assert!(g.capability.trap_debug_firmware_supported);
    assert_eq!(g.properties["num_cp_queues"], 64);
}

#[test]
fn cwsr_sizes_follow_the_kernel_formula_and_match_the_node() {
    let nodes = sysfs::topology_nodes(&root("gfx942")).unwrap();
    let g = &nodes[1];
    let s = sysfs::cwsr_sizes(g).unwrap();
    assert_eq!(s.ctl_stack_size, g.ctl_stack_size);
    assert_eq!(s.cwsr_size, g.cwsr_size);
    // Per CU 0x95000 bytes of wave state on gfx942 (VGPR+AGPR 512 KiB, SGPR 16 KiB, LDS 64 KiB,
    // HWREG 4 KiB), 20 CUs per XCC, plus the control stack page(s).
    assert_eq!(g.cwsr_size, 20 * 0x95000 + g.ctl_stack_size);
    // 800 waves x 32 bytes of debugger area per XCC, 4 XCCs: ~46.7 MiB per queue on 80 CUs.
    assert_eq!(g.save_area_bytes(), (g.cwsr_size + 800 * 32) * 4);
    assert!(sysfs::cwsr_sizes(&nodes[0]).is_none(), "a CPU node has no CWSR area");
}

#[test]
fn gfx90a_and_gfx1100_names() {
    assert_eq!(sysfs::GfxTarget::from_version(90010).unwrap().name(), "gfx90a");
    assert_eq!(sysfs::GfxTarget::from_version(110000).unwrap().name(), "gfx1100");
    assert_eq!(sysfs::GfxTarget::from_version(0), None);
}

#[test]
fn cpu_only_tree_like_the_qemu_guest() {
    let nodes = sysfs::topology_nodes(&root("cpu-only")).unwrap();
    assert_eq!(nodes.len(), 1);
    assert!(!nodes[0].is_gpu());
    assert_eq!(nodes[0].gfx_target, None);
    assert_eq!(nodes[0].cu_count(), 0);
    let p = AmdgpuParams::read(&root("cpu-only")).unwrap();
    assert_eq!(
        (
            p.sched_policy,
            p.cwsr_enable,
            p.hws_max_conc_proc,
            p.mes,
            p.queue_preemption_timeout_ms
        ),
        (Some(0), Some(1), Some(-1), Some(0), Some(9000))
    );
}

#[test]
fn module_parameters_and_absent_module() {
    let p = AmdgpuParams::read(&root("gfx942")).unwrap();
    assert_eq!(p.sched_policy, Some(0));
    assert!(AmdgpuParams::module_loaded(&root("gfx942")));
    let none = AmdgpuParams::read(&root("empty")).unwrap();
    assert_eq!(none.sched_policy, None);
    assert!(!AmdgpuParams::module_loaded(&root("empty")));
}

#[test]
fn proc_queues_without_trailing_newlines() {
    let q = sysfs::proc_queues(&root("gfx942"), 4242).unwrap();
    assert_eq!(q.len(), 2);
    assert_eq!(
        (q[0].queue_id, q[0].size, q[0].queue_type, q[0].gpu_id),
        (3, 1 << 20, 2, 48063)
    );
    assert_eq!((q[1].queue_id, q[1].size), (5, 1024));
    assert!(
        sysfs::proc_queues(&root("gfx942"), 1).unwrap().is_empty(),
        "no KFD context = no queues"
    );
}

#[test]
fn a_kfd_without_a_proc_directory_is_an_error_not_an_empty_queue_list() {
    // cpu-only has a KFD topology but no sys/class/kfd/kfd/proc: nothing says which queues exist.
    let e = sysfs::proc_queues(&root("cpu-only"), 1).unwrap_err();
    assert_eq!(e.kind, SysfsErrorKind::Missing);
    assert!(e.path.ends_with("sys/class/kfd/kfd/proc"), "{e}");
    assert!(e.to_string().contains("kfd/kfd/proc: does not exist"), "{e}");
}

#[test]
fn no_kfd_is_a_missing_error_naming_the_directory() {
    let e = sysfs::topology_nodes(&root("empty")).unwrap_err();
    assert_eq!(e.kind, SysfsErrorKind::Missing);
    assert!(e.to_string().contains("topology/nodes: does not exist"), "{e}");
}

#[test]
fn malformed_files_give_clear_errors() {
    let e = sysfs::topology_nodes(&root("garbage-properties")).unwrap_err();
    assert!(matches!(e.kind, SysfsErrorKind::Malformed(_)));
    assert!(e.to_string().contains("line 2: expected 'key value'"), "{e}");

    let e = sysfs::topology_nodes(&root("truncated-properties")).unwrap_err();
    // Cut before `capability`: the first required GPU key after the cut is `num_xcc`.
    assert_eq!(e.kind, SysfsErrorKind::MissingKey("num_xcc"));
    assert!(e.to_string().contains("has no 'num_xcc' line (truncated file?)"), "{e}");

    let e = sysfs::topology_nodes(&root("non-numeric-value")).unwrap_err();
    assert!(
        e.to_string().contains("'simd_count' has a non-integer value \"many\""),
        "{e}"
    );

    let e = sysfs::topology_nodes(&root("bad-values")).unwrap_err();
    assert!(
        e.path.ends_with("gpu_id") && e.to_string().contains("expected an integer, found \"zero\""),
        "{e}"
    );

    let e = AmdgpuParams::read(&root("bad-values")).unwrap_err();
    assert!(e.path.ends_with("sched_policy"), "{e}");

    let e = sysfs::proc_queues(&root("bad-values"), 7).unwrap_err();
    assert!(e.to_string().contains("found \"12x\""), "{e}");
}

#[test]
fn a_queue_node_names_one_queue_object_and_changes_when_the_id_is_reused() {
    // Fixture: process 4242 has queues 3 and 5; the listing carries each queue's node.
    let q = sysfs::proc_queues(&root("gfx942"), 4242).unwrap();
    assert!(q.iter().all(|q| q.node.is_some()), "{q:?}");
    assert_eq!(
        sysfs::queue_node(&root("gfx942"), 4242, 3).unwrap(),
        q[0].node,
        "one stat gives the node the listing saw"
    );
    assert_eq!(sysfs::queue_node(&root("gfx942"), 4242, 4).unwrap(), None, "no queue 4");
    assert_eq!(
        sysfs::queue_node(&root("gfx942"), 1, 3).unwrap(),
        None,
        "no KFD context"
    );
    // A KFD without the proc directory cannot say whether the queue exists.
    let e = sysfs::queue_node(&root("cpu-only"), 1, 3).unwrap_err();
    assert!(
        e.path.ends_with("sys/class/kfd/kfd/proc") && e.kind == SysfsErrorKind::Missing,
        "{e}"
    );

    let fake = kfd::testing::FakeProcQueues::new(77);
    fake.create(4, 0xbeef);
    let first = sysfs::queue_node(&fake.root(), 77, 4).unwrap().unwrap();
    assert_eq!(
        sysfs::queue_node(&fake.root(), 77, 4).unwrap(),
        Some(first),
        "stable while it lives"
    );
    let dir = sysfs::QueueDir::open(&fake.root(), 77).unwrap();
    assert_eq!(
        dir.node(4).unwrap(),
        Some(first),
        "the open directory sees the same node"
    );
    fake.replace(4);
    let second = sysfs::queue_node(&fake.root(), 77, 4).unwrap().unwrap();
    assert_ne!(second, first, "the same id, another queue object");
    assert_eq!(
        dir.node(4).unwrap(),
        Some(second),
        "and so does the directory held open"
    );
    let listed = sysfs::proc_queues(&fake.root(), 77).unwrap();
    assert_eq!((listed.len(), listed[0].node), (1, Some(second)));
    fake.destroy(4);
    assert_eq!(sysfs::queue_node(&fake.root(), 77, 4).unwrap(), None);
    assert_eq!(dir.node(4).unwrap(), None);
    // No KFD context, or no queue list at all: errors naming what is missing.
    let e = sysfs::QueueDir::open(&fake.root(), 78).unwrap_err();
    assert!(
        e.kind == SysfsErrorKind::Missing && e.path.ends_with("proc/78/queues"),
        "{e}"
    );
    let e = sysfs::QueueDir::open(&root("cpu-only"), 78).unwrap_err();
    assert!(
        e.kind == SysfsErrorKind::Missing && e.path.ends_with("kfd/kfd/proc"),
        "{e}"
    );
}
