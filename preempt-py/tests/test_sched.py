"""Sessions scheduled by the preempt-sched daemon (``Session(scheduler="unix:PATH")``,
``$PREEMPT_SCHEDULER``) on the host device: another process's high-priority block suspends this
process's streams, and the daemon's SIGKILL resumes them with no worker left stopped
(docs/scheduler-daemon.md). The daemon is preempt-sched's debug build
(``cargo build -p preempt-sched``: scripts/check-python.sh builds it). Every wait is bounded."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

import preempt_kfd as pk
from child_lines import ChildLines

MS = 1_000_000
LONG_S = 20
REPO = pathlib.Path(__file__).resolve().parents[2]

# The high-priority process: a session scheduled by the same daemon, one block held until a line
# arrives on its stdin.
HP_PROCESS = """
import sys
import preempt_kfd as pk
with pk.Session("host", host_workers=1, scheduler=sys.argv[1]) as s:
    print("ready", flush=True)
    with s.helper().high_priority():
        print("entered", flush=True)
        sys.stdin.readline()
    print("left", flush=True)
"""


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def eventually(what, pred):
    deadline = time.monotonic() + LONG_S
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.002)


def daemon_binary():
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "preempt-sched"
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `cargo build -p preempt-sched` (scripts/check-python.sh does)")
    return path


@pytest.fixture
def daemon(tmp_path, monkeypatch):
    """A daemon on tmp_path/s.sock (ack timeout and block silence LONG_S, and the clients' waits on
    it too: a loaded machine must not make "suspended once enter returns" race), killed at the
    end."""
    monkeypatch.setenv("PREEMPT_SCHEDULER_TIMEOUT_MS", str(LONG_S * 1000))
    socket = tmp_path / "s.sock"
    log = tmp_path / "daemon.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([daemon_binary(), "--socket", socket, "--ack-timeout-ms", str(LONG_S * 1000),
                                 "--block-silence-ms", str(LONG_S * 1000)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        eventually("the daemon listens", lambda: "listening on" in log.read_text())
        yield proc, f"unix:{socket}"
    finally:
        proc.kill()
        proc.wait()


class Line:
    """A child's stdout read line by line, each read bounded by LONG_S."""

    def __init__(self, proc):
        self.lines = ChildLines(proc.stdout)

    def __call__(self):
        line = self.lines.next(LONG_S)
        assert line is not None, "no line from the child in time"
        return line


def hp_process(word):
    proc = subprocess.Popen([sys.executable, "-c", HP_PROCESS, word], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    line = Line(proc)
    assert line() == "ready"
    return proc, line


def test_another_process_s_block_suspends_the_session_and_the_daemon_s_death_resumes_it(daemon):
    proc, word = daemon
    with pk.Session("host", host_workers=2, scheduler=word) as s:
        assert s.scheduler["connected"] and s.scheduler["daemon_pid"] == proc.pid
        lp = s.low_priority_stream("lv3")
        for _ in range(10):
            lp.submit_delay(20 * MS)
        s.helper().register(lp)
        workers = lp.host_pids
        hp, line = hp_process(word)
        try:
            assert line() == "entered"
            assert lp.is_suspended, "suspended for another process's block"
            assert [proc_state(w) for w in workers] == ["T", "T"]
            assert s.scheduler["held"] == [lp.id]
            assert s.helper().active == 0, "the block is the other process's"
            with pytest.raises(pk.Busy):
                lp.resume()
            # The daemon dies with the block active: the session resumes the stream by itself.
            proc.kill()
            proc.wait()
            eventually("the stream is resumed", lambda: not lp.is_suspended)
            eventually("no worker is stopped", lambda: all(proc_state(w) != "T" for w in workers))
            assert not s.scheduler["connected"]
            lp.synchronize()
            c = lp.check()
            assert c["ok"] and c["exactly_once"] == 10, c
            hp.stdin.write("\n")
            hp.stdin.flush()
            assert line() == "left"
            assert hp.wait(LONG_S) == 0
        finally:
            hp.kill()
            hp.wait()


def test_the_word_the_environment_and_their_precedence(daemon, tmp_path, monkeypatch):
    _, word = daemon
    missing = f"unix:{tmp_path / 'nobody.sock'}"
    with pytest.raises(pk.SchedulerError) as e:
        pk.Session("host", host_workers=1, scheduler=missing)
    assert (e.value.kind, "nobody.sock" in str(e.value), "\n" in str(e.value)) == ("scheduler", True, False)
    assert e.value.code < 0
    # Not given: $PREEMPT_SCHEDULER; "none" wins over it.
    monkeypatch.setenv("PREEMPT_SCHEDULER", missing)
    with pytest.raises(pk.SchedulerError):
        pk.Session("host", host_workers=1)
    with pk.Session("host", host_workers=1, scheduler="none") as s:
        assert s.scheduler is None
    monkeypatch.setenv("PREEMPT_SCHEDULER", "tcp:nowhere")
    with pytest.raises(pk.InvalidArgument, match="PREEMPT_SCHEDULER"):
        pk.Session("host", host_workers=1)
    monkeypatch.setenv("PREEMPT_SCHEDULER", word)
    with pk.Session("host", host_workers=1) as s:
        assert s.scheduler["connected"] and s.scheduler["socket"] == word.removeprefix("unix:")
    monkeypatch.delenv("PREEMPT_SCHEDULER")
    with pk.Session("host", host_workers=1) as s:
        assert s.scheduler is None, "no word, no variable: the in-process helper"
