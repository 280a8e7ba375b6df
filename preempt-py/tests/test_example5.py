"""examples/example5_inference.py, XSched's Example 5 through the package, on the host device with
its stand-in model: every run of the seeds (Tests 1-3, Phase 2) completes, every request of every
replica is recorded, the figures are labelled as host figures, and the delay commands of every
low-priority stream complete exactly once (the example's exit status 3 otherwise)."""

import json
import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "example5_inference.py")


def test_example5_runs_every_test_on_the_host_device(tmp_path):
    out = tmp_path / "e5.json"
    p = subprocess.run([sys.executable, EXAMPLE, "--device", "host", "--requests", "6", "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for title in ("Test 1", "Test 2", "Test 3", "Phase 2", "low/high latency"):
        assert title in p.stdout, p.stdout
    assert "host figures, not GPU figures" in p.stdout
    assert "stand-in" in p.stdout
    r = json.loads(out.read_text())
    assert r["device"] == "host" and r["host_figures"] and r["exactly_once"]
    runs = r["runs"]
    assert set(runs) == {"test1_high", "test1_normal", "test1_low", "test2", "test3", "phase2"}
    for name, replicas in (("test2", ("high", "normal", "low")), ("phase2", ("high", "normal", "low")),
                           ("test3", ("high", "low")), ("test1_low", ("low",))):
        for rep in replicas:
            assert runs[name][rep]["n"] == 6, (name, rep)
            assert 0 < runs[name][rep]["p50"] <= runs[name][rep]["p99"] <= runs[name][rep]["max"]
    assert runs["phase2"]["level"] == "sigstop"
    assert set(r["summary"]) == {"low_high_p50", "low_high_p99", "high_p99_vs_alone", "throughput_loss_vs_test2"}


def test_example5_refuses_bad_numbers_with_exit_2():
    for args in (["--requests", "0"], ["--gap-high-ms", "nan"], ["--standin-ms", "-1"]):
        p = subprocess.run([sys.executable, EXAMPLE, "--device", "host", *args],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        assert args[0] in p.stderr.strip().splitlines()[-1], p.stderr
