//! Run-time compilation with hiprtc (see the invariants in ffi/mod.rs).

use std::ffi::{CString, c_char, c_int};

use super::{Api, HipError, Ptr, Status, c_string, error};

impl Api {
    /// Compiles `source` with hiprtc; returns (code object, compiler log).
    pub(crate) fn rtc_compile(
        &self,
        source: &str,
        name: &str,
        options: &[String],
    ) -> Result<(Vec<u8>, String), HipError> {
        let (rtc, err_str) = self.rtc.as_ref().map_err(Clone::clone)?;
        let invalid = |_| HipError::Invalid("NUL byte in hiprtc input".into());
        let (src, cname) = (
            CString::new(source).map_err(invalid)?,
            CString::new(name).map_err(invalid)?,
        );
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()
            .map_err(invalid)?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let n_opts = c_int::try_from(opt_ptrs.len())
            .map_err(|_| HipError::Invalid(format!("{} hiprtc options are too many", opt_ptrs.len())))?;
        let fail = |func: &'static str, code: Status, log: String| {
            // SAFETY: hiprtcGetErrorString accepts any code and returns a static string.
            let name = c_string(unsafe { err_str(code) }).unwrap_or_else(|| error::rtc_error_name(code).into());
            HipError::Rtc { func, code, name, log }
        };
        let mut prog: Ptr = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings that outlive the call; no headers (count 0, null arrays).
        let st = unsafe {
            (rtc.create_program)(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if st != 0 {
            return Err(fail("hiprtcCreateProgram", st, String::new()));
        }
        // SAFETY: `prog` is live until destroy_program at the end; every out-buffer is sized by
        // the matching size query first.
        let result = unsafe {
            let st = (rtc.compile_program)(prog, n_opts, opt_ptrs.as_ptr());
            let mut log_len = 0usize;
            let mut log = String::new();
            if (rtc.get_program_log_size)(prog, &mut log_len) == 0 && log_len > 1 {
                let mut buf = vec![0u8; log_len + 1];
                if (rtc.get_program_log)(prog, buf.as_mut_ptr().cast()) == 0 {
                    log = String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap_or(log_len)])
                        .into_owned();
                }
            }
            let mut code_len = 0usize;
            if st != 0 {
                Err(fail("hiprtcCompileProgram", st, log))
            } else {
                match (rtc.get_code_size)(prog, &mut code_len) {
                    0 => {
                        let mut code = vec![0u8; code_len];
                        match (rtc.get_code)(prog, code.as_mut_ptr().cast()) {
                            0 => Ok((code, log)),
                            s => Err(fail("hiprtcGetCode", s, log)),
                        }
                    }
                    s => Err(fail("hiprtcGetCodeSize", s, log)),
                }
            }
        };
        // SAFETY: destroys the live program once.
        unsafe { (rtc.destroy_program)(&mut prog) };
        result
    }

    pub(crate) fn rtc_status(&self) -> Result<(), HipError> {
        self.rtc.as_ref().map(|_| ()).map_err(Clone::clone)
    }
}
