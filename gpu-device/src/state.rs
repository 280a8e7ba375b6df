//! The LP kernel's wave state: which delay kernel a run uses ([`LpState`]), what the heavy one
//! must hold, and how much state the LP grid keeps resident per CU ([`WaveState`]), i.e. what a
//! CWSR save of the LP queue has to move. Pure: the numbers come from the code object's metadata
//! ([`hip_rt::code_object::Resources`]) and the grid.
//!
//! Where the hardware numbers come from (gfx90a and gfx94x, wave64):
//! - 512 VGPRs per lane in one unified file, at most 256 ArchVGPRs and 256 AccVGPRs (LLVM
//!   `AMDGPUBaseInfo::getTotalNumVGPRs` = 512 for gfx90a; the gfx90a ISA guide, 3.6.4): a wave
//!   using all 512 is the only wave its SIMD can hold, so 4 per CU (one per SIMD). The code
//!   object's `.vgpr_count` is that unified total (ArchVGPRs rounded up to 4, plus AccVGPRs).
//! - VGPRs are allocated in granules of 8, and CWSR saves what is allocated: the gfx9 trap
//!   handler saves (GPR_ALLOC.VGPR_SIZE + 1) x 8 registers per lane and the LDS in LDS_ALLOC
//!   (docs/kfd-facts.md#wave-state-per-cu).
//! - 64 KiB of LDS per work-group and per CU (LLVM refuses more for gfx90a/gfx940-942).
//! - The CWSR save area per CU is sized for 512 KiB of VGPRs+AGPRs and 64 KiB of LDS
//!   (docs/kfd-facts.md#cwsr-save-area-sizes), so the heavy kernel fills exactly that.
//!
//! SGPRs ((SGPR_SIZE + 1) x 16 per wave, about 128 bytes here) and hardware registers are left
//! out of [`WaveState`]: they are small beside the vector registers.
use std::fmt;
use std::str::FromStr;

use hip_rt::code_object::Resources;

use crate::Error;
use crate::calib::{GfxTarget, Grid};

/// Threads of one heavy block (`HEAVY_THREADS` of delay.hip): 4 waves of 64, one per SIMD.
pub const HEAVY_THREADS: u32 = 256;
/// VGPRs (ArchVGPRs + AccVGPRs) per lane the heavy kernel must hold: the whole unified file.
pub const HEAVY_VGPRS: u64 = 512;
/// AccVGPRs per lane the heavy kernel must hold: all of them.
pub const HEAVY_AGPRS: u64 = 256;
/// LDS per heavy block: all of a CU's.
pub const HEAVY_LDS_BYTES: u64 = 64 * 1024;
/// The VGPR allocation granule of gfx90a/gfx94x (wave64).
pub const VGPR_GRANULE: u64 = 8;

/// Which LP kernel a GPU run uses, i.e. how much wave state a CWSR save of the LP queue has to
/// move. Both kernels spin on the wall clock and book the same slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LpState {
    /// `delay_kernel`: a few VGPRs per wave and no LDS (the default).
    #[default]
    Light,
    /// `delay_kernel_heavy` (gfx90a/gfx94x): all 512 VGPRs per lane (256 of them AccVGPRs)
    /// holding data, and 64 KiB of LDS per block; one 4-wave block per CU.
    Heavy,
}

impl LpState {
    pub const ALL: [LpState; 2] = [LpState::Light, LpState::Heavy];
    /// The targets delay.hip compiles the heavy kernel for (its `#if`).
    pub const HEAVY_TARGETS: [&'static str; 4] = ["gfx90a", "gfx940", "gfx941", "gfx942"];

    pub fn name(self) -> &'static str {
        match self {
            LpState::Light => "light",
            LpState::Heavy => "heavy",
        }
    }

    /// The kernel's symbol in delay.hip.
    pub fn kernel_name(self) -> &'static str {
        match self {
            LpState::Light => "delay_kernel",
            LpState::Heavy => "delay_kernel_heavy",
        }
    }

    /// Whether delay.hip has this kernel for `arch`; the reason if not.
    pub fn check_target(self, arch: &GfxTarget) -> Result<(), Error> {
        if self == LpState::Heavy && !LpState::HEAVY_TARGETS.contains(&arch.processor.as_str()) {
            return Err(Error::Invalid(format!(
                "--lp-state heavy: no heavy delay kernel for {} (it is written for the unified 512-entry VGPR+AGPR \
                 file and 64 KiB LDS per CU of {}); use --lp-state light",
                arch.processor,
                LpState::HEAVY_TARGETS.join(", ")
            )));
        }
        Ok(())
    }
}

impl fmt::Display for LpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LpState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        LpState::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("invalid LP state {s:?}: light or heavy"))
    }
}

/// The wave state an LP grid keeps resident per CU while its commands run: registers as allocated
/// and LDS as declared by the code object. SGPRs and hardware registers (about 128 bytes and a
/// few dozen per wave) are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaveState {
    pub blocks_per_cu: u32,
    pub waves_per_cu: u32,
    /// VGPRs (with AccVGPRs) allocated per lane, rounded up to the granule.
    pub vgprs_per_lane: u64,
    pub lds_bytes_per_block: u64,
    /// VGPR bytes of all resident waves plus LDS bytes of all resident blocks.
    pub bytes_per_cu: u64,
}

impl WaveState {
    /// One line for a report, e.g. `4 waves/CU x 512 VGPRs + 64 KiB LDS/block = 576 KiB/CU`.
    pub fn describe(&self) -> String {
        format!(
            "{} waves/CU x {} VGPRs + {} KiB LDS/block x {} = {} KiB/CU",
            self.waves_per_cu,
            self.vgprs_per_lane,
            self.lds_bytes_per_block / 1024,
            self.blocks_per_cu,
            self.bytes_per_cu / 1024
        )
    }
}

/// The wave state per CU of `grid` (blocks spread evenly over `cu_count` CUs, every block
/// resident) for a kernel with resources `r`, in waves of `wave_size` lanes of 4-byte registers.
pub fn wave_state(r: &Resources, grid: Grid, cu_count: u32, wave_size: u32) -> WaveState {
    let wave = wave_size.max(1);
    let blocks_per_cu = grid.blocks.div_ceil(cu_count.max(1));
    let waves_per_cu = blocks_per_cu * grid.threads.div_ceil(wave);
    let vgprs_per_lane = r.vgpr_count.next_multiple_of(VGPR_GRANULE);
    let vgpr_bytes = u64::from(waves_per_cu) * vgprs_per_lane * u64::from(wave) * 4;
    WaveState {
        blocks_per_cu,
        waves_per_cu,
        vgprs_per_lane,
        lds_bytes_per_block: r.group_segment_fixed_size,
        bytes_per_cu: vgpr_bytes + u64::from(blocks_per_cu) * r.group_segment_fixed_size,
    }
}

/// The compiled heavy kernel holds what it is meant to (every register, all the LDS, the block
/// size the host launches), on `grid` of [`HEAVY_THREADS`]-thread blocks; the first thing that
/// differs otherwise. Spills are allowed (the registers are still allocated) but named.
pub fn check_heavy(r: &Resources, grid: Grid) -> Result<(), Error> {
    let mut wrong = Vec::new();
    for (what, got, want) in [
        ("VGPRs per lane (.vgpr_count)", r.vgpr_count, HEAVY_VGPRS),
        ("AccVGPRs per lane (.agpr_count)", r.agpr_count, HEAVY_AGPRS),
        (
            "LDS bytes per block (.group_segment_fixed_size)",
            r.group_segment_fixed_size,
            HEAVY_LDS_BYTES,
        ),
        (
            "threads per block (.max_flat_workgroup_size)",
            r.max_flat_workgroup_size,
            u64::from(HEAVY_THREADS),
        ),
        (
            "threads per launched block",
            u64::from(grid.threads),
            u64::from(HEAVY_THREADS),
        ),
    ] {
        if got != want {
            wrong.push(format!("{what} {got}, want {want}"));
        }
    }
    if wrong.is_empty() {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "--lp-state heavy: the compiled delay_kernel_heavy does not hold the full wave state: {} \
         (spills: {} VGPR, {} SGPR; this hiprtc's compiler allocates differently from clang-19, \
         which scripts/check-delay-kernel.sh checks)",
        wrong.join("; "),
        r.vgpr_spill_count,
        r.sgpr_spill_count
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::DELAY_SOURCE;

    #[test]
    fn heavy_kernel_targets_and_shape_match_the_source() {
        let guard = LpState::HEAVY_TARGETS
            .iter()
            .map(|t| format!("defined(__{t}__)"))
            .collect::<Vec<_>>()
            .join(" || ");
        assert!(
            DELAY_SOURCE.contains(&format!("#if {guard}\n")),
            "the #if of the heavy kernel: {guard}"
        );
        assert!(DELAY_SOURCE.contains(&format!("#define HEAVY_THREADS {} ", HEAVY_THREADS)));
        assert!(DELAY_SOURCE.contains(&format!("#define HEAVY_LDS_WORDS {} ", HEAVY_LDS_BYTES / 4)));
        assert!(DELAY_SOURCE.contains(&format!("#define HEAVY_AGPRS {} ", HEAVY_AGPRS)));
        let arch = |s: &str| GfxTarget::parse(s).unwrap();
        assert!(LpState::Heavy.check_target(&arch("gfx942:sramecc+:xnack-")).is_ok());
        assert!(LpState::Heavy.check_target(&arch("gfx90a")).is_ok());
        let e = LpState::Heavy.check_target(&arch("gfx908")).unwrap_err().to_string();
        assert!(
            e.contains("no heavy delay kernel for gfx908") && e.contains("--lp-state light"),
            "{e}"
        );
        assert!(LpState::Light.check_target(&arch("gfx908")).is_ok());
    }

    #[test]
    fn lp_state_names_round_trip() {
        for s in LpState::ALL {
            assert_eq!(s.name().parse::<LpState>(), Ok(s));
            assert_eq!(s.to_string(), s.name());
        }
        assert_eq!(LpState::default(), LpState::Light);
        assert!("medium".parse::<LpState>().unwrap_err().contains("light or heavy"));
    }

    /// The heavy kernel's resources as clang-19 compiles delay.hip for gfx942 (what
    /// scripts/check-delay-kernel.sh checks).
    fn heavy() -> Resources {
        Resources {
            vgpr_count: HEAVY_VGPRS,
            agpr_count: HEAVY_AGPRS,
            sgpr_count: 30,
            group_segment_fixed_size: HEAVY_LDS_BYTES,
            max_flat_workgroup_size: u64::from(HEAVY_THREADS),
            wavefront_size: 64,
            ..Resources::default()
        }
    }

    #[test]
    fn heavy_state_fills_a_cu() {
        let grid = Grid {
            blocks: 80,
            threads: HEAVY_THREADS,
        };
        let w = wave_state(&heavy(), grid, 80, 64);
        assert_eq!((w.blocks_per_cu, w.waves_per_cu, w.vgprs_per_lane), (1, 4, 512));
        // 4 waves x 512 registers x 64 lanes x 4 bytes = the CU's 512 KiB register file, + 64 KiB LDS.
        assert_eq!(w.bytes_per_cu, 512 * 1024 + 64 * 1024);
        assert_eq!(
            w.describe(),
            "4 waves/CU x 512 VGPRs + 64 KiB LDS/block x 1 = 576 KiB/CU"
        );
        assert!(check_heavy(&heavy(), grid).is_ok());
    }

    #[test]
    fn light_state_is_its_rounded_registers() {
        // delay_kernel as clang-19 compiles it: 7 VGPRs (allocated: 8), no LDS; 2 blocks of 1024 per CU.
        let light = Resources {
            vgpr_count: 7,
            max_flat_workgroup_size: 1024,
            wavefront_size: 64,
            ..Resources::default()
        };
        let grid = Grid {
            blocks: 160,
            threads: 1024,
        };
        let w = wave_state(&light, grid, 80, 64);
        assert_eq!((w.blocks_per_cu, w.waves_per_cu, w.vgprs_per_lane), (2, 32, 8));
        assert_eq!(w.bytes_per_cu, 32 * 8 * 64 * 4);
        assert_eq!(w.lds_bytes_per_block, 0);
    }

    #[test]
    fn a_heavy_kernel_that_lost_its_state_is_refused() {
        let grid = Grid {
            blocks: 80,
            threads: HEAVY_THREADS,
        };
        let few = Resources {
            vgpr_count: 252,
            agpr_count: 0,
            vgpr_spill_count: 3,
            ..heavy()
        };
        let e = check_heavy(&few, grid).unwrap_err().to_string();
        assert!(
            e.contains("VGPRs per lane (.vgpr_count) 252, want 512") && e.contains("AccVGPRs per lane (.agpr_count) 0"),
            "{e}"
        );
        assert!(e.contains("spills: 3 VGPR"), "{e}");
        let no_lds = Resources {
            group_segment_fixed_size: 16 * 1024,
            ..heavy()
        };
        assert!(
            check_heavy(&no_lds, grid)
                .unwrap_err()
                .to_string()
                .contains("LDS bytes per block")
        );
        let wide = Grid {
            blocks: 80,
            threads: 1024,
        };
        assert!(
            check_heavy(&heavy(), wide)
                .unwrap_err()
                .to_string()
                .contains("threads per launched block 1024")
        );
    }
}
