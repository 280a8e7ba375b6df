//! The numeric conversions this crate needs, each with the reason it is sound, so that the
//! workspace's cast lints stay on everywhere else. [`round_u64`] is public: `preempt-lat` rounds
//! its parameters and measurements with the same rule.

/// A non-negative measurement or quantity (cycles, ns, a count) rounded to a `u64`. `as` from f64
/// saturates (NaN and negatives -> 0, beyond `u64::MAX` -> `u64::MAX`), which is what every caller
/// wants: these values are never negative by construction, far below 2^64, and parameters are
/// range-checked before they get here (e.g. T <= 10 s), so the saturation never changes a result.
///
/// ```
/// use gpu_device::num::round_u64;
/// assert_eq!(round_u64(0.5e6), 500_000);
/// assert_eq!(round_u64(2.5), 3);
/// assert_eq!((round_u64(-1.0), round_u64(f64::NAN)), (0, 0));
/// assert_eq!(round_u64(1e30), u64::MAX);
/// ```
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn round_u64(x: f64) -> u64 {
    x.round() as u64
}

/// A slot or probe index as the kernels' `u32` command id. Indices are bounded by buffers the
/// run allocated (at most 4 Mi commands); one beyond `u32` is an error, never a wrap.
pub(crate) fn command_id(i: impl TryInto<u32> + Copy + std::fmt::Display) -> Result<u32, crate::Error> {
    i.try_into()
        .map_err(|_| crate::Error::Invalid(format!("command index {i} does not fit the kernel's 32-bit id")))
}
