//! The numeric conversions this crate needs, each with the reason it is sound, so that the
//! workspace's cast lints stay on everywhere else.

/// A non-negative measurement (cycles, ns, a count) rounded to a `u64`. `as` from f64 saturates
/// (NaN and negatives -> 0, beyond `u64::MAX` -> `u64::MAX`), which is what every caller wants:
/// these values are never negative by construction, and far below 2^64.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(crate) fn round_u64(x: f64) -> u64 {
    x.round() as u64
}

/// A slot or probe index as the kernels' `u32` command id. Indices are bounded by buffers the
/// run allocated (at most 4 Mi commands); one beyond `u32` is an error, never a wrap.
pub(crate) fn command_id(i: impl TryInto<u32> + Copy + std::fmt::Display) -> Result<u32, crate::Error> {
    i.try_into()
        .map_err(|_| crate::Error::Invalid(format!("command index {i} does not fit the kernel's 32-bit id")))
}
