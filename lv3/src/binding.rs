//! A stream's binding to its KFD queue, checked before every suspend.
//!
//! Discovery ([`crate::discovery`]) proves once which KFD queue a stream got. The binding must
//! not outlive that queue: if the queue is destroyed (the stream destroyed through its handle, a
//! HIP runtime that releases the stream's hardware queue, docs/kfd-facts.md#dynamic-queues), KFD
//! hands its id to the next queue created (lowest free id), which may be another stream's, and a
//! suspend by id would stop that one. So the binding remembers which queue *object* it is: the
//! inode of the queue's sysfs directory, which amdkfd creates with the queue and removes with
//! it, and which kernfs never gives to another node (docs/kfd-facts.md#queue-identity-in-sysfs).
//! [`QueueBinding::check`] compares it with one `fstatat` relative to the process's `queues`
//! directory, held open ([`QueueDir`]: 2-4 us on this project's 2-core VM, host figures), and
//! refuses with [`Stale`] when the queue is gone or the id names another queue.
//!
//! There is no renewal: no API says which queue a stream has after its old one went (the
//! stream-to-queue link is discovery's diff around the stream's creation,
//! docs/kfd-facts.md#stream-to-kfd-queue-id), and guessing among the queues that appeared since
//! could stop another stream's. The caller creates a new stream instead.
//!
//! What the check cannot see: a HIP runtime that keeps a queue alive and hands it to another
//! stream (clr's pooled queues). The streams bound here have a queue of their own
//! (`hipExtStreamCreateWithCUMask`), which clr never pools (docs/kfd-facts.md#dynamic-queues).
use crate::discovery::Found;
use crate::mechanism::QueueTarget;
use kfd::QueueId;
use kfd::sysfs::{self, QueueDir, QueueNode, SysRoot, SysfsError};
use std::fmt;
use std::path::PathBuf;

/// A KFD queue of this process as discovery found it, with the identity of its sysfs node and
/// the process's queue directory held open to check it.
#[derive(Debug, Clone)]
pub struct QueueBinding {
    target: QueueTarget,
    pid: u32,
    node: QueueNode,
    dir: QueueDir,
    root: SysRoot,
}

/// How the queue changed since it was bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// No queue has the bound id any more.
    Gone,
    /// The id names another queue object (the bound one was destroyed and the id reused).
    Replaced { was: QueueNode, now: QueueNode },
    /// The queue list could not be read, so the queue cannot be verified.
    Unverifiable(SysfsError),
}

/// Pure: whether the queue whose directory was `bound` is still the one at that id (`now`:
/// the directory's node today, `None` where it is gone).
pub fn judge(bound: QueueNode, now: Option<QueueNode>) -> Result<(), Change> {
    match now {
        Some(n) if n == bound => Ok(()),
        Some(n) => Err(Change::Replaced { was: bound, now: n }),
        None => Err(Change::Gone),
    }
}

/// A binding that no longer holds: nothing was sent to the kernel. `Display` is one line with
/// what happened and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub queue_id: QueueId,
    pub gpu_id: u32,
    /// The queue's sysfs directory.
    pub path: PathBuf,
    pub change: Change,
    /// The process's queue ids on that GPU now, when they could be read (for the message: a
    /// replacement queue with another id shows here).
    pub queues_now: Option<Vec<QueueId>>,
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (q, g, p) = (self.queue_id, self.gpu_id, self.path.display());
        match &self.change {
            Change::Gone => write!(f, "KFD queue {q} on gpu 0x{g:x} no longer exists ({p} is gone)")?,
            Change::Replaced { was, now } => write!(
                f,
                "KFD queue id {q} on gpu 0x{g:x} now names another queue ({p} is inode {}, was {}): the bound \
                 queue was destroyed and KFD gave its id to a new one, maybe another stream's",
                now.ino, was.ino
            )?,
            Change::Unverifiable(e) => {
                return write!(
                    f,
                    "KFD queue {q} on gpu 0x{g:x} cannot be verified ({e}); nothing was suspended"
                );
            }
        }
        if let Some(ids) = &self.queues_now {
            write!(f, "; this process's queues on that GPU now: {ids:?}")?;
        }
        write!(
            f,
            "; the stream's queue binding is stale (its hardware queue was destroyed: the stream was destroyed \
             through its handle, or the HIP runtime released its queue, docs/kfd-facts.md#dynamic-queues), so \
             nothing was suspended; create a new low-priority stream, whose queue is discovered anew"
        )
    }
}

impl std::error::Error for Stale {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.change {
            Change::Unverifiable(e) => Some(e),
            _ => None,
        }
    }
}

impl QueueBinding {
    /// Binds `target` (queue `target.queue_id` of process `pid`) to the queue object at that id
    /// now: opens the process's queue directory under `root` and stats the queue.
    pub fn bind(target: QueueTarget, pid: u32, root: SysRoot) -> Result<Self, Stale> {
        Self::with_node(target, pid, None, root)
    }

    /// The binding of discovery's result `found` (its sysfs listing carries the node, read in the
    /// same pass as the set that proved the queue new), as `target` (the ring and priority the
    /// mechanisms need). Where the listing could not stat the directory, it is stat'ed now.
    pub fn from_found(found: &Found, target: QueueTarget, pid: u32, root: SysRoot) -> Result<Self, Stale> {
        Self::with_node(target, pid, found.sysfs.node, root)
    }

    fn with_node(target: QueueTarget, pid: u32, node: Option<QueueNode>, root: SysRoot) -> Result<Self, Stale> {
        let stale = |change| Stale {
            queue_id: target.queue_id,
            gpu_id: target.gpu_id,
            path: queue_dir(&root, pid, target.queue_id),
            change,
            queues_now: None,
        };
        let dir = QueueDir::open(&root, pid).map_err(|e| stale(Change::Unverifiable(e)))?;
        let node = match node {
            Some(n) => n,
            None => match dir.node(target.queue_id) {
                Ok(Some(n)) => n,
                Ok(None) => return Err(stale(Change::Gone)),
                Err(e) => return Err(stale(Change::Unverifiable(e))),
            },
        };
        Ok(QueueBinding {
            target,
            pid,
            node,
            dir,
            root,
        })
    }

    /// The queue the mechanisms act on.
    pub fn target(&self) -> &QueueTarget {
        &self.target
    }

    /// The process the queue belongs to.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The queue's sysfs node when it was bound.
    pub fn node(&self) -> QueueNode {
        self.node
    }

    /// Ok while the bound queue is still the queue at its id: one `fstatat`. The failure path
    /// also lists the process's queues, for the message.
    pub fn check(&self) -> Result<(), Stale> {
        let change = match self.dir.node(self.target.queue_id) {
            Ok(now) => match judge(self.node, now) {
                Ok(()) => return Ok(()),
                Err(c) => c,
            },
            Err(e) => Change::Unverifiable(e),
        };
        let queues_now = match change {
            Change::Unverifiable(_) => None,
            _ => sysfs::proc_queues(&self.root, self.pid).ok().map(|qs| {
                qs.iter()
                    .filter(|q| q.gpu_id == self.target.gpu_id)
                    .map(|q| q.queue_id)
                    .collect()
            }),
        };
        Err(Stale {
            queue_id: self.target.queue_id,
            gpu_id: self.target.gpu_id,
            path: self.dir.path().join(self.target.queue_id.to_string()),
            change,
            queues_now,
        })
    }
}

fn queue_dir(root: &SysRoot, pid: u32, queue_id: QueueId) -> PathBuf {
    root.kfd_proc()
        .join(pid.to_string())
        .join("queues")
        .join(queue_id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd::testing::FakeProcQueues;

    const PID: u32 = 4242;
    const GPU: u32 = 0xbeef;

    fn target(id: QueueId) -> QueueTarget {
        QueueTarget {
            queue_id: id,
            gpu_id: GPU,
            ..QueueTarget::NONEXISTENT
        }
    }

    fn bind(q: &FakeProcQueues, id: QueueId) -> QueueBinding {
        let b = QueueBinding::bind(target(id), PID, q.root()).unwrap();
        assert_eq!(Some(b.node()), sysfs::queue_node(&q.root(), PID, id).unwrap());
        b
    }

    #[test]
    fn judge_tells_the_same_queue_from_a_gone_or_replaced_one() {
        let a = QueueNode { dev: 1, ino: 10 };
        let b = QueueNode { dev: 1, ino: 11 };
        assert_eq!(judge(a, Some(a)), Ok(()));
        assert_eq!(judge(a, Some(b)), Err(Change::Replaced { was: a, now: b }));
        assert_eq!(judge(a, None), Err(Change::Gone));
        // Another device with the same inode number is another node.
        assert!(judge(a, Some(QueueNode { dev: 2, ino: 10 })).is_err());
    }

    #[test]
    fn a_live_queue_passes_while_others_come_and_go() {
        let q = FakeProcQueues::new(PID);
        q.create(3, GPU);
        q.create(4, GPU);
        let b = bind(&q, 4);
        assert_eq!(b.check(), Ok(()));
        q.destroy(3);
        q.create(5, GPU);
        assert_eq!(b.check(), Ok(()), "other queues changing does not touch the binding");
        assert_eq!((b.target().queue_id, b.pid()), (4, PID));
    }

    #[test]
    fn a_queue_that_disappears_is_stale() {
        let q = FakeProcQueues::new(PID);
        q.create(4, GPU);
        let b = bind(&q, 4);
        q.destroy(4);
        let e = b.check().unwrap_err();
        assert_eq!((e.change.clone(), e.queues_now.clone()), (Change::Gone, Some(vec![])));
        let s = e.to_string();
        assert!(
            s.contains("KFD queue 4 on gpu 0xbeef no longer exists") && s.contains("queues/4 is gone"),
            "{s}"
        );
        assert!(
            s.contains("nothing was suspended") && s.contains("create a new low-priority stream"),
            "{s}"
        );
        assert!(!s.contains('\n'), "one line: {s}");
    }

    #[test]
    fn a_queue_replaced_under_the_same_id_is_stale() {
        let q = FakeProcQueues::new(PID);
        q.create(4, GPU);
        let b = bind(&q, 4);
        q.replace(4);
        let now = sysfs::queue_node(&q.root(), PID, 4).unwrap().unwrap();
        let e = b.check().unwrap_err();
        assert_eq!(e.change, Change::Replaced { was: b.node(), now });
        assert_eq!(e.queues_now, Some(vec![4]));
        let s = e.to_string();
        assert!(
            s.contains("now names another queue") && s.contains("maybe another stream's"),
            "{s}"
        );
        // The replacement stays stale: a binding is never quietly renewed.
        assert!(b.check().is_err());
    }

    #[test]
    fn a_queue_replaced_under_another_id_is_stale_and_the_new_id_is_named() {
        let q = FakeProcQueues::new(PID);
        q.create(4, GPU);
        q.create(9, 0x1111); // another GPU's queue: not listed
        let b = bind(&q, 4);
        q.destroy(4);
        q.create(6, GPU);
        let e = b.check().unwrap_err();
        assert_eq!((e.change.clone(), e.queues_now.clone()), (Change::Gone, Some(vec![6])));
        assert!(e.to_string().contains("queues on that GPU now: [6]"), "{e}");
    }

    #[test]
    fn a_queue_that_cannot_be_read_or_is_not_there_is_never_bound() {
        let e = QueueBinding::bind(target(4), PID, SysRoot::new("/nonexistent/sysroot")).unwrap_err();
        assert!(matches!(e.change, Change::Unverifiable(_)), "{e:?}");
        assert!(e.to_string().contains("cannot be verified"), "{e}");
        let q = FakeProcQueues::new(PID);
        q.create(3, GPU);
        let e = QueueBinding::bind(target(4), PID, q.root()).unwrap_err();
        assert_eq!(e.change, Change::Gone);
    }
}
