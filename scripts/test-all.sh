#!/usr/bin/env bash
# Every test of the project, as README.md shows it. Installs what it needs first.
#
#   scripts/test-all.sh            everything (cold: ~15-20 min, the kernel build; cached: ~2-3 min)
#   PREEMPT_SKIP_QEMU=1 scripts/test-all.sh   everything but the real-kernel guest (for quick iterations)
#
# Steps: system packages -> rustfmt check -> clippy (-D warnings) -> cargo test (workspace) -> cargo
# doc -> kfd-sys: committed bindings equal a fresh generation, the old-header refusal, a workspace
# build with libclang and the header hidden -> no module cycle -> every path a doc or comment names
# exists -> the unsafe-code fence -> the offline delay-kernel compile check -> the C ABI (header
# regeneration, install, the C test on the host device) -> the Python package (maturin into
# target/py-venv, pytest) -> the build script as an unprivileged user (scripts/check-build-user.sh)
# -> the DKMS flavour of the series (patches/dkms/check.sh) -> the QEMU guest tests on the stock
# kernel -> the patch series (apply, checkpatch, sign-off, build after each patch, QEMU guest tests
# on the patched kernel; the hostile-input suite runs on both kernels). Both guests also run the C
# ABI's test statically linked.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }
t0=$(date +%s)

step "system packages (scripts/install-deps.sh all)"
if [ "$(id -u)" = 0 ]; then bash scripts/install-deps.sh all; else sudo bash scripts/install-deps.sh all; fi

step "rustfmt (rustfmt.toml), no diff allowed"
cargo fmt --all --check
cargo fmt --manifest-path preempt-py/Cargo.toml --check

step "clippy, warnings denied"
cargo clippy --workspace --all-targets --locked -- -D warnings
# preempt-py (pyo3) is outside the workspace; it shares the target directory.
CARGO_TARGET_DIR=$PWD/target cargo clippy --manifest-path preempt-py/Cargo.toml --all-targets --locked -- -D warnings

step "cargo test --workspace"
# PREEMPT_REQUIRE_HIP: the Debian HIP runtime is installed by install-deps, so its tests must
# run for real rather than skip.
log=$(mktemp); trap 'rm -f "$log"' EXIT
PREEMPT_REQUIRE_HIP=1 cargo test --workspace --locked 2>&1 | tee "$log"
passed=$(awk '/^test result:/ {p += $4} END {print p+0}' "$log")

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -q

step "kfd-sys: the committed bindings equal bindgen's output for the pinned 6.12 header"
bash scripts/check-kfd-sys-bindings.sh

step "kfd-sys: the bindgen feature refuses a pre-1.13 header with a helpful message"
bash scripts/check-kfd-sys-header.sh

step "cargo build of the workspace with libclang and the KFD headers hidden"
bash scripts/check-build-without-headers.sh

step "no module cycle inside any crate"
python3 scripts/check-module-cycles.py

step "every path a doc or comment names exists"
python3 scripts/check-doc-paths.py

step "what a device platform costs in lines of code (test 7.1.1), every file of its table present"
python3 scripts/platform-loc.py

step "unsafe only in the ioctl wrappers, the HIP FFI and the C ABI's entry points"
bash scripts/check-unsafe.sh

step "offline compile check of the delay kernel (clang-19, gfx942 and gfx90a)"
bash scripts/check-delay-kernel.sh

step "C ABI: the committed header equals cbindgen's output (and compiles as C and C++)"
bash scripts/check-capi-header.sh

step "C ABI from C: install-capi.sh, pkg-config, the C test on the host device (no /dev/kfd: documented errors)"
bash scripts/check-capi.sh | tee "$log"
passed=$(( passed + $(grep -c '^PASS capi' "$log") ))

step "Python package: maturin develop into target/py-venv, pytest on the host device"
bash scripts/check-python.sh | tee "$log"
passed=$(( passed + $(awk '/ passed/ {for (i = 1; i < NF; i++) if ($(i+1) ~ /^passed/) p = $i} END {print p+0}' "$log") ))

step "scripts/build-user.sh as an unprivileged user: no Rust, no environment, the seeds' ROCm, the real build (scripts/check-build-user.sh)"
# After check-python.sh: it takes maturin from target/py-venv. Cold ~8 min (release build), then ~10 s.
bash scripts/check-build-user.sh | tee "$log"
passed=$(( passed + $(grep -c '^PASS check-build-user' "$log") ))

# Outside the QEMU block: it always runs checkpatch, the sign-off rules and the ABI proof; the
# apply/module build/guest steps need PREEMPT_DKMS_SRC (no CI machine has the amdgpu-dkms source)
# and honour PREEMPT_SKIP_QEMU themselves.
step "kernel patch series, DKMS flavour: checkpatch, sign-off, ABI proof; with PREEMPT_DKMS_SRC also apply, module build, guest (patches/dkms/check.sh)"
bash patches/dkms/check.sh | tee "$log"
passed=$(( passed + $(grep -c '^PASS' "$log") ))

if [ "${PREEMPT_SKIP_QEMU:-0}" = 1 ]; then
  echo "SKIPPED the QEMU real-kernel tests: PREEMPT_SKIP_QEMU=1"
else
  step "real kernel in QEMU: stock Linux 6.12 amdkfd"
  bash scripts/qemu/run-guest-tests.sh | tee "$log"
  passed=$(( passed + $(grep -c '^PASS guest' "$log") ))
  step "kernel patch series: apply, checkpatch --strict, build, patched kernel in QEMU (patches/check.sh)"
  bash patches/check.sh | tee "$log"
  passed=$(( passed + $(grep -c '^PASS guest' "$log") ))
fi
echo
echo "test-all: done in $(( $(date +%s) - t0 ))s (cargo tests and guest checks)"
echo "test-all: ${passed} passed, 0 failed"
