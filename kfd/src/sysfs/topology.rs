//! `/sys/class/kfd/kfd/topology/nodes/N/{properties,gpu_id,name}`.
use super::{Result, SysRoot, SysfsErrorKind, err, numbered_entries, read, read_int};
use kfd_sys as sys;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A gfx target from `gfx_target_version` (major*10000 + minor*100 + stepping; 90402 = gfx942).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GfxTarget {
    pub major: u32,
    pub minor: u32,
    pub stepping: u32,
}

impl GfxTarget {
    pub fn from_version(v: u64) -> Option<Self> {
        if v == 0 {
            return None;
        }
        let v = u32::try_from(v).ok()?;
        Some(GfxTarget {
            major: v / 10000,
            minor: v / 100 % 100,
            stepping: v % 100,
        })
    }
    /// The LLVM processor name: minor and stepping are single hex digits (gfx90a, gfx942).
    pub fn name(&self) -> String {
        format!("gfx{}{:x}{:x}", self.major, self.minor, self.stepping)
    }
    /// MI300 family (gfx940/941/942): "AQUA_VANJARAM" in the kernel.
    pub fn is_gfx94x(&self) -> bool {
        self.major == 9 && self.minor == 4
    }
}

/// The capability bits of a node that matter for preemption and debugging (kfd_sysfs.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capability {
    pub raw: u64,
    pub trap_debug_support: bool,
    pub trap_debug_firmware_supported: bool,
    pub trap_debug_precise_memory_operations: bool,
    pub watch_points_supported: bool,
    pub aql_queue_double_map: bool,
    pub svm_api_supported: bool,
}

impl Capability {
    pub fn from_raw(raw: u64) -> Self {
        let has = |bit: u32| raw & u64::from(bit) != 0;
        Capability {
            raw,
            trap_debug_support: has(sys::HSA_CAP_TRAP_DEBUG_SUPPORT),
            trap_debug_firmware_supported: has(sys::HSA_CAP_TRAP_DEBUG_FIRMWARE_SUPPORTED),
            trap_debug_precise_memory_operations: has(sys::HSA_CAP_TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED),
            watch_points_supported: has(sys::HSA_CAP_WATCH_POINTS_SUPPORTED),
            aql_queue_double_map: has(sys::HSA_CAP_AQL_QUEUE_DOUBLE_MAP),
            svm_api_supported: has(sys::HSA_CAP_SVMAPI_SUPPORTED),
        }
    }
}

/// One topology node: a CPU (gpu_id 0) or a GPU (or a GPU partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopologyNode {
    pub index: u32,
    pub gpu_id: u32,
    pub name: String,
    pub gfx_target: Option<GfxTarget>,
    pub num_xcc: u32,
    pub simd_count: u32,
    pub simd_per_cu: u32,
    pub array_count: u32,
    pub simd_arrays_per_engine: u32,
    pub cwsr_size: u64,
    pub ctl_stack_size: u64,
    pub capability: Capability,
    pub drm_render_minor: i64,
    pub unique_id: u64,
    pub fw_version: u64,
    /// Every `key value` line, including those not typed above.
    pub properties: BTreeMap<String, u64>,
}

impl TopologyNode {
    pub fn is_gpu(&self) -> bool {
        self.gpu_id != 0
    }
    /// Compute units: simd_count / simd_per_cu (0 for a CPU node).
    pub fn cu_count(&self) -> u32 {
        self.simd_count.checked_div(self.simd_per_cu).unwrap_or(0)
    }
    /// The per-queue CWSR allocation KFD makes: (cwsr_size + debug area) x num_xcc.
    pub fn save_area_bytes(&self) -> u64 {
        let waves = cwsr_sizes(self).map(|s| s.debug_memory_size).unwrap_or(0);
        (self.cwsr_size + waves) * u64::from(self.num_xcc.max(1))
    }
}

/// Parses a `properties` file: one `key value` pair per line, value an unsigned decimal.
/// `drm_render_minor` may be -1 (no render node) and is kept as two's complement.
pub fn parse_properties(path: &Path, text: &str) -> Result<BTreeMap<String, u64>> {
    let mut m = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) else {
            return Err(err(
                path,
                SysfsErrorKind::Malformed(format!("line {}: expected 'key value', found {line:?}", i + 1)),
            ));
        };
        let val = v
            .parse::<u64>()
            .or_else(|_| v.parse::<i64>().map(i64::cast_unsigned))
            .map_err(|_| {
                err(
                    path,
                    SysfsErrorKind::Malformed(format!("line {}: '{k}' has a non-integer value {v:?}", i + 1)),
                )
            })?;
        m.insert(k.to_string(), val);
    }
    Ok(m)
}

fn node_from(index: u32, dir: &Path) -> Result<TopologyNode> {
    let ppath = dir.join("properties");
    let props = parse_properties(&ppath, &read(&ppath)?)?;
    let gpu_id: u32 = read_int(&dir.join("gpu_id"))?;
    let name = read(&dir.join("name"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let get = |k: &'static str| {
        props
            .get(k)
            .copied()
            .ok_or_else(|| err(&ppath, SysfsErrorKind::MissingKey(k)))
    };
    let get32 = |k: &'static str| -> Result<u32> {
        let v = get(k)?;
        u32::try_from(v).map_err(|_| {
            err(
                &ppath,
                SysfsErrorKind::Malformed(format!("'{k}' = {v} does not fit 32 bits")),
            )
        })
    };
    // Keys every node has since Linux 5.x; GPU-only keys are required on GPU nodes only.
    let simd_count = get32("simd_count")?;
    let gpu = gpu_id != 0;
    let opt = |k: &'static str| {
        if gpu {
            get(k)
        } else {
            Ok(props.get(k).copied().unwrap_or(0))
        }
    };
    let opt32 = |k: &'static str| if gpu { get32(k) } else { Ok(get32(k).unwrap_or(0)) };
    Ok(TopologyNode {
        index,
        gpu_id,
        name,
        gfx_target: GfxTarget::from_version(opt("gfx_target_version")?),
        num_xcc: opt32("num_xcc")?,
        simd_count,
        simd_per_cu: opt32("simd_per_cu")?,
        array_count: opt32("array_count")?,
        simd_arrays_per_engine: opt32("simd_arrays_per_engine")?,
        cwsr_size: opt("cwsr_size")?,
        ctl_stack_size: opt("ctl_stack_size")?,
        capability: Capability::from_raw(opt("capability")?),
        drm_render_minor: opt("drm_render_minor")?.cast_signed(),
        unique_id: opt("unique_id")?,
        fw_version: opt("fw_version")?,
        properties: props,
    })
}

/// All topology nodes, in index order. Missing topology directory = no KFD (`Missing`).
pub fn topology_nodes(root: &SysRoot) -> Result<Vec<TopologyNode>> {
    numbered_entries(&root.kfd_topology())?
        .into_iter()
        .map(|(i, d)| node_from(i, &d))
        .collect()
}

/// The CWSR sizes KFD computes for a node (`kfd_queue_ctx_save_restore_size`, Linux 6.12),
/// per XCC. Lets a reader check the kernel's `cwsr_size`/`ctl_stack_size` and learn the
/// debugger area, which sysfs does not show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CwsrSizes {
    pub ctl_stack_size: u64,
    pub cwsr_size: u64,
    pub debug_memory_size: u64,
}

pub fn cwsr_sizes(n: &TopologyNode) -> Option<CwsrSizes> {
    const PAGE: u64 = 4096;
    let align = |x: u64, a: u64| x.div_ceil(a) * a;
    let gfxv = u64::from(n.gfx_target.map(|g| g.major * 10000 + g.minor * 100 + g.stepping)?);
    if gfxv < 80001 || n.simd_per_cu == 0 || n.num_xcc == 0 || n.simd_arrays_per_engine == 0 {
        return None;
    }
    let cu = u64::from(n.simd_count / n.simd_per_cu / n.num_xcc);
    let waves = if gfxv < 100100 {
        (cu * 40).min(u64::from(n.array_count / n.simd_arrays_per_engine) * 512)
    } else {
        cu * 32
    };
    let vgpr = if gfxv / 100 * 100 == 90400 || gfxv == 90010 || gfxv == 90008 {
        0x80000
    } else if [110000, 110001, 110501, 120000, 120001].contains(&gfxv) {
        0x60000
    } else {
        0x40000
    };
    let wg_data = align(cu * (vgpr + 0x4000 + 0x10000 + 0x1000), PAGE);
    let per_wave = if gfxv >= 100100 { 12 } else { 8 };
    let mut ctl = align(40 + waves * per_wave + 8, PAGE);
    if gfxv / 10000 * 10000 == 100000 {
        ctl = ctl.min(0x7000);
    }
    Some(CwsrSizes {
        ctl_stack_size: ctl,
        cwsr_size: ctl + wg_data,
        debug_memory_size: align(waves * 32, 64),
    })
}
