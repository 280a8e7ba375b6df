//! When HP requests arrive: at a fixed rate or as a Poisson process, from a seed.
use crate::measure::rng::SplitMix64;
use crate::options::Arrival;

/// Arrival times in ns from the start, `rate` per second, all before `duration_ns`. The first
/// request comes one gap after the start, so the LP queue is running when it arrives.
pub fn times(kind: Arrival, rate: f64, duration_ns: u64, seed: u64) -> Vec<u64> {
    let mean_gap_ns = 1e9 / rate;
    let mut rng = SplitMix64::new(seed);
    let mut out = Vec::new();
    let mut t = 0.0_f64;
    loop {
        t += match kind {
            Arrival::Fixed => mean_gap_ns,
            Arrival::Poisson => {
                // u in (0, 1]: 53 random bits.
                #[allow(clippy::cast_precision_loss)] // 53 bits: exact in an f64
                let u = ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
                -u.ln() * mean_gap_ns
            }
        };
        let at = crate::num::round_u64(t);
        if at >= duration_ns {
            return out;
        }
        out.push(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_is_evenly_spaced() {
        let t = times(Arrival::Fixed, 100.0, 1_000_000_000, 1);
        assert_eq!(t.len(), 99, "10 ms apart, the first after 10 ms, all before 1 s");
        assert_eq!(&t[..3], &[10_000_000, 20_000_000, 30_000_000]);
    }

    #[test]
    fn poisson_has_the_rate_on_average_and_repeats_with_the_seed() {
        let a = times(Arrival::Poisson, 1000.0, 10_000_000_000, 7);
        // 10000 expected; the standard deviation is 100.
        assert!((9500..10500).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(a, times(Arrival::Poisson, 1000.0, 10_000_000_000, 7));
        assert_ne!(a, times(Arrival::Poisson, 1000.0, 10_000_000_000, 8));
        let gaps: Vec<u64> = a.windows(2).map(|w| w[1] - w[0]).collect();
        let short = gaps.iter().filter(|&&g| g < 1_000_000).count();
        // P(gap < mean) = 1 - 1/e = 0.632.
        let frac = short as f64 / gaps.len() as f64;
        assert!((0.60..0.66).contains(&frac), "{frac}");
    }
}
