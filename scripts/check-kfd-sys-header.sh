#!/usr/bin/env bash
# kfd-sys must refuse a kfd_ioctl.h older than KFD 1.13 (no debugger API) with a message that
# names the header and says how to get a newer one. This builds kfd-sys against a copy of the
# real header whose minor version is set to 11 (Debian 12's own linux-libc-dev 6.1 is 1.11), in
# a target dir of its own, and checks the failure and its message; then checks that the real
# header is accepted and reported.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/linux"
src=/usr/include/linux/kfd_ioctl.h
sed 's/^#define KFD_IOCTL_MINOR_VERSION .*/#define KFD_IOCTL_MINOR_VERSION 11/' "$src" > "$tmp/include/linux/kfd_ioctl.h"
cp /usr/include/linux/kfd_sysfs.h "$tmp/include/linux/"
if out=$(KFD_IOCTL_H="$tmp/include/linux/kfd_ioctl.h" cargo check -q -p kfd-sys --features bindgen --target-dir target/header-check 2>&1); then
  echo "check-kfd-sys-header: FAIL: kfd-sys built against a KFD 1.11 header"; exit 1
fi
for want in "KFD ioctl 1.11" "needs >= 1.13" "scripts/install-deps.sh build" "bookworm-backports" "headers_install"; do
  grep -qF "$want" <<<"$out" || { echo "check-kfd-sys-header: FAIL: the error lacks '$want':"; echo "$out" | tail -20; exit 1; }
done
echo "check-kfd-sys-header: a KFD 1.11 header is refused with a message naming it and the way out"
if ! out=$(KFD_IOCTL_H="$src" cargo check -q -p kfd-sys --features bindgen --target-dir target/header-check 2>&1); then
  echo "check-kfd-sys-header: FAIL: the real header was refused:"; echo "$out" | tail -20; exit 1
fi
echo "check-kfd-sys-header: the system header ($src) is accepted"
