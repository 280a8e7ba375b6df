"""``python -m preempt_kfd._worker``: a host-device worker process.

Sessions on the host device start their worker processes with this module (the default
``host_worker``); it runs the library's worker loop (commands on stdin, reports on stdout) and
exits at EOF. Not meant to be run by hand.
"""

from preempt_kfd import _native

if __name__ == "__main__":
    _native.host_worker_main()
