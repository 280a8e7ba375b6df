//! When requests arrive: at a fixed rate, as a Poisson process, or with log-normal gaps, from a
//! seed.
use crate::measure::rng::SplitMix64;
use crate::options::Arrival;
#[cfg(test)]
use crate::options::values::DEFAULT_SIGMA;

/// u in (0, 1]: 53 random bits.
#[allow(clippy::cast_precision_loss)] // 53 bits: exact in an f64
fn unit(rng: &mut SplitMix64) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// Arrival times in ns from the start, `rate` per second, all before `duration_ns`; `sigma` is the
/// log-normal shape (ignored by the other kinds). The first request comes one gap after the start,
/// so the LP queue is running when it arrives. Generated as they are needed (an hour at 100000
/// requests/s is 360 M of them: `priority` keeps none); a clone is a second cursor over the same
/// times.
#[derive(Debug, Clone)]
pub struct Arrivals {
    kind: Arrival,
    sigma: f64,
    mean_gap_ns: f64,
    duration_ns: u64,
    rng: SplitMix64,
    t: f64,
}

impl Arrivals {
    pub fn new(kind: Arrival, sigma: f64, rate: f64, duration_ns: u64, seed: u64) -> Self {
        Arrivals {
            kind,
            sigma,
            mean_gap_ns: 1e9 / rate,
            duration_ns,
            rng: SplitMix64::new(seed),
            t: 0.0,
        }
    }
}

impl Iterator for Arrivals {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let (mean_gap_ns, sigma) = (self.mean_gap_ns, self.sigma);
        self.t += match self.kind {
            Arrival::Fixed => mean_gap_ns,
            Arrival::Poisson => -unit(&mut self.rng).ln() * mean_gap_ns,
            Arrival::Lognormal => {
                // exp(mu + sigma z) with z standard normal (Box-Muller) has mean
                // exp(mu + sigma^2 / 2): mu is chosen so that the mean gap is 1 / rate.
                let z = (-2.0 * unit(&mut self.rng).ln()).sqrt() * (std::f64::consts::TAU * unit(&mut self.rng)).cos();
                let mu = mean_gap_ns.ln() - sigma * sigma / 2.0;
                (mu + sigma * z).exp()
            }
        };
        let at = crate::num::round_u64(self.t);
        if at >= self.duration_ns {
            // Stays past the end: every later call is None too.
            self.t = f64::INFINITY;
            return None;
        }
        Some(at)
    }
}

/// Every arrival time of [`Arrivals::new`], in a vector.
#[cfg(test)]
pub fn times(kind: Arrival, sigma: f64, rate: f64, duration_ns: u64, seed: u64) -> Vec<u64> {
    Arrivals::new(kind, sigma, rate, duration_ns, seed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_is_evenly_spaced() {
        let t = times(Arrival::Fixed, 0.0, 100.0, 1_000_000_000, 1);
        assert_eq!(t.len(), 99, "10 ms apart, the first after 10 ms, all before 1 s");
        assert_eq!(&t[..3], &[10_000_000, 20_000_000, 30_000_000]);
    }

    #[test]
    fn poisson_has_the_rate_on_average_and_repeats_with_the_seed() {
        let a = times(Arrival::Poisson, 0.0, 1000.0, 10_000_000_000, 7);
        // 10000 expected; the standard deviation is 100.
        assert!((9500..10500).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(a, times(Arrival::Poisson, 0.0, 1000.0, 10_000_000_000, 7));
        assert_ne!(a, times(Arrival::Poisson, 0.0, 1000.0, 10_000_000_000, 8));
        let gaps: Vec<u64> = a.windows(2).map(|w| w[1] - w[0]).collect();
        let short = gaps.iter().filter(|&&g| g < 1_000_000).count();
        // P(gap < mean) = 1 - 1/e = 0.632.
        let frac = short as f64 / gaps.len() as f64;
        assert!((0.60..0.66).contains(&frac), "{frac}");
    }

    #[test]
    fn lognormal_gaps_have_the_mean_gap_and_are_bursty() {
        // sigma 1: the mean of 100k gaps is within a few percent of 1 ms (sigma 2's heavy tail
        // needs far more samples for its mean to settle).
        let a = times(Arrival::Lognormal, 1.0, 1000.0, 100_000_000_000, 3);
        let n = a.len() as f64;
        assert!((95_000.0..105_000.0).contains(&n), "{n}");
        let gaps: Vec<u64> = a.windows(2).map(|w| w[1] - w[0]).collect();
        let mut sorted = gaps.clone();
        sorted.sort_unstable();
        // The median of exp(mu + z) is exp(mu) = mean / e^(1/2): 0.607 ms.
        let median = sorted[sorted.len() / 2] as f64 / 1e6;
        assert!((0.58..0.64).contains(&median), "{median}");
        // sigma 2: burstier than Poisson: most gaps far below the mean, a few far above it.
        let b = times(Arrival::Lognormal, DEFAULT_SIGMA, 1000.0, 10_000_000_000, 3);
        let gaps: Vec<u64> = b.windows(2).map(|w| w[1] - w[0]).collect();
        let short = gaps.iter().filter(|&&g| g < 1_000_000).count() as f64 / gaps.len() as f64;
        assert!(short > 0.8, "{short}");
        assert_eq!(b, times(Arrival::Lognormal, DEFAULT_SIGMA, 1000.0, 10_000_000_000, 3));
    }

    /// A clone is a second cursor over the same times, and the end is the end.
    #[test]
    fn a_clone_goes_over_the_same_times() {
        let mut a = Arrivals::new(Arrival::Poisson, 0.0, 1000.0, 50_000_000, 9);
        a.next();
        let rest: Vec<u64> = a.clone().collect();
        assert_eq!(rest, a.by_ref().collect::<Vec<_>>());
        assert_eq!(
            (rest.len() + 1, a.next()),
            (times(Arrival::Poisson, 0.0, 1000.0, 50_000_000, 9).len(), None)
        );
    }
}
