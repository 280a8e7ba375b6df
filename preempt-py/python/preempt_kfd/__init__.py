"""preempt_kfd: preempt your own low-priority GPU work on AMD Instinct GPUs.

Lv3 stops a running queue where it is (CWSR through /dev/kfd; on the host device, SIGSTOP of
CPU worker processes standing in for a GPU); Lv1 stops launching and drains; Lv2 (the host device
only) lets the running command finish and starts no new one. The same calls
work on ``"host"``, ``"hip:N"`` and ``"kfd"`` sessions::

    import preempt_kfd as pk
    with pk.Session("auto") as s:                 # hip:0 where it can run, else the host device
        lp = s.low_priority_stream()              # Lv3 where available, else Lv1
        # GPU: torch.cuda.ExternalStream(lp.handle) launches your low-priority work on it
        hpf = s.helper()
        hpf.register(lp)
        with hpf.high_priority(sync=torch.cuda.current_stream().synchronize):
            run_the_urgent_request()              # lp is suspended until this block's GPU work is done

A session may also share the device by time between its streams (``Session(policy="up")``,
``"kedf"`` or ``"laxity"``; ``Helper.schedule``, ``Helper.busy``)::

    with pk.Session("auto", policy="up", round_ms=10) as s:
        a, b = s.low_priority_stream(), s.low_priority_stream()
        s.helper().schedule(a, share=3)           # while both have work: a 75 %, b 25 % of the time
        s.helper().schedule(b, share=1)

Errors are exceptions of ``preempt_kfd.PreemptError`` with ``kind``, ``code``, ``errno`` and
``meaning``; a bad argument is ``InvalidArgument`` (the wrong type: ``InvalidArgumentType``, also
a TypeError). Nothing is left suspended: closing a session (or its garbage collection) resumes
everything; a panic inside the library resumes what it held; a KeyboardInterrupt anywhere in a
``with`` block of the package leaves the block (the blocks are native: no signal lands between
their enter and their protection); a low-priority stream's ``synchronize()`` wakes for Ctrl-C;
``install_signal_handlers()`` makes SIGINT/SIGTERM resume everything before the process goes on
dying.
"""

import signal
import sys
import threading

from . import _args, _native
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
    InvalidArgumentType,
    KfdError,
    NoDevice,
    NoKfd,
    NotSuspended,
    PreemptError,
    QueueRefused,
    ResumeFailed,
    SchedulerError,
    ShuttingDown,
    Unavailable,
    Unsupported,
)

__all__ = [
    "Session", "LowPriorityStream", "HighPriorityStream", "Helper", "HighestPriorityFirst", "probe", "MECHANISMS",
    "POLICIES",
    "resume_all", "install_signal_handlers", "events", "PreemptError", "InvalidArgument", "InvalidArgumentType",
    "BadHandle", "NoDevice", "NoKfd", "Unavailable", "QueueRefused", "KfdError", "DeviceError",
    "AlreadySuspended", "NotSuspended", "ResumeFailed", "ShuttingDown", "Closed", "Unsupported",
    "InternalError", "Forked", "Busy", "Abandoned", "SchedulerError",
]

#: The Lv3 mechanisms' names, in ``auto``'s order (lv3's own list, through preempt-api).
MECHANISMS = _native.MECHANISMS

#: The helper's policy words (``Session(policy=...)``), as ``preempt-lat priority --policy``.
POLICIES = _native.POLICIES

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
    signal. Call from the main thread (Python runs signal handlers there only); nothing is
    installed if an argument is bad. A main thread blocked in a low-priority stream's
    ``synchronize()`` runs them too."""
    signals = _args.signals("install_signal_handlers", signals)
    if threading.current_thread() is not threading.main_thread():
        raise _args.error(Unsupported, "unsupported",
                          "install_signal_handlers: call it from the main thread (Python runs signal handlers there only)")

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
        """``"lv3"``, ``"lv2"`` (the host device only) or ``"lv1"``."""
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

    def preempted(self):
        """``with lp.preempted():`` the stream is suspended inside the block, resumed after it
        (also when the block raises, a KeyboardInterrupt included; a block whose stream or
        session was closed inside it ends quietly, close having resumed it)."""
        return self._n.preempted(self)

    def submit_delay(self, ns):
        """A delay command of ``ns`` nanoseconds of work through the library's launcher (any
        real number, rounded; 0..2**64-1)."""
        return self._n.submit_delay(_args.duration_ns("submit_delay", "ns", ns))

    def synchronize(self):
        """Wait until every command submitted through the library completed. Under an Lv3 or
        Lv2 suspension it waits until another thread resumes, and under an Lv1 suspension the
        helper (a block, the policy) holds until that ends; under an Lv1 suspension of your own
        with commands pending it raises ``Unsupported`` at once (they would never launch).
        Ctrl-C interrupts it."""
        self._n.synchronize()

    def check(self):
        """The exactly-once check of the delay commands: a dict with ``ok``, ``submitted``,
        ``completed``, ``exactly_once``, ``finished`` and ``problems``."""
        return self._n.check()

    def close(self):
        """Resume the stream if suspended, leave the helper, drop the commands not yet
        launched. Idempotent."""
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
        return self._n.submit_delay(_args.duration_ns("submit_delay", "ns", ns))

    def synchronize(self):
        """Wait for everything submitted so far, in the calling thread: nothing suspends this
        stream, so the wait is bounded by the work submitted, and a Ctrl-C raises when it
        returns (a hand-off that woke for it would cost every request two thread wake-ups)."""
        self._n.synchronize()


class Helper:
    """The session's helper: highest-priority-first blocks, and the policy the session was
    opened with (``Session(policy=...)``) over the streams you schedule.

    **Blocks** (every session): while a block of priority ``p`` runs (``high_priority()``), every
    stream registered at a lower priority (``register()``) is suspended at its own level (Lv3,
    or Lv1 where the session has no Lv3 mechanism); it resumes when the last such block has
    left, i.e. after the block's GPU work is done (``sync``). Blocks may run concurrently from
    several threads. For requests that must not wait.

    **The policy** (a session opened with ``policy="up"``, ``"kedf"`` or ``"laxity"``): one
    thread of the session suspends and resumes the streams you ``schedule()``, sharing the device
    by time (docs/c-api.md#the-helpers-policy)::

        s = pk.Session("auto", policy="up", round_ms=10)   # utilization partition
        pol = s.helper()
        pol.schedule(a, share=3)                         # a gets 3/4 of the device time ...
        pol.schedule(b, share=1)                         # ... b 1/4, while both have work
        a.submit_delay(ns)                               # a submit makes its stream ready
        with pol.busy(b):                                # work the library does not see:
            launch_on(b.handle); b.synchronize()         # b is ready inside, idle after

    Under ``up`` one stream at a time runs for its slice of the round; under ``kedf`` the ``k``
    ready streams due first run; under ``laxity`` a ready stream counts at ``priority`` until its
    slack (``laxity_ms``) is used up, then at ``critical``, and streams below the highest ready
    one are suspended. The policy's suspension is a hold of its own: a hand ``resume()`` of a
    stream only the policy holds raises ``Busy``, a block still suspends a stream the policy
    lets run (the policy's choice stands again after it), and closing the session resumes
    everything.
    """

    def __init__(self, session):
        self._session = session

    def register(self, stream, priority=0):
        """Register ``stream`` for blocks at ``priority``: a block of a higher priority
        suspends it."""
        n = _args.stream("register", "stream", stream, LowPriorityStream)
        self._session._n.helper_register(n, _args.integer("register", "priority", priority, *_args.I32))

    def unregister(self, stream):
        """Take ``stream`` off the blocks and the policy (resuming it if either held it)."""
        self._session._n.helper_unregister(_args.stream("unregister", "stream", stream, LowPriorityStream))

    @property
    def active(self):
        """High-priority blocks running now."""
        return self._session._n.helper_active

    def high_priority(self, sync=None, priority=1):
        """``with hpf.high_priority(sync=...):`` a high-priority block. ``sync`` waits for the
        block's GPU work: a callable, or an object with ``synchronize()`` (a
        ``HighPriorityStream``, a ``torch.cuda.Stream``); it runs before the low-priority
        streams resume, also when the block raises. The block is left whatever happens inside
        it, a KeyboardInterrupt included (also one inside ``sync``, which is then raised); a
        block whose session was closed inside it ends quietly."""
        sync = _args.sync("high_priority", sync)
        priority = _args.integer("high_priority", "priority", priority, *_args.I32)
        return self._session._n.high_priority(priority, sync, self)

    @property
    def policy(self):
        """The policy's name as the status gives it (``"utilization-partition"``, ``"k-edf"``,
        ``"laxity"``), None for a session of blocks only (``policy="hpf"``)."""
        return self._session._n.helper_policy

    @property
    def policy_status(self):
        """What the policy knows now, None without a policy: ``{"policy": name, "streams":
        [(id, ready, held), ...], "actions": n, "failures": n, "last_error": str or None}``.
        Per scheduled stream (``id`` is ``stream.id``): whether it has work, and whether the
        policy holds it suspended; the suspends and resumes carried out, those that failed (each
        is retried at the policy's next decision) and the last failure's message."""
        return self._session._n.helper_policy_status()

    def _policy_word(self, where):
        word = self._session._policy
        if word == "hpf":
            raise _args.error(InvalidArgument, "invalid_argument",
                              f"{where}: the session's helper runs highest-priority-first blocks only: open the "
                              f"session with policy=\"up\", \"kedf\" or \"laxity\" to schedule streams by share, "
                              f"deadline or laxity")
        return word

    def schedule(self, stream, share=None, deadline_ms=None, laxity_ms=None, priority=None, critical=None):
        """Schedule ``stream`` with the session's policy (again: new parameters). Give exactly
        the policy's parameters:

        - ``policy="up"``: ``share``, an integer >= 1, its share of device time relative to the
          other scheduled streams' (3 and 1: 75 % and 25 % while both have work);
        - ``policy="kedf"``: ``deadline_ms``, its relative deadline (its work is due this long
          after it becomes ready; the ``k`` due first run);
        - ``policy="laxity"``: ``laxity_ms`` (how long its work may wait once ready),
          ``priority`` (while it has slack) and ``critical`` (once the slack is used up); larger
          runs first.

        Durations take any real number of milliseconds. From now on the policy may suspend the
        stream at any time; a delay command submitted through the library makes it ready, work
        launched on its handle needs ``ready()``/``idle()`` or ``busy()``. InvalidArgument
        (saying what the policy needs) for other parameters or a session without a policy."""
        w = "schedule"
        n = _args.stream(w, "stream", stream, LowPriorityStream)
        word = self._policy_word(w)
        values = _args.schedule_params(w, word, {"share": share, "deadline_ms": deadline_ms, "laxity_ms": laxity_ms,
                                                 "priority": priority, "critical": critical})
        call = {"up": self._session._n.helper_schedule_share, "kedf": self._session._n.helper_schedule_deadline,
                "laxity": self._session._n.helper_schedule_laxity}[word]
        call(n, *values)

    def ready(self, stream):
        """``stream`` has work the library does not see (kernels launched on its ``handle``)
        from now on, until ``idle()``: call it before launching. The policy may suspend other
        streams for it, or suspend it at once (its turn has not come). ``busy()`` pairs the two
        calls."""
        n = _args.stream("ready", "stream", stream, LowPriorityStream)
        self._policy_word("ready")
        self._session._n.helper_ready(n)

    def idle(self, stream):
        """All of ``stream``'s work is done (call it after ``stream.synchronize()``): the policy
        gives its place to the others."""
        n = _args.stream("idle", "stream", stream, LowPriorityStream)
        self._policy_word("idle")
        self._session._n.helper_idle(n)

    def busy(self, stream):
        """``with pol.busy(lp):`` ``lp`` is ready for the policy inside the block and idle after
        it (``ready()`` on entry, ``idle()`` on exit), whatever happens inside, an exception or a
        KeyboardInterrupt included (the block is native, as ``high_priority``). Launch on
        ``lp.handle`` and synchronize inside the block: after it the policy may suspend the
        stream at once. ``as`` gives ``lp``. Overlapping blocks of one stream (several threads)
        keep it ready until the last one leaves; a block whose session or stream was closed
        inside it ends quietly."""
        n = _args.stream("busy", "stream", stream, LowPriorityStream)
        self._policy_word("busy")
        return self._session._n.busy(n, stream)


#: The helper's name before it took a policy, kept for the programs that use it; the same class.
HighestPriorityFirst = Helper


class Session:
    """A session on one device: ``"host"`` (= ``"host:0"``; ``"host:N"``: host device N, which a
    scheduler daemon schedules apart), ``"hip:N"``, ``"kfd"`` or ``"auto"``.

    ``mechanism``: ``"auto"`` or one of ``MECHANISMS`` (GPU and kfd; the old name ``"ioctl"`` raises
    ``InvalidArgument`` naming ``"preempt-queues"``);
    ``grace``: 0 (firmware default) or 1..255 units of ~1K GPU clocks; ``force``: build the
    mechanism whatever the facts say; ``host_workers``: worker processes per host stream (0:
    cores - 1); ``host_worker``: the worker command (default: this interpreter with
    ``preempt_kfd._worker``); ``lv1_threshold``/``lv1_batch``: the Lv1 launcher;
    ``scheduler``: ``"unix:PATH"``, the ``preempt-sched`` daemon listening there schedules the
    session's helper across the node's processes (another process's high-priority block
    suspends this session's registered streams); ``"none"``: the in-process helper; None (the
    default): ``$PREEMPT_SCHEDULER`` if set, else the in-process helper. A daemon that cannot
    be reached raises ``SchedulerError``; once connected the session reconnects by itself, and
    resumes what the daemon suspended when the daemon goes away.
    ``policy``: the helper's policy over the streams you ``helper().schedule()``, beside its
    blocks: ``"hpf"`` (the default: blocks only), ``"up"`` (utilization partition: streams share
    the device by time, one at a time, each for ``round x share / sum of shares``), ``"kedf"``
    (the ``k`` ready streams with the earliest deadlines run) or ``"laxity"`` (least laxity);
    ``round_ms``: the partition's round, XSched's time slice (more than 0, at most 10 s; any real
    number of milliseconds); ``k``: how many streams run at once under ``kedf`` (1..4096). Both
    are checked whatever the policy. See ``Helper``.
    Use as a context manager, or call ``close()``: it resumes everything.
    """

    def __init__(self, device="auto", mechanism="auto", grace=0, force=False, host_workers=0,
                 host_worker=DEFAULT_HOST_WORKER, lv1_threshold=8, lv1_batch=4, gpu_slots=0, scheduler=None,
                 policy="hpf", round_ms=10, k=1):
        w = "Session"
        policy = _args.policy_word(w, policy)
        self._n = _native.NativeSession(
            _args.word(w, "device", device, _native.DEVICES),
            _args.word(w, "mechanism", mechanism, _args.either(("auto", *MECHANISMS))),
            _args.integer(w, "grace", grace, 0, 255, "units of ~1K GPU clocks; 0: the firmware's default"),
            _args.flag(w, "force", force),
            _args.integer(w, "host_workers", host_workers, 0, _args.U32, "worker processes per stream; 0: every core but one"),
            _args.worker(w, host_worker),
            _args.integer(w, "lv1_threshold", lv1_threshold, 1, _args.U32),
            _args.integer(w, "lv1_batch", lv1_batch, 1, _args.U32, "at most lv1_threshold"),
            _args.integer(w, "gpu_slots", gpu_slots, 0, _args.U32, "command slots per GPU delay stream; 0: 65536"),
            _args.scheduler(w, scheduler),
            policy,
            _args.round_ms(w, round_ms),
            _args.policy_k(w, k),
        )
        self._policy = policy
        self._helper = Helper(self)

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

    @property
    def scheduler(self):
        """None for a session not scheduled by a daemon, else ``{"socket", "connected",
        "daemon_pid", "held"}`` (``held``: the ids of the streams the daemon holds suspended)."""
        return self._n.scheduler()

    def low_priority_stream(self, level="auto"):
        """A low-priority stream suspended at ``level``: ``"auto"`` (Lv3 where available, else
        Lv1), ``"lv3"``, ``"lv2"`` or ``"lv1"`` (or their numbers). Lv2, the host device only: a
        suspend lets the running command finish and starts no new one; on a GPU session it raises
        Unavailable (no per-queue Lv2 on gfx942 under HWS:
        docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws)."""
        return LowPriorityStream(self._n.create_lp_stream(_args.level("low_priority_stream", level)), self)

    def bind_queue(self, queue_id, gpu_id=0, ring_base_address=0, ring_size=0, priority=None):
        """An explicit KFD queue of this process as an Lv3 stream (kfd and GPU sessions).
        ``priority``: the KFD priority 0..15 it is restored with (None: 7, ROCr's normal)."""
        w = "bind_queue"
        return LowPriorityStream(self._n.bind_queue(
            _args.integer(w, "queue_id", queue_id, 0, _args.U32),
            _args.integer(w, "gpu_id", gpu_id, 0, _args.U32, "0: unknown"),
            _args.integer(w, "ring_base_address", ring_base_address, 0, _args.U64, "0: look it up"),
            _args.integer(w, "ring_size", ring_size, 0, _args.U32, "0: look it up"),
            None if priority is None else _args.integer(w, "priority", priority, 0, 15, "None: 7, ROCr's normal"),
        ), self)

    def high_priority_stream(self):
        return HighPriorityStream(self._n.hp_stream())

    def suspend_set(self, streams):
        """Suspend every stream of ``streams`` (this session's), or none (the error says which
        failed)."""
        self._n.suspend_set(_args.streams("suspend_set", "streams", streams, LowPriorityStream))

    def resume_set(self, streams):
        """Resume every stream of ``streams``; the first failure is raised after trying all."""
        self._n.resume_set(_args.streams("resume_set", "streams", streams, LowPriorityStream))

    def helper(self):
        """The session's helper (``Helper``): highest-priority-first blocks, and the session's
        policy over the streams scheduled with it."""
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
