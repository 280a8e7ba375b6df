"""The host device's worker processes against the world outside the library, from Python: a
worker that dies makes every later call raise DeviceError naming it. Every wait is bounded."""

import os
import signal
import time

import pytest

import preempt_kfd as pk

MS = 1_000_000
LONG_S = 30


def proc_state(pid):
    """The scheduler state letter of pid ('T' stopped, 'Z' zombie), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def eventually(what, pred):
    deadline = time.monotonic() + LONG_S
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.001)


def test_a_dead_worker_makes_every_later_call_raise_naming_it():
    with pk.Session("host", host_workers=1) as s:
        lp = s.low_priority_stream("lv3")
        lp.submit_delay(MS)
        lp.synchronize()
        pid = lp.host_pids[0]
        os.kill(pid, signal.SIGKILL)
        eventually("the worker has ended", lambda: proc_state(pid) in (None, "Z", "X"))
        named = rf"\(pid {pid}\) was killed by SIGKILL"
        with pytest.raises(pk.DeviceError, match=named):
            lp.submit_delay(MS)
        with pytest.raises(pk.DeviceError, match=named):
            lp.synchronize()
        with pytest.raises(pk.DeviceError, match=named):
            lp.suspend()
        assert not lp.is_suspended
        c = lp.check()
        assert not c["ok"] and any(f"(pid {pid})" in p for p in c["problems"]), c
