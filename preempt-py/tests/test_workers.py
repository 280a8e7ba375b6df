"""The host device's worker processes against the world outside the library, from Python: a
stream created by a thread that then exits keeps its workers; a worker that dies makes every later
call raise DeviceError naming it. Every wait is bounded."""

import os
import signal
import threading
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


def test_streams_created_by_a_thread_that_exits_keep_working():
    made = {}

    def make():
        s = pk.Session("host", host_workers=1)
        made["s"], made["lp"] = s, s.low_priority_stream("lv3")
        s.high_priority_stream().submit_delay(MS)

    t = threading.Thread(target=make)
    t.start()
    t.join(LONG_S)
    assert not t.is_alive()
    s, lp = made["s"], made["lp"]
    with s:
        time.sleep(0.1)  # the parent-death signal, if it came, came when the thread ended
        for _ in range(5):
            lp.submit_delay(MS)
        with lp.preempted():
            pass
        lp.synchronize()
        c = lp.check()
        assert c["ok"] and c["exactly_once"] == 5, c
        hp = s.high_priority_stream()
        hp.submit_delay(MS)
        hp.synchronize()


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
