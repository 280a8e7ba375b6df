//! `overhead`'s options: native against scheduled, nothing preempted.
use super::Common;
use super::values::{self, Format, Level, check_level};
use super::values::{parse_positive, parse_t_ms};
use crate::error::{UsageError, usage};
use clap::Args;

/// `overhead --help`'s examples.
pub(super) const OVERHEAD_EXAMPLES: &str = "Examples:
  preempt-lat overhead --device host
      host defaults: 500 commands of T = 0.5 ms per setup and run, 5 runs (seconds in all)
  preempt-lat overhead --device hip:0 --mechanism dbg-trap --format json > overhead.json
      on a GPU: Lv3 with dbg-trap armed keeps the process in debug mode through its runs
  preempt-lat report overhead.json
      the overhead and scheduler-cpu targets judged";

/// `overhead`: native against scheduled, nothing preempted.
#[derive(Debug, Clone, Args)]
pub struct OverheadOptions {
    /// The scheduled setups to compare with native: 1 (an LP stream at Lv1: through the
    /// launcher), 2 (at Lv2, host device only: the helper registered, nothing armed), 3 (at Lv3:
    /// the mechanism armed, the helper registered). Also lv1, lv2, lv3.
    #[arg(long = "levels", value_name = "LEVELS", value_delimiter = ',', default_value = "1,3", value_parser = values::level())]
    pub levels: Vec<Level>,
    /// T, the execution time of one LP command, in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms)]
    pub t_ms: f64,
    /// LP commands per setup and run, back to back (host default 500: 0.25 s at T = 0.5 ms).
    #[arg(long, default_value_t = 500, value_parser = parse_positive)]
    pub commands: u32,
    /// Runs; every setup runs once per run (in a rotating order), and each figure is reported as
    /// min / median / max over the runs.
    #[arg(long, default_value_t = 5, value_parser = parse_positive)]
    pub runs: u32,
    /// Output format on stdout: text for people; json (every figure with its spread, what
    /// `report` judges) and csv (a row per setup) carry every parameter.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub common: Common,
}

impl OverheadOptions {
    /// The most commands one run submits (a GPU stream books a slot per command).
    pub const MAX_COMMANDS: u32 = 1_000_000;

    /// Cross-field checks (one line, a usage error); the levels put in order, once each.
    pub(super) fn check(&mut self) -> Result<(), UsageError> {
        if self.commands > Self::MAX_COMMANDS {
            return Err(usage!(
                "--commands {}: at most {} per run",
                self.commands,
                Self::MAX_COMMANDS
            ));
        }
        // A run is --commands x T per setup: on a GPU a Ctrl-C waits for its direct launches (the
        // host device's are killed after the bounded close).
        values::check_measurement(self.commands, self.t_ms)?;
        for &l in &self.levels {
            check_level("--levels", self.common.device, l)?;
        }
        self.levels = [Level::Lv1, Level::Lv2, Level::Lv3]
            .into_iter()
            .filter(|l| self.levels.contains(l))
            .collect();
        Ok(())
    }
}

/// A setup of `overhead`'s comparison, by the name its outputs and targets give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    Native,
    Scheduled(Level),
}

impl Setup {
    pub fn name(self) -> &'static str {
        match self {
            Setup::Native => "native",
            Setup::Scheduled(Level::Lv3) => "lv3",
            Setup::Scheduled(Level::Lv2) => "lv2",
            Setup::Scheduled(_) => "lv1",
        }
    }
}
