"""Every bad argument of every public call raises InvalidArgument: the C ABI's INVALID_ARGUMENT,
with a message naming the argument and what it accepts. A value of the wrong type is also a
TypeError, a bad value of the right type also a ValueError (Python's idiom for the two). Nothing is
changed by a refused call."""

import inspect
import signal

import pytest

import preempt_kfd as pk
from preempt_kfd import _native

INVALID = {kind: code for _, kind, code in _native.error_kinds()}["invalid_argument"]
U32, U64, I32 = 2**32, 2**64, 2**31
HUGE = 10**5000  # past Python's own limit on the digits of an int's repr (3.11: 4300)


class Case:
    """One bad call: ``call(fx)`` with ``fx`` the fixtures below; ``arg`` names the argument."""

    def __init__(self, func, arg, value, call, wrong_type):
        self.func, self.arg, self.value, self.call, self.wrong_type = func, arg, value, call, wrong_type

    def __repr__(self):
        v = self.value
        shown = f"<int of {v.bit_length()} bits>" if isinstance(v, int) and v.bit_length() > 128 else repr(v)[:40]
        return f"{self.func}({self.arg}={shown})"


def session_cases():
    """Session(...): each keyword with values of the wrong type and out of range."""
    bad = {
        "device": ([5, None, b"host", ["host"]], ["gpu:0", "", "host "]),
        "mechanism": ([5, None, b"auto"], ["nope"]),
        "grace": ([1.5, "1", None], [-1, 256, U64, HUGE]),
        "force": (["yes", None, 1.0], [2, -1]),
        "host_workers": ([1.5, "1", None], [-1, U32, HUGE]),
        "host_worker": ([5, [5], [None], [b"/bin/x"]], [[], [""], ["a\0b"], ""]),
        "lv1_threshold": ([1.5, None], [0, -1, U32]),
        "lv1_batch": ([1.5, None], [0, -1, U32, 9]),  # 9: more than the threshold (8)
        "gpu_slots": ([1.5, None], [-1, U32]),
        "scheduler": ([5, b"unix:/x", ["unix:/x"]], ["", "unix:", "tcp:127.0.0.1:1", "/run/s.sock", "unix:a\0b"]),
        "policy": ([5, None, b"up"], ["edf", "", "UP", "x" * 65]),
        "round_ms": (["10", None, b"1", 1j], [0, -1, 0.0000001, 10_001, 1e300, float("nan"), float("inf"), HUGE]),
        "k": ([1.5, "1", None], [0, -1, 4097, HUGE]),
    }
    for arg, (types, values) in bad.items():
        for v, wrong_type in [(v, True) for v in types] + [(v, False) for v in values]:
            yield Case("Session", arg, v, lambda fx, a=arg, v=v: pk.Session(**{"device": "host", "host_workers": 1, a: v}), wrong_type)
    yield Case("Session", "device", 5, lambda fx: pk.Session(5), True)


def stream_cases():
    """Calls on a session, its streams and its helper."""
    for v, t in [(None, True), (1.5, True), (b"lv3", True), ("lv4", False), (4, False), (-1, False), (HUGE, False)]:
        yield Case("low_priority_stream", "level", v, lambda fx, v=v: fx.s.low_priority_stream(v), t)
    for arg, limit in [("queue_id", U32), ("gpu_id", U32), ("ring_base_address", U64), ("ring_size", U32)]:
        for v, t in [("1", True), (None, True), (1.5, True), (-1, False), (limit, False)]:
            kw = {"queue_id": 1, arg: v}
            yield Case("bind_queue", arg, v, lambda fx, kw=kw: fx.s.bind_queue(**kw), t)
    for v, t in [("7", True), (1.5, True), (-1, False), (16, False)]:
        yield Case("bind_queue", "priority", v, lambda fx, v=v: fx.s.bind_queue(1, priority=v), t)
    for name in ("suspend_set", "resume_set"):
        for label, make, t in [
            ("None", lambda fx: None, True), ("5", lambda fx: 5, True), ("a string", lambda fx: "ab", True),
            ("[None]", lambda fx: [None], True), ("[5]", lambda fx: [5], True),
            ("[a session]", lambda fx: [fx.s], True), ("[the HP stream]", lambda fx: [fx.hp], True),
            ("[a hand-made stream]", lambda fx: [pk.LowPriorityStream(5, fx.s)], True),
            ("[]", lambda fx: [], False), ("another session's stream", lambda fx: [fx.lp, fx.theirs], False),
            ("a closed stream", lambda fx: [fx.closed], False),
        ]:
            yield Case(name, "streams", label, lambda fx, n=name, m=make: getattr(fx.s, n)(m(fx)), t)
    for name in ("submit_delay",):
        for target in ("lp", "hp"):
            for v, t in [(None, True), ("5", True), (b"5", True), ([1], True),
                         (-1, False), (-0.5, False), (U64, False), (HUGE, False), (1e30, False),
                         (float("nan"), False), (float("inf"), False)]:
                yield Case(f"{target}.{name}", "ns", v, lambda fx, g=target, v=v: getattr(fx, g).submit_delay(v), t)
    for label, make, t in [("'x'", lambda fx: "x", True), ("None", lambda fx: None, True),
                           ("a session", lambda fx: fx.s, True), ("the HP stream", lambda fx: fx.hp, True),
                           ("a hand-made stream", lambda fx: pk.LowPriorityStream(5, fx.s), True),
                           ("another session's stream", lambda fx: fx.theirs, False),
                           ("a closed stream", lambda fx: fx.closed, False)]:
        yield Case("register", "stream", label, lambda fx, m=make: fx.s.helper().register(m(fx)), t)
        yield Case("unregister", "stream", label, lambda fx, m=make: fx.s.helper().unregister(m(fx)), t)
    for v, t in [("1", True), (1.5, True), (None, True), (I32, False), (-I32 - 1, False), (HUGE, False)]:
        yield Case("register", "priority", v, lambda fx, v=v: fx.s.helper().register(fx.lp, v), t)
        yield Case("high_priority", "priority", v, lambda fx, v=v: fx.s.helper().high_priority(priority=v), t)
    for v in (5, "x", object()):
        yield Case("high_priority", "sync", v, lambda fx, v=v: fx.s.helper().high_priority(sync=v), True)


def enter(block):
    with block:
        pass


def policy_cases():
    """The helper's policy: schedule, ready, idle and busy on the sessions with a policy, and each
    of schedule's parameters under its own policy and under another."""
    streams = [("'x'", lambda fx: "x", True), ("None", lambda fx: None, True), ("a session", lambda fx: fx.up, True),
               ("the HP stream", lambda fx: fx.hp, True),
               ("a hand-made stream", lambda fx: pk.LowPriorityStream(5, fx.up), True),
               ("another session's stream", lambda fx: fx.theirs, False),
               ("a closed stream", lambda fx: fx.up_closed, False)]
    for label, make, t in streams:
        yield Case("schedule", "stream", label, lambda fx, m=make: fx.up.helper().schedule(m(fx), share=1), t)
        yield Case("ready", "stream", label, lambda fx, m=make: fx.up.helper().ready(m(fx)), t)
        yield Case("idle", "stream", label, lambda fx, m=make: fx.up.helper().idle(m(fx)), t)
        yield Case("busy", "stream", label, lambda fx, m=make: enter(fx.up.helper().busy(m(fx))), t)
    # A stream of the session not scheduled, and a session without a policy.
    for name in ("ready", "idle", "busy"):
        def call(fx, n=name):
            r = getattr(fx.up.helper(), n)(fx.up_unscheduled)
            if n == "busy":
                enter(r)
        yield Case(name, "stream", "a stream not scheduled", call, False)
        yield Case(name, "stream", "a session without a policy", lambda fx, n=name: getattr(fx.s.helper(), n)(fx.lp), False)
    yield Case("schedule", "stream", "a session without a policy", lambda fx: fx.s.helper().schedule(fx.lp, share=1), False)
    lax = {"laxity_ms": 10, "priority": 0, "critical": 1}
    own = [("share", "up", {}, ([1.5, "1", b"1"], [0, -1, U32, HUGE])),
           ("deadline_ms", "kedf", {}, (["1", b"1", [1], 1j], [-1, -0.5, float("nan"), float("inf"), 1e30, HUGE])),
           ("laxity_ms", "lax", lax, (["1", [1]], [-1, float("nan"), HUGE])),
           ("priority", "lax", lax, (["1", 1.5], [I32, -I32 - 1, HUGE])),
           ("critical", "lax", lax, (["1", 1.5], [I32, -I32 - 1, HUGE]))]
    for arg, session, rest, (types, values) in own:
        for v, t in [(v, True) for v in types] + [(v, False) for v in values]:
            kw = {**rest, arg: v}
            yield Case("schedule", arg, v, lambda fx, s=session, kw=kw: fx.sched(s, **kw), t)
    # Parameters of another policy, or missing: each names what the policy needs.
    for arg, session, kw in [("share", "kedf", {"share": 1}), ("deadline_ms", "up", {"deadline_ms": 1}),
                             ("share", "up", {"share": 1, "deadline_ms": 1}), ("share", "up", {}),
                             ("laxity_ms", "kedf", lax), ("critical", "lax", {"laxity_ms": 10, "priority": 0}),
                             ("priority", "lax", {"laxity_ms": 10, "priority": 0, "critical": 1, "share": 2})]:
        yield Case("schedule", arg, f"{kw} under {session}", lambda fx, s=session, kw=kw: fx.sched(s, **kw), False)


def signal_cases():
    for v, t in [(5, True), (["x"], True), ([None], True), ("SIGINT", True),
                 ([0], False), ([10**6], False), ([signal.SIGKILL], False), ([signal.SIGSTOP], False)]:
        yield Case("install_signal_handlers", "signals", v, lambda fx, v=v: pk.install_signal_handlers(v), t)


CASES = [*session_cases(), *stream_cases(), *policy_cases(), *signal_cases()]


class Fixtures:
    def __init__(self):
        self.s = pk.Session("host", host_workers=1)
        self.other = pk.Session("host", host_workers=1)
        self.lp = self.s.low_priority_stream()
        self.hp = self.s.high_priority_stream()
        self.closed = self.s.low_priority_stream()
        self.closed.close()
        self.theirs = self.other.low_priority_stream()
        self.s.helper().register(self.lp)
        # One session per policy, each with one stream (the argument checks come first: a bad
        # call schedules nothing).
        self.up = pk.Session("host", host_workers=1, policy="up")
        self.kedf = pk.Session("host", host_workers=1, policy="kedf")
        self.lax = pk.Session("host", host_workers=1, policy="laxity")
        self.own = {"up": self.up.low_priority_stream(), "kedf": self.kedf.low_priority_stream(),
                    "lax": self.lax.low_priority_stream()}
        self.up_unscheduled = self.up.low_priority_stream()
        self.up_closed = self.up.low_priority_stream()
        self.up_closed.close()

    def sched(self, session, **kw):
        getattr(self, session).helper().schedule(self.own[session], **kw)

    def close(self):
        for s in (self.s, self.other, self.up, self.kedf, self.lax):
            s.close()


@pytest.fixture(scope="module")
def fx():
    f = Fixtures()
    yield f
    f.close()


@pytest.fixture
def saved_handlers():
    """install_signal_handlers must refuse before it installs anything; restore if it did not."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.getsignal(s) for s in sigs}
    yield
    after = {s: signal.getsignal(s) for s in sigs}
    for s, h in before.items():
        signal.signal(s, h)
    assert after == before, "a refused install_signal_handlers installed handlers"


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_a_bad_argument_is_invalid_argument(case, fx, saved_handlers):
    with pytest.raises(pk.InvalidArgument) as e:
        case.call(fx)
    err = e.value
    assert isinstance(err, pk.PreemptError)
    assert (err.kind, err.code, err.errno) == ("invalid_argument", INVALID, None)
    assert isinstance(err, TypeError if case.wrong_type else ValueError), type(err).__mro__
    assert len(str(err)) < 400, f"an unreadable message: {len(str(err))} characters"
    # The message names the argument (the library's own checks name the stream or the set).
    assert case.arg in str(err) or "stream" in str(err), str(err)
    # Nothing changed: no stream suspended, no block open, nothing scheduled.
    assert fx.s.helper().active == 0
    assert not fx.lp.is_suspended and not fx.theirs.is_suspended
    for s in (fx.up, fx.kedf, fx.lax):
        assert s.helper().policy_status["streams"] == []


def test_every_parameter_of_the_public_api_has_bad_cases():
    """The table above is written from the API: every parameter of every public call is in it."""
    calls = {
        "Session": pk.Session.__init__, "low_priority_stream": pk.Session.low_priority_stream,
        "bind_queue": pk.Session.bind_queue, "suspend_set": pk.Session.suspend_set,
        "resume_set": pk.Session.resume_set, "register": pk.Helper.register,
        "unregister": pk.Helper.unregister, "high_priority": pk.Helper.high_priority,
        "schedule": pk.Helper.schedule, "ready": pk.Helper.ready, "idle": pk.Helper.idle, "busy": pk.Helper.busy,
        "lp.submit_delay": pk.LowPriorityStream.submit_delay, "hp.submit_delay": pk.HighPriorityStream.submit_delay,
        "install_signal_handlers": pk.install_signal_handlers,
    }

    def takes_arguments(f):
        return any(p != "self" for p in inspect.signature(f).parameters)

    public = {pk.Session.__init__}
    for cls in (pk.Session, pk.LowPriorityStream, pk.HighPriorityStream, pk.Helper):
        public |= {f for name, f in vars(cls).items() if inspect.isfunction(f) and not name.startswith("_")}
    public |= {getattr(pk, name) for name in pk.__all__ if inspect.isfunction(getattr(pk, name))}
    untested = {f.__qualname__ for f in public if takes_arguments(f)} - {f.__qualname__ for f in calls.values()}
    assert not untested, f"public calls with arguments and no bad cases: {untested}"
    covered = {(c.func, c.arg) for c in CASES}
    for func, f in calls.items():
        missing = [p for p in inspect.signature(f).parameters if p != "self" and (func, p) not in covered]
        assert not missing, f"{func}: no bad case for {missing}"


def test_a_wrong_type_is_its_own_class():
    # InvalidArgumentType: an InvalidArgument (kind, code) that is also a TypeError.
    assert issubclass(pk.InvalidArgumentType, pk.InvalidArgument)
    assert issubclass(pk.InvalidArgumentType, TypeError)
    assert issubclass(pk.InvalidArgument, ValueError) and not issubclass(pk.InvalidArgument, TypeError)
    with pytest.raises(pk.InvalidArgumentType, match=r"^Session: device must be"):
        pk.Session(5)


def test_messages_name_the_call_the_argument_and_what_is_accepted(fx):
    with pytest.raises(pk.InvalidArgument, match=r"^submit_delay: ns must be .*nanoseconds.*, got -1$"):
        fx.lp.submit_delay(-1)
    with pytest.raises(pk.InvalidArgument, match=r"^Session: grace must be an integer 0\.\.255.*, got 256$"):
        pk.Session("host", grace=256)
    with pytest.raises(pk.InvalidArgument, match=r"^register: stream must be a LowPriorityStream.*, got str 'x'$"):
        fx.s.helper().register("x")
    with pytest.raises(pk.InvalidArgument, match=f"got an integer of {HUGE.bit_length()} bits$"):
        fx.lp.submit_delay(HUGE)


def test_reasonable_values_of_other_types_are_accepted(fx):
    # A duration may be any real number of nanoseconds (rounded); counts take anything with
    # __index__ (bool, numpy's integers); host_worker takes a path or a sequence of them.
    import fractions
    import pathlib

    lp = fx.s.low_priority_stream()
    for ns in (1e5, 100_000.4, fractions.Fraction(1, 3), True):
        lp.submit_delay(ns)
    lp.synchronize()
    assert lp.check()["ok"]
    with pk.Session("host", grace=True, host_workers=1,
                    host_worker=[pathlib.Path(pk.DEFAULT_HOST_WORKER[0]), *pk.DEFAULT_HOST_WORKER[1:]]) as s:
        s.low_priority_stream(level=3).submit_delay(1000)
    lp.close()
