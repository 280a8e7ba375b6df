#!/usr/bin/env bash
# The project's rule: `unsafe` lives only in the KFD ioctl wrappers (lv3/src/kfd/ioctl.rs) and
# the HIP loader's FFI (microbench/src/hip/ffi/). The compiler enforces it too (deny(unsafe_code)
# at each crate root, allowed in those modules alone); this check also catches an `allow` added
# elsewhere. Comments and strings that merely mention the word are ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rn --include='*.rs' -E '\bunsafe\b|allow\(unsafe_code\)' lv3/src lv1/src microbench/src \
  | grep -v -E '^(lv3/src/kfd/ioctl\.rs|microbench/src/hip/ffi/)' \
  | grep -v -E '^[^:]+:[0-9]+:\s*(//|\*)' \
  | grep -v -E 'deny\(unsafe_code\)|forbid\(unsafe_code\)|unsafe_op_in_unsafe_fn' || true)
if [ -n "$bad" ]; then
  echo "unsafe outside lv3/src/kfd/ioctl.rs and microbench/src/hip/ffi/:"; echo "$bad"; exit 1
fi
n=$(grep -rn --include='*.rs' -E 'unsafe \{|unsafe fn' lv3/src/kfd/ioctl.rs microbench/src/hip/ffi | wc -l)
echo "check-unsafe: ok ($n unsafe blocks/fns, all in lv3/src/kfd/ioctl.rs and microbench/src/hip/ffi/)"
