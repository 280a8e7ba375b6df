"""The exceptions of preempt_kfd: one class per error kind of the library, all PreemptError.

Every exception carries what the C ABI returns too: ``kind`` (e.g. ``"queue_refused"``),
``code`` (the C ABI's negative status), and where a system call failed its ``errno`` and
``meaning`` (amdkfd's meaning of that errno for that call), else None.
"""

import errno as _errno


class PreemptError(Exception):
    """Base class of every error of preempt_kfd."""

    def __init__(self, message, kind, code, errno=None, meaning=None):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.code = code
        self.errno = errno
        self.meaning = meaning

    @property
    def errno_name(self):
        """The errno's symbolic name (``"EFAULT"``), or None."""
        return _errno.errorcode.get(self.errno) if self.errno is not None else None

    def __repr__(self):
        extra = f", errno={self.errno_name}" if self.errno is not None else ""
        return f"{type(self).__name__}({self.message!r}{extra})"


class InvalidArgument(PreemptError, ValueError):
    """A bad argument (the C ABI's INVALID_ARGUMENT): a value out of range, an unknown device,
    mechanism or level, another session's stream, a queue that cannot be restored. The message
    names the call, the argument and what it accepts. Also a ValueError."""


class InvalidArgumentType(InvalidArgument, TypeError):
    """An InvalidArgument of the wrong type (``Session(5)``, ``register("x")``): also a
    TypeError, Python's idiom for one, so that ``except TypeError`` keeps catching what Python's
    own conversions raised before these checks. Only these: a value of the right type out of
    range is not a type mistake, and stays a ValueError only. (A call with a missing or unknown
    keyword is Python's own plain TypeError: it is raised before the call runs.)"""


class BadHandle(PreemptError):
    """An object that is not (or no longer) open."""


class NoDevice(PreemptError):
    """The device does not exist or cannot run (no GPU, no HIP runtime)."""


class NoKfd(PreemptError):
    """/dev/kfd is missing or cannot be opened (errno: ENOENT, EACCES, ...)."""


class Unavailable(PreemptError):
    """The asked mechanism or level cannot work here; the message says why."""


class QueueRefused(PreemptError):
    """The kernel refused the queue (INVALID: no such queue in this process; ERROR)."""


class KfdError(PreemptError, OSError):
    """A KFD call failed; ``errno`` and ``meaning`` are set."""

    def __init__(self, message, kind, code, errno=None, meaning=None):
        PreemptError.__init__(self, message, kind, code, errno, meaning)
        self.args = (message,)


class DeviceError(PreemptError):
    """The device failed (a HIP call, a host worker process)."""


class AlreadySuspended(PreemptError):
    """The stream is suspended already."""


class NotSuspended(PreemptError):
    """Resume of a stream that is not suspended."""


class ResumeFailed(PreemptError):
    """Every try to resume failed: the queue may still be suspended."""


class ShuttingDown(PreemptError):
    """A SIGINT/SIGTERM handler is resuming every queue before exit: no new suspend."""


class Closed(PreemptError):
    """The session is closed."""


class Unsupported(PreemptError):
    """The call does not apply to this object (e.g. a delay command on a bound KFD queue)."""


class InternalError(PreemptError):
    """A panic inside the library was caught (a bug); what it held was resumed."""


class Forked(PreemptError):
    """A call in a fork child on a session the parent opened: the child must open its own."""


class Busy(PreemptError):
    """A hand resume of a stream the helper holds suspended (a block of higher priority is active)."""


class Abandoned(PreemptError):
    """Close gave up waiting for work in flight and abandoned it; closed all the same."""


class SchedulerError(PreemptError):
    """The scheduler daemon (``Session(scheduler=...)``, ``$PREEMPT_SCHEDULER``) could not be
    reached, refused a request or did not answer in time; the message says which."""
