#!/usr/bin/env bash
# Builds ROCm's out-of-tree amdgpu (the amdgpu-dkms source a ROCm node has under
# /usr/src/amdgpu-<version>) with the patches of patches/dkms/series, as modules, against the DKMS
# flavour's harness kernel (scripts/qemu/build-kernel-dkms.sh): what `dkms build` does, with the
# kernel build tree given instead of /lib/modules/$(uname -r)/build.
#
#   PREEMPT_DKMS_SRC=/usr/src/amdgpu-6.12.12-2164967.24.04 scripts/qemu/build-dkms-module.sh [--stock]
#
# Prints the work tree on stdout: its *.ko files are the modules (amd/amdgpu/amdgpu.ko, ttm/,
# scheduler/, amd/amdkcl/, amd/amdxcp/, amddrm_*.ko), its include/uapi/linux/kfd_ioctl.h the
# patched header. --stock: the same without the patches.
#
# The display code (DC) is left out unless PREEMPT_DKMS_DC=1: the series does not touch it, it is
# half of the build, and amdgpu's init on a GPU-less guest never reaches it. The DKMS package's
# own amd/dkms/Kbuild hard-codes CONFIG_DRM_AMD_DC=y; those lines are dropped in the work copy.
#
# Cache: ${PREEMPT_DKMS_CACHE:-$HOME/.cache/preempt-dkms}/mod-<key>, keyed by the source's
# PACKAGE_VERSION and path, the patches, the kernel build and the DC choice. Cold: ~25-40 min on
# 2 cores without DC (amd/dkms/configure alone runs a few hundred compile tests); a hit is free.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${PREEMPT_DKMS_CACHE:-$HOME/.cache/preempt-dkms}
log() { echo "build-dkms-module: $*" >&2; }
step() { local name=$1; shift; local s; s=$(date +%s); "$@"; log "step $name took $(( $(date +%s) - s ))s"; }
stock=0; [ "${1:-}" = --stock ] && stock=1

DSRC=${PREEMPT_DKMS_SRC:-}
[ -n "$DSRC" ] && [ -f "$DSRC/dkms.conf" ] || {
  log "PREEMPT_DKMS_SRC must name an amdgpu-dkms source tree (with dkms.conf), e.g. /usr/src/amdgpu-6.12.12-2164967.24.04"
  exit 2
}
DSRC=$(cd "$DSRC" && pwd)
DVER=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$DSRC/dkms.conf")
dc=${PREEMPT_DKMS_DC:-0}

KB=$("$HERE/build-kernel-dkms.sh")
KSRC=$(readlink -f "$KB/source")
KREL=$(cat "$KB/include/config/kernel.release")

SERIES=$REPO/patches/dkms/series
PATCHES=()
if [ "$stock" = 0 ]; then
  mapfile -t PATCHES < <(grep -v '^\s*\(#\|$\)' "$SERIES" | sed "s|^|$REPO/patches/dkms/|")
fi
key=$( { printf '%s\n' "$DVER" "$DSRC" "$KB" "dc=$dc" "stock=$stock"; cat "$HERE/build-dkms-module.sh" "${PATCHES[@]}"; } |
  sha256sum | cut -c1-16)
W=$CACHE/mod-$key
log "amdgpu-dkms $DVER ($DSRC), $([ "$stock" = 1 ] && echo stock || echo "+ ${#PATCHES[@]} patches"), kernel $KREL ($KB), DC ${dc/0/off}, key $key"

if [ ! -f "$W/.built" ]; then
  rm -rf "$W"; mkdir -p "$W"
  # A full copy: amd/dkms/pre-build.sh edits the tree in place (sed -i, >>).
  step copy cp -a "$DSRC/." "$W/"
  for p in "${PATCHES[@]}"; do
    patch -s -p1 -d "$W" --dry-run < "$p" >&2 || { log "$(basename "$p") does not apply to amdgpu-dkms $DVER"; exit 1; }
    patch -s -p1 -d "$W" < "$p" >&2
  done
  if [ "$dc" != 1 ]; then
    sed -i -e '/^ *export CONFIG_DRM_AMD_DC\(_HDCP\|_FP\)\?=y$/d' \
      -e '/^ *subdir-ccflags-y += -DCONFIG_DRM_AMD_DC\(_HDCP\|_FP\)\?$/d' "$W/amd/dkms/Kbuild"
    ! grep -q 'CONFIG_DRM_AMD_DC' "$W/amd/dkms/Kbuild" || { log "could not take DC out of amd/dkms/Kbuild"; exit 1; }
  fi
  # Fix-ups of the work copy (not of the series) for kernels newer than the package knows:
  # - 6.12.y stable (Debian 6.12.117 among them) backported pci_resize_resource()'s fourth
  #   argument, exclude_bars (upstream 6.18), after amdgpu-dkms 6.4.1 was released; its configure
  #   does not test for it. Pass what the kernel's own amdgpu passes.
  if grep -q 'int exclude_bars);' "$KSRC/include/linux/pci.h" &&
     grep -q 'pci_resize_resource(adev->pdev, 0, rbar_size);' "$W/amd/amdgpu/amdgpu_device.c"; then
    sed -i 's/pci_resize_resource(adev->pdev, 0, rbar_size);/pci_resize_resource(adev->pdev, 0, rbar_size,\n\t\t\t\t(adev->asic_type >= CHIP_BONAIRE) ? 1 << 5 : 1 << 2);/' \
      "$W/amd/amdgpu/amdgpu_device.c"
    log "fix-up: pci_resize_resource() with exclude_bars (this kernel's 4-argument form)"
  fi
  # - 6.12.y stable also backported the removal of drm_exec_for_each_locked_object()'s index
  #   argument (upstream 6.16); configure then uses the kernel's <drm/drm_exec.h>, and the
  #   package's callers still pass an index.
  if grep -q '^#define drm_exec_for_each_locked_object(exec, obj)' "$KSRC/include/drm/drm_exec.h" 2>/dev/null; then
    mapfile -t uses < <(grep -l 'drm_exec_for_each_locked_object(' "$W"/amd/amdgpu/*.c "$W"/amd/amdkfd/*.c || true)
    if [ "${#uses[@]}" -gt 0 ]; then
      sed -i 's/drm_exec_for_each_locked_object(\([^,()]*\), *[a-z_]*, *\([^,()]*\))/drm_exec_for_each_locked_object(\1, \2)/' "${uses[@]}"
      log "fix-up: drm_exec_for_each_locked_object() without index in $(basename -a "${uses[@]}" | tr '\n' ' ')"
    fi
  fi
  # amd/dkms/Makefile: kernel_build_dir and num_cpu_cores are plain variables (overridden from
  # the command line); its configure takes the kernel from with_linux/with_linux_obj (autoconf's
  # variables for --with-linux=, --with-linux-obj=), else from /lib/modules/$KERNELVER.
  build() {
    (cd "$W" && with_linux=$KSRC with_linux_obj=$KB nice -n 10 make KERNELVER="$KREL" \
      kernel_build_dir="$KB" num_cpu_cores="$(nproc)" > "$W/build.log" 2>&1) || {
      grep -E 'error|Error' "$W/build.log" | head -30 >&2; log "build failed: $W/build.log"; exit 1; }
  }
  step make build
  [ -f "$W/amd/amdgpu/amdgpu.ko" ] || { log "no amd/amdgpu/amdgpu.ko: $W/build.log"; exit 1; }
  touch "$W/.built"
fi
log "modules: $(cd "$W" && find . -name '*.ko' -printf '%f ' )"
echo "$W"
