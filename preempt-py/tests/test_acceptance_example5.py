"""`preempt-lat acceptance`'s example5 stage with this environment's Python (``PREEMPT_PYTHON``),
on the host device: the stage runs examples/example5_inference.py as built into preempt-lat,
passes with the figures of every level of Phase 2 in its line and facts, and its example5.json is
judged per level in the summary's targets (host figures). preempt-lat is the debug build
(``cargo build -p preempt-lat``: scripts/check-python.sh builds it). `cargo test` covers the
stage's SKIP without the package (preempt-lat/tests/acceptance_example5.rs); this is its PASS
path, which needs the package built into a Python, as here."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def preempt_lat():
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "preempt-lat"
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `cargo build -p preempt-lat` (scripts/check-python.sh does)")
    return path


def test_the_example5_stage_passes_with_this_python_and_its_figures_are_judged(tmp_path):
    env = dict(os.environ, PREEMPT_PYTHON=sys.executable)
    p = subprocess.run([str(preempt_lat()), "acceptance", "--device", "host", "--quick", "--only", "example5",
                        "--format", "json", "--node", "pytest-example5", "--out-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, env=env)
    s = json.loads(p.stdout)
    assert p.returncode == 0 and s["ok"], p.stderr
    st = next(x for x in s["devices"][0]["stages"] if x["id"] == "example5")
    assert st["status"] == "PASS", st
    assert st["reason"].startswith("host figures, stand-in: one delay command of 5 ms per request, "
                                   "6 requests per replica: lv1 high P99 "), st["reason"]
    assert st["reason"].endswith("; every delay command exactly once"), st["reason"]
    facts = st["facts"]
    assert facts["python"]["found"]["executable"] and "preempt_kfd" in facts["python"]["found"]["package"]
    assert set(facts["levels"]) == {"lv1", "lv2", "lv3"}
    for lv, f in facts["levels"].items():
        for k in ("high_p99_vs_baseline", "low_high_p99", "throughput_loss_percent", "high_p99_ms", "low_p99_ms"):
            assert isinstance(f[k], float), (lv, k, f)
    rows = [t for t in s["devices"][0]["targets"] if t["scope"].startswith("Example 5")]
    assert [(t["scope"][-3:], t["id"]) for t in rows] == [
        (lv, i) for lv in ("lv1", "lv2", "lv3")
        for i in ("example5-high-vs-baseline", "example5-low-high", "throughput-loss")]
    assert all(t["verdict"] in ("PASS", "FAIL") and t["host_figures"] for t in rows), rows
    assert [r.rsplit("/", 1)[1] for r in st["results"]] == ["example5.json"]
