//! `/sys/class/kfd/kfd/proc/<pid>/queues/<queue_id>/{size,type,gpuid}`: a process's KFD queues
//! (world-readable; no addresses), and which sysfs node each queue is ([`QueueNode`]).
use super::{Result, SysRoot, SysfsErrorKind, err, numbered_entries, read, read_int};
use nix::fcntl::AtFlags;
use nix::sys::stat::fstatat;
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcQueue {
    pub queue_id: u32,
    /// Ring size in bytes (1024 after an UPDATE_QUEUE disable: KFD clamps to its minimum).
    pub size: u64,
    /// KFD_QUEUE_TYPE_* of the kernel (0 compute, 1 SDMA, 2 HIQ, ...), as the file says.
    pub queue_type: u32,
    pub gpu_id: u32,
    /// Which queue object this directory is (`None` where the directory could not be stat'ed).
    /// Not part of any output: an inode number means nothing to a reader of a report.
    #[serde(skip)]
    pub node: Option<QueueNode>,
}

/// The identity of one queue's sysfs directory, `(st_dev, st_ino)`. amdkfd creates the directory
/// (a kobject named after the queue id) when the queue is created and removes it when the queue is
/// destroyed; kernfs gives every new node a new inode number for the life of the sysfs mount
/// (64-bit ids, allocated cyclically, never reused). So a queue id that names another queue
/// object than before, the lowest-free id reused for a new queue, shows here as another inode
/// (docs/kfd-facts.md#queue-identity-in-sysfs). One `stat` ([`QueueDir::node`]): cheap enough
/// before every suspend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct QueueNode {
    pub dev: u64,
    pub ino: u64,
}

impl QueueNode {
    fn of(path: &Path) -> std::io::Result<QueueNode> {
        let m = std::fs::metadata(path)?;
        Ok(QueueNode {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// The KFD queues of process `pid`. A process without a KFD context has no directory: that is
/// an empty list, not an error. A KFD with no `proc` directory at all publishes no per-process
/// queue list (amdkfd creates it at module init and carries on if that fails,
/// docs/kfd-facts.md#per-process-queues): that is a [`SysfsErrorKind::Missing`] error naming
/// the `proc` directory, because "no queues" would be a claim nothing backs. A queue directory
/// that vanishes while we read it (queue destroyed) is skipped.
pub fn proc_queues(root: &SysRoot, pid: u32) -> Result<Vec<ProcQueue>> {
    let dir = root.kfd_proc().join(pid.to_string()).join("queues");
    let entries = match numbered_entries(&dir) {
        Ok(e) => e,
        Err(e) if e.kind == SysfsErrorKind::Missing && !root.kfd_proc().is_dir() => {
            return Err(err(&root.kfd_proc(), SysfsErrorKind::Missing));
        }
        Err(e) if e.kind == SysfsErrorKind::Missing => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for (id, qdir) in entries {
        let q = (|| -> Result<ProcQueue> {
            // The node first: if the queue is replaced while we read, its files describe the
            // newer queue, and a later `queue_node` sees that the node changed.
            let node = QueueNode::of(&qdir).ok();
            let ty = read(&qdir.join("type"))?;
            let queue_type = ty.trim().parse().map_err(|_| {
                err(
                    &qdir.join("type"),
                    SysfsErrorKind::Malformed(format!("expected a queue type number, found {:?}", ty.trim())),
                )
            })?;
            Ok(ProcQueue {
                queue_id: id,
                size: read_int(&qdir.join("size"))?,
                queue_type,
                gpu_id: read_int(&qdir.join("gpuid"))?,
                node,
            })
        })();
        match q {
            Ok(q) => out.push(q),
            Err(e) if e.kind == SysfsErrorKind::Missing && !qdir.exists() => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Which node `proc/<pid>/queues/<queue_id>` is now: one `stat`. `Ok(None)`: no such queue (the
/// directory is gone). A KFD without the `proc` directory is the same error as in
/// [`proc_queues`]: nothing there could say whether the queue exists.
pub fn queue_node(root: &SysRoot, pid: u32, queue_id: u32) -> Result<Option<QueueNode>> {
    let qdir = root
        .kfd_proc()
        .join(pid.to_string())
        .join("queues")
        .join(queue_id.to_string());
    match QueueNode::of(&qdir) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if root.kfd_proc().is_dir() {
                Ok(None)
            } else {
                Err(err(&root.kfd_proc(), SysfsErrorKind::Missing))
            }
        }
        Err(e) => Err(err(&qdir, SysfsErrorKind::Io(e.to_string()))),
    }
}

/// A process's `queues` directory, held open so that [`QueueDir::node`] stats one queue with a
/// single path component (`fstatat` relative to it) rather than walking the ~8 components of the
/// full path through the `/sys/class` symlink: on this project's 2-core VM (host figures, load
/// average 8) about 2-4 us per call instead of 8-14 us. If the directory itself goes (the
/// process's KFD context torn down), every queue under it reads as gone.
#[derive(Debug, Clone)]
pub struct QueueDir {
    dir: Arc<File>,
    path: PathBuf,
}

impl QueueDir {
    /// Opens `proc/<pid>/queues`. A process without a KFD context has none: a
    /// [`SysfsErrorKind::Missing`] error naming it (naming the `proc` directory where KFD
    /// publishes no queue list at all).
    pub fn open(root: &SysRoot, pid: u32) -> Result<QueueDir> {
        let path = root.kfd_proc().join(pid.to_string()).join("queues");
        match File::open(&path) {
            Ok(f) => Ok(QueueDir { dir: Arc::new(f), path }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !root.kfd_proc().is_dir() => {
                Err(err(&root.kfd_proc(), SysfsErrorKind::Missing))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(err(&path, SysfsErrorKind::Missing)),
            Err(e) => Err(err(&path, SysfsErrorKind::Io(e.to_string()))),
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which node queue `queue_id` is now (`None`: no such queue): one `fstatat`.
    pub fn node(&self, queue_id: u32) -> Result<Option<QueueNode>> {
        match fstatat(&*self.dir, queue_id.to_string().as_str(), AtFlags::empty()) {
            Ok(st) => Ok(Some(QueueNode {
                dev: st.st_dev,
                ino: st.st_ino,
            })),
            Err(nix::errno::Errno::ENOENT) => Ok(None),
            Err(e) => Err(err(
                &self.path.join(queue_id.to_string()),
                SysfsErrorKind::Io(e.to_string()),
            )),
        }
    }
}
