#!/usr/bin/env bash
# Checks the kernel patch series end to end:
#   1. applies it (patch -p1 --dry-run first, then for real) to a hard-linked copy of the pinned
#      tree, Debian's linux-source-6.12; a version that no longer takes the patches fails LOUDLY
#      with both versions;
#   2. checkpatch.pl --strict --no-tree (the kernel's own) on every patch: 0 errors, 0 warnings,
#      0 checks;
#   3. builds the kernel after each patch (build-kernel.sh --patched-upto N: every patch builds on
#      its own), then the whole series (scripts/qemu/build-kernel.sh --patched);
#   4. builds kfd-sys/lv3 against the patched tree's kfd_ioctl.h, so that kfd-sys proves its
#      hand-written copy of the uapi additions equal to the patch (cfg kfd_has_preempt);
#   5. boots it in QEMU with the guest tests (scripts/qemu/run-guest-tests.sh --patched), including
#      the reproducer of the stock bugs that patches 0001-0002 fix (exec with /dev/kfd open, then a
#      reopen: a duplicate proc/<pid> and a use-after-free), in a boot of its own.
#
#   bash patches/check.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CACHE=${PREEMPT_QEMU_CACHE:-$HOME/.cache/preempt-kfd-qemu}
t0=$(date +%s)
log() { echo "patches/check: $*" >&2; }
# shellcheck source=patches/lib.sh
. "$HERE/lib.sh"
die() { echo >&2; echo "patches/check: FAIL: $*" >&2; exit 1; }

# The version the series was made against (also named in 0000-cover-letter.patch).
PINNED=$(sed -n 's/^# base: linux-source-6.12 //p' "$HERE/series")
INSTALLED=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null) ||
  die "linux-source-6.12 is not installed (scripts/install-deps.sh kernel)"
log "series made against linux-source-6.12 $PINNED; installed: $INSTALLED"
[ "$PINNED" = "$INSTALLED" ] || log "NOTE: the installed Debian version differs from the one the series was made against"

read_series "$HERE" patches/series || die "patches/series"

# 0. The pristine tree (build-kernel.sh extracts it and builds the stock kernel; both cached).
"$REPO/scripts/qemu/build-kernel.sh" >/dev/null
SRC=$CACHE/src-$INSTALLED/linux-source-6.12
[ -d "$SRC" ] || die "no pristine tree at $SRC"

# 1. Apply to a hard-linked copy (patch(1) replaces the files it edits: the original stays pristine).
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
cp -al "$SRC" "$WORK/linux"
if ! apply_series "$WORK/linux" "$HERE" "${PATCHES[@]}"; then
  echo >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  echo "!! $APPLY_FAILED DOES NOT APPLY to linux-source-6.12 $INSTALLED" >&2
  echo "!! The series was made against linux-source-6.12 $PINNED." >&2
  echo "!! A Debian stable update moved the code under it: refresh the series (see" >&2
  echo "!! patches/README.md) and the base line in patches/series." >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  exit 1
fi
log "1. the series applies (${#PATCHES[@]} patches)"

# 2. checkpatch, strict: every patch must be clean.
checkpatch_series "$SRC/scripts/checkpatch.pl" "" "$HERE" "${PATCHES[@]}" || die "checkpatch --strict is not clean"
log "2. checkpatch --strict: clean"

# 2b. Sign-off: the template identity until someone sends the series (patches/README.md).
so=$(bash "$HERE/check-sign-off.sh" "$HERE" "$SRC/scripts/checkpatch.pl") || die "the sign-off rules (patches/README.md)"
log "2b. $so"

# 3. The patched kernel, after each patch of the series (bisectable: every prefix builds; each
#    prefix has a build cache of its own, incremental from the stock objects).
for ((n = 1; n < ${#PATCHES[@]}; n++)); do
  s=$(date +%s)
  "$REPO/scripts/qemu/build-kernel.sh" --patched-upto "$n" >/dev/null ||
    die "the kernel does not build with only the first $n patch(es) (up to ${PATCHES[n-1]})"
  log "3. builds with patches 1..$n ($(( $(date +%s) - s ))s)"
done
s=$(date +%s)
BZ=$("$REPO/scripts/qemu/build-kernel.sh" --patched)
BUILD=$(cd "$(dirname "$BZ")/../../.." && pwd)
PSRC=$(readlink -f "$BUILD/source")
KHDR=$PSRC/include/uapi/linux/kfd_ioctl.h
grep -q '#define AMDKFD_IOC_PREEMPT_QUEUES' "$KHDR" || die "$KHDR lacks AMDKFD_IOC_PREEMPT_QUEUES (not the patched tree?)"
log "3. patched kernel: $BZ ($(( $(date +%s) - s ))s)"

# 4. The Rust side against the patched header: kfd-sys's compile-time ABI check.
s=$(date +%s)
abi_proof "$REPO" "$KHDR" || die "the Rust ABI check against the patched header"
log "4. kfd-sys/lv3 build against $KHDR: hand-written ABI equals the patch ($(( $(date +%s) - s ))s)"

# 5. Boot it.
"$REPO/scripts/qemu/run-guest-tests.sh" --patched || die "guest tests on the patched kernel"
log "5. guest tests on the patched kernel: pass"
log "all checks passed in $(( $(date +%s) - t0 ))s (linux-source-6.12 $INSTALLED + ${#PATCHES[@]} patches)"
