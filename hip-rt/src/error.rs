//! `HipError`: every way the HIP layer can fail, as a value (never a panic).

use std::fmt;

/// An error from loading HIP/hiprtc or from one of their calls.
///
/// ```
/// let e = hip_rt::Hip::load_from(&["/nonexistent/libamdhip64.so".to_string()], &[]).err().unwrap();
/// assert!(matches!(e, hip_rt::HipError::LibraryNotFound { .. }));
/// assert_eq!(e.code(), None);
/// assert!(e.to_string().contains("/nonexistent/libamdhip64.so"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HipError {
    /// No candidate file of a library could be loaded.
    LibraryNotFound {
        /// "libamdhip64" or "libhiprtc".
        library: &'static str,
        /// Every path/soname tried, in order, with the loader's message for each.
        tried: Vec<(String, String)>,
    },
    /// The library loaded but lacks a function we need (wrong library or too old a HIP).
    MissingSymbol { library: String, symbol: &'static str },
    /// A HIP runtime call returned an error code.
    Hip {
        func: &'static str,
        code: i32,
        name: String,
        explanation: Option<&'static str>,
    },
    /// A hiprtc call failed; `log` holds the compiler output when there is one.
    Rtc {
        func: &'static str,
        code: i32,
        name: String,
        log: String,
    },
    /// Rejected on our side before calling HIP (bad argument, unexpected answer).
    Invalid(String),
}

impl HipError {
    /// The HIP error code, when this is one.
    pub fn code(&self) -> Option<i32> {
        match self {
            HipError::Hip { code, .. } | HipError::Rtc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True for `hipErrorNoDevice` (100): the library works, there is just no GPU.
    pub fn is_no_device(&self) -> bool {
        matches!(self, HipError::Hip { code: 100, .. })
    }
}

impl fmt::Display for HipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HipError::LibraryNotFound { library, tried } => {
                write!(f, "{library} not found (is ROCm/HIP installed? set ROCM_PATH); tried:")?;
                for (path, why) in tried {
                    write!(f, "\n  {path}: {why}")?;
                }
                Ok(())
            }
            HipError::MissingSymbol { library, symbol } => write!(
                f,
                "{library} lacks the symbol {symbol} (not a HIP library, or a HIP too old for this tool)"
            ),
            HipError::Hip {
                func,
                code,
                name,
                explanation,
            } => {
                write!(f, "{func} failed: {name} ({code})")?;
                if let Some(e) = explanation {
                    write!(f, ": {e}")?;
                }
                Ok(())
            }
            HipError::Rtc { func, code, name, log } => {
                write!(f, "{func} failed: {name} ({code})")?;
                if !log.trim().is_empty() {
                    write!(f, "\ncompiler log:\n{}", log.trim_end())?;
                }
                Ok(())
            }
            HipError::Invalid(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for HipError {}

/// The enumerator name of a HIP error code (the stable ones, ROCm 5.x to 7.x), for when
/// `hipGetErrorName` is unavailable or answers with nothing useful.
pub fn hip_error_name(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        4 => "hipErrorDeinitialized",
        9 => "hipErrorInvalidConfiguration",
        17 => "hipErrorInvalidDevicePointer",
        35 => "hipErrorInsufficientDriver",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        209 => "hipErrorNoBinaryForGpu",
        218 => "hipErrorInvalidKernelFile",
        300 => "hipErrorInvalidSource",
        301 => "hipErrorFileNotFound",
        302 => "hipErrorSharedObjectSymbolNotFound",
        303 => "hipErrorSharedObjectInitFailed",
        400 => "hipErrorInvalidHandle",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        702 => "hipErrorLaunchTimeOut",
        719 => "hipErrorLaunchFailure",
        801 => "hipErrorNotSupported",
        999 => "hipErrorUnknown",
        1052 => "hipErrorRuntimeMemory",
        1053 => "hipErrorRuntimeOther",
        _ => return None,
    })
}

/// A one-line hint for the errors a user of this tool is likely to meet.
pub fn hip_error_explanation(code: i32) -> Option<&'static str> {
    Some(match code {
        1 => "an argument was rejected (e.g. an attribute this HIP version does not know)",
        2 => "out of device or pinned host memory",
        3 => "the HIP runtime could not initialize (ROCr/HSA failed to start; check dmesg and /dev/kfd)",
        35 => "the amdgpu kernel driver is older than this HIP runtime needs",
        100 => "no AMD GPU visible to HIP (is /dev/kfd present and are you in the render/video group?)",
        101 => "no such device index (see HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES)",
        200 | 209 | 218 => "the code object does not match this GPU (wrong --offload-arch / gfx target features?)",
        400 => "an invalid stream/event/module handle was passed",
        500 => "the kernel name was not found in the module",
        600 => "the work is still running (not an error for queries)",
        700 => "a kernel accessed an illegal address (GPU memory fault)",
        701 => "the launch needs more registers/LDS/threads than the GPU allows",
        719 => "a kernel failed on the device (fault, trap or a queue reset)",
        801 => "this HIP build does not implement the call",
        1052 | 1053 => "the HSA runtime (ROCr) failed underneath HIP",
        _ => return None,
    })
}

/// The enumerator name of a hiprtc result code.
pub fn rtc_error_name(code: i32) -> &'static str {
    match code {
        0 => "HIPRTC_SUCCESS",
        1 => "HIPRTC_ERROR_OUT_OF_MEMORY",
        2 => "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
        3 => "HIPRTC_ERROR_INVALID_INPUT",
        4 => "HIPRTC_ERROR_INVALID_PROGRAM",
        5 => "HIPRTC_ERROR_INVALID_OPTION",
        6 => "HIPRTC_ERROR_COMPILATION",
        7 => "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        11 => "HIPRTC_ERROR_INTERNAL_ERROR",
        100 => "HIPRTC_ERROR_LINKING",
        _ => "HIPRTC_ERROR_UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_device_message_names_code_and_cause() {
        let e = HipError::Hip {
            func: "hipGetDeviceCount",
            code: 100,
            name: "hipErrorNoDevice".into(),
            explanation: hip_error_explanation(100),
        };
        assert!(e.is_no_device());
        let s = e.to_string();
        assert!(
            s.contains("hipGetDeviceCount") && s.contains("(100)") && s.contains("/dev/kfd"),
            "{s}"
        );
    }

    #[test]
    fn names_cover_common_codes() {
        assert_eq!(hip_error_name(100), Some("hipErrorNoDevice"));
        assert_eq!(hip_error_name(600), Some("hipErrorNotReady"));
        assert_eq!(hip_error_name(12345), None);
        assert_eq!(rtc_error_name(6), "HIPRTC_ERROR_COMPILATION");
    }
}
