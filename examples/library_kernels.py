#!/usr/bin/env python3
"""Library kernels under Lv3: a GEMM and a 2-D convolution launched by a library (on a GPU:
PyTorch's torch.matmul through hipBLAS/hipBLASLt and torch.nn.functional.conv2d through MIOpen),
run repeatedly on one low-priority stream while another thread suspends and resumes that stream
many times, then every result compared with an unpreempted reference run of the same launches.
Lv3 stops the queue at wave granularity (CWSR), so kernels our code never sees are held too; this
shows their results come out the same.

    python3 examples/library_kernels.py --device hip:0          # PyTorch on ROCm, preempt_kfd
    python3 examples/library_kernels.py --device host           # the stand-in, host figures

Routes:
- `hip:N` (written for real hardware from PyTorch's and preempt_kfd's documented calls; no GPU
  was available where it was written, so this route has not been run): `import preempt_kfd as
  pk`, `pk.Session("hip:N").low_priority_stream("lv3")`, `torch.cuda.ExternalStream(lp.handle)`;
  the launches go to that stream under `torch.cuda.stream(...)`; `lp.suspend()` / `lp.resume()`
  from the suspending thread. `torch.backends.cudnn.deterministic = True` and `benchmark = False`
  make MIOpen pick the same algorithm every launch.
- `host`: the same steps with the stand-in torch (examples/xsched_seed002/standin_torch, NOT
  PyTorch) over the stand-in HIP runtime (crate hip-standin: its kernels run as host work on CPU
  worker processes; its `sgemm_f32` and `conv2d_f32_nchw` are naive f32 loops computed tile by
  tile, not hipBLAS, not MIOpen), suspended through its `preempt_standin_stream_suspend` /
  `_resume` (SIGSTOP/SIGCONT of the stream's workers). It needs the stand-in on LD_LIBRARY_PATH
  as libamdhip64.so and PREEMPT_HOST_WORKER naming preempt-host-worker. Every line it prints says
  that its figures are host figures.

The suspends are spread over the reference run's duration; each holds the stream for half its
interval. `mid_kernel` counts the suspends that found a kernel running: on the host the stand-in
says so; on a GPU, the stream had work it had not finished (`query()` false) at the suspend. A
run where no suspend found a kernel running proves nothing and fails.

One line on stdout ends the run: `library_kernels ok=1|0 route=host|gpu device=.. figures=host|gpu
gemm_runs=.. conv_runs=.. suspends=.. resumes=.. mid_kernel=.. mismatches=.. mismatched_runs=..
compare=exact|close rtol=.. atol=.. seconds=.. ref_seconds=.. reason=..`.
Exit status: 0 every result matched; 2 bad arguments (one line on stderr); 3 a mismatch, a
suspend or resume that failed, no suspend mid-kernel, or the run over --timeout-s; 4 the route
cannot run here (no PyTorch, no GPU, no stand-in), one line saying why; 130 Ctrl-C/SIGTERM. The
stream is resumed before any exit.
"""
import argparse
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from library_kernels_check import compare_runs, next_f32  # noqa: E402
from library_kernels_routes import GpuRoute, HostRoute, Unavailable  # noqa: E402

HOST_NOTE = "host figures on the stand-in HIP runtime (CPU worker processes), not hipBLAS/MIOpen"
EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 2, 3, 4, 130


class Usage(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Usage(message)


def ints(n, what):
    def parse(text):
        try:
            v = [int(x) for x in text.split(",")]
        except ValueError:
            v = []
        if len(v) != n or min(v) < 1:
            raise argparse.ArgumentTypeError(f"{what}: {n} positive integers separated by commas, got {text!r}")
        return v
    return parse


def bounded(lo, hi, kind=int):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r}: give {lo}..{hi}")
        return v
    return parse


def parse(argv):
    p = Parser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--device", required=True, help="host (the stand-in, host figures) or hip:N (PyTorch on ROCm)")
    p.add_argument("--suspends", type=bounded(1, 100_000), default=50,
                   help="suspend/resume pairs, spread over the run (default 50)")
    p.add_argument("--runs", type=bounded(1, 10_000), default=None,
                   help="launches of each kernel (default 20 on the host, 50 on a GPU)")
    p.add_argument("--inputs", type=bounded(1, 64), default=4, help="input sets, used in turn (default 4)")
    p.add_argument("--gemm", type=ints(3, "--gemm M,N,K"), default=None,
                   help="GEMM shape M,N,K (default 128,128,128 on the host: about 20 ms a launch; 4096,4096,4096 on a GPU)")
    p.add_argument("--conv", type=ints(7, "--conv N,C,H,W,K,R,S"), default=None,
                   help="conv input N,C,H,W and filters K,C,R,S as N,C,H,W,K,R,S "
                        "(default 2,8,32,32,16,3,3 on the host; 16,64,112,112,128,3,3 on a GPU)")
    p.add_argument("--stride", type=bounded(1, 64), default=1)
    p.add_argument("--padding", type=bounded(0, 64), default=1)
    p.add_argument("--compare", choices=("exact", "close"), default="exact",
                   help="exact: bit for bit (a deterministic library); close: within --rtol/--atol")
    p.add_argument("--rtol", type=bounded(0.0, 1.0, float), default=1e-5)
    p.add_argument("--atol", type=bounded(0.0, 1.0, float), default=1e-6)
    p.add_argument("--seed", type=bounded(0, 2**31), default=0)
    p.add_argument("--timeout-s", type=bounded(1.0, 86_400.0, float), default=300.0,
                   help="bound of the whole run; past it the stream is resumed and the run fails (default 300)")
    p.add_argument("--standin-torch", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                           "xsched_seed002", "standin_torch"),
                   help="host route: the stand-in torch's directory")
    p.add_argument("--corrupt-reference", action="store_true",
                   help="the checker's own test: one element of the first GEMM's reference is moved by one "
                        "unit in the last place; the run must then report a mismatch and exit 3")
    a = p.parse_args(argv)
    dev = a.device
    if dev == "host":
        a.gpu = None
    elif dev.startswith("hip:") and dev[4:].isdigit():
        a.gpu = int(dev[4:])
    else:
        raise Usage(f"--device {dev!r}: give host or hip:N")
    host = a.gpu is None
    a.runs = a.runs or (20 if host else 50)
    a.gemm = a.gemm or ([128, 128, 128] if host else [4096, 4096, 4096])
    a.conv = a.conv or ([2, 8, 32, 32, 16, 3, 3] if host else [16, 64, 112, 112, 128, 3, 3])
    n, c, h, w, k, r, s = a.conv
    if h + 2 * a.padding < r or w + 2 * a.padding < s:
        raise Usage(f"--conv {a.conv}: an {r}x{s} filter does not fit an {h}x{w} image with padding {a.padding}")
    return a


class Suspender(threading.Thread):
    """`pairs` suspend/resume pairs, one every `interval` s, each holding the stream `hold` s."""

    def __init__(self, route, pairs, interval, hold, stop):
        super().__init__(daemon=True, name="suspender")
        self.route, self.pairs, self.interval, self.hold, self.stop = route, pairs, interval, hold, stop
        self.suspends = self.resumes = self.in_flight = 0
        self.error = None

    def run(self):
        try:
            for _ in range(self.pairs):
                if self.stop.wait(self.interval - self.hold):
                    return
                busy = self.route.busy()
                self.route.suspend()
                self.suspends += 1
                self.in_flight += int(busy)
                try:
                    self.stop.wait(self.hold)
                finally:
                    self.route.resume()
                    self.resumes += 1
        except Exception as e:  # noqa: BLE001 - any failure is the run's, reported by main
            self.error = f"{type(e).__name__}: {e}"


def launches(route, a, inputs, outs):
    """Every launch of the run on the route's stream, then the wait for them."""
    with route.stream_context():
        for i in range(a.runs):
            A, B, X, W = inputs[i % len(inputs)]
            outs[0].append(route.torch.matmul(A, B))
            outs[1].append(route.torch.nn.functional.conv2d(X, W, stride=a.stride, padding=a.padding))
        route.synchronize()


def timed_run(route, a, inputs, deadline, suspender=None):
    """One run in a thread of its own (its waits are native and cannot be interrupted), waited for
    until `deadline`; returns ([gemm outs], [conv outs]) and its seconds. Raises TimeoutError."""
    outs, err = ([], []), []

    def body():
        try:
            launches(route, a, inputs, outs)
        except Exception as e:  # noqa: BLE001
            err.append(f"{type(e).__name__}: {e}")
    t0 = time.monotonic()
    t = threading.Thread(target=body, daemon=True, name="launches")
    t.start()
    if suspender:
        suspender.start()
    for th in (t, suspender):
        while th and th.is_alive():
            th.join(0.05)
            if time.monotonic() > deadline:
                raise TimeoutError("the run went past --timeout-s")
    if err:
        raise RuntimeError(err[0])
    return outs, time.monotonic() - t0


def summary(route, a, **kv):
    keys = dict(ok=0, route=route.name if route else ("host" if a.gpu is None else "gpu"), device=a.device,
                figures="host" if a.gpu is None else "gpu", gemm_runs=0, conv_runs=0, suspends=0, resumes=0,
                mid_kernel=0, mismatches=0, mismatched_runs=0, compare=a.compare, rtol=a.rtol, atol=a.atol)
    keys.update(kv)
    line = "library_kernels " + " ".join(f"{k}={v}" for k, v in keys.items())
    if a.gpu is None:
        line += " note=" + HOST_NOTE.replace(" ", "-").replace("(", "").replace(")", "").replace(",", "")
    print(line, flush=True)


def say(a, msg, err=False):
    note = f" [{HOST_NOTE}]" if a.gpu is None else ""
    print(f"library_kernels: {msg}{note}", file=sys.stderr if err else sys.stdout, flush=True)


# The suspender of the run, joined before the stream is released (so it suspends nothing after).
_suspenders = []


def run(a, route, deadline):
    inputs = route.inputs(a)
    refs_t, ref_s = timed_run(route, a, inputs, deadline)
    refs = [[route.comparable(t) for t in ts] for ts in refs_t]
    if a.corrupt_reference:
        refs[0][0] = route.corrupt(refs[0][0], next_f32)
        say(a, "--corrupt-reference: one element of the first GEMM's reference moved by one ulp")
    interval = max(ref_s / a.suspends, 0.002)
    stop = threading.Event()
    sus = Suspender(route, a.suspends, interval, interval / 2, stop)
    _suspenders.append(sus)
    before = route.counts()
    try:
        outs_t, secs = timed_run(route, a, inputs, deadline, sus)
    finally:
        stop.set()
    after = route.counts()
    mid = after[1] - before[1] if after else sus.in_flight
    outs = [[route.comparable(t) for t in ts] for ts in outs_t]
    found = [(name, run_i, n, first) for name, o, r in (("gemm", outs[0], refs[0]), ("conv", outs[1], refs[1]))
             for run_i, n, first in route.compare(o, r, a)]
    for name, i, n, first in found:
        say(a, f"mismatch: {name} run {i}: {n} elements differ from the reference (the first at index {first})")
    why = ("every result matched the reference" if not found else f"{len(found)} runs differ from the reference")
    ok = not found and sus.error is None and sus.suspends == sus.resumes >= a.suspends and mid > 0
    if sus.error:
        why = f"a suspend or resume failed: {sus.error}"
    elif sus.suspends < a.suspends:
        why = f"{sus.suspends} of {a.suspends} suspends made"
    elif mid == 0:
        why = "no suspend found a kernel running: the run proved nothing (make the kernels longer)"
    summary(route, a, ok=int(ok), gemm_runs=len(outs[0]), conv_runs=len(outs[1]), suspends=sus.suspends,
            resumes=sus.resumes, mid_kernel=mid, mismatches=sum(f[2] for f in found), mismatched_runs=len(found),
            seconds=f"{secs:.3f}", ref_seconds=f"{ref_s:.3f}", reason=why.replace(" ", "_"))
    return EXIT_OK if ok else EXIT_FAILED


def main(argv):
    try:
        a = parse(argv)
    except Usage as e:
        print(f"library_kernels: {e} (--help teaches)", file=sys.stderr)
        return EXIT_USAGE

    def term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, term)
    deadline = time.monotonic() + a.timeout_s
    route = None
    try:
        route = HostRoute(a) if a.gpu is None else GpuRoute(a)
        return run(a, route, deadline)
    except Unavailable as e:
        say(a, f"cannot run here: {e}", err=True)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        say(a, "interrupted (Ctrl-C/SIGTERM); the stream is resumed before exit", err=True)
        summary(route, a, reason="interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - a failure of the run, said in one line
        say(a, f"failed: {type(e).__name__}: {e}", err=True)
        summary(route, a, reason=f"{type(e).__name__}".replace(" ", "_"))
        return EXIT_FAILED
    finally:
        for sus in _suspenders:
            sus.stop.set()
            sus.join(5.0)
        if route is not None:
            route.release()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # A run stopped early may leave a thread in a native wait: leave without joining it (the
    # stream was resumed in main's `finally`).
    os._exit(code)
