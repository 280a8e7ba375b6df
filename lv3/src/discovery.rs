//! Which KFD queue is behind a HIP stream: pure logic over the queue sets taken just before and
//! just after the stream's creation, from two independent sources.
//!
//! There is no public API from a stream to its KFD queue (docs/kfd-facts.md#stream-to-kfd-queue-id, "Stream -> KFD queue
//! id"). The stock way is a diff: take `/sys/class/kfd/kfd/proc/<pid>/queues` (ids, type, size,
//! gpu id; world-readable) and GET_QUEUE_SNAPSHOT (the same plus the ring address, which only the
//! snapshot gives; needs the debug trap on) before and after creating a stream that gets a queue
//! of its own (`hipExtStreamCreateWithCUMask`), and require that exactly one new compute queue
//! appeared, the same one in both sources. Anything else is refused with a reason, because
//! preempting the wrong queue would measure (and stall) something else.
//!
//! The caller must make everything else that creates queues happen before the "before" sets:
//! ROCr's utility queue (created with the first user queue of an agent), the HP stream's queue,
//! and any blit/copy queue the warm-up work needs.
//!
//! Long because the diff, its reading of the sysfs table and the checks a candidate must pass are
//! one procedure, each step's reason beside it.
use kfd::sysfs::ProcQueue;
use kfd::{QueueId, QueueSnapshot, QueueType};
use std::collections::BTreeMap;
use std::fmt;

/// `type` in sysfs is the kernel's `enum kfd_queue_type` (kfd_priv.h), not the uapi numbering:
/// 0 COMPUTE (PM4 and AQL alike), 1 SDMA, 2 HIQ, 3 DIQ, 4 SDMA_XGMI, 5 SDMA_BY_ENG_ID.
pub const SYSFS_TYPE_COMPUTE: u32 = 0;

/// A queue's identity across both sources: (gpu_id, queue_id). Queue ids are per process and
/// per KFD, allocated lowest-free, so the gpu id is part of the key.
pub type QueueKey = (u32, QueueId);

fn sysfs_key(q: &ProcQueue) -> QueueKey {
    (q.gpu_id, q.queue_id)
}

fn snap_key(s: &QueueSnapshot) -> QueueKey {
    (s.gpu_id, s.queue_id)
}

/// Compute queues only: SDMA queues (ROCr's copy engines) are never the stream's queue.
pub fn sysfs_is_compute(q: &ProcQueue) -> bool {
    q.queue_type == SYSFS_TYPE_COMPUTE
}

/// Compute queues only (the snapshot uses the uapi numbering: COMPUTE or COMPUTE_AQL).
pub fn snapshot_is_compute(s: &QueueSnapshot) -> bool {
    matches!(s.queue_type, QueueType::Compute | QueueType::ComputeAql)
}

/// Where a queue set came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Sysfs,
    Snapshot,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Sysfs => "sysfs /sys/class/kfd/kfd/proc/<pid>/queues",
            Source::Snapshot => "GET_QUEUE_SNAPSHOT",
        })
    }
}

/// The queue found behind the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub queue_id: QueueId,
    pub gpu_id: u32,
    /// From the snapshot (the only stock source).
    pub ring_base_address: u64,
    /// In bytes; sysfs and snapshot agree on it.
    pub ring_size: u32,
    pub snapshot: QueueSnapshot,
    pub sysfs: ProcQueue,
    /// New queues that were ignored (SDMA), one line each, for the report.
    pub ignored: Vec<String>,
}

/// Why no queue could be attributed to the stream. `Display` is one line with what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No new compute queue in either source.
    NoNewQueue,
    /// More than one new compute queue in `source`.
    SeveralNew { source: Source, keys: Vec<QueueKey> },
    /// The sources tell different stories.
    Disagree {
        sysfs: Vec<QueueKey>,
        snapshot: Vec<QueueKey>,
        why: String,
    },
    /// Queues vanished (or an id was reused for a different ring) between the two sets.
    Changed { source: Source, keys: Vec<QueueKey> },
    /// The new queue is on another GPU than the HIP device.
    WrongGpu { found: u32, expected: u32 },
    /// The snapshot's ring could not be restored by UPDATE_QUEUE.
    BadRing { queue: QueueId, why: &'static str },
}

fn keys(v: &[QueueKey]) -> String {
    let s: Vec<String> = v.iter().map(|(g, q)| format!("{q}@gpu 0x{g:x}")).collect();
    format!("[{}]", s.join(", "))
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoNewQueue => write!(
                f,
                "no new compute queue appeared when the LP stream was created: the stream shares a pooled \
                 queue (HIP pools GPU_MAX_HW_QUEUES=4 queues per priority; only a CU-mask stream, \
                 hipExtStreamCreateWithCUMask, gets a dedicated one), or this HIP creates queues lazily / \
                 reuses idle ones (clr's dynamic queues)"
            ),
            Refusal::SeveralNew { source, keys: k } => write!(
                f,
                "{} new compute queues appeared in {source} ({}), expected exactly one: ROCr created its \
                 utility/blit queue (or HIP another stream's queue) at the same time; create a warm-up stream \
                 and run its work before the LP stream",
                k.len(),
                keys(k)
            ),
            Refusal::Disagree { sysfs, snapshot, why } => write!(
                f,
                "sysfs and GET_QUEUE_SNAPSHOT disagree on the new queue ({why}): sysfs {}, snapshot {}; \
                 another thread created or destroyed a queue in between",
                keys(sysfs),
                keys(snapshot)
            ),
            Refusal::Changed { source, keys: k } => write!(
                f,
                "queues {} vanished or were replaced in {source} while the LP stream was created (HIP \
                 releasing idle queues?); the stream-to-queue binding cannot be trusted",
                keys(k)
            ),
            Refusal::WrongGpu { found, expected } => write!(
                f,
                "the new queue is on gpu 0x{found:x}, but the HIP device is gpu 0x{expected:x} in the KFD topology"
            ),
            Refusal::BadRing { queue, why } => write!(f, "new queue {queue}: {why}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// What was there before and is no longer: gone, another type, or (where both listings could
/// stat it) another sysfs node, i.e. another queue object under the same id
/// (docs/kfd-facts.md#queue-identity-in-sysfs). For the snapshot: another ring now.
fn changed_sysfs(before: &[ProcQueue], after: &[ProcQueue]) -> Vec<QueueKey> {
    let now: BTreeMap<QueueKey, &ProcQueue> = after.iter().map(|q| (sysfs_key(q), q)).collect();
    let replaced = |a: &ProcQueue, b: &ProcQueue| matches!((a.node, b.node), (Some(x), Some(y)) if x != y);
    before
        .iter()
        .filter(|b| {
            now.get(&sysfs_key(b))
                .is_none_or(|a| a.queue_type != b.queue_type || replaced(a, b))
        })
        .map(sysfs_key)
        .collect()
}

fn changed_snapshot(before: &[QueueSnapshot], after: &[QueueSnapshot]) -> Vec<QueueKey> {
    let now: BTreeMap<QueueKey, &QueueSnapshot> = after.iter().map(|s| (snap_key(s), s)).collect();
    before
        .iter()
        .filter(|b| {
            now.get(&snap_key(b))
                .is_none_or(|a| a.ring_base_address != b.ring_base_address || a.queue_type != b.queue_type)
        })
        .map(snap_key)
        .collect()
}

/// Attributes the one new compute queue to the stream created between `before` and `after`.
///
/// Rules, in order: nothing known may vanish or change (a reused id would hide the new queue);
/// new SDMA queues are ignored (and listed); exactly one new compute queue in each source, the
/// same (gpu, id) in both, with the same size; on `expected_gpu` when it is known; a restorable
/// ring (non-zero address, power-of-two size).
pub fn find_new_queue(
    sysfs_before: &[ProcQueue],
    sysfs_after: &[ProcQueue],
    snap_before: &[QueueSnapshot],
    snap_after: &[QueueSnapshot],
    expected_gpu: Option<u32>,
) -> Result<Found, Refusal> {
    let gone = changed_sysfs(sysfs_before, sysfs_after);
    if !gone.is_empty() {
        return Err(Refusal::Changed {
            source: Source::Sysfs,
            keys: gone,
        });
    }
    let gone = changed_snapshot(snap_before, snap_after);
    if !gone.is_empty() {
        return Err(Refusal::Changed {
            source: Source::Snapshot,
            keys: gone,
        });
    }
    let old_sys: Vec<QueueKey> = sysfs_before.iter().map(sysfs_key).collect();
    let old_snap: Vec<QueueKey> = snap_before.iter().map(snap_key).collect();
    let mut ignored = Vec::new();
    let mut new_sys: Vec<&ProcQueue> = Vec::new();
    for q in sysfs_after.iter().filter(|q| !old_sys.contains(&sysfs_key(q))) {
        if sysfs_is_compute(q) {
            new_sys.push(q);
        } else {
            ignored.push(format!(
                "sysfs: new non-compute queue {} (type {}) on gpu 0x{:x} ignored",
                q.queue_id, q.queue_type, q.gpu_id
            ));
        }
    }
    let mut new_snap: Vec<&QueueSnapshot> = Vec::new();
    for s in snap_after.iter().filter(|s| !old_snap.contains(&snap_key(s))) {
        if snapshot_is_compute(s) {
            new_snap.push(s);
        } else {
            ignored.push(format!(
                "snapshot: new non-compute queue {} ({:?}) on gpu 0x{:x} ignored",
                s.queue_id, s.queue_type, s.gpu_id
            ));
        }
    }
    let ks: Vec<QueueKey> = new_sys.iter().map(|q| sysfs_key(q)).collect();
    let kn: Vec<QueueKey> = new_snap.iter().map(|s| snap_key(s)).collect();
    let disagree = |why: String| Refusal::Disagree {
        sysfs: ks.clone(),
        snapshot: kn.clone(),
        why,
    };
    match (new_sys.len(), new_snap.len()) {
        (0, 0) => return Err(Refusal::NoNewQueue),
        (0, _) | (_, 0) => return Err(disagree("only one source saw a new compute queue".into())),
        (n, _) if n > 1 => {
            return Err(Refusal::SeveralNew {
                source: Source::Sysfs,
                keys: ks,
            });
        }
        (_, n) if n > 1 => {
            return Err(Refusal::SeveralNew {
                source: Source::Snapshot,
                keys: kn,
            });
        }
        _ => {}
    }
    let (q, s) = (new_sys[0], new_snap[0]);
    if sysfs_key(q) != snap_key(s) {
        return Err(disagree("different queue ids or GPUs".into()));
    }
    if q.size != u64::from(s.ring_size) {
        return Err(disagree(format!(
            "ring size {} in sysfs, {} in the snapshot",
            q.size, s.ring_size
        )));
    }
    if let Some(expected) = expected_gpu.filter(|&g| g != s.gpu_id) {
        return Err(Refusal::WrongGpu {
            found: s.gpu_id,
            expected,
        });
    }
    if s.ring_base_address == 0 {
        return Err(Refusal::BadRing {
            queue: s.queue_id,
            why: "the snapshot reports a NULL ring (queue disabled?)",
        });
    }
    if !s.ring_size.is_power_of_two() {
        return Err(Refusal::BadRing {
            queue: s.queue_id,
            why: "ring size is not a power of two",
        });
    }
    Ok(Found {
        queue_id: s.queue_id,
        gpu_id: s.gpu_id,
        ring_base_address: s.ring_base_address,
        ring_size: s.ring_size,
        snapshot: *s,
        sysfs: q.clone(),
        ignored,
    })
}

/// A PCI address `DDDD:BB:DD.F` (as hipDeviceGetPCIBusId gives it) as KFD's topology encodes it:
/// (domain, location_id = bus << 8 | device << 3 | function).
pub fn pci_location(bus_id: &str) -> Option<(u64, u64)> {
    let (dom, rest) = bus_id.trim().rsplit_once(':').and_then(|(a, dev_fn)| {
        let (d, b) = a.split_once(':')?;
        Some(((d, b), dev_fn))
    })?;
    let (dev, func) = rest.split_once('.')?;
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let (domain, bus, dev, func) = (hex(dom.0)?, hex(dom.1)?, hex(dev)?, hex(func)?);
    if bus > 0xff || dev > 0x1f || func > 7 {
        return None;
    }
    Some((domain, bus << 8 | dev << 3 | func))
}

/// The gpu ids of the topology nodes at this PCI address: `(gpu_id, domain, location_id)` per
/// node. On gfx 9.4.3 (MI300) partitions OR their node index into `location_id`, so only the
/// first partition matches exactly; callers should constrain discovery only on exactly one match.
pub fn gpu_ids_at(nodes: &[(u32, Option<u64>, Option<u64>)], bus_id: &str) -> Vec<u32> {
    let Some((dom, loc)) = pci_location(bus_id) else {
        return Vec::new();
    };
    nodes
        .iter()
        .filter(|(g, d, l)| *g != 0 && d.unwrap_or(0) == dom && *l == Some(loc))
        .map(|(g, _, _)| *g)
        .collect()
}

/// After an UPDATE_QUEUE disable, sysfs shows the ring size clamped to 1024: a queue still
/// reading that at the end of a run (with a larger real ring) was left disabled.
pub fn looks_disabled(q: &ProcQueue, ring_size: u32) -> bool {
    ring_size != 1024 && q.size == 1024
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd::sysfs::QueueNode;

    const GPU: u32 = 0xbeef;

    fn sq(id: u32, ty: u32) -> ProcQueue {
        ProcQueue {
            queue_id: id,
            size: 1 << 20,
            queue_type: ty,
            gpu_id: GPU,
            node: Some(QueueNode {
                dev: 1,
                ino: 100 + u64::from(id),
            }),
        }
    }

    fn snap(id: u32, ty: QueueType) -> QueueSnapshot {
        QueueSnapshot {
            exception_status: 0,
            ring_base_address: 0x7f00_0000_0000 + u64::from(id) * 0x10_0000,
            write_pointer_address: 0,
            read_pointer_address: 0,
            ctx_save_restore_address: 0,
            queue_id: id,
            gpu_id: GPU,
            ring_size: 1 << 20,
            queue_type: ty,
            ctx_save_restore_area_size: 0,
        }
    }

    /// ROCr's utility queue (0) and the warm-up and HP streams' queues (1, 2), plus an SDMA queue (3).
    fn base() -> (Vec<ProcQueue>, Vec<QueueSnapshot>) {
        (
            vec![sq(0, 0), sq(1, 0), sq(2, 0), sq(3, 1)],
            vec![
                snap(0, QueueType::ComputeAql),
                snap(1, QueueType::ComputeAql),
                snap(2, QueueType::ComputeAql),
                snap(3, QueueType::Sdma),
            ],
        )
    }

    #[test]
    fn exactly_one_new_queue_is_found_in_both_sources() {
        let (sb, nb) = base();
        let (mut sa, mut na) = base();
        sa.push(sq(4, 0));
        na.push(snap(4, QueueType::ComputeAql));
        let f = find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap();
        assert_eq!((f.queue_id, f.gpu_id, f.ring_size), (4, GPU, 1 << 20));
        assert_eq!(f.ring_base_address, snap(4, QueueType::ComputeAql).ring_base_address);
        assert!(f.ignored.is_empty());
        // Unknown expected GPU: not constrained.
        assert!(find_new_queue(&sb, &sa, &nb, &na, None).is_ok());
    }

    #[test]
    fn no_new_queue_points_at_pooling_and_cu_mask_streams() {
        let (sb, nb) = base();
        let e = find_new_queue(&sb, &sb, &nb, &nb, Some(GPU)).unwrap_err();
        assert_eq!(e, Refusal::NoNewQueue);
        let s = e.to_string();
        assert!(
            s.contains("GPU_MAX_HW_QUEUES") && s.contains("hipExtStreamCreateWithCUMask"),
            "{s}"
        );
    }

    #[test]
    fn two_new_queues_blame_rocr_utility_or_blit_queue() {
        let (sb, nb) = base();
        let (mut sa, mut na) = base();
        sa.extend([sq(4, 0), sq(5, 0)]);
        na.extend([snap(4, QueueType::ComputeAql), snap(5, QueueType::ComputeAql)]);
        let e = find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap_err();
        assert!(
            matches!(&e, Refusal::SeveralNew { source: Source::Sysfs, keys } if keys.len() == 2),
            "{e:?}"
        );
        let s = e.to_string();
        assert!(s.contains("utility/blit") && s.contains("warm-up"), "{s}");
        // Only the snapshot sees two.
        sa.pop();
        let e = find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap_err();
        assert!(
            matches!(
                e,
                Refusal::SeveralNew {
                    source: Source::Snapshot,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn snapshot_and_sysfs_disagreeing_is_refused() {
        let (sb, nb) = base();
        let (mut sa, mut na) = base();
        sa.push(sq(4, 0));
        na.push(snap(5, QueueType::ComputeAql));
        let e = find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap_err();
        assert!(
            matches!(&e, Refusal::Disagree { why, .. } if why.contains("different")),
            "{e:?}"
        );
        assert!(e.to_string().contains("disagree"));
        // Only one source saw it.
        let e = find_new_queue(&sb, &sa, &nb, &nb, Some(GPU)).unwrap_err();
        assert!(
            matches!(&e, Refusal::Disagree { why, .. } if why.contains("only one source")),
            "{e:?}"
        );
        // Same id, different sizes.
        let mut n4 = snap(4, QueueType::ComputeAql);
        n4.ring_size = 1 << 19;
        let (_, mut na) = base();
        na.push(n4);
        let e = find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap_err();
        assert!(
            matches!(&e, Refusal::Disagree { why, .. } if why.contains("ring size")),
            "{e:?}"
        );
    }

    #[test]
    fn new_sdma_queues_are_ignored_and_listed() {
        let (sb, nb) = base();
        let (mut sa, mut na) = base();
        sa.extend([sq(4, 1), sq(5, 0), sq(6, 4)]);
        na.extend([
            snap(4, QueueType::Sdma),
            snap(5, QueueType::ComputeAql),
            snap(6, QueueType::SdmaXgmi),
        ]);
        let f = find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap();
        assert_eq!(f.queue_id, 5);
        assert_eq!(f.ignored.len(), 4, "{:?}", f.ignored);
        // An SDMA queue alone is not the stream's queue.
        let (mut sa, mut na) = base();
        sa.push(sq(4, 1));
        na.push(snap(4, QueueType::Sdma));
        assert_eq!(
            find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap_err(),
            Refusal::NoNewQueue
        );
    }

    #[test]
    fn vanished_or_replaced_queues_are_refused() {
        let (sb, nb) = base();
        // Queue 2 destroyed and its id reused by the new stream: sysfs sees no difference in ids,
        // but the snapshot's ring moved.
        let (sa, mut na) = base();
        na[2].ring_base_address = 0x1234_0000;
        let e = find_new_queue(&sb, &sa, &nb, &na, Some(GPU)).unwrap_err();
        assert_eq!(
            e,
            Refusal::Changed {
                source: Source::Snapshot,
                keys: vec![(GPU, 2)]
            }
        );
        let (mut sa, _) = base();
        sa.remove(1);
        sa.push(sq(4, 0));
        let e = find_new_queue(&sb, &sa, &nb, &nb, Some(GPU)).unwrap_err();
        assert!(
            matches!(
                e,
                Refusal::Changed {
                    source: Source::Sysfs,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn a_queue_replaced_under_its_id_is_refused_from_sysfs_alone() {
        // Queue 2 destroyed and a new queue (the stream's) given id 2: the ids and types agree,
        // the sysfs node does not. A listing that could not stat a node does not count as a change.
        let (sb, nb) = base();
        let (mut sa, _) = base();
        sa[2].node = Some(QueueNode { dev: 1, ino: 999 });
        let e = find_new_queue(&sb, &sa, &nb, &nb, Some(GPU)).unwrap_err();
        assert_eq!(
            e,
            Refusal::Changed {
                source: Source::Sysfs,
                keys: vec![(GPU, 2)]
            }
        );
        sa[2].node = None;
        assert_eq!(
            find_new_queue(&sb, &sa, &nb, &nb, Some(GPU)).unwrap_err(),
            Refusal::NoNewQueue
        );
    }

    #[test]
    fn wrong_gpu_and_bad_rings_are_refused() {
        let (sb, nb) = base();
        let (mut sa, mut na) = base();
        sa.push(sq(4, 0));
        na.push(snap(4, QueueType::ComputeAql));
        assert_eq!(
            find_new_queue(&sb, &sa, &nb, &na, Some(7)).unwrap_err(),
            Refusal::WrongGpu {
                found: GPU,
                expected: 7
            }
        );
        na[4].ring_base_address = 0;
        assert!(matches!(
            find_new_queue(&sb, &sa, &nb, &na, None).unwrap_err(),
            Refusal::BadRing { queue: 4, .. }
        ));
        let (_, mut na) = base();
        na.push(snap(4, QueueType::ComputeAql));
        na[4].ring_size = 3 << 18;
        sa[4].size = 3 << 18;
        assert!(matches!(
            find_new_queue(&sb, &sa, &nb, &na, None).unwrap_err(),
            Refusal::BadRing { queue: 4, .. }
        ));
    }

    #[test]
    fn pci_addresses_map_to_topology_location_ids() {
        assert_eq!(pci_location("0000:c1:00.0"), Some((0, 0xc100)));
        assert_eq!(pci_location("0001:05:1f.7"), Some((1, 0x05ff)));
        assert_eq!(pci_location("garbage"), None);
        assert_eq!(pci_location("0000:c1:20.0"), None);
        let nodes = [
            (0, Some(0), Some(0)),
            (0x1111, Some(0), Some(0xc100)),
            (0x2222, Some(0), Some(0xc101)),
            (0x3333, None, Some(0x0500)),
        ];
        assert_eq!(gpu_ids_at(&nodes, "0000:c1:00.0"), vec![0x1111]);
        assert_eq!(gpu_ids_at(&nodes, "0000:05:00.0"), vec![0x3333]);
        assert!(gpu_ids_at(&nodes, "0000:07:00.0").is_empty());
    }

    #[test]
    fn a_disabled_queue_shows_the_minimum_size() {
        let mut q = sq(4, 0);
        assert!(!looks_disabled(&q, 1 << 20));
        q.size = 1024;
        assert!(looks_disabled(&q, 1 << 20));
    }
}
