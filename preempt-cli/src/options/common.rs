//! The options most commands share: the device and its Lv3 mechanism, the Lv1 launcher's
//! settings, the host device's workers, the LP kernel of a GPU measurement.
use super::values::{self, DeviceSpec, LpState};
use super::values::{parse_positive, parse_threshold, parse_workers};
use crate::error::{UsageError, usage};
use clap::Args;
use preempt_api::GracePeriod;
use preempt_api::{MechanismChoice, MechanismKind};

/// The Lv1 launcher's settings.
#[derive(Debug, Clone, Copy, Args)]
pub struct Lv1Options {
    /// Lv1: at most this many LP commands in flight. Must be >= --batch, at most 65536, and with T
    /// at most 600 s of LP work in flight (an Lv1 suspend waits for it). Default 8, as the seeds'
    /// experiments set it (`XQueueSetLaunchConfig(8, 4)`); XSched's own default is 16.
    #[arg(long, default_value_t = 8, value_parser = parse_threshold)]
    pub threshold: u32,
    /// Lv1: a sync point every this many commands. Default 4, as the seeds' experiments set it;
    /// XSched's own default is 8.
    #[arg(long, default_value_t = 4, value_parser = parse_positive)]
    pub batch: u32,
}

impl Lv1Options {
    /// A batch larger than the threshold is refused (a usage error).
    pub fn check(&self) -> Result<(), UsageError> {
        if self.threshold < self.batch {
            return Err(usage!(
                "--threshold ({}) must be >= --batch ({}): a batch larger than the threshold could never complete",
                self.threshold,
                self.batch
            ));
        }
        Ok(())
    }
}

/// Options shared by measurements and sweeps.
#[derive(Debug, Clone, Args)]
pub struct Common {
    #[command(flatten)]
    pub lv1: Lv1Options,
    /// Device the LP and HP work runs on.
    ///
    /// hip is hip:0. kfd (binding KFD queue ids a scheduler already has) is the C and Python
    /// API's and refused here: preempt-lat runs its LP work on a queue of its own.
    #[arg(long, default_value = "auto", value_parser = values::device())]
    pub device: DeviceSpec,
    /// Seed of the random gaps between HP requests (same seed, same gaps).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Lv3 mechanism on a GPU. The host device has one mechanism (SIGSTOP) and takes only auto.
    #[arg(long, default_value = "auto", value_parser = values::mechanism())]
    pub mechanism: MechanismChoice,
    /// Lv3 on a GPU: how long the CP lets waves run before it saves them, in units of ~1K GPU
    /// clocks (0-255; the kernel makes 0 into 1), or `default` (the firmware's). Default 1, as
    /// ROCdbgapi: a spinning kernel never reaches a natural break, so the firmware default is
    /// always waited out in full. Applies to preempt-queues and dbg-trap; update-queue cannot set
    /// it.
    #[arg(long, value_name = "N|default", value_parser = str::parse::<GracePeriod>)]
    pub grace: Option<GracePeriod>,
    /// Host device: LP worker processes ("compute units"). Default: cores - 1, at least 1.
    #[arg(long, value_parser = parse_workers)]
    pub workers: Option<u32>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

impl Common {
    /// The grace period Lv3 asks for: `--grace`, else [`GracePeriod::SHORTEST`] (ROCdbgapi's
    /// choice; see docs/kfd-facts.md#grace-period).
    pub fn grace(&self) -> GracePeriod {
        self.grace.unwrap_or(GracePeriod::SHORTEST)
    }

    /// Cross-field checks: the one-line reason a combination is refused (a usage error).
    pub fn check(&self) -> Result<(), UsageError> {
        if let Some(g) = self.grace {
            if self.device.is_host() {
                return Err(usage!(
                    "--grace {g} applies to Lv3 on an AMD GPU ({}); the host device's SIGSTOP has no grace period",
                    MechanismKind::names_where(MechanismKind::sets_grace_period).join(", ")
                ));
            }
            if let MechanismChoice::Only(k) = self.mechanism
                && !k.sets_grace_period()
            {
                return Err(usage!(
                    "--grace {g}: {k} cannot set a grace period (its ioctl has no such argument; the device's setting \
                     applies): drop --grace or use --mechanism {}",
                    MechanismKind::names_where(MechanismKind::sets_grace_period).join("|")
                ));
            }
        }
        if self.device.is_host() && self.mechanism != MechanismChoice::Auto {
            return Err(usage!(
                "--mechanism {} needs an AMD GPU (--device hip:N); the host device's Lv3 is SIGSTOP/SIGCONT (use --mechanism auto)",
                self.mechanism
            ));
        }
        self.lv1.check()
    }
}

/// The LP kernel of a GPU measurement.
#[derive(Debug, Clone, Copy, Args)]
pub struct LpOptions {
    /// GPU LP kernel: light (a few VGPRs per wave, no LDS) or heavy (every wave keeps all 512
    /// VGPRs+AGPRs live and each block 64 KiB of LDS: the most state CWSR can have to save; gfx90a/
    /// gfx94x). Written in every output; on the host device n.a., and heavy is refused there.
    #[arg(long, default_value = "light", value_parser = values::lp_state())]
    pub lp_state: LpState,
}

/// `--lp-state heavy` with `--device host` (or `sweep state` there): refused, because the host
/// device's LP commands are CPU worker processes with no GPU wave state for a save to move.
/// `light` on the host device is accepted and recorded as not applicable.
pub fn check_lp_state(device: DeviceSpec, state: LpState) -> Result<(), UsageError> {
    if device.is_host() && state == LpState::Heavy {
        return Err(UsageError::new(
            HOST_HAS_NO_LP_STATE.replace("{what}", "--lp-state heavy"),
        ));
    }
    Ok(())
}

/// Why the host device has no LP state (`{what}` = the option refused).
pub const HOST_HAS_NO_LP_STATE: &str = "{what} needs an AMD GPU (--device hip:N): the LP state is how much wave \
    state (VGPRs, AGPRs, LDS) the GPU's LP kernel leaves for CWSR to save, and the host device's LP commands are CPU \
    worker processes with none (its Lv3 is SIGSTOP/SIGCONT)";
