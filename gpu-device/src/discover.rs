//! Finding the KFD queue behind the LP stream: the glue around [`lv3::discovery`].
//!
//! Order (the caller has already created the warm-up and HP streams and run work on them, so
//! ROCr's utility queue and any blit queue exist):
//! 1. Make GET_QUEUE_SNAPSHOT readable. It needs the debug trap enabled on this process. With
//!    `dbg-trap` the mechanism's setup already did that. With `update-queue` (which itself needs no
//!    debug mode, but needs the ring address to restore the queue, and the snapshot is the only
//!    stock source of it) a temporary self-debug session is opened for discovery and closed right
//!    after; if it cannot be opened (KFD < 1.13, firmware without debug support, sched_policy=2),
//!    update-queue is refused: it cannot restore a ring it does not know. If debugging is already
//!    on (rocgdb), its snapshots are read without clearing any exception bit.
//! 2. Take sysfs and snapshot sets, create the LP stream with `hipExtStreamCreateWithCUMask` (a
//!    dedicated queue), run one tiny launch on it (in case this HIP creates queues lazily), take
//!    both sets again, and require exactly one new compute queue, the same in both.
//! 3. Bind the stream to that queue object (its sysfs node from the second set), so that every
//!    later suspend can check the queue is still the one found ([`lv3::binding`]).
use kfd::sysfs::{self, ProcQueue, SysRoot, SysfsErrorKind};
use kfd::{GracePeriod, Kfd, KfdOps, QueueSnapshot};
use lv3::MechanismKind;
use lv3::binding::QueueBinding;
use lv3::discovery;
use lv3::mechanism::{DbgTrap, Preempt, QueueTarget};

use hip_rt::{Device, HipError, Stream};

use crate::Error;

/// KFD priority of the LP queue: a CU-mask stream is a normal-priority stream, and ROCr maps HSA
/// NORMAL to KFD 7 (LOW 0, HIGH 11). UPDATE_QUEUE's restore must send it back unchanged.
pub const KFD_PRIORITY_NORMAL: u32 = 7;

/// The LP stream and the queue behind it.
pub struct Discovered {
    pub stream: Stream,
    /// The queue found, as the mechanisms target it, and which queue object it is.
    pub binding: QueueBinding,
    /// What the report should say about how it was found.
    pub notes: Vec<String>,
}

fn hip<E: Into<Error>>(what: &'static str) -> impl Fn(E) -> Error {
    move |e| {
        let e = e.into();
        Error::discovery(format!("queue discovery: {what}: {e}"), e)
    }
}

/// "queue discovery: {e}", with `e` as the source.
fn qd<E: std::error::Error + Send + Sync + 'static>(e: E) -> Error {
    Error::discovery(format!("queue discovery: {e}"), e)
}

/// The gpu id of the HIP device in the KFD topology, when exactly one node has its PCI address.
pub fn expected_gpu_id(root: &SysRoot, pci_bus_id: &str) -> Option<u32> {
    let nodes = sysfs::topology_nodes(root).ok()?;
    let triples: Vec<(u32, Option<u64>, Option<u64>)> = nodes
        .iter()
        .map(|n| {
            (
                n.gpu_id,
                n.properties.get("domain").copied(),
                n.properties.get("location_id").copied(),
            )
        })
        .collect();
    match discovery::gpu_ids_at(&triples, pci_bus_id).as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// This process's queues from sysfs. A KFD without `/sys/class/kfd/kfd/proc` cannot take part
/// in discovery: say so, instead of letting an empty list read as "no new queue".
fn proc_queue_set(root: &SysRoot, pid: u32) -> Result<Vec<ProcQueue>, Error> {
    sysfs::proc_queues(root, pid).map_err(|e| {
        if e.kind == SysfsErrorKind::Missing && e.path == root.kfd_proc() {
            let message = format!(
                "queue discovery: {e}: this KFD publishes no per-process queue list, so the LP stream's \
                 queue cannot be cross-checked against GET_QUEUE_SNAPSHOT and Lv3 cannot target it \
                 (docs/kfd-facts.md#per-process-queues); Lv1 needs no queue discovery"
            );
            Error::discovery(message, e)
        } else {
            qd(e)
        }
    })
}

fn sets(root: &SysRoot, kfd: &Kfd) -> Result<(Vec<ProcQueue>, Vec<QueueSnapshot>), Error> {
    let sys = proc_queue_set(root, std::process::id())?;
    // Clear mask 0: discovery must not clear EC_QUEUE_NEW (dbg-trap's suspend does that itself,
    // and a debugger owning the session expects to see it).
    let snap = kfd.queue_snapshot(0).map_err(qd)?;
    Ok((sys, snap))
}

/// Creates the LP stream and proves which KFD queue it got, for `mechanism` (set up already: one
/// that keeps this process in debug mode, [`MechanismKind::turns_debug_mode_on`], has it on).
/// `first_use` runs one small launch on the new stream and waits for it.
pub fn lp_stream_with_queue<E: Into<Error>>(
    dev: &Device,
    first_use: impl Fn(&Stream) -> Result<(), E>,
    mechanism: MechanismKind,
) -> Result<Discovered, Error> {
    let debug_is_ours = mechanism.turns_debug_mode_on();
    let root = SysRoot::default();
    let kfd = Kfd::open().map_err(qd)?;
    let mut notes = Vec::new();
    let temporary = if kfd.queue_snapshot(0).is_ok() {
        if !debug_is_ours {
            notes.push(
                "debugging was already on for this process (rocgdb?): snapshots read without clearing anything".into(),
            );
        }
        None
    } else {
        let s = DbgTrap::setup(Kfd::open().map_err(qd)?, GracePeriod::Default).map_err(|e| {
            let message = if mechanism.restores_from_ring() {
                format!(
                    "{mechanism} needs the LP queue's ring address and size to restore it; on a stock kernel only \
                     GET_QUEUE_SNAPSHOT gives them, and it needs DBG_TRAP ENABLE on this process, which failed: {e}"
                )
            } else {
                format!(
                    "{mechanism} targets the LP queue by the id GET_QUEUE_SNAPSHOT gives, and it needs DBG_TRAP \
                     ENABLE on this process, which failed: {e}"
                )
            };
            Error::discovery(message, e)
        })?;
        notes.push("ring address read through a temporary self-debug session (closed after discovery)".into());
        Some(s)
    };
    let gpu = expected_gpu_id(&root, &dev.info.pci_bus_id);
    if gpu.is_none() {
        notes.push(format!(
            "no unique KFD node at PCI {}: the queue's GPU is not cross-checked",
            dev.info.pci_bus_id
        ));
    }
    let (sys0, snap0) = sets(&root, &kfd)?;
    let stream = dev
        .stream_own_queue()
        .map_err(hip::<HipError>("creating the LP stream (hipExtStreamCreateWithCUMask)"))?;
    first_use(&stream).map_err(hip("first launch on the LP stream"))?;
    let after = sets(&root, &kfd);
    if let Some(s) = temporary
        && let Err(e) = s.teardown()
    {
        return Err(Error::discovery(
            format!("queue discovery: closing the temporary debug session failed: {e}"),
            e,
        ));
    }
    let (sys1, snap1) = after?;
    let found = discovery::find_new_queue(&sys0, &sys1, &snap0, &snap1, gpu)
        .map_err(|r| Error::discovery(format!("queue discovery refused: {r}"), r))?;
    notes.extend(found.ignored.iter().cloned());
    let target = QueueTarget::from_snapshot(&found.snapshot, KFD_PRIORITY_NORMAL);
    target.validate().map_err(qd)?;
    let binding = QueueBinding::from_found(&found, target, std::process::id(), root).map_err(qd)?;
    Ok(Discovered { stream, binding, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> SysRoot {
        SysRoot::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../kfd/tests/fixtures/gfx942"))
    }

    #[test]
    fn the_hip_device_maps_to_its_topology_node_by_pci_address() {
        // Node 1 of the fixture: domain 0, location_id 1024 = bus 4, device 0, function 0.
        assert_eq!(expected_gpu_id(&fixture(), "0000:04:00.0"), Some(48063));
        assert_eq!(expected_gpu_id(&fixture(), "0000:05:00.0"), None);
        assert_eq!(expected_gpu_id(&SysRoot::new("/nonexistent"), "0000:04:00.0"), None);
    }

    #[test]
    fn a_kfd_without_per_process_queues_is_refused_with_a_reason() {
        let no_proc = SysRoot::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../kfd/tests/fixtures/cpu-only"));
        let e = proc_queue_set(&no_proc, 1).expect_err("no proc directory must not read as no queues");
        let text = e.to_string();
        assert!(text.contains("kfd/kfd/proc: does not exist"), "{text}");
        assert!(text.contains("publishes no per-process queue list"), "{text}");
        // With the directory, a process without a KFD context simply has no queues.
        assert!(proc_queue_set(&fixture(), 1).unwrap().is_empty());
        assert_eq!(proc_queue_set(&fixture(), 4242).unwrap().len(), 2);
    }
}
