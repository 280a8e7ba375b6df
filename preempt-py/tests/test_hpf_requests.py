"""examples/hpf_requests.py, HP requests against an LP stream through the helper, on the host device:
the helper at Lv2 (the running LP commands finish, no new one starts) is a configuration of its own
beside Lv1 and Lv3, its row names the host's Lv2 mechanism and finds every LP command exactly once
(the example's exit status 3 otherwise); --levels picks the helper configurations and refuses
anything else with one line and exit status 2. Every run is bounded by its timeout."""

import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "hpf_requests.py")


def example(*args, timeout=120):
    return subprocess.run([sys.executable, EXAMPLE, "--device", "host", *args],
                          capture_output=True, text=True, timeout=timeout)


def rows(stdout):
    """The table's rows: configuration -> its cells."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("configuration", "---"):
            out[cells[0]] = cells
    return out


def test_the_helper_at_lv2_is_a_configuration_of_its_own_on_the_host_device():
    p = example("--requests", "10", "--gap-ms", "10", "--levels", "lv2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "host figures, not GPU figures" in p.stdout
    r = rows(p.stdout)
    assert list(r) == ["no helper", "helper Lv2"], p.stdout
    lv2 = r["helper Lv2"]
    assert lv2[1] == "lv2-hold", lv2
    assert lv2[6] == "10", lv2  # every HP request went through the helper
    assert lv2[-1] == "yes", lv2  # every LP command exactly once


def test_by_default_every_helper_level_runs_lv2_between_lv1_and_lv3():
    p = example("--requests", "5", "--gap-ms", "10")
    assert p.returncode == 0, p.stdout + p.stderr
    assert list(rows(p.stdout)) == ["no helper", "helper Lv1", "helper Lv2", "helper Lv3"], p.stdout


def test_levels_other_than_lv1_lv2_lv3_are_refused_with_exit_2():
    for bad in ("lv4", "auto", "lv2,lv2", ""):
        p = example("--levels", bad, timeout=60)
        assert p.returncode == 2, (bad, p.stdout, p.stderr)
        last = p.stderr.strip().splitlines()[-1]
        assert "--levels" in last and "give lv1, lv2 and/or lv3" in last, (bad, p.stderr)
        assert p.stdout == "", (bad, p.stdout)
