//! Lv3 preemption on AMD GPUs through `/dev/kfd`.
//!
//! - [`kfd`]: the safe KFD handle. One small `unsafe` wrapper per ioctl lives in `kfd::ioctl`
//!   (the only `unsafe` in this crate); everything above it is safe, typed, and returns errors
//!   that name the ioctl, the queue, the errno and what it means for that ioctl.
//! - [`sysfs`]: readers for the KFD topology, the amdgpu module parameters and the per-process
//!   queue list. They take a root path so that tests run on checked-in fixture trees.
//! - [`mechanism`]: Lv3 preemption of one queue (update-queue, dbg-trap) behind one trait, the
//!   guard that resumes a suspended queue on drop, and the `--mechanism auto` chooser.
//! - [`signals`]: resume every suspended queue on SIGINT/SIGTERM, without a signal handler.
//!
//! What the kernel does with each call is documented in the project's `KFD-FACTS.md`
//! (checked against Linux 6.12); the docs here cite the relevant kernel behaviour.
#![deny(unsafe_op_in_unsafe_fn)]
// `unsafe` is allowed in `kfd::ioctl` alone (see its module docs).
#![deny(unsafe_code)]

pub mod discovery;
pub mod kfd;
pub mod mechanism;
pub mod signals;
pub mod sysfs;

pub use kfd::{Kfd, KfdError};
