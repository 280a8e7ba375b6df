#!/usr/bin/env bash
# The C ABI from C on this machine: installs libpreempt into a staging prefix with
# scripts/install-capi.sh (debug build), compiles preempt-capi/tests/c/capi_test.c against the
# installed header and library through pkg-config, and runs it: the host device end to end,
# then the /dev/kfd calls (here, without /dev/kfd, each gives its documented error; the QEMU
# guests run the same program statically linked against the real kernels). Then
# capi_workers_test.c: the host device's worker processes killed, orphaned by an exiting thread,
# and under terminal job control (host only). Then capi_sched_test.c: sessions scheduled by the
# preempt-sched daemon (host only; the daemon is preempt-sched's debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
P=$PWD/target/capi-prefix
rm -rf "$P"
bash scripts/install-capi.sh --debug "$P" >/dev/null
export PKG_CONFIG_PATH=$P/lib/pkgconfig
BIN=target/capi-test
WBIN=target/capi-workers-test
SBIN=target/capi-sched-test
for t in "$BIN:capi_test" "$WBIN:capi_workers_test" "$SBIN:capi_sched_test"; do
    # shellcheck disable=SC2046
    cc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -o "${t%%:*}" "preempt-capi/tests/c/${t#*:}.c" $(pkg-config --cflags --libs preempt) -lpthread
    ldd "${t%%:*}" | grep "$P/lib/libpreempt.so" >/dev/null || { echo "check-capi: ${t%%:*} does not use the installed libpreempt.so"; exit 1; }
done
# The installed worker (libexec) is the one a session with default options must find.
env -u PREEMPT_HOST_WORKER "$BIN" host
env -u PREEMPT_HOST_WORKER "$BIN" kfd --stock
"$WBIN"
cargo build --locked -q -p preempt-sched --bin preempt-sched
env -u PREEMPT_HOST_WORKER -u PREEMPT_SCHEDULER "$SBIN" "${CARGO_TARGET_DIR:-target}/debug/preempt-sched"
