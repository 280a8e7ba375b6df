"""The two routes of examples/library_kernels.py: the same calls (inputs, a stream to launch on,
suspend, resume, the comparison) on a GPU with PyTorch and preempt_kfd, and on the host with the
stand-in torch over the stand-in HIP runtime. A route that cannot run here raises `Unavailable`
with the reason."""
import ctypes
import sys

from library_kernels_check import compare_runs


class Unavailable(Exception):
    """The route cannot run on this machine (not a failure of what it tests)."""


def _make_inputs(torch, a, device):
    g = torch.Generator().manual_seed(a.seed)
    m, n, k = a.gemm
    bn, c, h, w, kf, r, s = a.conv
    sets = []
    for _ in range(a.inputs):
        t = [torch.randn(m, k, generator=g), torch.randn(k, n, generator=g),
             torch.randn(bn, c, h, w, generator=g), torch.randn(kf, c, r, s, generator=g)]
        sets.append([x.to(device) for x in t])
    return sets


class HostRoute:
    """The stand-in torch (not PyTorch) over the stand-in HIP runtime; host figures."""

    name = "host"

    def __init__(self, a):
        sys.path.insert(0, a.standin_torch)
        try:
            import torch
        except ImportError as e:
            raise Unavailable(f"the stand-in torch does not import from {a.standin_torch} ({e})") from None
        if not getattr(torch, "STANDIN", False):
            raise Unavailable(f"`import torch` gave {torch.__file__}, not the stand-in torch ({a.standin_torch})")
        self.torch = torch
        self.lib = ctypes.CDLL(None)
        if not hasattr(self.lib, "preempt_standin_stream_suspend_counts"):
            raise Unavailable("the HIP runtime found is not the stand-in (crate hip-standin) with its library "
                              "kernels: put its libamdhip64.so first on LD_LIBRARY_PATH")
        for name in ("preempt_standin_stream_suspend", "preempt_standin_stream_resume",
                     "preempt_standin_stream_is_suspended"):
            getattr(self.lib, name).argtypes = [ctypes.c_void_p]
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.preempt_standin_stream_suspend_counts.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                                                  ctypes.POINTER(ctypes.c_uint64)]
        self.lib.preempt_standin_stream_suspend_counts.restype = ctypes.c_int
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        # The stream that is suspended: PyTorch's normal (lowest) priority.
        self.stream = torch.cuda.Stream(priority=0)
        self.h = ctypes.c_void_p(self.stream.cuda_stream)

    def inputs(self, a):
        return _make_inputs(self.torch, a, "cuda")

    def stream_context(self):
        return self.torch.cuda.stream(self.stream)

    def synchronize(self):
        self.stream.synchronize()

    def _call(self, name):
        code = getattr(self.lib, name)(self.h)
        if code != 0:
            raise RuntimeError(f"{name} returned hipError {code}")

    def suspend(self):
        self._call("preempt_standin_stream_suspend")

    def resume(self):
        self._call("preempt_standin_stream_resume")

    def busy(self):
        return False  # the stand-in counts the suspends that found a kernel running (counts())

    def counts(self):
        """(suspends, suspends that found a kernel running), as the stand-in counted them."""
        s, m = ctypes.c_uint64(), ctypes.c_uint64()
        if self.lib.preempt_standin_stream_suspend_counts(self.h, ctypes.byref(s), ctypes.byref(m)) != 0:
            raise RuntimeError("preempt_standin_stream_suspend_counts failed")
        return s.value, m.value

    def comparable(self, t):
        return t.cpu().flatten().tolist()

    def corrupt(self, ref, next_f32):
        ref = list(ref)
        ref[0] = next_f32(ref[0])
        return ref

    def compare(self, outs, refs, a):
        return compare_runs(outs, refs, a.compare, a.rtol, a.atol)

    def release(self):
        if self.lib.preempt_standin_stream_is_suspended(self.h) == 1:
            self.resume()


class GpuRoute:
    """PyTorch on ROCm: hipBLAS/hipBLASLt and MIOpen kernels on a preempt_kfd Lv3 stream."""

    name = "gpu"

    def __init__(self, a):
        try:
            import torch
        except ImportError as e:
            raise Unavailable(f"PyTorch does not import ({e}); install PyTorch for ROCm") from None
        if getattr(torch, "STANDIN", False):
            raise Unavailable("`import torch` found the stand-in torch, not PyTorch: take it off PYTHONPATH")
        if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
            raise Unavailable(f"PyTorch {torch.__version__} sees no ROCm GPU (torch.version.hip="
                              f"{getattr(torch.version, 'hip', None)}, cuda.is_available()={torch.cuda.is_available()})")
        if a.gpu >= torch.cuda.device_count():
            raise Unavailable(f"hip:{a.gpu}: PyTorch sees {torch.cuda.device_count()} GPUs")
        try:
            import preempt_kfd as pk
        except ImportError as e:
            raise Unavailable(f"preempt_kfd does not import ({e}): scripts/build-user.sh builds and installs it") from None
        # On SIGINT/SIGTERM: resume everything the library suspended, then the previous handler.
        pk.install_signal_handlers()
        self.torch, self.pk = torch, pk
        self.device = torch.device(f"cuda:{a.gpu}")
        torch.cuda.set_device(self.device)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        self.session = pk.Session(a.device)
        self.lp = self.session.low_priority_stream("lv3")
        self.stream = torch.cuda.ExternalStream(self.lp.handle, device=self.device)

    def inputs(self, a):
        with self.stream_context():
            sets = _make_inputs(self.torch, a, self.device)
        self.stream.synchronize()
        return sets

    def stream_context(self):
        return self.torch.cuda.stream(self.stream)

    def synchronize(self):
        self.stream.synchronize()

    def suspend(self):
        self.lp.suspend()

    def resume(self):
        self.lp.resume()

    def busy(self):
        """Work launched on the stream and not finished (an upper bound of "a kernel running")."""
        return not self.stream.query()

    def counts(self):
        return None  # the suspender counts busy() at each suspend

    def comparable(self, t):
        return t

    def corrupt(self, ref, next_f32):
        ref = ref.clone()
        flat = ref.view(-1)
        flat[0] = self.torch.nextafter(flat[0], self.torch.tensor(float("inf"), device=ref.device))
        return ref

    def compare(self, outs, refs, a):
        torch, found = self.torch, []
        for i, (o, r) in enumerate(zip(outs, refs)):
            if a.compare == "exact":
                bad = (o.view(torch.int32) != r.view(torch.int32)).view(-1)
            else:
                bad = (~torch.isclose(o, r, rtol=a.rtol, atol=a.atol)).view(-1)
            n = int(bad.sum().item())
            if n:
                found.append((i, n, int(bad.nonzero()[0].item())))
        return found

    def release(self):
        try:
            if self.lp.is_suspended:
                self.lp.resume()
        finally:
            self.session.close()
