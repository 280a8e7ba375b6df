//! `/sys/class/kfd/kfd/proc/<pid>/queues/<queue_id>/{size,type,gpuid}`: a process's KFD queues
//! (world-readable; no addresses).
use super::{Result, SysRoot, SysfsErrorKind, err, numbered_entries, read, read_int};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcQueue {
    pub queue_id: u32,
    /// Ring size in bytes (1024 after an UPDATE_QUEUE disable: KFD clamps to its minimum).
    pub size: u64,
    /// KFD_QUEUE_TYPE_* of the kernel (0 compute, 1 SDMA, 2 HIQ, ...), as the file says.
    pub queue_type: u32,
    pub gpu_id: u32,
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
