"""The checks of the public calls' arguments. A bad argument raises InvalidArgument, the C ABI's
INVALID_ARGUMENT, with a message naming the call, the argument and what it accepts (``submit_delay:
ns must be ..., got -1``); one of the wrong type raises its subclass InvalidArgumentType, also a
TypeError. Checked here, before the native layer, whose conversions would raise OverflowError,
TypeError or AttributeError instead.

Counts, ids and priorities take integers (anything with ``__index__``: bool, numpy's integers);
a duration takes any real number of nanoseconds, rounded; names take str.
"""

import math
import numbers
import operator
import os
import signal

from . import _native
from ._errors import InvalidArgument, InvalidArgumentType

_CODES = {kind: code for _, kind, code in _native.error_kinds()}

U32 = 2**32 - 1
U64 = 2**64 - 1
I32 = (-(2**31), 2**31 - 1)
# A name of a grammar (device, mechanism, level) is short; a longer one is refused before its
# error would echo it whole.
NAME_MAX = 64


def error(cls, kind, message):
    """An exception of the package, ``kind`` giving its C code."""
    return cls(message, kind, _CODES[kind])


def shown(value):
    """A short readable form of a bad value: numbers as they are, others with their type."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still named by its type
        text = "?"
    if len(text) > 60:
        text = text[:57] + "..."
    if value is None or type(value) in (bool, int, float):
        return text
    return f"{type(value).__name__} {text}"


def bad(where, name, accepted, value, wrong_type):
    cls = InvalidArgumentType if wrong_type else InvalidArgument
    return error(cls, "invalid_argument", f"{where}: {name} must be {accepted}, got {shown(value)}")


def either(words, conjunction="or"):
    """``a, b or c`` (``a, b and c``)."""
    *rest, last = words
    return f"{', '.join(rest)} {conjunction} {last}" if rest else last


def span(lo, hi):
    named = {U32: "2**32-1", U64: "2**64-1", I32[0]: "-2**31", I32[1]: "2**31-1"}
    return f"{named.get(lo, lo)}..{named.get(hi, hi)}"


def integer(where, name, value, lo, hi, note=None):
    """``value`` as an int in ``lo..hi``; ``note`` says what a value means."""
    accepted = f"an integer {span(lo, hi)}" + (f" ({note})" if note else "")
    try:
        n = operator.index(value)
    except TypeError:
        raise bad(where, name, accepted, value, True) from None
    if not lo <= n <= hi:
        raise bad(where, name, accepted, value, False)
    return n


def duration_ns(where, name, value):
    """A number of nanoseconds in 0..2**64-1: an integer, or a real number rounded."""
    accepted = f"a number of nanoseconds {span(0, U64)} (a real number is rounded)"
    try:
        n = operator.index(value)
    except TypeError:
        if not isinstance(value, numbers.Real):
            raise bad(where, name, accepted, value, True) from None
        f = float(value)
        if not (math.isfinite(f) and 0 <= f <= U64):
            raise bad(where, name, accepted, value, False) from None
        n = round(f)
    if not 0 <= n <= U64:
        raise bad(where, name, accepted, value, False)
    return n


def flag(where, name, value):
    """True or False (or 1 or 0)."""
    if isinstance(value, bool):
        return value
    accepted = "True or False"
    try:
        n = operator.index(value)
    except TypeError:
        raise bad(where, name, accepted, value, True) from None
    if n not in (0, 1):
        raise bad(where, name, accepted, value, False)
    return bool(n)


def word(where, name, value, accepted):
    """A str of a grammar; the library's parser says whether it knows it."""
    if not isinstance(value, str):
        raise bad(where, name, f"a str: {accepted}", value, True)
    if len(value) > NAME_MAX:
        raise bad(where, name, f"a str of at most {NAME_MAX} characters: {accepted}", value, False)
    return value


def level(where, value):
    """A level's word or number, as the word the native layer parses."""
    accepted = either([f"{w} ({n})" for w, n in _native.LEVELS])
    if isinstance(value, str):
        return word(where, "level", value, accepted)
    try:
        n = operator.index(value)
    except TypeError:
        raise bad(where, "level", accepted, value, True) from None
    for w, number in _native.LEVELS:
        if n == number:
            return w
    raise bad(where, "level", accepted, value, False)


def stream(where, name, value, cls):
    """One low-priority stream (the session checks that it is its own)."""
    native = getattr(value, "_n", None) if isinstance(value, cls) else None
    if not isinstance(native, _native.NativeLpStream):  # also one built by hand, not by a session
        raise bad(where, name, f"a {cls.__name__} of this session", value, True)
    return native


def streams(where, name, value, cls):
    """A non-empty iterable of low-priority streams, as a list of their native objects."""
    accepted = f"a non-empty iterable of {cls.__name__} of this session"
    if isinstance(value, (str, bytes)):
        raise bad(where, name, accepted, value, True)
    try:
        items = list(value)
    except TypeError:
        raise bad(where, name, accepted, value, True) from None
    if not items:
        raise bad(where, name, accepted, value, False)
    return [stream(where, f"{name}[{i}]", s, cls) for i, s in enumerate(items)]


def worker(where, value):
    """The host worker command: None (the library's lookup), a path, or a non-empty sequence
    of a program and its arguments (str or os.PathLike)."""
    accepted = "None, a program path, or a sequence of a program and its arguments (str or os.PathLike)"
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    elif isinstance(value, bytes):
        raise bad(where, "host_worker", accepted, value, True)
    try:
        items = list(value)
    except TypeError:
        raise bad(where, "host_worker", accepted, value, True) from None
    out = []
    for i, a in enumerate(items):
        a = os.fspath(a) if isinstance(a, os.PathLike) else a
        if not isinstance(a, str):
            raise bad(where, f"host_worker[{i}]", "a str or an os.PathLike of one", a, True)
        if "\0" in a:
            raise bad(where, f"host_worker[{i}]", "a str without NUL characters", a, False)
        out.append(a)
    if not out or not out[0]:
        raise bad(where, "host_worker", accepted, value, False)
    return out


def scheduler(where, value):
    """None (not given: ``$PREEMPT_SCHEDULER``, else no daemon) or a str of the library's
    grammar (``unix:PATH`` or ``none``; the library's parser says whether it knows it)."""
    accepted = f"None ($PREEMPT_SCHEDULER, else no daemon) or a str: {_native.SCHEDULERS}"
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(where, "scheduler", accepted, value, True)
    if "\0" in value:
        raise bad(where, "scheduler", f"a str without NUL characters: {_native.SCHEDULERS}", value, False)
    return value


def sync(where, value):
    """None, a callable, or an object with a callable ``synchronize`` (a stream)."""
    if value is None or callable(value) or callable(getattr(value, "synchronize", None)):
        return value
    raise bad(where, "sync", "None, a callable, or an object with a synchronize() method", value, True)


def signals(where, value):
    """Signal numbers Python can catch."""
    accepted = "an iterable of signal numbers that can be caught (not SIGKILL or SIGSTOP)"
    if isinstance(value, (str, bytes)):
        raise bad(where, "signals", accepted, value, True)
    try:
        items = list(value)
    except TypeError:
        raise bad(where, "signals", accepted, value, True) from None
    one = "a signal number that can be caught (not SIGKILL or SIGSTOP)"
    out = []
    for i, s in enumerate(items):
        try:
            n = operator.index(s)
        except TypeError:
            raise bad(where, f"signals[{i}]", one, s, True) from None
        if n not in signal.valid_signals() or n in (signal.SIGKILL, signal.SIGSTOP):
            raise bad(where, f"signals[{i}]", one, s, False)
        out.append(n)
    return out


def millis(where, name, value, positive, max_ns, note):
    """A number of milliseconds (an integer, or any real number) as whole nanoseconds (rounded):
    more than 0 where ``positive``, else at least 0, and at most ``max_ns``."""
    limit = f"{max_ns // 10**6} ms" if max_ns % 10**6 == 0 else f"{span(0, max_ns).split('..')[1]} ns"
    accepted = f"a number of milliseconds {'more than 0' if positive else 'at least 0'}, at most {limit} ({note})"
    try:
        ns = operator.index(value) * 10**6
    except TypeError:
        if not isinstance(value, numbers.Real):
            raise bad(where, name, accepted, value, True) from None
        scaled = value * 10**6  # exact for int-like and Fraction, a float for a float
        try:
            f = float(scaled)
        except (OverflowError, ValueError):
            raise bad(where, name, accepted, value, False) from None
        if not (math.isfinite(f) and 0 <= f <= max_ns):
            raise bad(where, name, accepted, value, False)
        ns = round(scaled)
    if not (1 if positive else 0) <= ns <= max_ns:
        raise bad(where, name, accepted, value, False)
    return ns


# What a stream is scheduled with under each policy word (Helper.schedule's keywords), and what
# each keyword means; preempt-api's own words and limits are in _native (POLICIES, MAX_POLICY_*).
POLICY_KEYWORDS = {
    "up": ("share",),
    "kedf": ("deadline_ms",),
    "laxity": ("laxity_ms", "priority", "critical"),
}
KEYWORD_MEANS = {
    "share": "its share of device time, relative to the other scheduled streams'",
    "deadline_ms": "its relative deadline: its work is due this long after it becomes ready",
    "laxity_ms": "how long its work may wait at `priority` once it is ready",
    "priority": "its priority while it has slack; larger runs first",
    "critical": "its priority once the slack is used up",
}


def policy_word(where, value):
    """A policy word; the library's parser says whether it knows it."""
    return word(where, "policy", value, either(_native.POLICIES))


def round_ms(where, value):
    return millis(where, "round_ms", value, True, _native.MAX_POLICY_ROUND_NS,
                  "policy up's round: one turn of every scheduled stream")


def policy_k(where, value):
    return integer(where, "k", value, 1, _native.MAX_POLICY_K, "policy kedf: how many streams run at once")


def schedule_params(where, policy, given):
    """``given`` ({keyword: value or None}) checked against the session's policy word: exactly the
    policy's keywords, each of its type and range. Returns the values in the order of
    POLICY_KEYWORDS[policy], as the native layer takes them."""
    needed = POLICY_KEYWORDS[policy]
    passed = {k: v for k, v in given.items() if v is not None}
    if set(passed) != set(needed):
        what = either([f"{k}=" for k in needed], "and")
        means = "; ".join(f"{k}: {KEYWORD_MEANS[k]}" for k in needed)
        got = ", ".join(f"{k}={shown(v)}" for k, v in passed.items()) or "none of them"
        raise error(InvalidArgument, "invalid_argument",
                    f"{where}: the session's policy {policy!r} schedules a stream with {what} ({means}), got {got}")
    out = []
    for k in needed:
        v = passed[k]
        if k == "share":
            out.append(integer(where, k, v, 1, U32, KEYWORD_MEANS[k]))
        elif k.endswith("_ms"):
            out.append(millis(where, k, v, False, U64, KEYWORD_MEANS[k]))
        else:
            out.append(integer(where, k, v, *I32, KEYWORD_MEANS[k]))
    return out
