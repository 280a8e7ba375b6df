//! The per-thread last error: its message (a C string owned by the thread) and errno. Set by
//! every failing call, left alone by successful ones.
use preempt_api::Error;
use std::cell::RefCell;
use std::ffi::{CString, c_char};

struct Last {
    message: CString,
    errno: i32,
}

thread_local! {
    static LAST: RefCell<Last> = RefCell::new(Last { message: CString::default(), errno: 0 });
}

/// A C string of `s` (interior NULs replaced).
pub fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

/// Records `e` for this thread and returns its code.
pub fn set(e: &Error) -> i32 {
    let message = match (&e.errno, &e.meaning) {
        (Some(n), Some(m)) if !e.message.contains(m.as_str()) => format!("{} (errno {n}: {m})", e.message),
        _ => e.message.clone(),
    };
    LAST.with(|l| {
        *l.borrow_mut() = Last {
            message: c_string(&message),
            errno: e.errno.unwrap_or(0),
        }
    });
    e.kind.code()
}

/// The message: valid until this thread's next failing call.
pub fn message_ptr() -> *const c_char {
    LAST.with(|l| l.borrow().message.as_ptr())
}

pub fn errno() -> i32 {
    LAST.with(|l| l.borrow().errno)
}
