//! How large each stage's runs are: full, or `--quick`.
use crate::options::Preset;

/// The sizes of the runs: full, or `--quick`.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub samples: u32,
    pub warmup: u32,
    pub sweep_t_ms: &'static str,
    pub sweep_samples: u32,
    pub thresholds: &'static str,
    pub threshold_t_ms: &'static str,
    pub commands: u32,
    pub priority_s: f64,
    /// The partition run's length (s).
    pub partition_s: f64,
    /// `overhead --runs` and `--commands` (of T each, per setup and run).
    pub overhead_runs: u32,
    pub overhead_commands: u32,
    /// Multiplies every bound.
    pub bound_scale: f64,
}

impl Sizes {
    pub const FULL: Sizes = Sizes {
        samples: 1000,
        warmup: 20,
        sweep_t_ms: "0.01,0.1,0.5,1,2",
        sweep_samples: 200,
        thresholds: "1,2,4,6,8,10,12,16",
        threshold_t_ms: "0.01,0.1,1",
        commands: 200,
        priority_s: 3.0,
        // Section 10 of docs/hardware-validation.md runs the partition for 10 s: a thousand
        // rounds of 10 ms, in each a turn per queue (a suspend and a resume through the mechanism).
        partition_s: 10.0,
        // overhead's own defaults (5 runs of 500 commands: 0.25 s of work per setup at T = 0.5 ms).
        overhead_runs: 5,
        overhead_commands: 500,
        bound_scale: 1.0,
    };
    pub const QUICK: Sizes = Sizes {
        samples: 100,
        warmup: 5,
        sweep_t_ms: "0.1,0.5,1",
        sweep_samples: 40,
        thresholds: "1,4,10",
        threshold_t_ms: "0.1,1",
        commands: 100,
        priority_s: 1.0,
        // 200 rounds (host figures: 1-2 points off 75:25 in 1-2 s on an idle 2-core VM).
        partition_s: 2.0,
        overhead_runs: 3,
        overhead_commands: 200,
        bound_scale: 0.5,
    };

    /// A preset stage's `--duration-s` with `--quick` (without: the preset's own, the seeds'
    /// set-up). Each run of a preset with `--standalone` (7.2.2-native, 8.1.1, 8.3.1) is three
    /// runs of this; together the presets add about 45 s to the host's `--quick` on a 2-core VM.
    /// 8.2.1's 5.5 s hold one speech request (it arrives at 3 s and took about 2.1 s on the host
    /// device; one still running at the end is judged by its age); 8.3.1's 2 s hold 20 HP
    /// requests.
    pub fn quick_preset_s(p: Preset) -> f64 {
        match p {
            Preset::Fig9 => Sizes::QUICK.priority_s,
            Preset::PartitionNative => 1.0,
            Preset::Harvest => 1.5,
            Preset::Videoconf | Preset::VideoconfFixed | Preset::VideoconfNative => 5.5,
            Preset::Fig15a => 2.0,
        }
    }

    pub fn of(quick: bool) -> Sizes {
        if quick { Sizes::QUICK } else { Sizes::FULL }
    }
}
