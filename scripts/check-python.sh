#!/usr/bin/env bash
# The Python package preempt_kfd (preempt-py/): a virtual environment under target/py-venv
# (created once; maturin and pytest from PyPI at pinned versions), `maturin develop` of the
# package into it (the same target directory as the workspace), then pytest on the host device.
set -euo pipefail
cd "$(dirname "$0")/.."
MATURIN=1.16.0
PYTEST=9.2.0
V=$PWD/target/py-venv
if [ ! -x "$V/bin/python" ]; then
  python3 -m venv "$V" || { echo "check-python: python3 -m venv failed (Debian: apt-get install python3-venv; scripts/install-deps.sh does)"; exit 1; }
fi
"$V/bin/python" -m pip install -q --disable-pip-version-check "maturin==$MATURIN" "pytest==$PYTEST"
export CARGO_TARGET_DIR=$PWD/target VIRTUAL_ENV=$V PATH=$V/bin:$PATH
(cd preempt-py && maturin develop -q --locked)
# The scheduler daemon that tests/test_sched.py starts (target/debug/preempt-sched).
cargo build -q --locked -p preempt-sched --bin preempt-sched
# preempt-lat (target/debug/preempt-lat), whose acceptance stage tests/test_acceptance_example5.py
# runs with this venv's Python: the stage's PASS path, which `cargo test` cannot build a venv for.
cargo build -q --locked -p preempt-lat --bin preempt-lat
"$V/bin/python" -c 'import preempt_kfd, sys; print("check-python: preempt_kfd imports from", preempt_kfd.__file__, "on Python", sys.version.split()[0])'
"$V/bin/python" -m pytest -q -p no:cacheprovider preempt-py/tests
# The example (examples/hpf_requests.py) on the host device, short: it must print its table and
# find every LP command exactly once in each configuration (exit status 3 otherwise).
"$V/bin/python" examples/hpf_requests.py --device host --requests 20 --gap-ms 10
