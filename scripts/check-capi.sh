#!/usr/bin/env bash
# The C ABI from C on this machine: installs libpreempt_kfd into a staging prefix with
# scripts/install-capi.sh (debug build), compiles preempt-capi/tests/c/capi_test.c against the
# installed header and library through pkg-config, and runs it: the host device end to end,
# then the /dev/kfd calls (here, without /dev/kfd, each gives its documented error; the QEMU
# guests run the same program statically linked against the real kernels). Then
# capi_workers_test.c: the host device's worker processes killed, orphaned by an exiting thread,
# and under terminal job control (host only). Then capi_policy_test.c: the helper's time-driven
# policy (host only: options, a 3:1 partition over a second, K-EDF, laxity, misuse). Then
# capi_sched_test.c: sessions scheduled by the preempt-sched daemon (host only; the daemon is
# preempt-sched's debug build).
#
# The names (docs/c-api.md#library-names): the prefix already holds a stand-in for XSched's
# libpreempt.so (built here, exporting XQueueCreate), which the install must leave alone and the
# test programs must not link; a second prefix holds this project's files under the old names,
# which the install must remove.
set -euo pipefail
cd "$(dirname "$0")/.."
P=$PWD/target/capi-prefix
rm -rf "$P"
mkdir -p "$P/lib"
printf 'int XQueueCreate(void **xq, void *hwq, long level, long flags) { (void)hwq; (void)level; (void)flags; *xq = 0; return 0; }\n' |
  cc -x c -shared -fPIC -o "$P/lib/libpreempt.so" -
bash scripts/install-capi.sh --debug "$P" >/dev/null
[ -f "$P/lib/libpreempt.so" ] && grep -qa XQueueCreate "$P/lib/libpreempt.so" ||
  { echo "check-capi: the install removed or replaced another project's libpreempt.so (XSched's name)"; exit 1; }
for f in lib/libpreempt.a include/preempt.h lib/pkgconfig/preempt.pc; do
  [ ! -e "$P/$f" ] || { echo "check-capi: the install wrote $P/$f, a name XSched's library clashes with"; exit 1; }
done
export PKG_CONFIG_PATH=$P/lib/pkgconfig
BIN=target/capi-test
WBIN=target/capi-workers-test
SBIN=target/capi-sched-test
PBIN=target/capi-policy-test
for t in "$BIN:capi_test" "$WBIN:capi_workers_test" "$PBIN:capi_policy_test" "$SBIN:capi_sched_test"; do
    # shellcheck disable=SC2046
    cc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -o "${t%%:*}" "preempt-capi/tests/c/${t#*:}.c" $(pkg-config --cflags --libs preempt-kfd) -lpthread
    ldd "${t%%:*}" | grep "$P/lib/libpreempt_kfd.so" >/dev/null || { echo "check-capi: ${t%%:*} does not use the installed libpreempt_kfd.so"; exit 1; }
    ! ldd "${t%%:*}" | grep -E '/libpreempt\.so' || { echo "check-capi: ${t%%:*} links XSched's name libpreempt.so"; exit 1; }
done
# The installed worker (libexec) is the one a session with default options must find.
env -u PREEMPT_HOST_WORKER "$BIN" host
env -u PREEMPT_HOST_WORKER "$BIN" kfd --stock
"$WBIN"
"$PBIN"
cargo build --locked -q -p preempt-sched --bin preempt-sched
env -u PREEMPT_HOST_WORKER -u PREEMPT_SCHEDULER "$SBIN" "${CARGO_TARGET_DIR:-target}/debug/preempt-sched"

# An earlier install of this project under the old names is cleaned up by the next install.
O=$PWD/target/capi-prefix-old
rm -rf "$O"; mkdir -p "$O/lib/pkgconfig" "$O/include"
cp "$P/lib/libpreempt_kfd.so" "$O/lib/libpreempt.so"
cp "$P/lib/libpreempt_kfd.a" "$O/lib/libpreempt.a"
cp "$P/include/preempt_kfd.h" "$O/include/preempt.h"
sed 's/-lpreempt_kfd/-lpreempt/' "$P/lib/pkgconfig/preempt-kfd.pc" > "$O/lib/pkgconfig/preempt.pc"
out=$(bash scripts/install-capi.sh --debug "$O")
for f in lib/libpreempt.so lib/libpreempt.a include/preempt.h lib/pkgconfig/preempt.pc; do
  [ ! -e "$O/$f" ] || { echo "check-capi: the install left this project's old $O/$f (the XSched clash)"; exit 1; }
  grep -qF "removed $O/$f" <<<"$out" || { echo "check-capi: the install did not say it removed $O/$f:"; echo "$out"; exit 1; }
done
rm -rf "$O"
echo "check-capi: libpreempt_kfd, preempt_kfd.h, preempt-kfd.pc beside XSched's libpreempt.so: linked by name, the other left alone; old names cleaned up"
