//! Gathering what `doctor` reports: the kernel, /dev/kfd, the KFD version, topology, module
//! parameters. Each fact is kept with its error (as text) so one missing piece never hides the
//! others.
use crate::error::{Context, Error};
use kfd::sysfs::{self, AmdgpuParams, SysRoot, TopologyNode};
use kfd::{Kfd, KfdOps};
use serde::Serialize;

/// A fact or the reason it could not be read.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Fact<T> {
    Ok(T),
    Err { error: String },
}

impl<T> Fact<T> {
    pub fn from_result<E: std::fmt::Display>(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => Fact::Ok(v),
            Err(e) => Fact::Err { error: e.to_string() },
        }
    }
    pub fn ok(&self) -> Option<&T> {
        match self {
            Fact::Ok(v) => Some(v),
            Fact::Err { .. } => None,
        }
    }
    pub fn err(&self) -> Option<&str> {
        match self {
            Fact::Ok(_) => None,
            Fact::Err { error } => Some(error),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KernelInfo {
    pub release: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HeaderInfo {
    /// What kfd-sys's bindings were generated from (no path: the committed bindings by default).
    pub source: &'static str,
    pub kfd_version: String,
}

/// A GPU (or CPU) node as doctor shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodeSummary {
    pub index: u32,
    pub gpu_id: u32,
    pub gfx_target: Option<String>,
    pub cu_count: u32,
    pub num_xcc: u32,
    pub cwsr_size: u64,
    pub ctl_stack_size: u64,
    /// (cwsr_size + debugger area) x num_xcc: what KFD allocates per queue.
    pub save_area_bytes: u64,
    pub capability: kfd::sysfs::Capability,
    pub drm_render_minor: i64,
}

impl From<&TopologyNode> for NodeSummary {
    fn from(n: &TopologyNode) -> Self {
        NodeSummary {
            index: n.index,
            gpu_id: n.gpu_id,
            gfx_target: n.gfx_target.map(|g| g.name()),
            cu_count: n.cu_count(),
            num_xcc: n.num_xcc,
            cwsr_size: n.cwsr_size,
            ctl_stack_size: n.ctl_stack_size,
            save_area_bytes: if n.is_gpu() { n.save_area_bytes() } else { 0 },
            capability: n.capability,
            drm_render_minor: n.drm_render_minor,
        }
    }
}

/// What the HIP runtime said, if it was asked.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HipInfo {
    pub library: String,
    /// Why that library: hip-rt's `Origin` (already in the process, or opened, and which name).
    pub origin: String,
    pub runtime_version: i32,
    /// Number of devices, or HIP's error for `hipGetDeviceCount`.
    pub devices: Fact<u32>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Facts {
    pub kernel: Fact<KernelInfo>,
    pub kfd_device_present: bool,
    /// `open(/dev/kfd)` then GET_VERSION.
    pub kfd_version: Fact<String>,
    /// The KFD minor version as a number, when known.
    #[serde(skip)]
    pub kfd_minor: Option<u32>,
    pub header: HeaderInfo,
    /// The patched-kernel preempt ioctl (patches/): probed with a no-op PREEMPT_QUEUES when
    /// /dev/kfd opens (ENOTTY on a stock kernel).
    pub preempt_ioctl: Option<lv3::mechanism::preempt_queues::IoctlAvailability>,
    /// Whether that probe found it (None: not probed).
    #[serde(skip)]
    pub patched_ioctl: Option<bool>,
    pub amdgpu_params: Fact<AmdgpuParams>,
    pub nodes: Fact<Vec<NodeSummary>>,
    pub hip: Fact<HipInfo>,
}

impl Facts {
    pub fn gpu_nodes(&self) -> Vec<&NodeSummary> {
        self.nodes
            .ok()
            .map(|v| v.iter().filter(|n| n.gpu_id != 0).collect())
            .unwrap_or_default()
    }
}

fn kernel_info(root: &SysRoot) -> Result<KernelInfo, Error> {
    let read = |p: &str| {
        std::fs::read_to_string(root.0.join(p))
            .map(|s| s.trim().to_string())
            .context(p)
    };
    Ok(KernelInfo {
        release: read("proc/sys/kernel/osrelease")?,
        version: read("proc/sys/kernel/version")?,
    })
}

/// Reads every fact from the running system. `hip` is asked by the caller (it loads a library).
pub fn gather(root: &SysRoot, hip: Fact<HipInfo>) -> Facts {
    let dev = root.0.join("dev/kfd");
    let handle = Kfd::open_path(&dev);
    let preempt = handle
        .as_ref()
        .ok()
        .map(|k| lv3::mechanism::preempt_queues::availability_of(k.preempt_probe()));
    let opened = handle.and_then(|k| k.version());
    Facts {
        kernel: Fact::from_result(kernel_info(root)),
        kfd_device_present: dev.exists(),
        kfd_minor: opened.as_ref().ok().map(|v| v.minor),
        kfd_version: Fact::from_result(opened.map(|v| v.to_string())),
        header: HeaderInfo {
            source: kfd::header::KFD_HEADER_SOURCE,
            kfd_version: format!("{}.{}", kfd::header::KFD_HEADER_MAJOR, kfd::header::KFD_HEADER_MINOR),
        },
        preempt_ioctl: preempt.clone(),
        patched_ioctl: preempt.as_ref().map(|a| a.available),
        amdgpu_params: Fact::from_result(AmdgpuParams::read(root)),
        nodes: Fact::from_result(sysfs::topology_nodes(root).map(|v| v.iter().map(NodeSummary::from).collect())),
        hip,
    }
}
