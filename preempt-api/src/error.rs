//! The one error type of the API: a kind with a stable numeric code (the C ABI returns it), one
//! line of message, and where the failure came from a system call, its errno and what that errno
//! means for that call.
use lv3::mechanism::MechError;
use std::fmt;

/// What went wrong, as a caller branches on it. The codes are the C ABI's return values and
/// never change meaning (new kinds get new codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad argument: an unknown device, mechanism or level name, a NULL pointer, a queue
    /// descriptor that cannot be restored.
    InvalidArgument,
    /// A handle that is not (or no longer) open.
    BadHandle,
    /// The device does not exist or cannot run (no GPU, no HIP runtime, `hip:N` out of range).
    NoDevice,
    /// `/dev/kfd` is missing or cannot be opened.
    NoKfd,
    /// The asked mechanism or level cannot work here; the message says why.
    Unavailable,
    /// The kernel refused the queue (INVALID: no such queue in this process; ERROR: the
    /// unmap/map failed).
    QueueRefused,
    /// A KFD call failed; errno and meaning are set.
    Kfd,
    /// The device failed (a HIP call, a host worker).
    Device,
    /// The queue is suspended already (by this session).
    AlreadySuspended,
    /// Resume of a queue that this session did not suspend.
    NotSuspended,
    /// Every try to resume failed: the queue may still be suspended.
    ResumeFailed,
    /// A SIGINT/SIGTERM is resuming every queue before exit: no new suspend.
    ShuttingDown,
    /// The session is closed.
    Closed,
    /// The operation does not apply to this object (e.g. submitting to a bound KFD queue).
    Unsupported,
    /// A panic inside the library, caught at the boundary (a bug: please report it).
    Panic,
    /// A call in a fork child on a session (or its stream) that the parent process opened: a
    /// session belongs to the process that opened it, and the child must open its own.
    Forked,
    /// The stream's suspension is the helper's (a block of higher priority is active): a hand
    /// resume would let it run inside that block; it resumes when the block leaves.
    Busy,
    /// Close gave up waiting for work in flight and abandoned it (the session or stream is
    /// closed all the same; only that work was lost).
    Abandoned,
    /// The scheduler daemon (`Options::scheduler`) could not be reached, refused a request or
    /// did not answer in time (docs/scheduler-daemon.md).
    Scheduler,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::InvalidArgument,
        ErrorKind::BadHandle,
        ErrorKind::NoDevice,
        ErrorKind::NoKfd,
        ErrorKind::Unavailable,
        ErrorKind::QueueRefused,
        ErrorKind::Kfd,
        ErrorKind::Device,
        ErrorKind::AlreadySuspended,
        ErrorKind::NotSuspended,
        ErrorKind::ResumeFailed,
        ErrorKind::ShuttingDown,
        ErrorKind::Closed,
        ErrorKind::Unsupported,
        ErrorKind::Panic,
        ErrorKind::Forked,
        ErrorKind::Busy,
        ErrorKind::Abandoned,
        ErrorKind::Scheduler,
    ];

    /// The C ABI's code: negative, -1 for the first kind.
    pub fn code(self) -> i32 {
        // Every kind is in ALL (the test below checks it), so the fallback is never taken.
        let i = Self::ALL.iter().position(|&k| k == self).unwrap_or(0);
        -1 - i32::try_from(i).unwrap_or(0)
    }

    /// The kind of a code (`None` for 0 and unknown codes).
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        let i = usize::try_from(-1_i64 - i64::from(code)).ok()?;
        Self::ALL.get(i).copied()
    }

    /// A short snake_case name (`queue_refused`): the Python exception's `kind`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::BadHandle => "bad_handle",
            ErrorKind::NoDevice => "no_device",
            ErrorKind::NoKfd => "no_kfd",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::QueueRefused => "queue_refused",
            ErrorKind::Kfd => "kfd",
            ErrorKind::Device => "device",
            ErrorKind::AlreadySuspended => "already_suspended",
            ErrorKind::NotSuspended => "not_suspended",
            ErrorKind::ResumeFailed => "resume_failed",
            ErrorKind::ShuttingDown => "shutting_down",
            ErrorKind::Closed => "closed",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Panic => "panic",
            ErrorKind::Forked => "forked",
            ErrorKind::Busy => "busy",
            ErrorKind::Abandoned => "abandoned",
            ErrorKind::Scheduler => "scheduler",
        }
    }
}

/// An error of the API. `Display` is the message (one line, naming what failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// The errno of the failing system call, where there is one.
    pub errno: Option<i32>,
    /// What that errno means for that call (amdkfd's meaning for a KFD call).
    pub meaning: Option<String>,
}

/// The API's result.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error without errno.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            errno: None,
            meaning: None,
        }
    }

    /// With the errno of a system call; the meaning is the C library's description unless one
    /// is set already.
    pub fn with_errno(mut self, errno: nix::errno::Errno) -> Self {
        self.errno = Some(errno as i32);
        if self.meaning.is_none() {
            self.meaning = Some(errno.desc().to_string());
        }
        self
    }

    /// `message` prefixed with `what: `.
    pub fn context(mut self, what: &str) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unsupported, message)
    }

    pub(crate) fn closed() -> Self {
        Error::new(ErrorKind::Closed, "the session is closed")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<MechError> for Error {
    fn from(e: MechError) -> Self {
        let kind = match &e {
            MechError::Kfd { .. } => ErrorKind::Kfd,
            MechError::QueueRefused { .. } | MechError::PreemptRefused { .. } => ErrorKind::QueueRefused,
            MechError::Session(_) | MechError::Unavailable { .. } => ErrorKind::Unavailable,
            MechError::BadTarget { .. } => ErrorKind::InvalidArgument,
            MechError::AlreadySuspended { .. } => ErrorKind::AlreadySuspended,
            MechError::ResumeFailed { .. } => ErrorKind::ResumeFailed,
            MechError::ShuttingDown { .. } => ErrorKind::ShuttingDown,
        };
        let meaning = kfd_meaning(&e);
        let mut out = Error::new(kind, e.to_string());
        if let Some(errno) = e.errno() {
            out.meaning = meaning;
            out = out.with_errno(errno);
        }
        out
    }
}

/// amdkfd's meaning of the errno, where the failure came from a KFD call.
fn kfd_meaning(e: &MechError) -> Option<String> {
    match e {
        MechError::Kfd { source, .. } => Some(source.meaning.to_string()),
        MechError::ResumeFailed { last, .. } => kfd_meaning(last),
        _ => None,
    }
}

impl From<kfd::KfdError> for Error {
    fn from(e: kfd::KfdError) -> Self {
        let kind = if e.op == kfd::Op::Open {
            ErrorKind::NoKfd
        } else {
            ErrorKind::Kfd
        };
        let mut out = Error::new(kind, e.to_string());
        out.meaning = Some(e.meaning.to_string());
        out.with_errno(e.errno)
    }
}

impl From<host_device::HostError> for Error {
    fn from(e: host_device::HostError) -> Self {
        let errno = match &e {
            host_device::HostError::Sys(_, errno) => Some(*errno),
            host_device::HostError::Spawn(io) | host_device::HostError::Io { source: io, .. } => {
                io.raw_os_error().map(nix::errno::Errno::from_raw)
            }
            _ => None,
        };
        let kind = match e {
            host_device::HostError::AlreadySuspended => ErrorKind::AlreadySuspended,
            _ => ErrorKind::Device,
        };
        let out = Error::new(kind, format!("host device: {e}"));
        match errno {
            Some(n) => out.with_errno(n),
            None => out,
        }
    }
}

impl From<gpu_device::Error> for Error {
    fn from(e: gpu_device::Error) -> Self {
        let kind = match &e {
            gpu_device::Error::NoSuchDevice { .. } | gpu_device::Error::Hip(_) => ErrorKind::Device,
            gpu_device::Error::NoKfd => ErrorKind::NoKfd,
            gpu_device::Error::Invalid(_) => ErrorKind::InvalidArgument,
            _ => ErrorKind::Unavailable,
        };
        Error::new(kind, e.to_string())
    }
}

impl From<hip_rt::HipError> for Error {
    fn from(e: hip_rt::HipError) -> Self {
        Error::new(ErrorKind::Device, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd::{DbgOp, QueueState};
    use nix::errno::Errno;

    #[test]
    fn codes_are_stable_and_round_trip() {
        assert_eq!(ErrorKind::InvalidArgument.code(), -1);
        assert_eq!(
            ErrorKind::Panic.code(),
            -15,
            "codes never change meaning: new kinds come after"
        );
        for (i, k) in ErrorKind::ALL.into_iter().enumerate() {
            assert_eq!(ErrorKind::from_code(k.code()), Some(k));
            assert_eq!(
                ErrorKind::ALL.iter().filter(|&&o| o == k).count(),
                1,
                "{k:?} once in ALL"
            );
            assert_eq!(i64::from(k.code()), -1 - i64::try_from(i).unwrap());
        }
        let past = -1 - i32::try_from(ErrorKind::ALL.len()).unwrap();
        assert_eq!(ErrorKind::from_code(0), None);
        assert_eq!(ErrorKind::from_code(past), None);
        assert_eq!(ErrorKind::from_code(i32::MIN), None);
    }

    #[test]
    fn kfd_failures_keep_errno_and_amdkfd_meaning() {
        let k = kfd::KfdError::new(kfd::Op::UpdateQueue, Some(7), Errno::EFAULT);
        let e = Error::from(MechError::Kfd {
            mechanism: lv3::MechanismKind::UpdateQueue,
            source: k.clone(),
        });
        assert_eq!((e.kind, e.errno), (ErrorKind::Kfd, Some(Errno::EFAULT as i32)));
        assert_eq!(e.meaning.as_deref(), Some(k.meaning));
        let e = Error::from(MechError::QueueRefused {
            op: DbgOp::SuspendQueues,
            queue: 0xdead,
            state: QueueState::Invalid,
        });
        assert_eq!((e.kind, e.errno), (ErrorKind::QueueRefused, None));
        assert!(e.message.contains("INVALID"), "{e}");
        let open = Error::from(kfd::KfdError::new(kfd::Op::Open, None, Errno::ENOENT));
        assert_eq!((open.kind, open.errno), (ErrorKind::NoKfd, Some(Errno::ENOENT as i32)));
    }
}
