"""Lv2 through preempt_kfd: on the host device a suspend lets the running command finish and starts
no new one, and what it held back runs once after resume; on a GPU session (here: a forced kfd
session, where /dev/kfd exists) the level is refused with Unavailable, saying why and where. Each
host scenario runs on a thread of its own and fails after LONG_S instead of hanging the suite."""

import os
import threading
import time

import pytest

import preempt_kfd as pk

MS = 1_000_000
LONG_S = 60
HAVE_KFD = os.path.exists("/dev/kfd")


def bounded(body):
    """Run body() on a daemon thread; fail (re-raising its exception) or time out after LONG_S."""
    failed = []

    def run():
        try:
            body()
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            failed.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(LONG_S)
    assert not t.is_alive(), f"not done after {LONG_S} s"
    if failed:
        raise failed[0]


def test_lv2_holds_back_what_has_not_started_and_runs_it_once_after_resume():
    def body():
        # A sync point per command: the launcher's completed count follows the commands one by one.
        with pk.Session("host", host_workers=1, lv1_batch=1) as s:
            lp = s.low_priority_stream("lv2")
            assert lp.level == "lv2" and "lv2 via lv2-hold" in lp.describe()
            for _ in range(4):
                lp.submit_delay(40 * MS)
            time.sleep(0.01)
            info = lp.suspend()
            assert (info["level"], info["mechanism"]) == ("lv2", "lv2-hold")
            assert info["latency_ns"] > 0
            time.sleep(0.02)
            c1 = lp.check()["completed"]
            time.sleep(0.15)  # longer than a command: none may complete while held
            assert lp.check()["completed"] == c1 < 4
            with pytest.raises(pk.AlreadySuspended):
                lp.suspend()
            lp.resume()
            lp.synchronize()
            c = lp.check()
            assert c["ok"] and c["exactly_once"] == 4, c

    bounded(body)


def test_lv2_by_number_and_under_the_helper():
    def body():
        with pk.Session("host", host_workers=1) as s:
            lp = s.low_priority_stream(2)
            assert lp.level == "lv2"
            hpf = s.helper()
            hpf.register(lp)
            hp = s.high_priority_stream()
            for _ in range(10):
                lp.submit_delay(MS)
            with hpf.high_priority(sync=hp):
                assert lp.is_suspended
                hp.submit_delay(MS)
            assert not lp.is_suspended
            lp.synchronize()
            assert lp.check()["exactly_once"] == 10

    bounded(body)


@pytest.mark.skipif(not HAVE_KFD, reason="needs /dev/kfd: Lv2 on a GPU session (kfd, forced) is refused there")
def test_lv2_on_a_gpu_session_is_unavailable_saying_why_and_where():
    with pk.Session("kfd", mechanism="dbg-trap", force=True) as s:
        with pytest.raises(pk.Unavailable, match="no per-queue Lv2 on gfx942 under HWS") as e:
            s.low_priority_stream("lv2")
        assert str(e.value).endswith("docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws")
