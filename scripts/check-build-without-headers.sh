#!/usr/bin/env bash
# `cargo build` of the whole workspace must succeed on a machine with neither libclang nor a
# kfd_ioctl.h (kfd-sys's bindings are committed; bindgen is behind its `bindgen` feature).
# Shown here by hiding both in a private mount namespace (root: unshare + bind mounts; nothing
# outside this process tree sees it) and building into a target dir of its own, from scratch:
#   - /usr/include/linux is replaced by a copy without kfd_ioctl.h and kfd_sysfs.h;
#   - every /usr/lib/llvm-*/ tree (libclang, clang) is covered by an empty tmpfs, and every
#     libclang*.so* elsewhere under /usr/lib by /dev/null.
# Then checks that the built preempt-lat carries no header path.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != --inside ]; then
  if [ "$(id -u)" != 0 ]; then exec sudo -E bash "$0"; fi
  exec unshare --mount --propagation private bash "$0" --inside
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/linux"
cp -a /usr/include/linux/. "$tmp/linux/"
rm -f "$tmp/linux/kfd_ioctl.h" "$tmp/linux/kfd_sysfs.h"
mount --bind "$tmp/linux" /usr/include/linux
for d in /usr/lib/llvm-*; do [ -d "$d" ] && mount -t tmpfs none "$d"; done
while IFS= read -r f; do mount --bind /dev/null "$f"; done < <(find /usr/lib -name 'libclang*.so*' \( -type f -o -type l \) -xtype f 2>/dev/null)
# What is hidden, checked rather than assumed:
for h in /usr/include/linux/kfd_ioctl.h /usr/include/linux/kfd_sysfs.h; do
  [ ! -e "$h" ] || { echo "check-build-without-headers: FAIL: $h still visible"; exit 1; }
done
if python3 -c 'import ctypes.util, ctypes, sys
for n in ("clang", "clang-14", "clang-19"):
    p = ctypes.util.find_library(n)
    try:
        ctypes.CDLL(p or "lib%s.so" % n); sys.exit(0)
    except OSError: pass
sys.exit(1)'; then echo "check-build-without-headers: FAIL: a libclang still loads"; exit 1; fi
echo "check-build-without-headers: hidden: kfd_ioctl.h, kfd_sysfs.h, libclang (no libclang loads)"
if cargo tree -q --locked --workspace -e build,normal -i clang-sys >/dev/null 2>&1; then
  echo "check-build-without-headers: FAIL: clang-sys is in the default build graph"; exit 1
fi
t0=$(date +%s)
cargo build -q --locked --workspace --target-dir target/no-headers
echo "check-build-without-headers: cargo build --workspace succeeded without libclang or a kfd header ($(( $(date +%s) - t0 ))s, fresh target dir)"
if grep -q 'kfd_ioctl\.h' target/no-headers/debug/preempt-lat && strings target/no-headers/debug/preempt-lat | grep -E '/[^ ]*kfd_ioctl\.h' ; then
  echo "check-build-without-headers: FAIL: preempt-lat carries a header path"; exit 1
fi
echo "check-build-without-headers: preempt-lat names no header path"
