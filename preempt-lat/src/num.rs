//! The float -> integer conversions preempt-lat needs, with the reason each is sound, so that the
//! workspace's cast lints stay on everywhere else.

/// Rounding to a `u64` is gpu-device's rule, shared: see [`gpu_device::num::round_u64`].
pub use gpu_device::num::round_u64;

/// `x` rounded up to a `u32`, saturating like [`round_u64`] (a command count).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn ceil_u32(x: f64) -> u32 {
    x.ceil() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_rounds_up_and_saturates() {
        assert_eq!(ceil_u32(100.01), 101);
        assert_eq!(ceil_u32(1e12), u32::MAX);
        assert_eq!(ceil_u32(-1.0), 0);
    }
}
