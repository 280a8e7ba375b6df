//! The float -> integer conversions preempt-lat needs, with the reason each is sound, so that the
//! workspace's cast lints stay on everywhere else.

/// A non-negative quantity (ns, a count) rounded to a `u64`. `as` from f64 saturates (NaN and
/// negatives -> 0, beyond the range -> `u64::MAX`): the values here are parsed and range-checked
/// first (T <= 10 s), so the saturation never changes a result.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn round_u64(x: f64) -> u64 {
    x.round() as u64
}

/// `x` rounded up to a `u32`, saturating like [`round_u64`] (a command count).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn ceil_u32(x: f64) -> u32 {
    x.ceil() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_and_saturate() {
        assert_eq!(round_u64(0.5e6), 500_000);
        assert_eq!(round_u64(2.5), 3);
        assert_eq!(round_u64(-1.0), 0);
        assert_eq!(round_u64(f64::NAN), 0);
        assert_eq!(ceil_u32(100.01), 101);
        assert_eq!(ceil_u32(1e12), u32::MAX);
    }
}
