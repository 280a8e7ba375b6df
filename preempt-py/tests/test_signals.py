"""Signals against preempt_kfd, each in a child interpreter with a time limit: a KeyboardInterrupt
at any point of a ``with`` block never leaves the block open or a worker stopped, and Ctrl-C (or
SIGTERM) reaches a main thread blocked in a wait."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import preempt_kfd as pk
from child_lines import ChildLines

# Every child states its workers' scheduler states with this ('T' = stopped, None = gone).
STATES = textwrap.dedent("""
    def states(pids):
        out = []
        for p in pids:
            try:
                with open(f"/proc/{p}/stat") as f:
                    out.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                out.append(None)
        return out
""")

LIMIT_S = 60  # no child may take longer; a child that does is killed and the test fails


class Child:
    """A child interpreter running ``script``, read line by line with a time limit."""

    def __init__(self, script):
        self.p = subprocess.Popen([sys.executable, "-c", STATES + textwrap.dedent(script)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.deadline = time.monotonic() + LIMIT_S
        self.lines = ChildLines(self.p.stdout)

    def line(self):
        """The child's next line of stdout; fails the test past the limit."""
        left = self.deadline - time.monotonic()
        line = self.lines.next(max(0.0, left))
        if line is None:
            self.kill()
            pytest.fail(f"the child printed no line within {LIMIT_S} s")
        return line

    def finish(self, limit_s):
        """(exit status, rest of stdout, stderr) once the child exits, at most `limit_s` from now."""
        try:
            out, err = self.p.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the child did not exit within {limit_s} s: it is blocked")
        return self.p.returncode, self.lines.rest(out), err

    def kill(self):
        self.p.kill()
        self.p.communicate()


# --- a KeyboardInterrupt at any point of a block -------------------------------------------------

HAMMER = """
    import json, signal, sys, threading, time
    import preempt_kfd as pk

    s = pk.Session("host", host_workers=1, policy="kedf")
    hpf = s.helper()
    by_helper = s.low_priority_stream()   # suspended by high_priority blocks
    by_hand = s.low_priority_stream()     # suspended by preempted blocks
    by_policy = s.low_priority_stream()   # made ready by busy blocks
    hpf.register(by_helper)
    hpf.schedule(by_policy, deadline_ms=5)
    hp = s.high_priority_stream()
    stop = [False]
    armed = [True]
    errors = []

    def one_block(i):
        if i % 3 == 1:
            with hpf.high_priority(sync=hp):
                pass
        elif i % 3 == 2:
            with by_hand.preempted():
                pass
        else:
            with hpf.busy(by_policy):
                pass

    def inside_a_block(frame):
        while frame is not None:
            if frame.f_code is one_block.__code__:
                return True
            frame = frame.f_back
        return False

    def on_sigint(signum, frame):
        # As Python's default handler: KeyboardInterrupt wherever the block's code runs (the
        # block's frame and every frame below it, the library's included). Only the harness's own
        # loop is spared, so that it survives to report.
        if armed[0] and inside_a_block(frame):
            raise KeyboardInterrupt

    def stop_on_stdin():
        sys.stdin.readline()
        stop[0] = True

    signal.signal(signal.SIGINT, on_sigint)
    threading.Thread(target=stop_on_stdin, daemon=True).start()
    print("ready", flush=True)
    blocks = interrupted = i = 0
    while not stop[0]:
        i += 1
        try:
            one_block(i)
            blocks += 1
        except KeyboardInterrupt:
            interrupted += 1
        except Exception as e:  # noqa: BLE001 - every other failure is reported
            errors.append(repr(e))
    armed[0] = False
    pids = by_helper.host_pids + by_hand.host_pids
    print(json.dumps({
        "blocks": blocks, "interrupted": interrupted, "active": hpf.active,
        "suspended": [by_helper.is_suspended, by_hand.is_suspended], "states": states(pids),
        "ready": [ready for _, ready, _ in hpf.policy_status["streams"]],
        "errors": errors[:5],
    }), flush=True)
    s.close()
"""


def test_a_keyboardinterrupt_at_any_point_of_a_block_leaves_nothing_open():
    # SIGINT every 0.2-3 ms for 3 s over high_priority, preempted and busy blocks in turn (busy:
    # the policy's block); the seed is printed by pytest on failure.
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    child = Child(HAMMER)
    assert child.line() == "ready"
    end = time.monotonic() + 3.0
    sent = 0
    while time.monotonic() < end:
        os.kill(child.p.pid, signal.SIGINT)
        sent += 1
        time.sleep(rng.uniform(0.0002, 0.003))
    try:
        child.p.stdin.write("stop\n")
        child.p.stdin.flush()
    except BrokenPipeError:
        pass  # the child is gone: its stderr says why
    line = child.line()
    rc, _, err = child.finish(LIMIT_S)
    assert line and rc == 0, f"the child died (status {rc}, seed {seed}): {err}"
    report = json.loads(line)
    where = f"seed {seed}, {sent} SIGINTs: {report}"
    assert report["interrupted"] > 0, f"no block was interrupted: the test did not test ({where})"
    assert report["errors"] == [], where
    assert report["active"] == 0, f"a block was left open ({where})"
    assert report["suspended"] == [False, False], f"a stream was left suspended ({where})"
    assert report["ready"] == [False], f"a busy block left its stream ready ({where})"
    assert "T" not in report["states"], f"a worker was left stopped ({where})"


class RaiseAt:
    """A trace function raising KeyboardInterrupt at the k-th instruction run under `root` (its
    frame and every frame it calls), where a signal handler could raise it."""

    def __init__(self, k, root):
        self.k, self.root, self.n, self.hit = k, root, 0, False

    def under_root(self, frame):
        while frame is not None:
            if frame.f_code is self.root:
                return True
            frame = frame.f_back
        return False

    def __call__(self, frame, event, arg):
        if not self.under_root(frame):
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            self.n += 1
            if self.n - 1 == self.k:
                self.hit = True
                raise KeyboardInterrupt
        return self


def opcode_events_work():
    def probe():
        return 1
    t = RaiseAt(0, probe.__code__)
    sys.settrace(t)
    try:
        probe()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return t.hit


@pytest.mark.skipif(not opcode_events_work(), reason="this interpreter's sys.settrace gives no opcode events (3.12.1)")
def test_a_keyboardinterrupt_at_every_instruction_of_a_block_leaves_nothing_open():
    # Deterministic beside the hammer: the interrupt at each instruction in turn, the library's
    # Python code and sync's included.
    with pk.Session("host", host_workers=1, policy="kedf") as s:
        by_helper, by_hand, by_policy = s.low_priority_stream(), s.low_priority_stream(), s.low_priority_stream()
        hpf = s.helper()
        hpf.register(by_helper)
        hpf.schedule(by_policy, deadline_ms=5)
        hp = s.high_priority_stream()

        def blocks():
            with hpf.high_priority(sync=hp):
                pass
            with by_hand.preempted():
                pass
            with hpf.busy(by_policy):
                pass

        k = 0
        while True:
            t = RaiseAt(k, blocks.__code__)
            sys.settrace(t)
            try:
                blocks()
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(None)
            assert hpf.active == 0, f"a block left open by an interrupt at instruction {k}"
            assert not by_helper.is_suspended and not by_hand.is_suspended, f"suspended after instruction {k}"
            assert not any(r for _, r, _ in hpf.policy_status["streams"]), f"left ready after instruction {k}"
            if not t.hit:
                break
            k += 1
        assert k > 20, f"only {k} instructions were interrupted"


def test_a_keyboardinterrupt_inside_sync_still_leaves_the_block():
    with pk.Session("host", host_workers=1) as s:
        lp = s.low_priority_stream()
        hpf = s.helper()
        hpf.register(lp)

        def sync():
            signal.raise_signal(signal.SIGINT)  # the default handler: KeyboardInterrupt here

        with pytest.raises(KeyboardInterrupt):
            with hpf.high_priority(sync=sync):
                assert lp.is_suspended
        assert hpf.active == 0 and not lp.is_suspended


def test_a_block_dropped_while_entered_is_left():
    # What a `with` statement skipped by a signal leaves behind on CPython 3.9 (the block object
    # entered, its __exit__ never called): the object's end leaves the block.
    with pk.Session("host", host_workers=1) as s:
        lp, other = s.low_priority_stream(), s.low_priority_stream()
        hpf = s.helper()
        hpf.register(lp)
        block = hpf.high_priority()
        block.__enter__()
        preempted = other.preempted()
        preempted.__enter__()
        assert hpf.active == 1 and lp.is_suspended and other.is_suspended
        del block, preempted
        assert hpf.active == 0 and not lp.is_suspended and not other.is_suspended


def test_closing_the_session_inside_a_block_ends_it_quietly():
    # close() resumed everything and ended every block: leaving has nothing left to do.
    s = pk.Session("host", host_workers=1)
    lp, other = s.low_priority_stream(), s.low_priority_stream()
    s.helper().register(lp)
    with s.helper().high_priority():
        with other.preempted():
            s.close()
    with pytest.raises(pk.Closed):
        lp.suspend()


# --- signals reach a main thread blocked in a wait -----------------------------------------------

BLOCKED_IN_SYNCHRONIZE = """
    import signal, sys, time
    import preempt_kfd as pk
    {setup}
    s = pk.Session("host", host_workers=1)
    lp = s.low_priority_stream()
    lp.submit_delay(200_000_000)
    lp.suspend()
    pids = lp.host_pids
    print("blocking", flush=True)
    try:
        lp.synchronize()
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted", states(pids), flush=True)
    s.close()
    print("closed", states(pids), flush=True)
"""


def blocked_child(setup):
    child = Child(textwrap.dedent(BLOCKED_IN_SYNCHRONIZE).format(setup=textwrap.dedent(setup)))
    assert child.line() == "blocking"
    time.sleep(0.5)  # the main thread is inside synchronize() by now
    return child


def test_ctrl_c_interrupts_synchronize_of_a_suspended_stream_and_resumes():
    child = blocked_child("pk.install_signal_handlers()")
    os.kill(child.p.pid, signal.SIGINT)
    rc, out, err = child.finish(10)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("interrupted") and "'T'" not in lines[0], out
    assert lines[1].startswith("closed") and "'T'" not in lines[1], out


def test_ctrl_c_without_handlers_interrupts_synchronize_and_close_resumes():
    child = blocked_child("")
    os.kill(child.p.pid, signal.SIGINT)
    rc, out, err = child.finish(10)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("interrupted"), out
    assert lines[1].startswith("closed") and "'T'" not in lines[1], out


def test_sigterm_reaches_a_main_thread_blocked_in_synchronize():
    # The default action, after install_signal_handlers: the process dies by SIGTERM.
    child = blocked_child("pk.install_signal_handlers()")
    os.kill(child.p.pid, signal.SIGTERM)
    rc, out, err = child.finish(10)
    assert rc == -signal.SIGTERM, (rc, out, err)
    # An application's own SIGTERM handler runs after everything was resumed.
    child = blocked_child(textwrap.dedent("""
        def on_term(signum, frame):
            print("term", states(pids), flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, on_term)
        pk.install_signal_handlers()
    """))
    os.kill(child.p.pid, signal.SIGTERM)
    rc, out, err = child.finish(10)
    assert rc == 3, (rc, out, err)
    assert out.startswith("term") and "'T'" not in out.splitlines()[0], out


def test_synchronize_of_a_suspended_stream_returns_once_another_thread_resumes():
    # The interruptible wait still answers as synchronize does.
    with pk.Session("host", host_workers=1) as s:
        lp = s.low_priority_stream()
        for _ in range(3):
            lp.submit_delay(20_000_000)
        lp.suspend()
        resumer = threading.Timer(0.3, lp.resume)
        t0 = time.monotonic()
        resumer.start()
        lp.synchronize()
        waited = time.monotonic() - t0
        resumer.join()
        assert waited >= 0.3, f"synchronize returned after {waited} s, before the resume"
        c = lp.check()
        assert c["ok"] and c["exactly_once"] == 3, c
