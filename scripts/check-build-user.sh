#!/usr/bin/env bash
# scripts/build-user.sh as an unprivileged user with only a Rust toolchain and Python: the way
# the seeds' users build on an MI308X node or in a ROCm container (no root, no apt).
#
#   scripts/check-build-user.sh        (as root: it creates the user; test-all runs it)
#
# A user `preempt-build` (created once, useradd) runs the script from its own copy of the
# sources with `runuser`, in an environment holding nothing but HOME, PATH and what a case sets:
#   1. no Rust: --check names rustup's installer command and downloads nothing (a `curl` and a
#      `wget` that record being called sit on PATH);
#   2. Rust but no active Python environment: --check says so;
#   3. ROCm as the seeds have it (fake trees, no GPU needed): ROCm 6.4 as ROCM_PATH, ROCm 7.2's
#      libamdhip64 on LD_LIBRARY_PATH, PyTorch with its own HIP 6.4 in a conda-style environment:
#      --check prints both versions, what preempt-lat loads, that preempt_kfd uses PyTorch's runtime
#      after 'import torch' (hip-rt takes the one in the process), and what a session opened
#      before it would load instead, with the fix (no warning once the fix is applied);
#   4. the real build: cargo build --release and maturin develop into the user's venv, offline;
#      preempt_kfd then imports in that venv and runs a host-device session, and preempt-lat
#      doctor loads the libamdhip64 the script said it would.
# The toolchain is the one this machine's root uses, hard-linked (not copied) into
# /var/tmp/preempt-build-user, with a copy of cargo's registry so that the build runs offline;
# the user's target directory stays there between runs, like the QEMU kernel cache. Time on this
# 2-core VM: the first run builds everything in release (~6-10 min, more under load); later runs
# rebuild only what changed (~1 min, most of it maturin's release link of the extension).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED check-build-user: needs root to create the test user (scripts/test-all.sh runs it as root)" >&2
  exit 0
fi
U=preempt-build
W=/var/tmp/preempt-build-user
MATURIN_BIN=$REPO/target/py-venv/bin/maturin
[ -x "$MATURIN_BIN" ] || { echo "check-build-user: $MATURIN_BIN missing: run scripts/check-python.sh first"; exit 1; }
id -u "$U" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$U"
H=$(getent passwd "$U" | cut -d: -f6)
fail() { echo "FAIL check-build-user: $*"; exit 1; }
pass() { echo "PASS check-build-user: $*"; }

# The toolchain root uses, hard-linked (same filesystem: no copy) where the user can read it.
sysroot=$(rustc --print sysroot)
tc=$W/rust/$(rustc --version | tr -c 'A-Za-z0-9.\n' '_')
if [ ! -x "$tc/bin/cargo" ]; then
  rm -rf "$W/rust"; mkdir -p "$W/rust"
  cp -al "$sysroot" "$tc.tmp" 2>/dev/null || cp -a "$sysroot" "$tc.tmp"
  mv "$tc.tmp" "$tc"
fi
chmod 755 "$W" "$W/rust"
# Tools every case gets: maturin (a copy: the user's venv has no network to pip-install it) and
# a curl/wget that only record being run (the script must never download on its own).
mkdir -p "$W/bin" "$W/trap"
install -m 755 "$MATURIN_BIN" "$W/bin/maturin"
for t in curl wget; do printf '#!/bin/sh\necho "$0 $*" >> %s/trap/called\nexit 1\n' "$W" > "$W/trap/$t"; chmod 755 "$W/trap/$t"; done
chmod 777 "$W/trap"; rm -f "$W/trap/called"

# The user's own things: cargo's registry (for --offline), the sources, a venv, the target dir.
mkdir -p "$W/user"; chown "$U:" "$W/user"
as_user() { runuser -u "$U" -- "$@"; }
# Brought up to date at every run (only what is new is copied): a copy from an earlier run lacks
# the crates the workspace has come to depend on since, and the offline build would not find them.
mkdir -p "$W/user/cargo/registry"
cp -a -u "${CARGO_HOME:-$HOME/.cargo}/registry/cache" "${CARGO_HOME:-$HOME/.cargo}/registry/index" "$W/user/cargo/registry/"
chown -R "$U:" "$W/user/cargo"
# The sources as a user would have them: every tracked and new file, mtimes kept (so the cached
# target directory stays valid for what did not change).
rm -rf "$W/user/src"; mkdir -p "$W/user/src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$W/user/src"
chown -R "$U:" "$W/user/src"
[ -x "$W/user/venv/bin/python" ] || as_user /usr/bin/python3 -m venv "$W/user/venv"

# Runs build-user.sh as the user in a bare environment: HOME, PATH=$1, then `VAR=value`s, then
# `--` and the script's options; output in $out, status in $rc.
run() {
  local path=$1; shift
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  set +e
  out=$(cd "$W/user/src" && runuser -u "$U" -- env -i HOME="$H" PATH="$path" "${envs[@]}" bash scripts/build-user.sh "$@" 2>&1)
  rc=$?
  set -e
}
expect() { grep -qF -- "$1" <<<"$out" || fail "$2: expected '$1' in:"$'\n'"$out"; }
SYS=/usr/local/bin:/usr/bin:/bin
RUST=$tc/bin

# 1. No Rust at all.
run "$W/trap:$SYS" -- --check
[ "$rc" = 1 ] || fail "no Rust: exit $rc, expected 1:"$'\n'"$out"
expect "cargo not found" "no Rust"
expect "sh.rustup.rs | sh -s -- -y" "no Rust"
expect "--install-rust" "no Rust"
[ ! -e "$W/trap/called" ] || fail "no Rust: the script ran $(cat "$W/trap/called")"
pass "no Rust: --check names rustup's installer and downloads nothing"

# 2. Rust, but no Python environment.
run "$W/trap:$RUST:$SYS" -- --check
[ "$rc" = 1 ] || fail "no Python environment: exit $rc, expected 1:"$'\n'"$out"
expect "rust     ok: cargo" "no Python environment"
expect "no active Python environment" "no Python environment"
pass "Rust but no active Python environment: --check says how to activate one"

# 3. The seeds' ROCm: 6.4 as ROCM_PATH, 7.2's library on LD_LIBRARY_PATH, PyTorch+rocm6.4 in a
# conda-style environment (a venv stands in for the prefix: CONDA_PREFIX, not VIRTUAL_ENV).
F=$W/user/fake; rm -rf "$F"
mkdir -p "$F/rocm-6.4.1/.info" "$F/rocm-6.4.1/lib" "$F/rocm-7.2.0/lib" "$F/conda"
echo 6.4.1-120 > "$F/rocm-6.4.1/.info/version"
touch "$F/rocm-6.4.1/lib/libamdhip64.so.6.4.43484" "$F/rocm-7.2.0/lib/libamdhip64.so.7.2.26015"
ln -s libamdhip64.so.6.4.43484 "$F/rocm-6.4.1/lib/libamdhip64.so.6"
ln -s libamdhip64.so.7.2.26015 "$F/rocm-7.2.0/lib/libamdhip64.so.7"
chown -R "$U:" "$F"
as_user /usr/bin/python3 -m venv --without-pip "$F/conda"
site=$(as_user "$F/conda/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
as_user mkdir -p "$site/torch/lib"
as_user sh -c "echo \"__version__ = '2.9.1+rocm6.4'\" > $site/torch/version.py; echo \"hip = '6.4.43484-123abc'\" >> $site/torch/version.py; : > $site/torch/__init__.py; : > $site/torch/lib/libamdhip64.so"
run "$W/bin:$RUST:$SYS" CONDA_PREFIX="$F/conda" ROCM_PATH="$F/rocm-6.4.1" LD_LIBRARY_PATH="$F/rocm-7.2.0/lib" -- --check
[ "$rc" = 0 ] || fail "seeds' ROCm: exit $rc, expected 0:"$'\n'"$out"
expect "conda/micromamba environment at $F/conda" "seeds' ROCm"
expect "$F/rocm-6.4.1: 6.4.1-120  [ROCM_PATH]" "seeds' ROCm"
expect "on LD_LIBRARY_PATH: $F/rocm-7.2.0/lib/libamdhip64.so.7 (HIP 7.2.26015)" "seeds' ROCm"
expect "preempt-lat and libpreempt_kfd will load $F/rocm-6.4.1/lib/libamdhip64.so.6 (HIP 6.4.43484)" "seeds' ROCm"
expect "PyTorch at $site/torch, HIP 6.4.43484-123abc, its own $site/torch/lib/libamdhip64.so (soname libamdhip64.so.6)" "seeds' ROCm"
# After import torch: PyTorch's runtime, whatever ROCM_PATH says (hip-rt takes the one in the process).
expect "ok: in Python after 'import torch', preempt_kfd uses PyTorch's own HIP runtime ($site/torch/lib/libamdhip64.so, already in the process)" "seeds' ROCm"
# Before import torch: 6.4's file from ROCM_PATH, whose soname PyTorch's libraries take instead of their own.
expect "WARNING: a preempt_kfd session on hip:N opened BEFORE 'import torch' loads $F/rocm-6.4.1/lib/libamdhip64.so.6 (HIP 6.4.43484); PyTorch then runs on that runtime instead of its own HIP 6.4.43484-123abc (same soname libamdhip64.so.6)" "seeds' ROCm"
expect "fix: import torch before opening a hip:N session; or run those programs with ROCM_PATH=$site/torch" "seeds' ROCm"
# Without ROCM_PATH the CLI takes 7.2's library from LD_LIBRARY_PATH; a session opened before
# import torch would then sit beside PyTorch's runtime (another soname): two runtimes.
run "$W/bin:$RUST:$SYS" CONDA_PREFIX="$F/conda" LD_LIBRARY_PATH="$F/rocm-7.2.0/lib" -- --check
expect "preempt-lat and libpreempt_kfd will load libamdhip64.so.7 = $F/rocm-7.2.0/lib/libamdhip64.so.7 (HIP 7.2.26015)" "seeds' ROCm, no ROCM_PATH"
expect "ok: in Python after 'import torch', preempt_kfd uses PyTorch's own HIP runtime" "seeds' ROCm, no ROCM_PATH"
expect "opened BEFORE 'import torch' loads libamdhip64.so.7 = $F/rocm-7.2.0/lib/libamdhip64.so.7 (HIP 7.2.26015); PyTorch then loads its own beside it: two HIP runtimes" "seeds' ROCm, no ROCM_PATH"
# With the fix applied: PyTorch's own file in either order, and no warning.
run "$W/bin:$RUST:$SYS" CONDA_PREFIX="$F/conda" ROCM_PATH="$site/torch" LD_LIBRARY_PATH="$F/rocm-7.2.0/lib" -- --check
expect "ok: in Python after 'import torch', preempt_kfd uses PyTorch's own HIP runtime" "seeds' ROCm with the fix"
! grep -q WARNING <<<"$out" || fail "seeds' ROCm with the fix: a warning is left:"$'\n'"$out"
pass "seeds' ROCm 6.4 + 7.2 + PyTorch: versions, the library loaded, PyTorch's runtime after import torch, the other order's warning and its fix"

# 4. The build, offline, into the user's venv.
t0=$(date +%s)
run "$W/bin:$RUST:$W/user/venv/bin:$SYS" VIRTUAL_ENV="$W/user/venv" CARGO_HOME="$W/user/cargo" \
  CARGO_TARGET_DIR="$W/user/target" CARGO_NET_OFFLINE=true --
[ "$rc" = 0 ] || fail "build: exit $rc:"$'\n'"$out"
expect "built    preempt_kfd in $W/user/venv" "build"
build_s=$(( $(date +%s) - t0 ))
# Built again with nothing changed, nothing compiles: sources without .git (a tarball, this copy)
# must not rebuild preempt-lat every time (its build script once named a missing .git/HEAD).
run "$W/bin:$RUST:$W/user/venv/bin:$SYS" VIRTUAL_ENV="$W/user/venv" CARGO_HOME="$W/user/cargo" \
  CARGO_TARGET_DIR="$W/user/target" CARGO_NET_OFFLINE=true --
[ "$rc" = 0 ] || fail "second build: exit $rc:"$'\n'"$out"
! grep -E '^ *Compiling ' <<<"$out" || fail "second build with nothing changed compiled the lines above"
# The candidate hip-rt opened, as doctor names it: a path, or a soname the loader resolved.
loads=$(sed -n 's/^hip      preempt-lat and libpreempt_kfd will load \([^ ]*\).*/\1/p' <<<"$out")
as_user env -i HOME="$H" PATH="$W/user/venv/bin:$SYS" python -c '
import preempt_kfd as pk
with pk.Session("host") as s:
    lp = s.low_priority_stream()
    lp.submit_delay(1_000_000); lp.suspend(); lp.resume(); lp.synchronize()
    c = lp.check()
    assert c["ok"] and c["exactly_once"] == 1, c
print("host session ok")' >/dev/null || fail "build: preempt_kfd does not run a host session in the user's venv"
doctor=$(as_user "$W/user/target/release/preempt-lat" doctor --format json)
lib=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["facts"]["hip"]["library"])' "$doctor" 2>/dev/null || true)
[ -n "$loads" ] && [ "$lib" = "$loads" ] || fail "build: build-user.sh said hip-rt loads '$loads', doctor loaded '$lib'"
pass "build as $U: release binaries and preempt_kfd in the venv in ${build_s}s (again, nothing to do: $(( $(date +%s) - t0 - build_s ))s with the checks); doctor loads $lib, as the script said"
