"""The comparison of examples/library_kernels.py: a preempted run's results against the
unpreempted reference, element by element, as flat lists of f32 values.

- `exact`: bit for bit (the f32 bit patterns: -0.0 differs from 0.0, a NaN equals only the same
  NaN). What a deterministic library gives for the same inputs, shapes and stream.
- `close`: |out - ref| <= atol + rtol * |ref| (torch.allclose's rule), for a library that may sum
  in another order from one launch to the next.
"""
import math
import struct


def bits(x):
    """The f32 bit pattern of `x`."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def next_f32(x):
    """The f32 one unit in the last place away from `x` (its bit pattern plus one): the smallest
    change a comparison must catch."""
    return struct.unpack("<f", struct.pack("<I", (bits(x) + 1) & 0xFFFFFFFF))[0]


def mismatched(out, ref, mode="exact", rtol=0.0, atol=0.0):
    """Indices where `out` differs from `ref` (lists of floats); a length difference counts every
    element past the shorter list."""
    if mode == "exact":
        same = [bits(a) == bits(b) for a, b in zip(out, ref)]
    elif mode == "close":
        same = [math.isfinite(a) and math.isfinite(b) and abs(a - b) <= atol + rtol * abs(b)
                for a, b in zip(out, ref)]
    else:
        raise ValueError(f"compare mode {mode!r}: exact or close")
    bad = [i for i, ok in enumerate(same) if not ok]
    return bad + list(range(len(same), max(len(out), len(ref))))


def compare_runs(outs, refs, mode="exact", rtol=0.0, atol=0.0):
    """For each run (`outs[i]` against `refs[i]`): how many elements differ. Returns the runs
    that differ as `[(run, elements_differing, first_index)]`."""
    if len(outs) != len(refs):
        raise ValueError(f"{len(outs)} results against {len(refs)} references")
    found = []
    for i, (o, r) in enumerate(zip(outs, refs)):
        bad = mismatched(o, r, mode, rtol, atol)
        if bad:
            found.append((i, len(bad), bad[0]))
    return found
