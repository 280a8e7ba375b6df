//! Readers for what KFD and amdgpu publish in sysfs, without a GPU runtime.
//!
//! Every reader takes a [`SysRoot`]: `/` on a real machine, a fixture directory in tests. All
//! failures are [`SysfsError`]s that name the file and what was wrong with it; nothing here
//! panics on malformed input.
mod params;
mod proc_queues;
mod topology;

pub use params::AmdgpuParams;
pub use proc_queues::{ProcQueue, QueueDir, QueueNode, proc_queues, queue_node};
pub use topology::{Capability, CwsrSizes, GfxTarget, TopologyNode, cwsr_sizes, topology_nodes};

use std::fmt;
use std::path::{Path, PathBuf};

/// The root under which `sys/...` is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot(pub PathBuf);

impl Default for SysRoot {
    fn default() -> Self {
        SysRoot(PathBuf::from("/"))
    }
}

impl SysRoot {
    pub fn new(p: impl Into<PathBuf>) -> Self {
        SysRoot(p.into())
    }
    pub fn kfd_topology(&self) -> PathBuf {
        self.0.join("sys/class/kfd/kfd/topology/nodes")
    }
    pub fn kfd_proc(&self) -> PathBuf {
        self.0.join("sys/class/kfd/kfd/proc")
    }
    pub fn amdgpu_params(&self) -> PathBuf {
        self.0.join("sys/module/amdgpu/parameters")
    }
}

/// What went wrong reading a sysfs file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysfsErrorKind {
    /// The file or directory does not exist.
    Missing,
    /// Reading failed with this OS error.
    Io(String),
    /// The content does not parse.
    Malformed(String),
    /// A required key is absent from a key-value file.
    MissingKey(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsError {
    pub path: PathBuf,
    pub kind: SysfsErrorKind,
}

impl fmt::Display for SysfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            SysfsErrorKind::Missing => write!(f, "{p}: does not exist"),
            SysfsErrorKind::Io(e) => write!(f, "{p}: cannot read: {e}"),
            SysfsErrorKind::Malformed(why) => write!(f, "{p}: malformed: {why}"),
            SysfsErrorKind::MissingKey(k) => write!(f, "{p}: has no '{k}' line (truncated file?)"),
        }
    }
}

impl std::error::Error for SysfsError {}

pub type Result<T> = std::result::Result<T, SysfsError>;

pub(crate) fn err(path: &Path, kind: SysfsErrorKind) -> SysfsError {
    SysfsError {
        path: path.to_path_buf(),
        kind,
    }
}

/// Reads a whole sysfs file as text.
pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound => SysfsErrorKind::Missing,
            std::io::ErrorKind::InvalidData => SysfsErrorKind::Malformed("not UTF-8 text".into()),
            _ => SysfsErrorKind::Io(e.to_string()),
        };
        err(path, kind)
    })
}

/// Reads a file holding one integer (sysfs files may or may not end in a newline).
pub(crate) fn read_int<T: std::str::FromStr>(path: &Path) -> Result<T> {
    let s = read(path)?;
    let t = s.trim();
    t.parse().map_err(|_| {
        err(
            path,
            SysfsErrorKind::Malformed(format!("expected an integer, found {t:?}")),
        )
    })
}

/// Lists the entries of a directory whose names are decimal numbers, sorted numerically.
pub(crate) fn numbered_entries(dir: &Path) -> Result<Vec<(u32, PathBuf)>> {
    let rd = std::fs::read_dir(dir).map_err(|e| {
        let kind = if e.kind() == std::io::ErrorKind::NotFound {
            SysfsErrorKind::Missing
        } else {
            SysfsErrorKind::Io(e.to_string())
        };
        err(dir, kind)
    })?;
    let mut v: Vec<(u32, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.parse().ok())
                .map(|n| (n, e.path()))
        })
        .collect();
    v.sort_by_key(|(n, _)| *n);
    Ok(v)
}
