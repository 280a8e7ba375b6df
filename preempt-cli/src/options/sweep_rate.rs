//! `sweep rate`'s options: the class experiment once per offered rate.
use super::preset::RatePreset;
use super::values::{self, Arrival, PolicyKind};
use super::values::{parse_positive, parse_positive_f64, parse_t_ms};
use super::{Common, class};
use crate::error::{UsageError, usage};
use clap::Args;
use std::path::PathBuf;

/// `sweep rate --help`'s examples: the host defaults, Fig. 15b on a GPU, a template.
pub(super) const SWEEP_RATE_EXAMPLES: &str = "Examples:
  preempt-lat sweep rate --device host
      host defaults: 4 clients, K = 2, 1 s per rate (K below the clients, so K-EDF suspends)
  preempt-lat sweep rate --device hip:0 --clients 32 --k 16 --duration-s 10 --out-dir fig15b/
      XSched Fig. 15b on a GPU: K-EDF with K = 16, log-normal arrivals (sigma 2), 100 to 1200 req/s
  preempt-lat sweep rate --device hip:0 --preset 8.3.2 --out-dir fig15b/
      the same as the seeds' test 8.3.2, and the 32 clients unscheduled at 1000 req/s beside it
  preempt-lat sweep rate --device host --rates 50,100,200 --class video:rate=3:t=1:deadline=10 \\
      --class speech:rate=1:t=2:deadline=40 --class bulk:t=1:deadline=1000
      a template: video gets 3/4 of each rate, speech 1/4; bulk (no rate=) stays saturating";

/// `sweep rate`: the class experiment at each offered rate.
#[derive(Debug, Clone, Args)]
pub struct SweepRateOptions {
    /// Total request rates to sweep, requests per second (the x axis).
    #[arg(long, value_delimiter = ',', default_value = "100,200,400,600,800,1000,1200",
          value_parser = |s: &str| parse_positive_f64(s, "--rates", 100_000.0))]
    pub rates: Vec<f64>,
    /// The policy (as `priority --policy`): kedf (Fig. 15b), up, laxity, or hpf (with --class
    /// templates of different prio=).
    #[arg(long, value_enum, default_value_t = PolicyKind::Kedf, conflicts_with = "preset")]
    pub policy: PolicyKind,
    /// kedf: how many classes run at once (host default 2; Fig. 15b's is 16, with more clients).
    #[arg(long, default_value_t = 2, value_parser = |s: &str| parse_positive(s).and_then(|k| if k <= 64 { Ok(k as usize) } else { Err(usage!("--k {k}: at most 64")) }), conflicts_with = "preset")]
    pub k: usize,
    /// The built-in set-up (without --class): this many identical clients c0, c1, ..., each an
    /// equal part of the rate (host default 4).
    #[arg(long, default_value_t = 4, value_parser = |s: &str| parse_positive(s).and_then(|n| if n <= 64 { Ok(n) } else { Err(usage!("--clients {n}: at most 64")) }),
          conflicts_with = "classes", conflicts_with = "preset")]
    pub clients: u32,
    /// The built-in set-up: T of each request (one command), in ms.
    #[arg(long = "t-ms", default_value = "0.5", value_parser = parse_t_ms, conflicts_with = "classes")]
    pub t_ms: f64,
    /// The built-in set-up: a request is due this long after it arrives, in ms (kedf's
    /// deadline, laxity's laxity).
    #[arg(long = "deadline-ms", default_value = "20", value_parser = |s: &str| parse_positive_f64(s, "--deadline-ms", 3_600_000.0),
          conflicts_with = "classes")]
    pub deadline_ms: f64,
    /// A class template instead of the built-in set-up (repeat it; keys as `priority --class`):
    /// at each swept rate R, a class with rate=W gets R x W / (sum of the W) requests per
    /// second; a class without rate= stays saturating.
    #[arg(long = "class", value_name = "NAME:KEY=V:...", value_parser = class::parse, conflicts_with = "preset")]
    pub classes: Vec<class::ClassSpec>,
    /// How requests arrive (Fig. 15b: lognormal).
    #[arg(long, value_enum, default_value_t = Arrival::Lognormal, conflicts_with = "preset")]
    pub arrival: Arrival,
    /// --arrival lognormal: the shape of the log-normal gaps (mean gap 1/rate).
    #[arg(long, default_value_t = values::DEFAULT_SIGMA, value_parser = |s: &str| parse_positive_f64(s, "--sigma", 10.0), conflicts_with = "preset")]
    pub sigma: f64,
    /// up: the round the slices add up to, in ms.
    #[arg(long = "round-ms", default_value = "10", value_parser = |s: &str| parse_positive_f64(s, "--round-ms", 10_000.0))]
    pub round_ms: f64,
    /// How long each rate runs, in seconds (host default 1; --preset 8.3.2: 10).
    #[arg(long = "duration-s", value_name = "SECONDS", value_parser = |s: &str| parse_positive_f64(s, "--duration-s", 3600.0))]
    pub duration_arg: Option<f64>,
    /// The duration in force: --duration-s, else the preset's, else 1 (set by `check`).
    #[arg(skip = 1.0)]
    pub duration_s: f64,
    /// The seeds' test 8.3.2 (Fig. 15b) in one flag: it sets the policy, K, the clients, the
    /// arrivals and 10 s per rate, and adds the comparison point (docs/priority.md#832-fig-15b);
    /// --rates, --t-ms, --deadline-ms, --duration-s, --device stay yours.
    #[arg(long, value_enum)]
    pub preset: Option<RatePreset>,
    /// At each rate, run each class alone first, then report P99 against alone and the
    /// throughput's loss (as `priority --standalone`; each rate then takes classes + 1 runs).
    #[arg(long)]
    pub standalone: bool,
    /// Directory for sweep-rate.csv, sweep-rate.json and sweep-rate.svg (created if missing).
    #[arg(long, default_value = "preempt-lat-results")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

impl SweepRateOptions {
    /// The classes whose rates are swept: the --class templates, else the built-in set-up.
    pub fn template(&self) -> Vec<class::ClassSpec> {
        if self.classes.is_empty() {
            class::built_in(self.clients, self.t_ms, self.deadline_ms)
        } else {
            self.classes.clone()
        }
    }

    /// Expands `--preset` (clap has already refused the options it sets beside it) and settles
    /// the duration: `--duration-s`, else the preset's, else 1 s.
    pub fn apply_preset(&mut self) {
        let set = self.preset.map(RatePreset::expand);
        self.duration_s = self.duration_arg.or(set.map(|x| x.duration_s)).unwrap_or(1.0);
        if let Some(x) = set {
            (self.policy, self.k, self.clients) = (x.policy, x.k, x.clients);
            (self.arrival, self.sigma) = (x.arrival, x.sigma);
        }
    }

    /// The preset's name, as outputs record it.
    pub fn preset_name(&self) -> Option<&'static str> {
        self.preset.map(RatePreset::name)
    }

    /// The rate at which the preset also runs its clients unscheduled, if it does.
    pub fn compare_at(&self) -> Option<f64> {
        self.preset.map(|p| p.expand().compare_at)
    }

    /// Cross-field checks (one line each, a usage error); the rates put in order, once each.
    pub(super) fn check(&mut self) -> Result<(), UsageError> {
        self.apply_preset();
        if self.policy == PolicyKind::Hpf && self.classes.is_empty() {
            return Err(UsageError::new(
                "sweep rate --policy hpf needs --class templates with prio=: the built-in clients share one priority, so nothing would be suspended",
            ));
        }
        let t = self.template();
        class::check_set(self.policy, &t)?;
        if class::at_rate(&t, 1.0).is_none() {
            return Err(UsageError::new(
                "sweep rate needs a class with requests to sweep: give one --class a rate= above 0",
            ));
        }
        self.rates.sort_by(f64::total_cmp);
        self.rates.dedup();
        Ok(())
    }
}
