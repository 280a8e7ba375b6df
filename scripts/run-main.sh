#!/usr/bin/env bash
# The main job, as README.md shows it: build preempt-lat (and the host device's worker), say what
# this machine can do, and measure Lv3 preemption latency at T = 0.5 ms. With no usable AMD GPU,
# `--device auto` runs on the host device and says so on stderr; its figures are host figures,
# not GPU figures.
#
#   scripts/run-main.sh [extra preempt-lat arguments, e.g. --samples 500 --format json]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh build; else sudo bash scripts/install-deps.sh build; fi
# preempt-lat, and beside it the host device's worker (host-device's preempt-host-worker) and the
# scheduler daemon (preempt-sched: priority --processes).
cargo build --release --locked -q -p preempt-lat -p host-device -p preempt-sched -p hip-interpose -p hip-standin
PL=target/release/preempt-lat
echo "==> preempt-lat doctor"
"$PL" doctor
echo
echo "==> preempt-lat --level 3 --t-ms 0.5 $*"
exec "$PL" --level 3 --t-ms 0.5 "$@"
