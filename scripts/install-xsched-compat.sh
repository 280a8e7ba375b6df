#!/usr/bin/env bash
# Installs XSched's C API names over this project (crate xsched-compat) into a directory of its
# own, under the names a program written for XSched loads, with the HIP interposer beside them:
#
#   scripts/install-xsched-compat.sh [--debug] DIR
#
#   DIR/libpreempt.so      xsched-compat (XQueueCreate, XHintPriority, XHintSetScheduler, ...)
#   DIR/libhalhip.so       a link to libpreempt.so (HipQueueCreate): the same file, so the loader
#                          maps it once and both names share one table of queues (a copy would be
#                          a second library whose HwQueue handles the first does not know)
#   DIR/libpreempt_hip.so  the HIP interposer, which enforces the priorities (LD_PRELOAD)
#
# DIR must be a directory of its own: XSched's own libpreempt.so has the same name
# (docs/c-api.md#library-names), so the system's library directories are refused.
# --debug installs the debug build (no release build of the dependency tree).
# docs/interposer.md#xscheds-c-api-names.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release; flag=(--release)
if [ "${1:-}" = --debug ]; then profile=debug; flag=(); shift; fi
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: scripts/install-xsched-compat.sh [--debug] DIR" >&2; exit 2
fi
DIR=$(realpath -m -- "$1")
case "$DIR" in
  /usr/lib*|/lib*|/usr/local/lib|/usr/local/lib/*)
    echo "install-xsched-compat: refusing $DIR: a system library directory (XSched's libpreempt.so has the same name); give a directory of its own" >&2
    exit 2 ;;
esac
cargo build "${flag[@]}" --locked -q --lib -p xsched-compat -p hip-interpose
T=${CARGO_TARGET_DIR:-target}/$profile
install -d "$DIR"
install -m755 "$T/libxsched_compat.so" "$DIR/libpreempt.so"
ln -sfn libpreempt.so "$DIR/libhalhip.so"
install -m755 "$T/libpreempt_hip.so" "$DIR/libpreempt_hip.so"
echo "install-xsched-compat: XSched's C API names ($profile) installed in $DIR"
# PREEMPT_OWN_QUEUES=always: XSched's programs create their streams at normal priority and hint
# them afterwards, so every stream needs a queue of its own from the start to be suspendable.
echo "run a program written for XSched with:"
echo "  LD_PRELOAD=$DIR/libpreempt_hip.so XSCHED_LIB_PATH=$DIR PREEMPT_OWN_QUEUES=always python3 script.py"
