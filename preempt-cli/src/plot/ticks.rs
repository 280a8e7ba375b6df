//! Axis ticks and their labels, as small pure functions: decade ticks with minor ticks on log
//! axes, "nice" steps on linear axes, integer ticks where the variable is an integer, and
//! numbers written the way a person would (no `0.30000000000000004`, no `10000.0`).

/// `m x 10^e` as the f64 nearest to that decimal (so `3 x 10^-1` is `0.3`, not `0.30000000000000004`).
fn decimal(m: i64, e: i32) -> f64 {
    format!("{m}e{e}").parse().unwrap_or(f64::NAN)
}

/// The decade exponent of `v` (> 0): `floor(log10 v)`, corrected where `log10` lands just below
/// an exact power of ten.
#[allow(clippy::cast_possible_truncation)] // log10 of a finite positive f64 is within +-330
fn exponent(v: f64) -> i32 {
    let e = v.log10().floor() as i32;
    if decimal(1, e + 1) <= v { e + 1 } else { e }
}

/// Ticks of a log axis over `[lo, hi]` (both > 0): `(major, minor)`. Majors are the powers of
/// ten inside the range; where fewer than three fit, the 1-2-5 steps of each decade, and where
/// fewer than three of those fit or the range spans less than 20x, every integer multiple. Minors are the other
/// integer multiples (2..9) of each decade inside the range.
pub fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return (Vec::new(), Vec::new());
    }
    let inside = |v: &f64| *v >= lo * (1.0 - 1e-12) && *v <= hi * (1.0 + 1e-12);
    let (e0, e1) = (exponent(lo), exponent(hi));
    let all: Vec<(i64, f64)> = (e0..=e1)
        .flat_map(|e| (1..=9).map(move |m| (m, decimal(m, e))))
        .filter(|(_, v)| inside(v))
        .collect();
    let decades: Vec<f64> = all.iter().filter(|(m, _)| *m == 1).map(|p| p.1).collect();
    let one_two_five: Vec<f64> = all
        .iter()
        .filter(|(m, _)| matches!(m, 1 | 2 | 5))
        .map(|p| p.1)
        .collect();
    let major: Vec<f64> = if decades.len() >= 3 {
        decades
    } else if one_two_five.len() >= 3 && hi / lo >= 20.0 {
        one_two_five
    } else {
        all.iter().map(|p| p.1).collect()
    };
    let minor = all.iter().map(|p| p.1).filter(|v| !major.contains(v)).collect();
    (major, minor)
}

/// The first multiple of `step` at or above `lo` (as an index: the tick is index x step), with
/// a tolerance for quotients such as 0.7 / 0.1 = 6.999999999999999.
#[allow(clippy::cast_possible_truncation)] // tick indices of a plot's range
fn first_multiple(lo: f64, step: f64) -> i64 {
    (lo / step - 1e-9).ceil() as i64
}

/// How many multiples of `step` lie in `[lo, hi]` (same tolerance).
#[allow(clippy::cast_possible_truncation)] // tick counts of a plot's range
fn multiples(lo: f64, hi: f64, step: f64) -> i64 {
    (hi / step + 1e-9).floor() as i64 - first_multiple(lo, step) + 1
}

/// The smallest "nice" step (1, 2 or 5 x 10^k) with at most `max_ticks` multiples in `[lo, hi]`,
/// as (m, k).
fn nice_step(lo: f64, hi: f64, max_ticks: usize) -> (i64, i32) {
    let max = i64::try_from(max_ticks.max(2)).unwrap_or(i64::MAX);
    let parts = f64::from(u32::try_from(max_ticks.max(2) - 1).unwrap_or(u32::MAX));
    let e = exponent(((hi - lo) / parts).max(f64::MIN_POSITIVE));
    (e - 1..=e + 2)
        .flat_map(|e| [1, 2, 5].map(|m| (m, e)))
        .find(|&(m, e)| multiples(lo, hi, decimal(m, e)) <= max)
        .unwrap_or((1, e + 2))
}

/// Ticks of a linear axis over `[lo, hi]`: multiples of a 1-2-5 step, at most `max_ticks`.
#[allow(clippy::cast_possible_truncation)] // tick indices of a range cut into <= max_ticks parts
pub fn linear_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        return if lo.is_finite() { vec![lo] } else { Vec::new() };
    }
    let (m, e) = nice_step(lo, hi, max_ticks);
    let step = decimal(m, e);
    let first = first_multiple(lo, step);
    (first..first + multiples(lo, hi, step))
        .map(|i| decimal(i * m, e))
        .collect()
}

/// Ticks of an integer variable over `[lo, hi]`: whole numbers only, with a step of 1, 2, 5,
/// 10, ... so that there are at most `max_ticks`.
#[allow(clippy::cast_possible_truncation)] // whole numbers of a plot's range
pub fn integer_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    let (a, b) = (lo.ceil() as i64, hi.floor() as i64);
    if b < a {
        return Vec::new();
    }
    let n = usize::try_from(b - a + 1).unwrap_or(usize::MAX);
    let step = if n <= max_ticks.max(1) {
        1
    } else {
        let (m, e) = nice_step(lo, hi, max_ticks);
        (m * 10_i64.pow(u32::try_from(e).unwrap_or(0))).max(1)
    };
    (a..=b)
        .filter(|i| i.rem_euclid(step) == 0)
        .map(|i| decimal(i, 0))
        .collect()
}

/// A tick label: at most 4 significant digits, no trailing zeros or point (`10000`, `0.3`,
/// `2.5`), and powers-of-ten notation beyond 10^6 or below 10^-4 (`1e-5`, `2e7`).
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return format!("{v}");
    }
    let e = exponent(v.abs());
    if !(-4..=6).contains(&e) {
        let s = format!("{v:.3e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        return format!("{}e{exp}", trim(mant));
    }
    let decimals = usize::try_from((3 - e).max(0)).unwrap_or(0);
    trim(&format!("{v:.decimals$}"))
}

fn trim(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decade_ticks_with_minor_ticks() {
        let (major, minor) = log_ticks(0.008, 2.5);
        assert_eq!(major, vec![0.01, 0.1, 1.0]);
        assert_eq!(minor.first(), Some(&0.008));
        assert!(minor.contains(&0.3) && minor.contains(&2.0) && !minor.contains(&3.0));
        assert_eq!(
            minor.len(),
            2 + 8 + 8 + 1,
            "8..9 x 10^-3, 2..9 x 10^-2 and 10^-1, 2 x 10^0"
        );
        let labels: Vec<String> = major.iter().chain(&minor).map(|&v| fmt_num(v)).collect();
        assert!(labels.iter().all(|l| l.len() <= 5), "{labels:?}");
    }

    #[test]
    fn narrow_log_range_falls_back_to_1_2_5_then_to_every_multiple() {
        let (major, minor) = log_ticks(1.5, 60.0);
        assert_eq!(major, vec![2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(minor.len(), 14 - 5, "2..9 and 10..60 by tens, less the majors");
        let (major, minor) = log_ticks(12.0, 60.0);
        assert_eq!(major, vec![20.0, 30.0, 40.0, 50.0, 60.0]);
        assert!(minor.is_empty());
        let (major, _) = log_ticks(1.9, 10.5);
        assert_eq!(
            major,
            (2..=10).map(f64::from).collect::<Vec<_>>(),
            "under 20x: every multiple"
        );
        assert_eq!(log_ticks(0.0, 1.0), (vec![], vec![]), "a log axis needs lo > 0");
    }

    #[test]
    fn exponent_is_exact_at_powers_of_ten() {
        for e in -9..=9 {
            assert_eq!(exponent(decimal(1, e)), e, "10^{e}");
            assert_eq!(exponent(decimal(9, e)), e, "9 x 10^{e}");
        }
    }

    #[test]
    fn linear_ticks_are_nice_multiples() {
        assert_eq!(linear_ticks(0.0, 1.0, 6), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(
            linear_ticks(-3.0, 12.0, 8),
            vec![-2.0, 0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
        );
        let t = linear_ticks(0.1, 0.7, 7);
        assert_eq!(t, vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
        assert_eq!(fmt_num(t[2]), "0.3");
    }

    #[test]
    fn integer_ticks_are_whole_numbers() {
        assert_eq!(
            integer_ticks(0.6, 10.4, 12),
            (1..=10).map(f64::from).collect::<Vec<_>>()
        );
        assert_eq!(integer_ticks(0.0, 100.0, 6), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert!(integer_ticks(0.2, 0.8, 5).is_empty());
        assert_eq!(
            integer_ticks(0.5, 16.5, 10),
            vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0]
        );
    }

    #[test]
    fn numbers_read_like_a_person_wrote_them() {
        for (v, want) in [
            (10000.0, "10000"),
            (0.1 + 0.2, "0.3"),
            (2.5, "2.5"),
            (1.0, "1"),
            (0.001, "0.001"),
            (1e-5, "1e-5"),
            (2e7, "2e7"),
            (123.456, "123.5"),
            (-40.0, "-40"),
            (0.0, "0"),
        ] {
            assert_eq!(fmt_num(v), want, "{v}");
        }
    }
}
