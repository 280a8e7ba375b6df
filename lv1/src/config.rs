//! Launcher configuration: `threshold` and `batch`, validated at construction so that an
//! existing [`Config`] is always usable.

use std::fmt;

/// Lv1 launcher settings.
///
/// * `threshold`: at most this many commands are in flight on the hardware queue (launched
///   and not yet observed complete by the launcher).
/// * `batch`: a sync point is recorded after every `batch` launched commands.
///
/// `threshold >= batch >= 1`; a batch larger than the threshold could never be closed
/// because the launcher would block before launching its last command. The defaults are
/// XSched's: threshold 8, batch 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    threshold: usize,
    batch: usize,
}

/// Why a [`Config`] was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `threshold` was 0: nothing could ever be launched.
    ZeroThreshold,
    /// `batch` was 0: no sync point would ever be recorded.
    ZeroBatch,
    /// `threshold < batch`.
    ThresholdBelowBatch {
        /// The requested threshold.
        threshold: usize,
        /// The requested batch.
        batch: usize,
    },
}

impl Config {
    /// XSched's threshold.
    pub const DEFAULT_THRESHOLD: usize = 8;
    /// XSched's batch.
    pub const DEFAULT_BATCH: usize = 4;

    /// A checked configuration.
    pub fn new(threshold: usize, batch: usize) -> Result<Self, ConfigError> {
        if threshold == 0 {
            Err(ConfigError::ZeroThreshold)
        } else if batch == 0 {
            Err(ConfigError::ZeroBatch)
        } else if threshold < batch {
            Err(ConfigError::ThresholdBelowBatch { threshold, batch })
        } else {
            Ok(Self { threshold, batch })
        }
    }

    /// Maximum number of commands in flight.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Number of launched commands per sync point.
    pub fn batch(&self) -> usize {
        self.batch
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            threshold: Self::DEFAULT_THRESHOLD,
            batch: Self::DEFAULT_BATCH,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroThreshold => write!(f, "threshold must be at least 1"),
            Self::ZeroBatch => write!(f, "batch must be at least 1"),
            Self::ThresholdBelowBatch { threshold, batch } => {
                write!(f, "threshold ({threshold}) must be >= batch ({batch})")
            }
        }
    }
}

impl std::error::Error for ConfigError {}
