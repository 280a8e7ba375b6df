//! The GPU device of the benchmark, on top of the [`hip_rt`] binding: the delay kernels
//! (`kernels/delay.hip`, their slot ABI, compile/load/launch and calibration: [`kernel`]; the
//! light and heavy LP kernel and the wave state each leaves for CWSR: [`state`]), the pure
//! calibration and clock-mapping logic ([`calib`]), the LP queue as lv1's hardware queue and the
//! HP probe ([`device`]), the discovery of the LP stream's KFD queue over lv3 ([`discover`]), the
//! correctness check of a run from the slots ([`verify`]), the sizing rules of a run ([`setup`])
//! and whether a run can happen here at all ([`open()`], [`usable`]); [`num`] holds the checked
//! float-to-integer rounding, which `preempt-lat` shares.
//!
//! No `unsafe` here. Nothing here prints or exits: failures are [`Error`]s, and what a caller
//! may want to report is returned as notes (e.g. [`discover::Discovered::notes`]).
#![deny(unsafe_code)]

pub mod calib;
pub mod device;
pub mod discover;
mod error;
pub mod kernel;
pub mod num;
mod open;
pub mod setup;
pub mod state;
pub mod verify;

pub use calib::{Achieved, CalSample, Calibration, ClockMap, ClockPair, GfxTarget, Grid};
pub use device::{DelayCmd, HipLpQueue, HpProbe};
pub use error::{BoxError, Error};
pub use kernel::{DelayKernel, DelaySlot, SlotStatus};
pub use open::{gfx_target, open, usable};
pub use state::{LpState, WaveState};

// This crate's API takes and returns hip-rt's types (the runtime, devices, streams, buffers):
// re-exported so that a user names them through the crate it calls, not a second dependency.
pub use hip_rt;

#[cfg(test)]
mod tests;
