//! The AMD GPU path of preempt-lat, over the GPU device of the `gpu-device` crate (the delay
//! kernel, the LP queue for lv1, the HP probe, queue discovery, the slot check): the measurement
//! itself ([`mod@run`]) and what it does around the samples ([`setup`]: the command budget for
//! these parameters, clock pairs, HP floor, co-run check); `validate`'s cycles
//! ([`mod@functional`]) and bystander check ([`mod@bystander`]), and the direct launches of
//! `overhead`'s native run ([`overhead`]).
//!
//! Entry points for `main.rs`: [`runnable`] (can `hip:N` run here? the reason if not),
//! [`run()`] (one measurement, the same `RunResult` as the host device) and [`functional()`]
//! (`validate`'s hardware check), [`bystander()`] (`validate`'s bystander check), [`run::kernel_choice`]
//! (the LP kernel of a run, for a device opened once).
//!
//! No `unsafe` here: the HIP handles are `Send + Sync` by the reasoning in hip-rt's `ffi` module.

pub(crate) mod backend;
pub mod bystander;
pub mod functional;
pub mod overhead;
pub mod run;
pub mod setup;

pub use bystander::bystander;
pub use functional::functional;
pub use run::{run, runnable};

#[cfg(test)]
mod tests;
