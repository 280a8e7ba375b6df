#!/usr/bin/env bash
# The project's rule: `unsafe` lives only in the KFD ioctl wrappers (lv3/src/kfd/ioctl.rs) and
# the HIP binding's FFI module (hip-rt/src/ffi/, allowed by one `#[allow(unsafe_code)]` on
# `mod ffi` in hip-rt/src/lib.rs). The compiler enforces it too (deny(unsafe_code)
# at each crate root, allowed in those modules alone); this check also catches an `allow` added
# elsewhere. Comments and strings that merely mention the word are ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rn --include='*.rs' -E '\bunsafe\b|allow\(unsafe_code\)' lv3/src lv1/src hip-rt/src gpu-device/src microbench/src \
  | grep -v -E '^(lv3/src/kfd/ioctl\.rs|hip-rt/src/ffi/)' \
  | grep -v -E '^hip-rt/src/lib\.rs:[0-9]+:#\[allow\(unsafe_code\)\] // the one module with `unsafe`' \
  | grep -v -E '^[^:]+:[0-9]+:\s*(//|\*)' \
  | grep -v -E 'deny\(unsafe_code\)|forbid\(unsafe_code\)|unsafe_op_in_unsafe_fn' || true)
if [ -n "$bad" ]; then
  echo "unsafe outside lv3/src/kfd/ioctl.rs and hip-rt/src/ffi/:"; echo "$bad"; exit 1
fi
# hip-rt and gpu-device deny unsafe_code at the root, and hip-rt's one `allow` sits on `mod ffi`.
for root in hip-rt/src/lib.rs gpu-device/src/lib.rs; do
  grep -q -E '^#!\[(deny|forbid)\(unsafe_code\)\]' "$root" || { echo "$root: no #![deny(unsafe_code)]"; exit 1; }
done
grep -A1 -E '^#\[allow\(unsafe_code\)\]' hip-rt/src/lib.rs | sed -n 2p | grep -q -E '^mod ffi;' \
  || { echo "hip-rt/src/lib.rs: #[allow(unsafe_code)] is not on 'mod ffi;'"; exit 1; }
n=$(grep -rn --include='*.rs' -E 'unsafe \{|unsafe fn' lv3/src/kfd/ioctl.rs hip-rt/src/ffi | wc -l)
echo "check-unsafe: ok ($n unsafe blocks/fns, all in lv3/src/kfd/ioctl.rs and hip-rt/src/ffi/)"
