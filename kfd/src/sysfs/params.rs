//! `/sys/module/amdgpu/parameters/`: the knobs that decide how preemption behaves.
use super::{Result, SysRoot, read_int};
use serde::Serialize;

/// The amdgpu module parameters the toolkit reports. Absent files are `None` (older kernels, or
/// amdgpu not loaded); a present but malformed file is an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AmdgpuParams {
    /// 0 = HWS, 1 = HWS without over-subscription, 2 = no HWS (debug only).
    pub sched_policy: Option<i32>,
    /// 0 = waves are drained, not saved, on preemption.
    pub cwsr_enable: Option<i32>,
    pub hws_max_conc_proc: Option<i32>,
    pub mes: Option<i32>,
    /// How long an unmap may take before KFD declares the HWS hung and resets the GPU.
    pub queue_preemption_timeout_ms: Option<i32>,
}

impl AmdgpuParams {
    pub fn read(root: &SysRoot) -> Result<Self> {
        let dir = root.amdgpu_params();
        let one = |name: &str| -> Result<Option<i32>> {
            let p = dir.join(name);
            if !p.exists() {
                return Ok(None);
            }
            read_int(&p).map(Some)
        };
        Ok(AmdgpuParams {
            sched_policy: one("sched_policy")?,
            cwsr_enable: one("cwsr_enable")?,
            hws_max_conc_proc: one("hws_max_conc_proc")?,
            mes: one("mes")?,
            queue_preemption_timeout_ms: one("queue_preemption_timeout_ms")?,
        })
    }

    /// Whether the module's parameter directory exists at all.
    pub fn module_loaded(root: &SysRoot) -> bool {
        root.amdgpu_params().is_dir()
    }
}
