#!/usr/bin/env bash
# kfd-sys's committed bindings (kfd-sys/src/bindings.rs) must equal what bindgen generates from the
# pinned uapi header: Debian's linux-libc-dev 6.12 (KFD ioctl 1.17), installed by
# scripts/install-deps.sh build. This regenerates them with the `bindgen` feature (the pinned
# bindgen invocation in kfd-sys/build/generate.rs, the bindgen version in Cargo.lock) in a target
# dir of its own and fails on any difference.
#
#   scripts/check-kfd-sys-bindings.sh            check (CI)
#   scripts/check-kfd-sys-bindings.sh --update   rewrite kfd-sys/src/bindings.rs (after a header or bindgen change)
set -euo pipefail
cd "$(dirname "$0")/.."
hdr=/usr/include/linux/kfd_ioctl.h
committed=kfd-sys/src/bindings.rs
want_minor=17
minor=$(awk '/#define KFD_IOCTL_MINOR_VERSION/{print $3}' "$hdr" 2>/dev/null || true)
[ "$minor" = "$want_minor" ] || {
  echo "check-kfd-sys-bindings: FAIL: $hdr says KFD 1.${minor:-?}, the pinned header is 1.$want_minor (linux-libc-dev 6.12: scripts/install-deps.sh build)"
  exit 1
}
out_dir=$(KFD_IOCTL_H=$hdr cargo build -q --locked -p kfd-sys --features bindgen --target-dir target/bindings-check \
  --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and "kfd-sys" in m["package_id"]:
        print(m["out_dir"])')
fresh=$out_dir/kfd_ioctl.rs
[ -f "$fresh" ] || { echo "check-kfd-sys-bindings: FAIL: the build produced no $fresh"; exit 1; }
if [ "${1:-}" = --update ]; then
  cp "$fresh" "$committed"
  echo "check-kfd-sys-bindings: wrote $committed from $hdr ($(dpkg-query -W -f '${Package} ${Version}' linux-libc-dev 2>/dev/null))"
  exit 0
fi
if ! diff -u "$committed" "$fresh" > target/bindings-check/diff; then
  echo "check-kfd-sys-bindings: FAIL: $committed differs from bindgen's output for $hdr:"
  head -60 target/bindings-check/diff
  echo "If the header or bindgen changed on purpose: scripts/check-kfd-sys-bindings.sh --update, and review the diff."
  exit 1
fi
echo "check-kfd-sys-bindings: $committed equals a fresh generation from $hdr ($(dpkg-query -W -f '${Package} ${Version}' linux-libc-dev 2>/dev/null))"
