//! The `hipError_t` values the stand-in returns, as `hip_runtime_api.h` numbers them (a test
//! compiles them against the installed header: `tests/header.rs`).

/// A `hipError_t`.
pub type Code = i32;

pub const SUCCESS: Code = 0;
pub const INVALID_VALUE: Code = 1;
pub const OUT_OF_MEMORY: Code = 2;
pub const NOT_INITIALIZED: Code = 3;
pub const INVALID_DEVICE_FUNCTION: Code = 98;
pub const INVALID_DEVICE: Code = 101;
pub const FILE_NOT_FOUND: Code = 301;
pub const INVALID_HANDLE: Code = 400;
pub const NOT_FOUND: Code = 500;
pub const NOT_READY: Code = 600;
pub const LAUNCH_FAILURE: Code = 719;
pub const NOT_SUPPORTED: Code = 801;
pub const UNKNOWN: Code = 999;

/// Every code above with its header name, for `hipGetErrorName` and the header test.
pub const NAMES: [(Code, &str); 13] = [
    (SUCCESS, "hipSuccess"),
    (INVALID_VALUE, "hipErrorInvalidValue"),
    (OUT_OF_MEMORY, "hipErrorOutOfMemory"),
    (NOT_INITIALIZED, "hipErrorNotInitialized"),
    (INVALID_DEVICE_FUNCTION, "hipErrorInvalidDeviceFunction"),
    (INVALID_DEVICE, "hipErrorInvalidDevice"),
    (FILE_NOT_FOUND, "hipErrorFileNotFound"),
    (INVALID_HANDLE, "hipErrorInvalidHandle"),
    (NOT_FOUND, "hipErrorNotFound"),
    (NOT_READY, "hipErrorNotReady"),
    (LAUNCH_FAILURE, "hipErrorLaunchFailure"),
    (NOT_SUPPORTED, "hipErrorNotSupported"),
    (UNKNOWN, "hipErrorUnknown"),
];

/// The header name of `code` (NUL-terminated, for C), `hipErrorUnknown` for any other.
pub fn name(code: Code) -> &'static str {
    match NAMES.iter().find(|(c, _)| *c == code) {
        Some((_, n)) => n,
        None => "hipErrorUnknown",
    }
}
