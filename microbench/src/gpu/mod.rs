//! The AMD GPU path of preempt-lat: the HIP device as an lv1 hardware queue ([`device`]), the
//! discovery of the LP stream's KFD queue ([`discover`], over lv3's pure `discovery`), the
//! correctness check of a GPU run ([`verify`], pure), the measurement itself ([`mod@run`]) and
//! what it checks around the samples ([`setup`]: grid, calibration points, clock pairs, HP floor,
//! co-run check); `validate`'s cycles ([`mod@functional`]) and the threshold sweep's point
//! ([`overhead`]).
//!
//! Entry points for `main.rs`: [`usable`] (can `hip:N` run here? the reason if not),
//! [`run()`] (one measurement, the same `RunResult` as the host device) and [`functional()`]
//! (`validate`'s hardware check), [`lv1_overhead`]
//! (the threshold sweep's point, as `measure::host::lv1_overhead` plus the device index).
//!
//! No `unsafe` here: the HIP handles are `Send + Sync` by the reasoning in `hip/ffi/mod.rs`.

pub mod device;
pub mod discover;
pub mod functional;
pub mod overhead;
pub mod run;
pub mod setup;
pub mod verify;

pub use functional::functional;
pub use overhead::lv1_overhead;
pub use run::{run, usable};
