#!/usr/bin/env bash
# The project's rule: `unsafe` lives only in the KFD ioctl wrappers (kfd/src/ioctl.rs), the
# HIP binding's FFI (hip-rt/src/ffi/, one `allow` on `mod ffi`) and the C ABI's entry points
# (preempt-capi/src/ffi/, one `allow` on `mod ffi`: a C caller hands raw pointers, and reading
# its strings, arrays and structs and writing its out-parameters cannot be done without `unsafe`;
# everything behind those reads is preempt-api's safe Rust), and the two HIP-facing libraries'
# entry points: the interposer's hooks and the runtime functions it calls on by pointer
# (hip-interpose/src/hooks.rs, hip-interpose/src/ffi/), the stand-in runtime's exported calls (hip-standin/src/ffi/), and XSched's C API names
# over the interposer (xsched-compat/src/ffi/: a C caller's out-parameters and the interposer's calls through dlsym). The compiler enforces it too (the workspace lint
# `unsafe_code = "deny"`, allowed in those modules alone); this check also catches an `allow`
# added elsewhere. kfd-sys (bindgen output: FFI types, no unsafe code of ours) is not scanned.
# Comments and strings that merely mention the word are ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
ALLOWED='^(kfd/src/ioctl\.rs|hip-rt/src/ffi/|hip-rt/src/lib\.rs:[0-9]+:#\[allow\(unsafe_code\)\]|preempt-capi/src/ffi/|preempt-capi/src/lib\.rs:[0-9]+:#\[allow\(unsafe_code\)\]|hip-interpose/src/ffi/|hip-interpose/src/hooks\.rs|hip-interpose/src/lib\.rs:[0-9]+:#\[allow\(unsafe_code\)\]|hip-standin/src/ffi/|hip-standin/src/lib\.rs:[0-9]+:#\[allow\(unsafe_code\)\]|xsched-compat/src/ffi/|xsched-compat/src/lib\.rs:[0-9]+:#\[allow\(unsafe_code\)\])'
mapfile -t SRC < <(for d in */src; do [ "$d" = kfd-sys/src ] || echo "$d"; done)
bad=$(grep -rn --include='*.rs' -E '\bunsafe\b|allow\(unsafe_code\)' "${SRC[@]}" \
  | grep -v -E "$ALLOWED" \
  | grep -v -E '^[^:]+:[0-9]+:\s*(//|\*)' \
  | grep -v -E 'deny\(unsafe_code\)|forbid\(unsafe_code\)|unsafe_op_in_unsafe_fn' || true)
if [ -n "$bad" ]; then
  echo "unsafe outside the allowed modules ($ALLOWED):"; echo "$bad"; exit 1
fi
# Every crate but kfd-sys must use the workspace lints (which deny unsafe_code).
for d in "${SRC[@]}"; do
  c=${d%/src}
  grep -q '^\[lints\]' "$c/Cargo.toml" && grep -q '^workspace = true' "$c/Cargo.toml" ||
    { echo "$c/Cargo.toml does not use the workspace lints ([lints] workspace = true)"; exit 1; }
done
n=$(grep -rn --include='*.rs' -E 'unsafe \{|unsafe fn' "${SRC[@]}" | grep -E "$ALLOWED" | wc -l)
echo "check-unsafe: ok ($n unsafe blocks/fns, all in the allowed modules; crates scanned: ${SRC[*]%/src})"
