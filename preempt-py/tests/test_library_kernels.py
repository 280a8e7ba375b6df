"""examples/library_kernels.py: its comparison (library_kernels_check) catches the smallest change a
suspended kernel could make, and its GPU route runs PyTorch's library kernels (hipBLAS, MIOpen) on
a preempt_kfd Lv3 stream, suspended and resumed, with every result equal to the reference. The GPU
route skips, with the reason, where PyTorch or a ROCm GPU is not here. The host route's end-to-end
run is hip-standin/tests/library_kernels_script.rs."""
import importlib.util
import math
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, EXAMPLES)
from library_kernels_check import bits, compare_runs, mismatched, next_f32  # noqa: E402


def test_exact_catches_one_ulp_and_the_sign_of_zero():
    ref = [1.0, -2.5, 0.0, 3.0e-8]
    assert mismatched(list(ref), ref) == []
    for i in range(len(ref)):
        out = list(ref)
        out[i] = next_f32(out[i])
        assert out[i] != ref[i] and bits(out[i]) == bits(ref[i]) + 1
        assert mismatched(out, ref) == [i]
    assert mismatched([-0.0], [0.0]) == [0], "bit for bit: -0.0 is not 0.0"
    nan = float("nan")
    assert mismatched([nan], [nan]) == [], "the same NaN bits are the same result"


def test_close_allows_the_stated_tolerance_only():
    ref = [1.0, 100.0]
    assert mismatched([1.0 + 1e-6, 100.0 + 1e-4], ref, "close", rtol=1e-5, atol=1e-6) == []
    assert mismatched([1.0 + 1e-4, 100.0], ref, "close", rtol=1e-5, atol=1e-6) == [0]
    assert mismatched([math.inf, 100.0], ref, "close", rtol=1.0, atol=1.0) == [0]


def test_runs_are_compared_one_by_one_and_missing_elements_count():
    refs = [[1.0, 2.0], [3.0, 4.0]]
    assert compare_runs([[1.0, 2.0], [3.0, 4.0]], refs) == []
    assert compare_runs([[1.0, 2.0], [3.0, 5.0]], refs) == [(1, 1, 1)]
    assert compare_runs([[1.0], [3.0, 4.0]], refs) == [(0, 1, 1)], "a result cut short differs"
    with pytest.raises(ValueError):
        compare_runs([[1.0]], refs)
    with pytest.raises(ValueError):
        mismatched([1.0], [1.0], "roughly")


def test_gpu_route_suspends_pytorch_library_kernels_with_results_unchanged():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed in this Python: the GPU route of examples/library_kernels.py "
                    "runs torch.matmul (hipBLAS) and conv2d (MIOpen) on a ROCm GPU")
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "library_kernels.py"), "--device", "hip:0"],
                       capture_output=True, text=True, timeout=900)
    if p.returncode == 4:
        pytest.skip(p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0, p.stderr
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("library_kernels ok=")][-1]
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    assert (kv["ok"], kv["route"], kv["figures"], kv["mismatches"]) == ("1", "gpu", "gpu", "0"), line
    assert int(kv["suspends"]) == int(kv["resumes"]) >= 50 and int(kv["mid_kernel"]) > 0, line
