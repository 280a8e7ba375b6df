#!/usr/bin/env bash
# Builds (or finds in the cache) the DKMS flavour's harness kernel: Debian's linux-source-6.12
# configured like the QEMU harness kernel (scripts/qemu/kernel.config) plus
# scripts/qemu/kernel-dkms.config: loadable modules, kallsyms and kprobes, amdgpu NOT built in,
# the helpers amdgpu selects built as modules
# (listed in harness-modules.txt of the build directory). It is the build tree that patches/dkms/check.sh builds
# ROCm's amdgpu-dkms modules against (make M=...), and the kernel the guest boots to load them.
#
#   scripts/qemu/build-kernel-dkms.sh     prints the build directory (O=) on stdout; its bzImage
#                                         is arch/x86/boot/bzImage in it
#
# Cache: ${PREEMPT_DKMS_CACHE:-$HOME/.cache/preempt-dkms}/kbuild-<key>, keyed by the Debian version,
# both config fragments. The pristine source is the one scripts/qemu/build-kernel.sh extracted
# (PREEMPT_QEMU_CACHE), else extracted here. Cold: ~10 min on 2 cores; a hit costs nothing.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
QCACHE=${PREEMPT_QEMU_CACHE:-$HOME/.cache/preempt-kfd-qemu}
CACHE=${PREEMPT_DKMS_CACHE:-$HOME/.cache/preempt-dkms}
log() { echo "build-kernel-dkms: $*" >&2; }
step() { local name=$1; shift; local s; s=$(date +%s); "$@"; log "step $name took $(( $(date +%s) - s ))s"; }

TARBALL=/usr/src/linux-source-6.12.tar.xz
[ -f "$TARBALL" ] || { log "no $TARBALL: run scripts/install-deps.sh kernel"; exit 1; }
SRCVER=$(dpkg-query -W -f='${Version}' linux-source-6.12)
key=$(printf "%s\n" "$SRCVER" | cat - "$HERE/kernel.config" "$HERE/kernel-dkms.config" | sha256sum | cut -c1-16)
KB=$CACHE/kbuild-$key
log "linux-source-6.12 $SRCVER, dkms harness key $key"
mkdir -p "$CACHE"

if [ -d "$QCACHE/src-$SRCVER/linux-source-6.12" ]; then
  SRC=$QCACHE/src-$SRCVER/linux-source-6.12
else
  SRC=$CACHE/src-$SRCVER/linux-source-6.12
  if [ ! -d "$SRC" ]; then
    extract() {
      rm -rf "$CACHE/src-$SRCVER.tmp"; mkdir -p "$CACHE/src-$SRCVER.tmp"
      tar -xJf "$TARBALL" -C "$CACHE/src-$SRCVER.tmp"
      mv "$CACHE/src-$SRCVER.tmp" "$CACHE/src-$SRCVER"
    }
    step extract extract
  fi
fi

fragment_args() { # $@ fragments: scripts/config arguments
  local line f
  for f in "$@"; do
    while read -r line; do
      case "$line" in '#'*|'') ;; +*) echo "-e ${line#+}" ;; -*) echo "-d ${line#-}" ;; =*) echo "-m ${line#=}" ;; esac
    done < "$f"
  done
}

configure() {
  make -s -C "$SRC" O="$KB" tinyconfig >/dev/null
  # shellcheck disable=SC2046 # one word per argument by construction
  "$SRC/scripts/config" --file "$KB/.config" $(fragment_args "$HERE/kernel.config" "$HERE/kernel-dkms.config")
  make -s -C "$SRC" O="$KB" olddefconfig >/dev/null
  local must
  for must in MODULES KALLSYMS KPROBES DRM PROVE_LOCKING MMU_NOTIFIER HMM_MIRROR; do
    grep -q "^CONFIG_$must=y" "$KB/.config" || { log "CONFIG_$must=y was lost by olddefconfig"; exit 1; }
  done
  grep -q '^CONFIG_DRM_AMDGPU=m' "$KB/.config" || { log "CONFIG_DRM_AMDGPU is not =m"; exit 1; }
}

build() {
  # CONFIG_DRM_AMDGPU= on the command line overrides include/config/auto.conf in every Makefile:
  # the in-tree amdgpu (and amdxcp) are not built; the helper modules it selected are, and
  # modpost writes Module.symvers with their exports for the out-of-tree build.
  nice -n 10 make -s -C "$SRC" O="$KB" -j"$(nproc)" CONFIG_DRM_AMDGPU= bzImage modules >&2
  find "$KB" -name '*.ko' -printf '%P\n' | sort > "$KB/harness-modules.txt"
  ! grep -q 'amd/amdgpu/amdgpu.ko' "$KB/harness-modules.txt" || { log "the in-tree amdgpu.ko was built"; exit 1; }
  log "helper modules for the guest: $(xargs -n1 basename < "$KB/harness-modules.txt" | tr '\n' ' ')"
}

if [ ! -f "$KB/arch/x86/boot/bzImage" ] || [ ! -f "$KB/harness-modules.txt" ]; then
  rm -rf "$KB"; mkdir -p "$KB"
  step configure configure
  step bzImage+modules build
  echo "$SRCVER" > "$KB/DEBIAN_SOURCE_VERSION"
fi
echo "$KB"
