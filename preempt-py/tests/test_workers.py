"""The host device's worker processes against the world outside the library, from Python: a
stream created by a thread that then exits keeps its workers; a worker that dies makes every later
call raise DeviceError naming it; terminal job control (Ctrl-Z then fg) cannot continue a
suspended stream's workers. Every wait is bounded."""

import os
import signal
import subprocess
import sys
import textwrap
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


def test_job_control_does_not_continue_a_suspended_worker():
    # The application is a job of its own (a process group, as a shell starts it); this test
    # plays the shell: Ctrl-Z sends SIGTSTP to the job's group, fg then SIGCONT.
    script = textwrap.dedent("""
        import sys, preempt_kfd as pk
        with pk.Session("host", host_workers=2) as s:
            lp = s.low_priority_stream("lv3")
            lp.submit_delay(50_000_000)
            lp.suspend()
            print(*lp.host_pids, flush=True)
            sys.stdin.read()
            lp.resume()
            lp.synchronize()
            print("DONE", lp.check()["ok"], flush=True)
    """)
    # process_group (3.11) is setpgid in the child; preexec_fn does the same on older Pythons.
    own_group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    job = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, **own_group)
    try:
        workers = [int(p) for p in job.stdout.readline().split()]
        assert len(workers) == 2
        os.killpg(job.pid, signal.SIGTSTP)
        eventually("the application is stopped", lambda: proc_state(job.pid) == "T")
        os.killpg(job.pid, signal.SIGCONT)
        eventually("the application runs again", lambda: proc_state(job.pid) != "T")
        until = time.monotonic() + 0.2  # SIGCONT acts before killpg returns; look a while
        while time.monotonic() < until:
            assert [proc_state(w) for w in workers] == ["T", "T"], "a suspended worker was continued"
            time.sleep(0.005)
        out, _ = job.communicate("", timeout=LONG_S)
        assert "DONE True" in out and job.returncode == 0, out
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
