//! What preempt-lat does on an AMD GPU beyond a latency run (whose device is preempt-api's
//! [`preempt_api::gpu::GpuLatency`]): whether `hip:N` can run here ([`mod@usable`]),
//! `validate`'s cycles ([`mod@functional`]) and bystander check ([`mod@bystander`]), and the
//! direct launches of `overhead`'s native run ([`overhead`]).
//!
//! No `unsafe` here: the HIP handles are `Send + Sync` by the reasoning in hip-rt's `ffi` module.

pub mod bystander;
pub mod functional;
pub mod overhead;
pub mod usable;

pub use bystander::bystander;
pub use functional::functional;
pub use usable::{runnable, unusable_reason};

use crate::error::{Cause, Error};

/// Context for a HIP (or GPU device) error: `hip: <what>: <error>`.
pub(crate) fn h<E: Cause>(what: &'static str) -> impl Fn(E) -> Error {
    move |e| e.under(format!("hip: {what}"))
}

#[cfg(test)]
mod tests;
