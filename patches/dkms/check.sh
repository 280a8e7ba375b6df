#!/usr/bin/env bash
# Checks the DKMS flavour of the kernel patch series (patches/dkms/: the same ABI against ROCm's
# out-of-tree amdgpu, the amdgpu-dkms source of the ROCm 6.4 line):
#
#   without the amdgpu-dkms source (always, CI included):
#     1. checkpatch.pl --strict --no-tree (linux-source-6.12's) on every patch: 0/0/0;
#     2. the ABI proof: the series' uapi hunk (patch 0004's include/uapi/linux/kfd_ioctl.h part)
#        is written to apply with no fuzz to upstream 6.12's kfd_ioctl.h as well; applied there,
#        kfd-sys/lv3 build against it with cfg(kfd_has_preempt): kfd-sys's hand-written copy equals
#        the DKMS series' definitions (as patches/check.sh step 4 proves for the upstream series);
#   with PREEMPT_DKMS_SRC=<amdgpu-dkms tree> (e.g. /usr/src/amdgpu-6.12.12-2164967.24.04 of the
#   amdgpu-dkms package), else SKIPPED with the reason:
#     3. applies the series (patch -p1 --dry-run first, then for real) to a copy of the tree; notes
#        when the tree is not the pinned one (series: version and sha256 of the files touched);
#     4. the ABI proof again, against the real patched amdgpu-dkms kfd_ioctl.h;
#     5. builds the modules out of tree against a module-capable 6.12 harness kernel
#        (scripts/qemu/build-kernel-dkms.sh, scripts/qemu/build-dkms-module.sh);
#     6. boots that kernel in QEMU, loads the modules and runs the guest tests
#        (scripts/qemu/run-guest-tests-dkms.sh; skipped with PREEMPT_SKIP_QEMU=1);
#     7. the same with the unpatched modules (run-guest-tests-dkms.sh --stock): the zero-count
#        probe answers EINVAL there (kfd::PreemptProbe::AbsentEinval), where upstream says ENOTTY.
#
#   bash patches/dkms/check.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
QCACHE=${PREEMPT_QEMU_CACHE:-$HOME/.cache/preempt-kfd-qemu}
CACHE=${PREEMPT_DKMS_CACHE:-$HOME/.cache/preempt-dkms}
t0=$(date +%s)
log() { echo "patches/dkms/check: $*" >&2; }
die() { echo >&2; echo "patches/dkms/check: FAIL: $*" >&2; exit 1; }
# shellcheck source=patches/lib.sh
. "$HERE/../lib.sh"

BASE=$(sed -n 's/^# base: //p' "$HERE/series")
PINNED_DIR=$(sed -n 's/^# source dir: //p' "$HERE/series")
read_series "$HERE" patches/dkms/series || die "patches/dkms/series"
log "series made against $BASE"

# linux-source-6.12: its checkpatch.pl and its upstream kfd_ioctl.h/kfd_sysfs.h. The tree that
# scripts/qemu/build-kernel.sh extracted, else only the files needed, from the tarball.
TARBALL=/usr/src/linux-source-6.12.tar.xz
SRCVER=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null) ||
  die "linux-source-6.12 is not installed (scripts/install-deps.sh kernel)"
LSRC=$QCACHE/src-$SRCVER/linux-source-6.12
[ -f "$LSRC/scripts/checkpatch.pl" ] || LSRC=$CACHE/src-$SRCVER/linux-source-6.12
if [ ! -f "$LSRC/scripts/checkpatch.pl" ]; then
  LSRC=$CACHE/lsrc-part-$SRCVER/linux-source-6.12
  if [ ! -f "$LSRC/scripts/checkpatch.pl" ]; then
    s=$(date +%s); rm -rf "$CACHE/lsrc-part-$SRCVER"; mkdir -p "$CACHE/lsrc-part-$SRCVER"
    tar -xJf "$TARBALL" -C "$CACHE/lsrc-part-$SRCVER" --wildcards 'linux-source-6.12/scripts/*' \
      linux-source-6.12/include/uapi/linux/kfd_ioctl.h linux-source-6.12/include/uapi/linux/kfd_sysfs.h
    log "extracted checkpatch and the kfd headers from $TARBALL ($(( $(date +%s) - s ))s)"
  fi
fi

WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT

# 1. checkpatch, strict: every patch must be clean.
checkpatch_series "$LSRC/scripts/checkpatch.pl" "dkms/" "$HERE" "${PATCHES[@]}" || die "checkpatch --strict is not clean"
log "1. checkpatch --strict: clean"
so=$(bash "$HERE/../check-sign-off.sh" "$HERE" "$LSRC/scripts/checkpatch.pl") || die "the sign-off rules (patches/README.md)"
log "1b. $so"

# The kfd-sys ABI proof against a header (patches/check.sh step 4).
# The kfd-sys ABI proof against a header (lib.sh, as patches/check.sh step 4).
dkms_abi_proof() { # $1 header, $2 what
  local s; s=$(date +%s)
  abi_proof "$REPO" "$1" || die "the Rust ABI check against $2"
  echo "PASS dkms abi: kfd-sys's hand-written ABI equals $2 ($(( $(date +%s) - s ))s)"
}

# 2. The uapi hunk on upstream 6.12's header (no source needed). git apply: no fuzz, and only
#    that file of the patch.
UPATCH=$(grep -l '^+++ b/include/uapi/linux/kfd_ioctl.h' "${PATCHES[@]/#/$HERE/}" || true)
[ "$(printf '%s\n' "$UPATCH" | grep -c .)" = 1 ] || die "exactly one patch must change include/uapi/linux/kfd_ioctl.h"
mkdir -p "$WORK/up/include/uapi/linux"
cp "$LSRC/include/uapi/linux/kfd_ioctl.h" "$LSRC/include/uapi/linux/kfd_sysfs.h" "$WORK/up/include/uapi/linux/"
(cd "$WORK/up" && git apply -p1 --include=include/uapi/linux/kfd_ioctl.h "$UPATCH") ||
  die "the uapi hunk of $(basename "$UPATCH") does not apply to linux-source-6.12's kfd_ioctl.h without fuzz"
grep -q '#define AMDKFD_IOC_PREEMPT_QUEUES' "$WORK/up/include/uapi/linux/kfd_ioctl.h" || die "no AMDKFD_IOC_PREEMPT_QUEUES after the uapi hunk"
dkms_abi_proof "$WORK/up/include/uapi/linux/kfd_ioctl.h" "the uapi hunk of $(basename "$UPATCH") (on linux-source-6.12 $SRCVER's kfd_ioctl.h)"
log "2. ABI proof without the DKMS source: pass"

# 3..6 need the amdgpu-dkms source.
DSRC=${PREEMPT_DKMS_SRC:-}
if [ -z "$DSRC" ] || [ ! -f "$DSRC/dkms.conf" ]; then
  echo "SKIPPED dkms apply/build/guest: no amdgpu-dkms source (PREEMPT_DKMS_SRC=${DSRC:-unset}; point it at an"
  echo "  extracted $PINNED_DIR from AMD's amdgpu-dkms package; Debian ships none, see patches/README.md)"
  log "done in $(( $(date +%s) - t0 ))s (checkpatch and the ABI proof only)"
  exit 0
fi
DVER=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$DSRC/dkms.conf")
log "amdgpu-dkms source: $DSRC (PACKAGE_VERSION $DVER)"
# The pinned tree: the sha256 of every file the series touches.
moved=0
while read -r _ _ sum f; do
  [ -n "$f" ] || continue
  have=$(sha256sum "$DSRC/$f" 2>/dev/null | cut -d' ' -f1 || true)
  [ "$have" = "$sum" ] || { log "NOTE: $f differs from the pinned tree's"; moved=1; }
done < <(grep '^# sha256 ' "$HERE/series")
[ "$moved" = 0 ] && log "the touched files are those of the pinned tree ($BASE)" ||
  log "NOTE: not the tree the series was made against ($BASE)"

# 3. Apply to a hard-linked copy (patch(1) replaces the files it edits).
cp -al "$DSRC/." "$WORK/dkms"
if ! apply_series "$WORK/dkms" "$HERE" "${PATCHES[@]}"; then
  echo "!! $APPLY_FAILED DOES NOT APPLY to amdgpu-dkms $DVER ($DSRC); the series was made against $BASE:" >&2
  echo "!! refresh it (patches/README.md, DKMS flavour)" >&2
  exit 1
fi
log "3. the series applies (${#PATCHES[@]} patches)"

# 4. The ABI proof against the real patched header.
mkdir -p "$WORK/dk/include/uapi/linux"
cp "$WORK/dkms/include/uapi/linux/kfd_ioctl.h" "$WORK/dk/include/uapi/linux/"
cp "$WORK/dkms/include/uapi/linux/kfd_sysfs.h" "$WORK/dk/include/uapi/linux/" 2>/dev/null ||
  cp "$LSRC/include/uapi/linux/kfd_sysfs.h" "$WORK/dk/include/uapi/linux/"
dkms_abi_proof "$WORK/dk/include/uapi/linux/kfd_ioctl.h" "the patched amdgpu-dkms $DVER kfd_ioctl.h"
log "4. ABI proof against the patched amdgpu-dkms header: pass"

# 5. The modules, out of tree, against the module-capable harness kernel.
s=$(date +%s)
MOD=$("$REPO/scripts/qemu/build-dkms-module.sh") || die "the patched amdgpu-dkms modules do not build"
echo "PASS dkms module build: $(cd "$MOD" && find . -name '*.ko' | wc -l) modules in $MOD ($(( $(date +%s) - s ))s)"
log "5. module build: pass"

# 6. Load them in QEMU and run the guest tests.
if [ "${PREEMPT_SKIP_QEMU:-0}" = 1 ]; then
  echo "SKIPPED dkms guest tests: PREEMPT_SKIP_QEMU=1"
else
  "$REPO/scripts/qemu/run-guest-tests-dkms.sh" || die "guest tests on the patched amdgpu-dkms modules"
  log "6. guest tests with the patched amdgpu-dkms modules: pass"
  "$REPO/scripts/qemu/run-guest-tests-dkms.sh" --stock || die "the unpatched amdgpu-dkms modules in the guest"
  log "7. unpatched amdgpu-dkms: the probe answers EINVAL: pass"
fi
log "all checks passed in $(( $(date +%s) - t0 ))s (amdgpu-dkms $DVER + ${#PATCHES[@]} patches)"
