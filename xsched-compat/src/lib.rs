//! XSched's C API names over this project: `libxsched_compat.so`, installed as `libpreempt.so`
//! and `libhalhip.so` (scripts/install-xsched-compat.sh), so that a program written for XSched
//! (XpuOS/xsched) creates its XQueues and sets their priorities unchanged, and the HIP interposer
//! (`libpreempt_hip.so`, preloaded) enforces those priorities at Lv3.
//!
//! The calls keep XSched's declarations and numbers ([`types`]); what differs from XSched (Lv3
//! instead of Lv1, the launch window recorded only, no suspend/resume) and the priority mapping
//! ([`priority`]) are in docs/interposer.md#xscheds-c-api-names.
#![deny(unsafe_code)]

pub mod api;
#[allow(unsafe_code)]
mod ffi;
pub mod priority;
pub mod table;
pub mod types;
