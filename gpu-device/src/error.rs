//! [`Error`]: every way the GPU device can fail, as a value the caller prints.

use std::fmt;

use hip_rt::HipError;

/// A source error of another layer (KFD, sysfs, lv3's discovery or mechanisms).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error of the GPU device. `Display` gives the whole message (including the cause's text,
/// as the command line prints it); [`std::error::Error::source`] gives the cause when there is one.
#[derive(Debug)]
pub enum Error {
    /// A HIP call failed.
    Hip(HipError),
    /// Refused on our side: a bad target name, grid, calibration or clock-pair set, a command id
    /// past the slot buffer, a kernel run that did not complete.
    Invalid(String),
    /// This HIP's hiprtc does not know the target (asking it would crash the process).
    HipTooOld {
        have: (i32, i32),
        need: (i32, i32),
        processor: String,
    },
    /// `hip:index` does not exist.
    NoSuchDevice { index: u32, count: u32 },
    /// The device's gfx target could not be read or parsed.
    Arch { index: u32, source: Box<Error> },
    /// No run-time compiler for the delay kernel.
    NoHiprtc(HipError),
    /// This HIP cannot create a stream with a hardware queue of its own.
    NoOwnQueueStreams,
    /// No /dev/kfd.
    NoKfd,
    /// Finding the LP stream's KFD queue failed; `message` says what and why.
    Discovery { message: String, source: Option<BoxError> },
}

impl Error {
    pub(crate) fn discovery(message: String, source: impl Into<BoxError>) -> Error {
        Error::Discovery {
            message,
            source: Some(source.into()),
        }
    }
}

impl From<HipError> for Error {
    fn from(e: HipError) -> Self {
        Error::Hip(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Hip(e) => e.fmt(f),
            Error::Invalid(m) => f.write_str(m),
            Error::HipTooOld { have, need, processor } => write!(
                f,
                "HIP {}.{} cannot compile for {processor} (needs HIP >= {}.{}; its hiprtc would crash on an unknown target)",
                have.0, have.1, need.0, need.1
            ),
            Error::NoSuchDevice { index, count } => write!(
                f,
                "hip:{index}: HIP sees {count} device(s) (check HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES)"
            ),
            Error::Arch { index, source } => write!(f, "hip:{index}: {source}"),
            Error::NoHiprtc(e) => write!(f, "hiprtc (to compile the delay kernel): {e}"),
            Error::NoOwnQueueStreams => f.write_str(
                "this HIP lacks hipExtStreamCreateWithCUMask: the LP stream cannot get a KFD queue of its own",
            ),
            Error::NoKfd => f.write_str("no /dev/kfd"),
            Error::Discovery { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Hip(e) | Error::NoHiprtc(e) => Some(e),
            Error::Arch { source, .. } => Some(source.as_ref()),
            Error::Discovery { source: Some(s), .. } => Some(s.as_ref()),
            _ => None,
        }
    }
}
