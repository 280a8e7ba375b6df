//! `libpreempt_hip.so`: priority for HIP programs nobody rewrites. Preloaded into an
//! unmodified program (`LD_PRELOAD`), it takes the program's own words for priority (a
//! stream's HIP priority, `hipStreamCreateWithPriority`, i.e. `torch.cuda.Stream(priority=..)`;
//! else `PREEMPT_PRIORITY`), gives lower-priority streams a queue of their own, and suspends them
//! at Lv3 while a stream of higher priority has work in flight ([`sched`]'s rule). On a GPU the
//! queues and the suspension are preempt-api's (`gpu::OwnQueueStream`, the KFD mechanisms); on
//! the project's stand-in runtime (`hip-standin`) they are host queues and SIGSTOP.
//!
//! The manual, with what is intercepted and why `LD_PRELOAD`: docs/interposer.md.
#![deny(unsafe_code)]

pub mod config;
pub mod daemon;
pub mod device;
pub mod exit_line;
#[allow(unsafe_code)]
mod ffi;
#[allow(unsafe_code)]
mod hooks;
pub mod interposer;
pub mod lv1;
pub mod sched;
pub mod watch;
