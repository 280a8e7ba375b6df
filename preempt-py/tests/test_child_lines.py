"""The tests' line reader (child_lines.py): lines a child writes together are each returned, and
every wait ends within its bound."""

import subprocess
import sys
import time

from child_lines import ChildLines


def child(script):
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.PIPE)


def test_two_lines_in_one_write_are_both_read():
    p = child("import sys; sys.stdout.write('ready\\nentered\\n'); sys.stdout.flush(); sys.stdin.readline()")
    try:
        lines = ChildLines(p.stdout)
        assert lines.next(10) == "ready"
        assert lines.next(10) == "entered", "the second line sat in a buffer the wait did not see"
    finally:
        p.kill()
        p.wait()


def test_a_silent_child_and_a_closed_pipe_end_the_wait():
    p = child("import sys; sys.stdout.write('partial'); sys.stdout.flush(); sys.stdin.readline()")
    try:
        lines = ChildLines(p.stdout)
        start = time.monotonic()
        assert lines.next(0.3) is None
        assert 0.25 < time.monotonic() - start < 5
        p.stdin.close()
        assert lines.next(10) is None, "end of file before a line's end"
        assert lines.rest("") == "partial"
    finally:
        p.kill()
        p.wait()
