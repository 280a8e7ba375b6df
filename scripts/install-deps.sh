#!/usr/bin/env bash
# Installs every system package the project needs on Debian 12 (bookworm).
#
#   scripts/install-deps.sh [build|kernel|all]   (default: all)
#
# build : what kfd-sys's `bindgen` feature needs (a plain `cargo build` needs neither: the
#         bindings are committed): libclang, and the pinned header, linux-libc-dev 6.12
#         (KFD ioctl 1.17) from bookworm-backports; bookworm's own 6.1 header is KFD 1.11,
#         older than the 1.13 minimum (the debugger API). The tests use both: the
#         regeneration check, the old-header refusal and the patched-header build.
#         Also python3-venv: the Python package's tests build it into a virtual environment
#         (a fresh Debian 12 has python3 but not its venv module).
#         And libamdhip64-dev (HIP 5.2's headers and libamdhip64.so): the interposer's tests
#         compile an unmodified HIP program (examples/hip/two_priorities.c) with gcc against it.
# kernel: what the QEMU real-kernel harness needs: linux-source-6.12 (bookworm-backports),
#         (bookworm-security carries the 6.12 series), the kernel build tools, busybox-static,
#         and qemu-system-x86 from bookworm-backports (to match the machine's qemu-utils).
#         Also clang-19/llvm-19 for the offline delay-kernel compile check.
#
# The backports source is derived from this machine's own apt configuration (the URIs that
# serve "bookworm"), never hard-coded. Safe to run again: it does nothing when all is there.
set -euo pipefail
what=${1:-all}

need_root() { if [ "$(id -u)" != 0 ]; then echo "install-deps: run as root (apt-get)" >&2; exit 1; fi; }

BUILD_PKGS=(libclang-dev clang gcc pkg-config python3-venv libamdhip64-dev)
KERNEL_PKGS=(file python3 patch util-linux flex bison bc libelf-dev libssl-dev cpio xz-utils busybox-static make gcc perl
             clang-19 llvm-19 lld-19 libamdhip64-5 linux-source-6.12)
BPO_PKGS_BUILD=(linux-libc-dev)
# qemu-utils on these machines comes from bookworm-backports; qemu-system-x86 must match it.
BPO_PKGS_KERNEL=(qemu-system-x86)

missing() { local p; for p in "$@"; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"; done; }

have_kfd_113() {
  # linux-libc-dev >= 6.5 carries KFD 1.13+.
  local v; v=$(dpkg-query -W -f='${Version}' linux-libc-dev 2>/dev/null || echo 0)
  dpkg --compare-versions "$v" ge 6.12
}

add_backports() {
  local f=/etc/apt/sources.list.d/project-bookworm-backports.sources
  [ -f "$f" ] && return 0
  local src=/etc/apt/sources.list.d/debian.sources uris
  if [ -f "$src" ]; then
    # The URIs of the stanza whose Suites include plain "bookworm".
    uris=$(awk 'BEGIN{RS="";FS="\n"} /Suites:[^\n]*(^| )bookworm( |$|\n)/ || /Suites: bookworm( |\n|$)/ {
             for(i=1;i<=NF;i++) if ($i ~ /^URIs:/) { sub(/^URIs:[ ]*/,"",$i); print $i; exit } }' "$src")
  fi
  if [ -z "${uris:-}" ] && [ -f /etc/apt/sources.list ]; then
    uris=$(awk '$1=="deb" && $3=="bookworm" {print $2; exit}' /etc/apt/sources.list)
  fi
  if [ -z "${uris:-}" ]; then
    echo "install-deps: cannot find the bookworm apt source in $src or /etc/apt/sources.list;" >&2
    echo "  add bookworm-backports yourself, then rerun" >&2; exit 1
  fi
  printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uris" > "$f"
  echo "install-deps: added bookworm-backports from $uris ($f)"
  updated=0
}

updated=0
apt_update() { if [ "$updated" = 0 ]; then apt-get update -qq; updated=1; fi; }

install() {
  local pkgs=("$@") miss
  miss=$(missing "${pkgs[@]}")
  [ -z "$miss" ] && return 0
  need_root; apt_update
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $miss
}

install_bpo() {
  local pkgs=("$@")
  need_root
  add_backports; apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -t bookworm-backports "${pkgs[@]}"
}

case "$what" in
  build|all)
    install "${BUILD_PKGS[@]}"
    have_kfd_113 || install_bpo "${BPO_PKGS_BUILD[@]}"
    ;;&
  kernel|all)
    install "${KERNEL_PKGS[@]}"
    [ -z "$(missing "${BPO_PKGS_KERNEL[@]}")" ] || install_bpo "${BPO_PKGS_KERNEL[@]}"
    ;;
  build) ;;
  *) echo "usage: $0 [build|kernel|all]" >&2; exit 2 ;;
esac
echo "install-deps: $what ready (linux-libc-dev $(dpkg-query -W -f='${Version}' linux-libc-dev 2>/dev/null || echo none)$( [ "$what" != build ] && echo ", linux-source-6.12 $(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || echo none)"))"
