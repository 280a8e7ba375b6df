//! The launcher's own host cost per command, measured over [`NullQueue`].
//!
//! [`measure`] submits `commands` do-nothing commands from the calling thread into an
//! [`XQueue`] over a [`NullQueue`] (every command completes the moment it is launched: no
//! device, no I/O) and waits until all have completed. What it reports is therefore what the
//! launcher itself costs the host: CPU time of every thread of the process (the submitting
//! thread, the launcher and its completion thread; `getrusage(RUSAGE_SELF)`), context switches
//! (voluntary and involuntary, same source) and wall time, per command, plus the latency of
//! `submit` itself, sampled on every [`SUBMIT_SAMPLE_EVERY`]-th command so that timing it does
//! not weigh on the rest.
//!
//! These are host figures, never GPU figures, and they move with whatever else the machine
//! runs: quote them with the machine's load beside them. The completion receiver is dropped
//! before the run (completions are only counted, as the `preempt-api` streams do), so the
//! channel's memory growth is not part of the figure.
//!
//! `cargo run --release -p lv1 --example launcher-cost -- --help` runs it from the command line.
//!
//! ```
//! use lv1::{Config, cost};
//! let c = cost::measure(10_000, Config::new(16, 8).unwrap()).unwrap();
//! assert_eq!(c.commands, 10_000);
//! println!(
//!     "host: {:.0} ns CPU, {:.4} context switches per command; submit p99 {} ns",
//!     c.cpu_ns_per_command(),
//!     c.switches_per_command(),
//!     c.submit.p99_ns
//! );
//! ```

use crate::clock::now_ns;
use crate::{Config, NullQueue, XQueue};
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;

/// One `submit` in this many is timed (with two clock reads around it).
pub const SUBMIT_SAMPLE_EVERY: u64 = 64;

/// Resource usage of the whole process at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// `CLOCK_MONOTONIC` ns ([`now_ns`]).
    pub wall_ns: u64,
    /// User plus system CPU time of every thread of the process so far, ns.
    pub cpu_ns: u64,
    /// Voluntary context switches so far (the thread slept: a futex wait, a blocking read).
    pub voluntary_switches: u64,
    /// Involuntary context switches so far (the thread was preempted).
    pub involuntary_switches: u64,
}

impl Usage {
    /// Now, from `getrusage(RUSAGE_SELF)` and [`now_ns`].
    pub fn now() -> std::io::Result<Self> {
        let u = getrusage(UsageWho::RUSAGE_SELF).map_err(std::io::Error::from)?;
        let count = |v: std::ffi::c_long| u64::try_from(v).unwrap_or(0);
        Ok(Self {
            wall_ns: now_ns(),
            cpu_ns: timeval_ns(u.user_time()) + timeval_ns(u.system_time()),
            voluntary_switches: count(u.voluntary_context_switches()),
            involuntary_switches: count(u.involuntary_context_switches()),
        })
    }

    /// What was used between `earlier` and `self` (saturating at 0).
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            wall_ns: self.wall_ns.saturating_sub(earlier.wall_ns),
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self.involuntary_switches.saturating_sub(earlier.involuntary_switches),
        }
    }
}

fn timeval_ns(t: TimeVal) -> u64 {
    let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec()).unwrap_or(0);
    secs * 1_000_000_000 + micros * 1_000
}

/// Percentiles of the sampled `submit` latencies, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubmitLatency {
    /// How many submits were timed.
    pub samples: usize,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// The slowest one.
    pub max_ns: u64,
}

impl SubmitLatency {
    /// Nearest-rank percentiles of `samples` (sorted in place); all 0 for no samples.
    pub fn from_samples(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        let Some(&max_ns) = samples.last() else {
            return Self::default();
        };
        Self {
            samples: samples.len(),
            p50_ns: nearest_rank(samples, 50),
            p99_ns: nearest_rank(samples, 99),
            max_ns,
        }
    }
}

/// The smallest value with at least `pct` % of `sorted` at or below it (`sorted` not empty).
fn nearest_rank(sorted: &[u64], pct: usize) -> u64 {
    let rank = (sorted.len() * pct).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// What one [`measure`] run used; the per-command figures are methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cost {
    /// Commands submitted.
    pub commands: u64,
    /// Completions the launcher counted by the end (equal to `commands`).
    pub completed: u64,
    /// The launcher's settings.
    pub config: Config,
    /// From the first submit until every command had completed.
    pub used: Usage,
    /// The sampled `submit` latencies.
    pub submit: SubmitLatency,
}

impl Cost {
    fn per_command(&self, v: u64) -> f64 {
        if self.commands == 0 {
            return 0.0;
        }
        // Precision: counts and nanoseconds below 2^53 are exact in f64.
        #[allow(clippy::cast_precision_loss)]
        let r = v as f64 / self.commands as f64;
        r
    }

    /// Host CPU time of all threads per command, ns.
    pub fn cpu_ns_per_command(&self) -> f64 {
        self.per_command(self.used.cpu_ns)
    }

    /// Voluntary plus involuntary context switches per command.
    pub fn switches_per_command(&self) -> f64 {
        self.per_command(self.used.voluntary_switches + self.used.involuntary_switches)
    }

    /// Wall time per command, ns.
    pub fn wall_ns_per_command(&self) -> f64 {
        self.per_command(self.used.wall_ns)
    }

    /// CPU time over wall time: how many cores the run kept busy on average.
    pub fn cores_busy(&self) -> f64 {
        if self.used.wall_ns == 0 {
            return 0.0;
        }
        #[allow(clippy::cast_precision_loss)] // as in per_command
        let r = self.used.cpu_ns as f64 / self.used.wall_ns as f64;
        r
    }
}

/// Submit `commands` commands from this thread into a fresh [`XQueue`] over a [`NullQueue`]
/// with `config`, wait until all have completed, and report what that used (see the module
/// docs). Fails only if the launcher's threads cannot start or `getrusage` fails.
pub fn measure(commands: u64, config: Config) -> std::io::Result<Cost> {
    let xq = XQueue::new(NullQueue::shared(), config)?;
    drop(xq.take_completions());
    let capacity = usize::try_from(commands / SUBMIT_SAMPLE_EVERY + 1).unwrap_or(0);
    let mut samples = Vec::with_capacity(capacity);
    let start = Usage::now()?;
    for i in 0..commands {
        if i % SUBMIT_SAMPLE_EVERY == 0 {
            let t0 = now_ns();
            xq.submit(i);
            samples.push(now_ns() - t0);
        } else {
            xq.submit(i);
        }
    }
    xq.wait_idle().map_err(std::io::Error::other)?;
    let used = Usage::now()?.since(&start);
    let completed = xq.stats().completed;
    drop(xq);
    Ok(Cost {
        commands,
        completed,
        config,
        used,
        submit: SubmitLatency::from_samples(&mut samples),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(commands: u64, used: Usage) -> Cost {
        Cost {
            commands,
            completed: commands,
            config: Config::default(),
            used,
            submit: SubmitLatency::default(),
        }
    }

    #[test]
    fn per_command_figures_divide_the_totals() {
        let used = Usage {
            wall_ns: 2_000_000,
            cpu_ns: 3_000_000,
            voluntary_switches: 30,
            involuntary_switches: 10,
        };
        let c = cost(10_000, used);
        assert_eq!(c.cpu_ns_per_command(), 300.0);
        assert_eq!(c.wall_ns_per_command(), 200.0);
        assert_eq!(c.switches_per_command(), 0.004);
        assert_eq!(c.cores_busy(), 1.5);
        let none = cost(0, Usage::default());
        assert_eq!((none.cpu_ns_per_command(), none.cores_busy()), (0.0, 0.0));
    }

    #[test]
    fn usage_since_subtracts_and_never_goes_negative() {
        let a = Usage {
            wall_ns: 100,
            cpu_ns: 50,
            voluntary_switches: 7,
            involuntary_switches: 2,
        };
        let b = Usage {
            wall_ns: 350,
            cpu_ns: 80,
            voluntary_switches: 9,
            involuntary_switches: 2,
        };
        let d = b.since(&a);
        assert_eq!(
            (d.wall_ns, d.cpu_ns, d.voluntary_switches, d.involuntary_switches),
            (250, 30, 2, 0)
        );
        assert_eq!(a.since(&b), Usage::default());
    }

    #[test]
    fn timevals_become_nanoseconds() {
        assert_eq!(timeval_ns(TimeVal::new(2, 500_000)), 2_500_000_000);
        assert_eq!(timeval_ns(TimeVal::new(0, 1)), 1_000);
    }

    #[test]
    fn submit_percentiles_are_nearest_rank() {
        let mut v: Vec<u64> = (1..=200).rev().collect();
        let l = SubmitLatency::from_samples(&mut v);
        assert_eq!((l.samples, l.p50_ns, l.p99_ns, l.max_ns), (200, 100, 198, 200));
        assert_eq!(SubmitLatency::from_samples(&mut [7]).p99_ns, 7);
        assert_eq!(SubmitLatency::from_samples(&mut []), SubmitLatency::default());
    }

    #[test]
    fn a_measurement_completes_every_command_and_counts_them() {
        let c = measure(1_000, Config::new(4, 2).unwrap()).unwrap();
        assert_eq!(
            (c.commands, c.completed, c.config),
            (1_000, 1_000, Config::new(4, 2).unwrap())
        );
        assert_eq!(c.submit.samples, 1_000usize.div_ceil(64));
        assert!(c.submit.p50_ns <= c.submit.p99_ns && c.submit.p99_ns <= c.submit.max_ns);
    }
}
