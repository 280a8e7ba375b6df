"""preempt_kfd: preempt your own low-priority GPU work on AMD Instinct GPUs.

Lv3 stops a running queue where it is (CWSR through /dev/kfd; on the host device, SIGSTOP of
CPU worker processes standing in for a GPU); Lv1 stops launching and drains. The same calls
work on ``"host"``, ``"hip:N"`` and ``"kfd"`` sessions::

    import preempt_kfd as pk
    with pk.Session("auto") as s:                 # hip:0 where it can run, else the host device
        lp = s.low_priority_stream()              # Lv3 where available, else Lv1
        # GPU: torch.cuda.ExternalStream(lp.handle) launches your low-priority work on it
        hpf = s.helper()
        hpf.register(lp)
        with hpf.high_priority(sync=torch.cuda.current_stream().synchronize):
            run_the_urgent_request()              # lp is suspended until this block's GPU work is done

Errors are exceptions of ``preempt_kfd.PreemptError`` with ``kind``, ``code``, ``errno`` and
``meaning``. Nothing is left suspended: closing a session (or its garbage collection) resumes
everything; a panic inside the library resumes what it held; ``install_signal_handlers()``
makes SIGINT/SIGTERM resume everything before the process goes on dying.
"""

import contextlib
import signal
import sys

from . import _native
from ._errors import (
    Abandoned,
    AlreadySuspended,
    BadHandle,
    Busy,
    Closed,
    DeviceError,
    Forked,
    InternalError,
    InvalidArgument,
    KfdError,
    NoDevice,
    NoKfd,
    NotSuspended,
    PreemptError,
    QueueRefused,
    ResumeFailed,
    ShuttingDown,
    Unavailable,
    Unsupported,
)

__all__ = [
    "Session", "LowPriorityStream", "HighPriorityStream", "HighestPriorityFirst", "probe", "MECHANISMS",
    "resume_all", "install_signal_handlers", "events", "PreemptError", "InvalidArgument",
    "BadHandle", "NoDevice", "NoKfd", "Unavailable", "QueueRefused", "KfdError", "DeviceError",
    "AlreadySuspended", "NotSuspended", "ResumeFailed", "ShuttingDown", "Closed", "Unsupported",
    "InternalError", "Forked", "Busy", "Abandoned",
]

#: The Lv3 mechanisms' names, in ``auto``'s order (lv3's own list, through preempt-api).
MECHANISMS = _native.MECHANISMS

#: The host device's worker: this interpreter running preempt_kfd._worker.
DEFAULT_HOST_WORKER = (sys.executable, "-m", "preempt_kfd._worker")


def probe():
    """``/dev/kfd`` and each Lv3 mechanism's verdict on this machine, one line each."""
    return _native.probe()


def resume_all():
    """Resume every queue suspended through the library (all sessions) and refuse later
    suspends; returns ``[(label, error or None)]``. For your own signal handling."""
    return _native.resume_all()


def events():
    """What the library reported but could not raise (failures inside drops), oldest first."""
    return _native.take_events()


def install_signal_handlers(signals=(signal.SIGINT, signal.SIGTERM)):
    """On each of ``signals``: resume everything (``resume_all``), then run the handler that was
    installed before (SIGINT: ``KeyboardInterrupt``) or, for the default action, die by the
    signal. Call from the main thread."""

    def install(sig):
        previous = signal.getsignal(sig)

        def handler(signum, frame):
            resume_all()
            if callable(previous):
                return previous(signum, frame)
            if previous == signal.SIG_IGN:
                return None
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return None

        signal.signal(sig, handler)

    for s in signals:
        install(s)


class LowPriorityStream:
    """A low-priority stream: what gets suspended and resumed.

    ``handle`` is the raw ``hipStream_t`` (an int) on a GPU, for ``torch.cuda.ExternalStream``;
    None on the host device, where ``submit_delay`` feeds its worker processes.
    """

    def __init__(self, native, session):
        self._n = native
        self._session = session

    @property
    def id(self):
        return self._n.id

    @property
    def level(self):
        """``"lv3"`` or ``"lv1"``."""
        return self._n.level

    @property
    def handle(self):
        """The raw ``hipStream_t`` as an int (GPU), None on the host device."""
        return self._n.handle

    @property
    def queue(self):
        """``(queue_id, gpu_id)`` of the KFD queue behind the stream, or None."""
        return self._n.queue

    @property
    def host_pids(self):
        """Host device: the worker processes' pids."""
        return self._n.host_pids

    @property
    def is_suspended(self):
        return self._n.is_suspended

    def describe(self):
        return self._n.describe()

    def suspend(self):
        """Suspend at the stream's level; returns ``{"level", "mechanism", "latency_ns"}``."""
        return self._n.suspend()

    def resume(self):
        self._n.resume()

    @contextlib.contextmanager
    def preempted(self):
        """``with lp.preempted():`` the stream is suspended inside the block, resumed after it
        (also when the block raises)."""
        self.suspend()
        try:
            yield self
        finally:
            self.resume()

    def submit_delay(self, ns):
        """A delay command of ``ns`` nanoseconds of work through the library's launcher."""
        return self._n.submit_delay(int(ns))

    def synchronize(self):
        self._n.synchronize()

    def check(self):
        """The exactly-once check of the delay commands: a dict with ``ok``, ``submitted``,
        ``completed``, ``exactly_once``, ``finished`` and ``problems``."""
        return self._n.check()

    def close(self):
        self._n.close()

    def __repr__(self):
        return f"<LowPriorityStream {self.describe()}>"


class HighPriorityStream:
    """The session's high-priority stream of delay commands (nothing suspends it)."""

    def __init__(self, native):
        self._n = native

    @property
    def handle(self):
        return self._n.handle

    def submit_delay(self, ns):
        return self._n.submit_delay(int(ns))

    def synchronize(self):
        self._n.synchronize()


class HighestPriorityFirst:
    """The in-process highest-priority-first helper of a session.

    While a block of priority ``p`` runs, every registered stream of a lower priority is
    suspended at its own level (Lv3, or Lv1 where the session has no Lv3 mechanism); it resumes
    when the last such block has left, i.e. after the block's GPU work is done (``sync``).
    Blocks may run concurrently from several threads.
    """

    def __init__(self, session):
        self._session = session

    def register(self, stream, priority=0):
        self._session._n.helper_register(stream._n, int(priority))

    def unregister(self, stream):
        self._session._n.helper_unregister(stream._n)

    @property
    def active(self):
        """High-priority blocks running now."""
        return self._session._n.helper_active

    @contextlib.contextmanager
    def high_priority(self, sync=None, priority=1):
        """``with hpf.high_priority(sync=...):`` a high-priority block. ``sync`` waits for the
        block's GPU work: a callable, or an object with ``synchronize()`` (a
        ``HighPriorityStream``, a ``torch.cuda.Stream``); it runs before the low-priority
        streams resume, also when the block raises."""
        n = self._session._n
        n.helper_enter(int(priority))
        try:
            yield self
        finally:
            try:
                if sync is not None:
                    (sync.synchronize if hasattr(sync, "synchronize") else sync)()
            finally:
                n.helper_leave(int(priority))


class Session:
    """A session on one device: ``"host"``, ``"hip:N"``, ``"kfd"`` or ``"auto"``.

    ``mechanism``: ``"auto"`` or one of ``MECHANISMS`` (GPU and kfd; the old name ``"ioctl"`` raises
    ``InvalidArgument`` naming ``"preempt-queues"``);
    ``grace``: 0 (firmware default) or 1..255 units of ~1K GPU clocks; ``force``: build the
    mechanism whatever the facts say; ``host_workers``: worker processes per host stream (0:
    cores - 1); ``host_worker``: the worker command (default: this interpreter with
    ``preempt_kfd._worker``); ``lv1_threshold``/``lv1_batch``: the Lv1 launcher.
    Use as a context manager, or call ``close()``: it resumes everything.
    """

    def __init__(self, device="auto", mechanism="auto", grace=0, force=False, host_workers=0,
                 host_worker=DEFAULT_HOST_WORKER, lv1_threshold=8, lv1_batch=4, gpu_slots=0):
        worker = [str(a) for a in host_worker] if host_worker is not None else None
        self._n = _native.NativeSession(device, mechanism, int(grace), bool(force), int(host_workers),
                                        worker, int(lv1_threshold), int(lv1_batch), int(gpu_slots))
        self._helper = HighestPriorityFirst(self)

    @property
    def device(self):
        """The device the session runs on (``auto`` resolved)."""
        return self._n.device

    @property
    def mechanism(self):
        """``{"name", "asked", "why", "verdicts"}``: the Lv3 mechanism and why (``name`` is
        ``"sigstop"`` on the host device, None where no Lv3 mechanism works)."""
        return self._n.mechanism()

    @property
    def has_lv3(self):
        return self._n.has_lv3

    def low_priority_stream(self, level="auto"):
        """A low-priority stream suspended at ``level``: ``"auto"`` (Lv3 where available, else
        Lv1), ``"lv3"`` or ``"lv1"``."""
        return LowPriorityStream(self._n.create_lp_stream(str(level)), self)

    def bind_queue(self, queue_id, gpu_id=0, ring_base_address=0, ring_size=0, priority=None):
        """An explicit KFD queue of this process as an Lv3 stream (kfd and GPU sessions)."""
        return LowPriorityStream(
            self._n.bind_queue(int(queue_id), int(gpu_id), int(ring_base_address), int(ring_size), priority), self)

    def high_priority_stream(self):
        return HighPriorityStream(self._n.hp_stream())

    def suspend_set(self, streams):
        """Suspend every stream of ``streams``, or none (the error says which failed)."""
        self._n.suspend_set([s._n for s in streams])

    def resume_set(self, streams):
        self._n.resume_set([s._n for s in streams])

    def helper(self):
        """The session's highest-priority-first helper."""
        return self._helper

    def close(self):
        """Resume everything, close every stream, tear the mechanism down. Idempotent."""
        self._n.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<Session {self.device}, Lv3 via {self.mechanism['name']}>"
