"""Tensors of the stand-in torch (not PyTorch; see the package's docstring): f32 tensors on the host
or in the HIP runtime's device memory, `randn`, `matmul` and `conv2d` as the stand-in runtime's
library kernels (`sgemm_f32`, `conv2d_f32_nchw` of crate hip-standin, naive f32 loops on the host:
not hipBLAS, not MIOpen), `equal` and `allclose`. Only what examples/library_kernels.py uses."""
import ctypes
import math
import random
import threading
from array import array

from . import cuda

_hip = cuda._hip
for _name, _args in {
    "hipMemcpy": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int],
    "hipMemcpyAsync": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p],
}.items():
    getattr(_hip, _name).argtypes = _args
    getattr(_hip, _name).restype = ctypes.c_int
_H2D, _D2H = 1, 2

float32 = "float32"


class Generator:
    """`torch.Generator()`: a seeded source of normal values (Python's, not PyTorch's stream of
    numbers: the same seed gives other values than in PyTorch)."""

    def __init__(self, device="cpu"):
        self._rng = random.Random(0)

    def manual_seed(self, seed):
        self._rng.seed(int(seed))
        return self


_default = Generator()


def manual_seed(seed):
    return _default.manual_seed(seed)


def _numel(shape):
    return math.prod(shape)


def _device_kind(device):
    d = str(device or "cpu")
    if d == "cpu":
        return "cpu"
    if d == "cuda" or d.startswith("cuda:"):
        return "cuda"
    raise ValueError(f"torch (stand-in): device {d!r}: give cpu or cuda[:N]")


class Tensor:
    """An f32 tensor: `shape`, `device` ("cpu" or "cuda"), `numel()`, `to(device)`, `cuda()`,
    `cpu()` (ordered after the current stream's work, as PyTorch's copy is), `flatten()` and
    `tolist()`. Device memory is never freed: a kernel still in flight may write it."""

    dtype = float32

    def __init__(self, shape, host=None, ptr=None):
        self.shape = tuple(int(s) for s in shape)
        self._host, self._ptr = host, ptr

    @property
    def device(self):
        return "cpu" if self._ptr is None else "cuda"

    def numel(self):
        return _numel(self.shape)

    def size(self):
        return self.shape

    @staticmethod
    def _empty_cuda(shape):
        p = ctypes.c_void_p()
        cuda._check(_hip.hipMalloc(ctypes.byref(p), 4 * max(_numel(shape), 1)), "hipMalloc")
        return Tensor(shape, ptr=p.value)

    def to(self, device):
        if _device_kind(device) == "cpu":
            return self.cpu()
        if self._ptr is not None:
            return self
        t = Tensor._empty_cuda(self.shape)
        buf = (ctypes.c_char * (4 * self.numel())).from_buffer(self._host)
        cuda._check(_hip.hipMemcpy(ctypes.c_void_p(t._ptr), buf, 4 * self.numel(), _H2D), "hipMemcpy")
        return t

    def cuda(self, device=None):
        return self.to("cuda")

    def cpu(self):
        if self._ptr is None:
            return self
        host = array("f", bytes(4 * self.numel()))
        buf = (ctypes.c_char * (4 * self.numel())).from_buffer(host)
        s = ctypes.c_void_p(cuda.current_stream().cuda_stream)
        cuda._check(_hip.hipMemcpyAsync(buf, ctypes.c_void_p(self._ptr), 4 * self.numel(), _D2H, s), "hipMemcpyAsync")
        return Tensor(self.shape, host=host)

    def flatten(self):
        return Tensor((self.numel(),), host=self._host, ptr=self._ptr)

    def tolist(self):
        flat = list(self.cpu()._host)

        def nest(off, dims):
            if not dims:
                return flat[off]
            step = _numel(dims[1:])
            return [nest(off + i * step, dims[1:]) for i in range(dims[0])]
        return nest(0, self.shape)

    def __repr__(self):
        return f"<torch.Tensor (stand-in) shape={self.shape} device={self.device}>"


def randn(*size, generator=None, dtype=None, device=None):
    """`torch.randn(*size, generator=None, dtype=None, device=None)`: f32 normal values."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if dtype not in (None, float32):
        raise TypeError("torch (stand-in): randn makes float32 tensors only")
    rng = (generator or _default)._rng
    t = Tensor(size, host=array("f", (rng.gauss(0.0, 1.0) for _ in range(_numel(size)))))
    return t.to(device) if device is not None else t


_fn_lock = threading.Lock()
_fns = {}


def _function(name):
    """A library kernel of the stand-in runtime, loaded once (the runtime reads no code object;
    a real HIP runtime has no such kernel and refuses)."""
    with _fn_lock:
        if name not in _fns:
            mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
            cuda._check(_hip.hipModuleLoad(ctypes.byref(mod), __file__.encode()), "hipModuleLoad")
            cuda._check(_hip.hipModuleGetFunction(ctypes.byref(fn), mod, name.encode()),
                        f"hipModuleGetFunction({name}) (a kernel of the stand-in runtime only)")
            _fns[name] = fn
        return _fns[name]


def _launch(name, ptrs, dims):
    args = [ctypes.c_void_p(p) for p in ptrs] + [ctypes.c_uint32(d) for d in dims]
    params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
    s = ctypes.c_void_p(cuda.current_stream().cuda_stream)
    cuda._check(_hip.hipModuleLaunchKernel(_function(name), 1, 1, 1, 64, 1, 1, 0, s, params, None),
                f"hipModuleLaunchKernel({name})")


def _on_device(what, *ts):
    for t in ts:
        if not isinstance(t, Tensor) or t._ptr is None:
            raise ValueError(f"torch (stand-in): {what} takes tensors in device memory (.cuda())")


def matmul(a, b):
    """`torch.matmul` of two 2-D device tensors, on the current stream (`sgemm_f32`)."""
    _on_device("matmul", a, b)
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"torch (stand-in): matmul of {a.shape} and {b.shape}: 2-D (M, K) and (K, N) only")
    (m, k), n = a.shape, b.shape[1]
    out = Tensor._empty_cuda((m, n))
    _launch("sgemm_f32", (a._ptr, b._ptr, out._ptr), (m, n, k))
    return out


def _pair(v, what):
    v = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(v) != 2 or v[0] != v[1]:
        raise ValueError(f"torch (stand-in): conv2d {what} {v}: the same along height and width only")
    return int(v[0])


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """`torch.nn.functional.conv2d` of NCHW device tensors, on the current stream
    (`conv2d_f32_nchw`); no bias, dilation 1, one group."""
    _on_device("conv2d", input, weight)
    if bias is not None or _pair(dilation, "dilation") != 1 or groups != 1:
        raise ValueError("torch (stand-in): conv2d without bias, with dilation 1 and groups 1 only")
    (n, c, h, w), (k, c2, r, s) = input.shape, weight.shape
    st, pad = _pair(stride, "stride"), _pair(padding, "padding")
    if c != c2 or h + 2 * pad < r or w + 2 * pad < s or st < 1:
        raise ValueError(f"torch (stand-in): conv2d of {input.shape} with {weight.shape}: shapes do not fit")
    out = Tensor._empty_cuda((n, k, (h + 2 * pad - r) // st + 1, (w + 2 * pad - s) // st + 1))
    _launch("conv2d_f32_nchw", (input._ptr, weight._ptr, out._ptr), (n, c, h, w, k, r, s, st, pad))
    return out


def _values(t):
    return t.cpu()._host


def equal(a, b):
    """`torch.equal`: the same shape and equal values (0.0 equals -0.0; NaN equals nothing)."""
    return a.shape == b.shape and all(x == y for x, y in zip(_values(a), _values(b)))


def allclose(a, b, rtol=1e-05, atol=1e-08):
    """`torch.allclose`: |a - b| <= atol + rtol * |b| everywhere."""
    return a.shape == b.shape and all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(_values(a), _values(b)))
