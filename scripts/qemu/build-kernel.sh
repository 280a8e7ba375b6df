#!/usr/bin/env bash
# Builds (or finds in the cache) the QEMU harness kernel: Debian's linux-source-6.12 with
# amdgpu+amdkfd built in, optionally with the patch series from patches/ applied.
#
#   scripts/qemu/build-kernel.sh [--patched]        prints the path of the bzImage on stdout
#   scripts/qemu/build-kernel.sh --patched-upto N   the same with only the first N patches of
#                                                   patches/series (check.sh: every patch builds)
#
# Cache: ${PREEMPT_QEMU_CACHE:-$HOME/.cache/preempt-kfd-qemu}, outside the repo, keyed by the exact
# Debian version of linux-source-6.12, the config fragment and (with --patched) the patches.
# A hit costs nothing; a patched build starts from a copy of the stock build's objects, so only
# the files the patches touch are recompiled (seconds). Cold: ~12-15 min on 2 cores.
# Logs go to stderr, with the source version, so every CI log names the kernel it tested.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${PREEMPT_QEMU_CACHE:-$HOME/.cache/preempt-kfd-qemu}
patched=0 upto=
case "${1:-}" in
  --patched) patched=1 ;;
  --patched-upto) patched=1; upto=${2:?--patched-upto needs a number}
    case "$upto" in ''|*[!0-9]*) echo "build-kernel: --patched-upto $upto: not a number" >&2; exit 1;; esac ;;
esac

log() { echo "build-kernel: $*" >&2; }
step() { local name=$1; shift; local s; s=$(date +%s); "$@"; log "step $name took $(( $(date +%s) - s ))s"; }

TARBALL=/usr/src/linux-source-6.12.tar.xz
[ -f "$TARBALL" ] || { log "no $TARBALL: run scripts/install-deps.sh kernel"; exit 1; }
SRCVER=$(dpkg-query -W -f='${Version}' linux-source-6.12)
hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

stock_key=$(printf "%s\n" "$SRCVER" | cat - "$HERE/kernel.config" | sha256sum | cut -c1-16)
SRC=$CACHE/src-$SRCVER/linux-source-6.12
STOCK=$CACHE/build-stock-$stock_key
log "linux-source-6.12 $SRCVER, stock key $stock_key"

extract() {
  rm -rf "$CACHE/src-$SRCVER.tmp"; mkdir -p "$CACHE/src-$SRCVER.tmp"
  tar -xJf "$TARBALL" -C "$CACHE/src-$SRCVER.tmp"
  mv "$CACHE/src-$SRCVER.tmp" "$CACHE/src-$SRCVER"
}

configure() { # $1 src $2 build dir
  make -s -C "$1" O="$2" tinyconfig >/dev/null
  local args=() line
  while read -r line; do
    case "$line" in '#'*|'') ;; +*) args+=(-e "${line#+}") ;; -*) args+=(-d "${line#-}") ;; esac
  done < "$HERE/kernel.config"
  "$1/scripts/config" --file "$2/.config" "${args[@]}"
  make -s -C "$1" O="$2" olddefconfig >/dev/null
  local must
  for must in HSA_AMD DRM_AMDGPU PROVE_LOCKING KASAN DEBUG_LIST KALLSYMS; do
    grep -q "^CONFIG_$must=y" "$2/.config" || { log "CONFIG_$must was lost by olddefconfig"; exit 1; }
  done
}

build() { # $1 src $2 build dir
  make -s -C "$1" O="$2" -j"$(nproc)" bzImage >&2
}

mkdir -p "$CACHE"
[ -d "$SRC" ] || step extract extract
if [ ! -f "$STOCK/arch/x86/boot/bzImage" ]; then
  rm -rf "$STOCK"; mkdir -p "$STOCK"
  step configure configure "$SRC" "$STOCK"
  step bzImage-stock build "$SRC" "$STOCK"
  echo "$SRCVER" > "$STOCK/DEBIAN_SOURCE_VERSION"
fi

if [ "$patched" = 0 ]; then
  echo "$STOCK/arch/x86/boot/bzImage"; exit 0
fi

# Patched: a source tree of its own (patches applied with a dry run first), and a build dir that
# starts as a copy of the stock objects so that make recompiles only what the patches changed.
SERIES=$REPO/patches/series
[ -f "$SERIES" ] || { log "no $SERIES"; exit 1; }
mapfile -t PATCHES < <(grep -v '^\s*\(#\|$\)' "$SERIES" | sed "s|^|$REPO/patches/|")
if [ -n "$upto" ]; then
  [ "$upto" -ge 1 ] && [ "$upto" -le "${#PATCHES[@]}" ] || { log "--patched-upto $upto: the series has ${#PATCHES[@]} patches"; exit 1; }
  PATCHES=("${PATCHES[@]:0:$upto}")
fi
pkey=$(cat "$HERE/kernel.config" "${PATCHES[@]}" | { printf '%s\n' "$SRCVER"; cat; } | sha256sum | cut -c1-16)
PSRC=$CACHE/src-patched-$pkey
PBUILD=$CACHE/build-patched-$pkey
log "patched key $pkey (${#PATCHES[@]} patches)"
if [ ! -f "$PBUILD/arch/x86/boot/bzImage" ]; then
  rm -rf "$PSRC" "$PBUILD"
  # Hard-linked copy of the pristine source: patch(1) replaces the files it edits (new inodes),
  # so the shared source stays pristine.
  cp -al "$SRC" "$PSRC"
  for p in "${PATCHES[@]}"; do
    if ! patch -s -p1 -d "$PSRC" --dry-run < "$p" >&2; then
      log "patch $(basename "$p") does not apply to linux-source-6.12 $SRCVER"; exit 1
    fi
    patch -s -p1 -d "$PSRC" < "$p" >&2
  done
  cp -a "$STOCK" "$PBUILD"
  # Kbuild records every command line, source path included, in the .cmd files: built from a
  # different source path, every object would be rebuilt (~12 min). So build with the patched
  # tree bind-mounted over the pristine path, in a private mount namespace (the pristine tree
  # is untouched outside it): only what the patches changed, and what includes it, recompiles.
  if unshare -m --propagation private true 2>/dev/null; then
    step bzImage-patched unshare -m --propagation private sh -c \
      'mount --bind "$1" "$2" && make -s -C "$2" O="$3" -j"$4" bzImage >&2' _ "$PSRC" "$SRC" "$PBUILD" "$(nproc)"
    # Later readers (run-guest-tests.sh) find the patched header through this link.
    ln -sfn "$PSRC" "$PBUILD/source"
  else
    log "no mount namespace (unshare -m): full rebuild from the patched path"
    step configure-patched make -s -C "$PSRC" O="$PBUILD" olddefconfig >/dev/null
    step bzImage-patched build "$PSRC" "$PBUILD"
  fi
  echo "$SRCVER + $(basename -a "${PATCHES[@]}" | tr '\n' ' ')" > "$PBUILD/DEBIAN_SOURCE_VERSION"
fi
echo "$PBUILD/arch/x86/boot/bzImage"
