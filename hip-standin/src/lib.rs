//! A stand-in for AMD's HIP runtime (`libamdhip64`), for tests where no GPU is: an unmodified
//! HIP program linked against the real library runs against this one when it is found first
//! (`LD_LIBRARY_PATH` holding a directory where it is named `libamdhip64.so.N`, N the major
//! version the program was linked against). What the program launches runs on the host
//! device's worker processes, so suspending a stream stops real processes: that is what the
//! interposer (`hip-interpose`) is tested against.
//!
//! It implements what a program with streams, events, device memory and the project's delay
//! kernels needs (the list is `ffi/`'s exports; anything else is absent and fails to resolve):
//! - devices: one; `hipDeviceGetStreamPriorityRange` says 1 (least) to -1 (greatest), as clr;
//! - streams: each its own queue of worker processes ([`stream`]), the null stream included;
//!   with `PREEMPT_STANDIN_CUS=exclusive` their kernels take the device's CUs one at a time
//!   ([`cus`]), as delay kernels that fill a GPU do;
//! - kernels: `hipModuleLoad` accepts any existing file, `hipModuleGetFunction` knows the delay
//!   kernels by name ([`kernels`]), and two "library" kernels, an f32 GEMM and an f32 NCHW
//!   convolution computed for real tile by tile ([`library`]); `hipLaunchKernel` (a host stub
//!   address) is refused;
//! - copies: `hipMemcpyAsync` and `hipMemsetAsync` wait for their stream and then copy (an
//!   implementation HIP allows: an async copy may complete before it returns);
//! - what no runtime has: `preempt_standin_stream_suspend` / `_resume` (host Lv3 of one stream:
//!   SIGSTOP/SIGCONT of its workers, the counterpart of a KFD queue's CWSR suspend),
//!   `preempt_standin_stream_suspend_counts` (how many suspends found a kernel running) and
//!   `preempt_standin_version`, by which the interposer knows it is not on a GPU.
//!
//! Every figure measured through it is a host figure.
#![deny(unsafe_code)]

pub mod code;
pub mod cus;
#[allow(unsafe_code)]
mod ffi;
pub mod kernels;
pub mod library;
pub mod memory;
pub mod runtime;
pub mod stream;

/// The stand-in's own interface version (`preempt_standin_version`).
pub const STANDIN_VERSION: u32 = 1;

/// One line on stderr, for what a `hipError_t` cannot say (why the runtime could not start).
pub(crate) fn warn(msg: &str) {
    eprintln!("hip-standin: {msg}");
}
