//! `soak`'s options: priority and the class experiment back to back for a long time, in one
//! process on one opened device.
use super::values::{self, Format};
use super::{Cli, Command, Common, Preset, PriorityOptions};
use crate::error::{UsageError, usage};
use clap::{Args, Parser};
use std::path::PathBuf;

/// `soak --help`'s examples.
pub(super) const SOAK_EXAMPLES: &str = "Examples:
  preempt-lat soak --device hip:0 --out-dir soak/
      an hour: 60 windows of 60 s, 7.2.1's priority load and 8.3.1's two clients in turn
  preempt-lat soak --device host --minutes 2 --window-s 10
      the suite's two minutes on the host device (host figures)
  preempt-lat report soak/soak.json
      the drift judged beside the other results";

/// The fewest windows a drift can be read from: a third of them at each end, two windows each.
pub const MIN_WINDOWS: u32 = 6;

/// The shortest window, in seconds: one holds 7.2.1's 20 HP requests a second and 8.3.1's 10, so
/// a shorter one may have no request to take a P99 of.
pub const MIN_WINDOW_S: f64 = 1.0;

/// `soak`: stability over time.
#[derive(Debug, Clone, Args)]
pub struct SoakOptions {
    /// How long the whole run lasts, in minutes (the seeds' stability item asks for an hour).
    #[arg(long, default_value = "60", value_parser = |s: &str| values::parse_positive_f64(s, "--minutes", 7.0 * 24.0 * 60.0))]
    pub minutes: f64,
    /// Each window's length in seconds (1 to 3600): the run is a series of windows, 7.2.1's priority load
    /// (lv3 mode) and 8.3.1's HP client against an LP client (hpf) in turn, each in sessions of
    /// its own on the device opened once. A window's HP P50/P99 and this process's RSS, open
    /// descriptors and threads after it make the series the drift is read from.
    #[arg(long = "window-s", default_value = "60", value_parser = |s: &str| values::parse_positive_f64(s, "--window-s", 3600.0))]
    pub window_s: f64,
    /// The most this process's RSS may grow, in MiB, from the end of the second window (both
    /// experiments warmed up) to the end of the last; more is a FAIL (exit status 3), as are
    /// open descriptors or threads that grew, or an LP command not completed exactly once.
    #[arg(long = "rss-growth-mib", default_value = "64", value_parser = |s: &str| values::parse_positive_f64(s, "--rss-growth-mib", 1e6))]
    pub rss_growth_mib: f64,
    /// Output format on stdout: text for people; json and csv (a row per window) carry every
    /// parameter.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Directory for soak.csv and soak.json (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

impl SoakOptions {
    /// How many windows the run has: --minutes rounded up to whole windows.
    pub fn windows(&self) -> u32 {
        crate::num::ceil_u32(self.minutes * 60.0 / self.window_s - 1e-9)
    }

    /// At least [`MIN_WINDOWS`] windows.
    pub(super) fn check(&self) -> Result<(), UsageError> {
        self.common.check()?;
        if self.window_s < MIN_WINDOW_S {
            return Err(usage!(
                "--window-s {}: at least {MIN_WINDOW_S} s (a window holds 7.2.1's 20 and 8.3.1's 10 HP requests a second)",
                self.window_s
            ));
        }
        if self.windows() < MIN_WINDOWS {
            return Err(usage!(
                "--minutes {} with --window-s {} makes {} windows: a drift needs at least {MIN_WINDOWS} (lengthen \
                 --minutes or shorten --window-s)",
                self.minutes,
                self.window_s,
                self.windows()
            ));
        }
        Ok(())
    }

    /// The options of one window of `preset`: the preset's experiment as `priority --preset`
    /// defines it, for one window, with this run's device, seed and workers, quiet.
    pub fn window_options(&self, preset: Preset) -> Result<PriorityOptions, UsageError> {
        let parsed = Cli::try_parse_from(["preempt-lat", "priority", "--preset", preset.name()])
            .map_err(|e| usage!("internal: the preset {} does not parse: {e}", preset.name()))?
            .checked()?;
        let Command::Priority(mut o) = parsed else {
            return Err(usage!(
                "internal: the preset {} is not a priority command",
                preset.name()
            ));
        };
        o.common = self.common.clone();
        o.common.quiet = true;
        o.duration_s = self.window_s;
        o.standalone = false;
        Ok(o)
    }
}
