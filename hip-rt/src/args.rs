//! Kernel arguments and the launch check: what a launch passes ([`LaunchConfig`], [`KernelArgs`])
//! and [`check_args`], which the FFI module runs right before hipModuleLaunchKernel (see
//! [the `launch` module](crate::launch) for why that makes the launch safe). Pure: no FFI here.

use crate::code_object::{KernelInfo, ParamKind};
use crate::{HipError, Mem};

/// The launch shape: `grid` blocks (x, y, z) of `block` threads (x, y, z), and the dynamic LDS.
/// Checked at launch: no zero dimension, at most 1024 threads per block.
///
/// ```
/// let c = hip_rt::LaunchConfig { grid: [4, 4, 1], block: [16, 16, 1], shared_mem_bytes: 0 };
/// assert_eq!(c.block.iter().product::<u32>(), 256);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// `blocks` blocks of `threads` threads, in x only, no dynamic LDS.
    ///
    /// ```
    /// let c = hip_rt::LaunchConfig::linear(160, 1024);
    /// assert_eq!((c.grid, c.block), ([160, 1, 1], [1024, 1, 1]));
    /// ```
    pub fn linear(blocks: u32, threads: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [blocks, 1, 1],
            block: [threads, 1, 1],
            shared_mem_bytes: 0,
        }
    }

    /// Every dimension at least 1, at most 1024 threads per block.
    pub(crate) fn check(&self) -> Result<(), HipError> {
        let threads = self.block.iter().try_fold(1u32, |a, &b| a.checked_mul(b));
        if self.grid.contains(&0) || self.block.contains(&0) || threads.is_none_or(|t| t > 1024) {
            return Err(HipError::Invalid(format!(
                "bad launch shape: grid {:?} x block {:?}",
                self.grid, self.block
            )));
        }
        Ok(())
    }
}

/// A value argument: up to 8 bytes in native byte order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArgValue {
    pub(crate) bytes: [u8; 8],
    len: usize,
}

/// One kernel argument.
#[derive(Clone, Copy)]
pub(crate) enum Arg<'a> {
    Mem(Mem<'a>),
    Value(ArgValue),
}

/// What the metadata check sees of an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgShape {
    Pointer,
    Value(usize),
}

impl Arg<'_> {
    pub(crate) fn shape(&self) -> ArgShape {
        match self {
            Arg::Mem(_) => ArgShape::Pointer,
            Arg::Value(v) => ArgShape::Value(v.len),
        }
    }
}

/// The arguments of one launch, in the kernel's parameter order. Pointer parameters take a
/// [`Mem`] (a buffer of this crate, borrowed for `'a`); value parameters take a number of the
/// parameter's C size (`u32` for `unsigned int`, `u64` for `unsigned long long`, ...).
///
/// ```
/// use hip_rt::KernelArgs;
/// let args = KernelArgs::new().u32(3).u64(1 << 40).f32(0.5);
/// assert_eq!(args.len(), 3);
/// ```
#[derive(Clone, Default)]
pub struct KernelArgs<'a> {
    pub(crate) args: Vec<Arg<'a>>,
}

macro_rules! value_args {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Appends a `", stringify!($t), "` value parameter.")]
        pub fn $name(self, v: $t) -> Self {
            self.value(&v.to_ne_bytes())
        }
    )*};
}

impl<'a> KernelArgs<'a> {
    pub fn new() -> Self {
        KernelArgs { args: Vec::new() }
    }

    /// Appends a pointer parameter: the address of `mem`.
    pub fn mem(mut self, mem: impl Into<Mem<'a>>) -> Self {
        self.args.push(Arg::Mem(mem.into()));
        self
    }

    fn value(mut self, b: &[u8]) -> Self {
        let mut bytes = [0u8; 8];
        bytes[..b.len()].copy_from_slice(b);
        self.args.push(Arg::Value(ArgValue { bytes, len: b.len() }));
        self
    }

    value_args!(u8: u8, i8: i8, u16: u16, i16: i16, u32: u32, i32: i32, u64: u64, i64: i64, f32: f32, f64: f64);

    pub fn len(&self) -> usize {
        self.args.len()
    }

    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }
}

/// The launch check: `args` must match `kernel`'s explicit parameters one to one.
pub(crate) fn check_args(kernel: &KernelInfo, args: impl ExactSizeIterator<Item = ArgShape>) -> Result<(), HipError> {
    let bad = |why: String| HipError::Invalid(format!("launch of {}: {why}", kernel.name));
    if args.len() != kernel.params.len() {
        return Err(bad(format!(
            "{} arguments given, the kernel has {} parameters",
            args.len(),
            kernel.params.len()
        )));
    }
    for (i, (a, p)) in args.zip(&kernel.params).enumerate() {
        let ok = match (&p.kind, a) {
            (ParamKind::GlobalBuffer, ArgShape::Pointer) => p.size == 8,
            (ParamKind::ByValue, ArgShape::Value(n)) => p.size == n as u64 && n <= 8,
            _ => false,
        };
        if !ok {
            return Err(bad(format!(
                "argument {i} is {a:?}, parameter {i} is {:?} of {} bytes",
                p.kind, p.size
            )));
        }
    }
    Ok(())
}
