"""A stand-in for `torch`, NOT PyTorch: the few names examples/xsched_seed002/test_xsched_integration.py
and examples/library_kernels.py use, over whatever HIP runtime the loader finds (`libamdhip64.so`), so that the script runs
unchanged where PyTorch is not installed. Put its directory first on PYTHONPATH for that script
only (tests and host runs); never install it.

What it provides, with PyTorch's names and documented meaning (torch.cuda.Stream,
torch.cuda.stream, torch.cuda.synchronize, torch.no_grad):

- `torch.cuda.Stream(device=None, priority=0)`: a real `hipStream_t` (`.cuda_stream`), created
  as PyTorch creates its streams: `hipStreamCreateWithPriority(.., hipStreamNonBlocking, p)`
  with PyTorch's ROCm priorities (0 normal, -1 high). One new stream per call: PyTorch hands
  streams out from a per-priority pool, round-robin, which gives six calls six streams when the
  pool has six.
- `torch.cuda.stream(s)`: makes `s` the calling thread's current stream (`None`: no change).
- `torch.cuda.current_stream()`, and `Stream.synchronize()` (`hipStreamSynchronize`).
- `torch.cuda.synchronize(device=None)`: as PyTorch, waits for every stream of the device
  (`hipDeviceSynchronize`). PyTorch takes a device here, not a stream: a Stream passed to it is
  read as "the current device", so it waits for every stream too (one stderr line says so).
- `torch.no_grad()`: a context manager that does nothing (no autograd here).
- `torch.standin_model()`: the "model": each call launches one `delay_kernel` of
  `STANDIN_TORCH_MODEL_MS` ms (default 5) on the current stream through hipModuleLaunchKernel
  (gpu-device/kernels/delay.hip's kernel and slot layout, as examples/hip/delay_run.h launches
  it). The stand-in runtime (crate hip-standin) runs it as host work on the stream's worker
  processes and accepts any file as the code object; on a real HIP runtime set
  `STANDIN_TORCH_CODE_OBJECT` to a code object holding `delay_kernel`.

For examples/library_kernels.py (`_tensors`, `nn.functional`, `backends`), with PyTorch's names:
- `torch.Tensor`: f32 only, on the host or in device memory (`hipMalloc`, never freed): `shape`,
  `device`, `numel()`, `to(device)`, `cuda()`, `cpu()` (ordered after the current stream's work),
  `flatten()`, `tolist()`; `torch.float32`;
- `torch.randn(*size, generator=None, dtype=None, device=None)`, `torch.Generator().manual_seed(s)`,
  `torch.manual_seed(s)`: normal values from Python's `random` (not PyTorch's numbers);
- `torch.matmul(a, b)` (2-D) and `torch.nn.functional.conv2d(x, w, stride=, padding=)` (NCHW, no
  bias, dilation 1, one group) on the current stream: the stand-in runtime's library kernels
  `sgemm_f32` and `conv2d_f32_nchw` (crate hip-standin: naive f32 loops on the host, not hipBLAS,
  not MIOpen; a real HIP runtime has no such kernels);
- `torch.equal(a, b)`, `torch.allclose(a, b, rtol, atol)`;
- `torch.backends.cudnn.deterministic` / `.benchmark`: flags a script may set; nothing reads them.

On the stand-in runtime every figure is a host figure (CPU worker processes), never a GPU figure;
one stderr line at import says which runtime was found.
"""
import os
import sys

from . import backends, cuda, nn  # noqa: F401
from ._tensors import Generator, Tensor, allclose, conv2d, equal, float32, manual_seed, matmul, randn  # noqa: F401
from .cuda import _hip_line

STANDIN = True
__version__ = "0.0+standin"

print(f"torch (stand-in, not PyTorch): examples/xsched_seed002/standin_torch; {_hip_line()}",
      file=sys.stderr, flush=True)


class no_grad:
    """`torch.no_grad()`: nothing to disable here; kept so the script's `with` reads as written."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def standin_model(ms=None):
    """The stand-in's model: one delay kernel of `ms` milliseconds (default
    `STANDIN_TORCH_MODEL_MS`, else 5) per call, on the calling thread's current stream."""
    if ms is None:
        ms = float(os.environ.get("STANDIN_TORCH_MODEL_MS", "5"))
    return cuda._DelayModel(ms)
