"""The contracts (docs/c-api.md#contracts) as Python meets them (the Rust and C tests have the
rest): a fork child's calls raise Forked and touch nothing of the parent's, the helper's suspension
is refused to a hand resume (Busy), absurd delays are refused up front and leaving a session with
work in flight is bounded, and messages carry no internal stream id. Every wait is bounded by the
test itself."""

import os
import re
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import preempt_kfd as pk

MS = 1_000_000


def proc_state(pid):
    """The scheduler state letter of pid ('T' stopped), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


@pytest.fixture
def session():
    s = pk.Session("host", host_workers=1)
    yield s
    s.close()


def test_a_fork_child_gets_forked_and_the_parent_goes_on(session):
    lp = session.low_priority_stream()
    held = session.low_priority_stream()
    hp = session.high_priority_stream()
    hp.submit_delay(MS)
    hp.synchronize()
    held.suspend()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
        pid = os.fork()
    if pid == 0:
        code = 0
        for step, call in enumerate(
            [lambda: lp.submit_delay(MS), lp.synchronize, held.resume, lambda: hp.submit_delay(MS)], 1
        ):
            try:
                call()
                code = code or step
            except pk.Forked as e:
                if "own session" not in str(e):
                    code = code or 10 + step
            except BaseException:
                code = code or 20 + step
        try:
            session.close()  # releases only the child's copy
        except BaseException:
            code = code or 30
        os._exit(code)
    deadline = time.monotonic() + 20
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if not done:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the fork child hung")
    assert os.waitstatus_to_exitcode(status) == 0, "the child's first unexpected step"
    assert all(proc_state(p) == "T" for p in held.host_pids), "the parent's suspension stands"
    held.resume()
    lp.submit_delay(MS)
    lp.synchronize()
    hp.submit_delay(MS)
    hp.synchronize()
    assert lp.check()["ok"]


def test_a_hand_resume_of_the_helpers_suspension_is_busy(session):
    lp = session.low_priority_stream()
    hpf = session.helper()
    hpf.register(lp)
    with hpf.high_priority():
        with pytest.raises(pk.Busy, match="helper"):
            lp.resume()
        lp.suspend()  # the user's own hold
    assert lp.is_suspended, "the hand suspension outlives the block"
    lp.resume()
    assert not lp.is_suspended


def test_messages_carry_no_internal_stream_id(session):
    lp = session.low_priority_stream()
    lp.suspend()
    with pytest.raises(pk.AlreadySuspended) as e:
        lp.suspend()
    assert not re.search(r"\d", str(e.value)), str(e.value)
    lp.resume()
    with pytest.raises(pk.NotSuspended) as e:
        lp.resume()
    assert not re.search(r"\d", str(e.value)), str(e.value)


def test_absurd_delays_are_refused_and_leaving_a_session_is_bounded():
    """A careless caller's program, in an interpreter of its own (so that a regression fails here
    instead of hanging pytest): submit_delay(10**15) then leaving the session would hang the
    interpreter at exit. It is refused, and leaving with the longest delay in flight raises
    Abandoned after the library's wait, long before the command would end."""
    script = textwrap.dedent(
        """
        import re, sys, time
        import preempt_kfd as pk
        with pk.Session("host", host_workers=1) as s:
            lp = s.low_priority_stream()
            try:
                lp.submit_delay(10**15)
                print("accepted", flush=True)
            except pk.InvalidArgument as e:
                print("refused", re.search(r"at most (\\d+) ns", str(e)).group(1), flush=True)
        try:
            with pk.Session("host", host_workers=1) as s:
                lp = s.low_priority_stream()
                hp = s.high_priority_stream()
                m = int(sys.argv[1])
                lp.submit_delay(m)
                hp.submit_delay(m)
                time.sleep(0.05)
                t0 = time.monotonic()
            print("closed")
        except pk.Abandoned as e:
            print("abandoned", time.monotonic() - t0, e)
        """
    )
    # A bound for the child, not a figure: a regression (a close that waits for the command, or
    # never returns) ends in the timeout instead of a hang.
    bound_s = 120
    first = subprocess.run(
        [sys.executable, "-c", script, "0"], capture_output=True, text=True, timeout=bound_s
    )
    line = first.stdout.splitlines()[0]
    assert line.startswith("refused "), line
    max_ns = int(line.split()[1])
    r = subprocess.run(
        [sys.executable, "-c", script, str(max_ns)], capture_output=True, text=True, timeout=bound_s
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].startswith("abandoned "), lines
    took = float(lines[1].split()[1])
    assert took < max_ns / 2e9, f"close returned long before the command would end: {lines[1]}"
    assert "high-priority" in lines[1] and not re.search(r"stream \d", lines[1]), lines[1]
