"""A child process's stdout read line by line, every wait bounded.

The reader keeps its own buffer of the pipe's bytes. Waiting on the descriptor while a line already
sits in a file object's buffer would miss it: two lines the child prints close together (say
"ready" then "entered") can arrive in one read, and `select` then waits for bytes that never come.
"""

import os
import select
import time


class ChildLines:
    def __init__(self, pipe):
        self.fd = pipe.fileno()
        self.buf = b""

    def next(self, timeout_s):
        """The next line without its end, or None if none is complete within `timeout_s` or the
        child closed its stdout first."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode().strip()

    def rest(self, tail):
        """What the reader buffered but nobody read yet, followed by `tail` (text the pipe gave
        afterwards, e.g. from `communicate`)."""
        out, self.buf = self.buf.decode() + tail, b""
        return out
