//! libpreempt_kfd: the C ABI of [`preempt_api`], for schedulers and applications that preempt their
//! own low-priority GPU work. The header, `include/preempt_kfd.h`, is generated from this crate by
//! cbindgen (`scripts/check-capi-header.sh` regenerates it and fails on a difference); its
//! opening comment states the rules (errors, threads, ownership). `docs/c-api.md` shows it in
//! use.
//!
//! Layout: [`types`] (the structs and enums the header shows), `ffi` (the `extern "C"`
//! functions: the crate's only `unsafe`, fenced by `scripts/check-unsafe.sh`), `handles`
//! (numbers, never pointers, for sessions and streams), `last_error` (per thread), `worker`
//! (where the host device's worker program is).
#![deny(unsafe_code)]

#[allow(unsafe_code)] // the one module with `unsafe`: raw pointers from C, each use with its SAFETY argument
pub mod ffi;
mod handles;
mod last_error;
pub mod types;
mod worker;
