"""examples/example5_inference.py, XSched's Example 5 through the package, on the host device with
its stand-in model: every run of the seeds (Tests 1-3, Phase 2 at every level) completes, every
request of every replica is recorded, the figures are labelled as host figures, the seeds'
targets are judged per level, the CDF chart is drawn, and the delay commands of every
low-priority stream complete exactly once (the example's exit status 3 otherwise)."""

import json
import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "example5_inference.py")


def test_example5_runs_every_test_and_every_level_on_the_host_device(tmp_path):
    out, svg = tmp_path / "e5.json", tmp_path / "e5.svg"
    p = subprocess.run([sys.executable, EXAMPLE, "--device", "host", "--requests", "6", "--warmup", "1",
                        "--json", str(out), "--svg", str(svg)],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    for title in ("Test 1", "Test 2", "Test 3", "Phase 2 at LV1", "Phase 2 at LV2", "Phase 2 at LV3",
                  "against the seeds' targets"):
        assert title in p.stdout, p.stdout
    assert "host figures, not GPU figures" in p.stdout
    assert "stand-in" in p.stdout
    r = json.loads(out.read_text())
    assert r["device"] == "host" and r["host_figures"] and r["exactly_once"]
    assert (r["requests"], r["warmup"], r["levels"]) == (6, 1, ["lv1", "lv2", "lv3"])
    runs = r["runs"]
    assert set(runs) == {"test1_high", "test1_normal", "test1_low", "test2", "test3",
                         "phase2_lv1", "phase2_lv2", "phase2_lv3"}
    three = ("high", "normal", "low")
    for name, replicas in (("test2", three), ("phase2_lv1", three), ("phase2_lv2", three), ("phase2_lv3", three),
                           ("test3", ("high", "low")), ("test1_low", ("low",))):
        for rep in replicas:
            assert runs[name][rep]["n"] == 6, (name, rep)
            assert len(runs[name]["latencies_ms"][rep]) == 6, (name, rep)
            assert 0 < runs[name][rep]["p50"] <= runs[name][rep]["p99"] <= runs[name][rep]["max"]
    assert [runs[f"phase2_{lv}"]["level"] for lv in ("lv1", "lv2", "lv3")] == ["lv1", "lv2", "lv3"]
    assert runs["phase2_lv3"]["mechanism"] == "sigstop"
    keys = {"low_high_p50", "low_high_p99", "high_p99_vs_test2", "high_p99_vs_alone", "throughput_loss_vs_test2",
            "verdicts"}
    assert set(r["summary_by_level"]) == {"lv1", "lv2", "lv3"}
    assert all(set(v) == keys for v in r["summary_by_level"].values())
    assert r["summary"] == r["summary_by_level"]["lv3"], "the report judges Lv3's first"
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<polyline") == 4 * 3, "a CDF per priority, baseline and 3 levels"


def test_example5_runs_only_the_levels_asked_and_refuses_unknown_ones(tmp_path):
    out = tmp_path / "e5.json"
    p = subprocess.run([sys.executable, EXAMPLE, "--device", "host", "--requests", "3", "--warmup", "0",
                        "--levels", "lv3", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["levels"] == ["lv3"] and "phase2_lv1" not in r["runs"]
    p = subprocess.run([sys.executable, EXAMPLE, "--device", "host", "--levels", "lv4"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--levels" in p.stderr.strip().splitlines()[-1], p.stderr


def test_example5_refuses_bad_numbers_with_exit_2():
    for args in (["--requests", "0"], ["--gap-high-ms", "nan"], ["--standin-ms", "-1"]):
        p = subprocess.run([sys.executable, EXAMPLE, "--device", "host", *args],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        assert args[0] in p.stderr.strip().splitlines()[-1], p.stderr
