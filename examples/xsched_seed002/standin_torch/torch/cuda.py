"""`torch.cuda` of the stand-in torch (not PyTorch; see the package's docstring): streams, the
current stream, synchronization and the delay "model", over the HIP runtime the loader finds."""
import ctypes
import os
import sys
import threading

try:
    # RTLD_GLOBAL: the runtime's names join the process's global scope, as they do when
    # libtorch_hip.so is loaded with it as a dependency.
    _runtime = ctypes.CDLL("libamdhip64.so", mode=os.RTLD_GLOBAL)
except OSError as e:
    raise ImportError(
        f"torch (stand-in): no HIP runtime ({e}); on the host put the stand-in runtime's "
        "libamdhip64.so on LD_LIBRARY_PATH (xsched-compat/tests/seed_002.rs shows how)") from None

# The calls are looked up in the process's global scope (dlopen(NULL)), not in the runtime's own
# handle: that is how PyTorch's calls bind, so a preloaded library (the HIP interposer,
# libpreempt_hip.so) sees these calls as it sees PyTorch's. Looked up in `_runtime` they would
# reach the runtime directly, past the interposer.
_hip = ctypes.CDLL(None)

_c = ctypes
for _name, _args in {
    "hipStreamCreateWithPriority": [_c.POINTER(_c.c_void_p), _c.c_uint, _c.c_int],
    "hipStreamSynchronize": [_c.c_void_p],
    "hipDeviceSynchronize": [],
    "hipMalloc": [_c.POINTER(_c.c_void_p), _c.c_size_t],
    "hipMemset": [_c.c_void_p, _c.c_int, _c.c_size_t],
    "hipModuleLoad": [_c.POINTER(_c.c_void_p), _c.c_char_p],
    "hipModuleGetFunction": [_c.POINTER(_c.c_void_p), _c.c_void_p, _c.c_char_p],
    "hipModuleLaunchKernel": [_c.c_void_p] + [_c.c_uint] * 7 + [_c.c_void_p, _c.POINTER(_c.c_void_p),
                                                               _c.POINTER(_c.c_void_p)],
}.items():
    getattr(_hip, _name).argtypes = _args
    getattr(_hip, _name).restype = _c.c_int
_hip.hipGetErrorString.argtypes = [_c.c_int]
_hip.hipGetErrorString.restype = _c.c_char_p

# hipStreamNonBlocking: PyTorch creates every pooled stream with it (kDefaultFlags).
_NON_BLOCKING = 1
# delay_kernel's wall clock: MI300's s_memrealtime, 100 MHz; the stand-in's ticks are the same.
_TICKS_PER_MS = 100_000
# struct DelaySlot of delay.hip (start, end, blocks, done, tag): 32 bytes, zeroed before use.
_SLOT_BYTES = 32


def _hip_line():
    """Which runtime was found, for the import line."""
    if hasattr(_hip, "preempt_standin_version"):
        return ("HIP runtime: the stand-in (crate hip-standin; kernels run as host work on CPU "
                "worker processes): host figures, not GPU figures")
    return "HIP runtime: libamdhip64.so as the loader found it"


def _check(code, what):
    if code != 0:
        msg = _hip.hipGetErrorString(code)
        raise RuntimeError(f"torch (stand-in): {what} failed: {msg.decode() if msg else code}")


class Stream:
    """`torch.cuda.Stream(device=None, priority=0)`: a new hipStream_t (`.cuda_stream`).

    PyTorch on ROCm has two stream priorities, 0 (normal) and -1 (high): a priority below -1 is
    read as -1 and one above 0 as 0 (its pool index, clamp(-priority, 0, 1))."""

    def __init__(self, device=None, priority=0, **kwargs):
        if kwargs.get("_handle") is not None:
            self.cuda_stream, self.priority = kwargs["_handle"], 0
            return
        self.priority = -min(max(-int(priority), 0), 1)
        h = ctypes.c_void_p()
        _check(_hip.hipStreamCreateWithPriority(ctypes.byref(h), _NON_BLOCKING, self.priority),
               "hipStreamCreateWithPriority")
        # Never destroyed, as PyTorch never destroys its pooled streams.
        self.cuda_stream = h.value or 0

    def synchronize(self):
        """Waits for this stream's work (`hipStreamSynchronize`), as PyTorch's Stream.synchronize."""
        _check(_hip.hipStreamSynchronize(ctypes.c_void_p(self.cuda_stream)), "hipStreamSynchronize")

    def __repr__(self):
        return f"<torch.cuda.Stream (stand-in) cuda_stream={self.cuda_stream:#x} priority={self.priority}>"


_DEFAULT = Stream(_handle=0)
_tls = threading.local()


def current_stream(device=None):
    """The calling thread's current stream (the null stream until `stream(s)` says otherwise)."""
    return getattr(_tls, "stream", None) or _DEFAULT


class stream:
    """`torch.cuda.stream(s)`: `s` is the calling thread's current stream inside the `with`."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        self.prev = current_stream()
        if self.s is not None:
            _tls.stream = self.s
        return self.s

    def __exit__(self, *exc):
        _tls.stream = self.prev
        return False


_said_stream = threading.Lock()


def synchronize(device=None):
    """`torch.cuda.synchronize(device=None)`: waits for every stream of the device, as PyTorch
    does. PyTorch reads its argument as a device; a Stream is not one, and is taken as the current
    device (`_get_device_index(.., optional=True)`), so passing one still waits for all streams."""
    if isinstance(device, Stream) and _said_stream.acquire(blocking=False):
        print("torch (stand-in): torch.cuda.synchronize(<Stream>) waits for every stream of the "
              "device, as in PyTorch (its argument is a device); Stream.synchronize() waits for "
              "one stream", file=sys.stderr, flush=True)
    _check(_hip.hipDeviceSynchronize(), "hipDeviceSynchronize")


_kernel_lock = threading.Lock()
_kernel = []


def _delay_kernel():
    """`delay_kernel` from STANDIN_TORCH_CODE_OBJECT; by default from this very file, which the
    stand-in runtime accepts (it reads no code object) and a real runtime refuses."""
    with _kernel_lock:
        if not _kernel:
            path = os.environ.get("STANDIN_TORCH_CODE_OBJECT", __file__)
            mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
            _check(_hip.hipModuleLoad(ctypes.byref(mod), path.encode()),
                   f"hipModuleLoad({path}) (on a real HIP runtime set STANDIN_TORCH_CODE_OBJECT to a "
                   "code object holding delay_kernel)")
            _check(_hip.hipModuleGetFunction(ctypes.byref(fn), mod, b"delay_kernel"),
                   "hipModuleGetFunction(delay_kernel)")
            _kernel.append(fn)
        return _kernel[0]


class _DelayModel:
    """One delay_kernel of `ms` ms per call, on the calling thread's current stream; every call
    gets a slot of its own, zeroed in advance (delay.hip books a command into a zeroed slot)."""

    SLOTS = 4096

    def __init__(self, ms):
        if not 0 <= ms <= 60_000:
            raise ValueError(f"torch (stand-in): a model of {ms} ms: give 0 to 60000")
        self.ms = ms
        self.ticks = int(ms * _TICKS_PER_MS)
        self.fn = _delay_kernel()
        self.lock = threading.Lock()
        self.buffers = []
        self._new_buffer()

    def _new_buffer(self):
        p = ctypes.c_void_p()
        _check(_hip.hipMalloc(ctypes.byref(p), self.SLOTS * _SLOT_BYTES), "hipMalloc")
        _check(_hip.hipMemset(p, 0, self.SLOTS * _SLOT_BYTES), "hipMemset")
        # Kept (never freed): commands in flight may still write their slots.
        self.buffers.append(p)
        self.used = 0

    def __call__(self, *args, **kwargs):
        s = current_stream().cuda_stream
        with self.lock:
            if self.used == self.SLOTS:
                self._new_buffer()
            slots, cmd_id = self.buffers[-1].value, self.used
            self.used += 1
        # delay_kernel(DelaySlot *slots, u32 cmd_id, u64 ticks, u32 nblocks): one block of 64.
        a = (ctypes.c_void_p(slots), ctypes.c_uint32(cmd_id), ctypes.c_uint64(self.ticks), ctypes.c_uint32(1))
        params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in a])
        _check(_hip.hipModuleLaunchKernel(self.fn, 1, 1, 1, 64, 1, 1, 0, ctypes.c_void_p(s), params, None),
               "hipModuleLaunchKernel(delay_kernel)")
        return None
