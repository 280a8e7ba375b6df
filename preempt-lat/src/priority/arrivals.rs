//! When HP requests arrive: at a fixed rate or as a Poisson process, from a seed.
use crate::measure::rng::SplitMix64;
use crate::options::Arrival;

/// Arrival times in ns from the start, `rate` per second, all before `duration_ns`. The first
/// request comes one gap after the start, so the LP queue is running when it arrives.
/// Generated as they are needed (an hour at 100000 requests/s is 360 M of them); a clone is a
/// second cursor over the same times.
#[derive(Debug, Clone)]
pub struct Arrivals {
    kind: Arrival,
    mean_gap_ns: f64,
    duration_ns: u64,
    rng: SplitMix64,
    t: f64,
}

impl Iterator for Arrivals {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        self.t += match self.kind {
            Arrival::Fixed => self.mean_gap_ns,
            Arrival::Poisson => {
                // u in (0, 1]: 53 random bits.
                #[allow(clippy::cast_precision_loss)] // 53 bits: exact in an f64
                let u = ((self.rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
                -u.ln() * self.mean_gap_ns
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

/// The arrivals of `kind` at `rate` per second before `duration_ns`, from `seed`.
pub fn times(kind: Arrival, rate: f64, duration_ns: u64, seed: u64) -> Arrivals {
    Arrivals {
        kind,
        mean_gap_ns: 1e9 / rate,
        duration_ns,
        rng: SplitMix64::new(seed),
        t: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_is_evenly_spaced() {
        let t: Vec<u64> = times(Arrival::Fixed, 100.0, 1_000_000_000, 1).collect();
        assert_eq!(t.len(), 99, "10 ms apart, the first after 10 ms, all before 1 s");
        assert_eq!(&t[..3], &[10_000_000, 20_000_000, 30_000_000]);
    }

    #[test]
    fn poisson_has_the_rate_on_average_and_repeats_with_the_seed() {
        let a: Vec<u64> = times(Arrival::Poisson, 1000.0, 10_000_000_000, 7).collect();
        // 10000 expected; the standard deviation is 100.
        assert!((9500..10500).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!(a.iter().copied().eq(times(Arrival::Poisson, 1000.0, 10_000_000_000, 7)));
        assert!(!a.iter().copied().eq(times(Arrival::Poisson, 1000.0, 10_000_000_000, 8)));
        let gaps: Vec<u64> = a.windows(2).map(|w| w[1] - w[0]).collect();
        let short = gaps.iter().filter(|&&g| g < 1_000_000).count();
        // P(gap < mean) = 1 - 1/e = 0.632.
        let frac = short as f64 / gaps.len() as f64;
        assert!((0.60..0.66).contains(&frac), "{frac}");
    }
}
