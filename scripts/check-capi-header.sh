#!/usr/bin/env bash
# The committed C header (preempt-capi/include/preempt_kfd.h) equals cbindgen's output for the
# current sources, and compiles as C and C++ on its own.
#
#   scripts/check-capi-header.sh           check (fails with the diff)
#   scripts/check-capi-header.sh --write   regenerate it
#
# cbindgen is installed once, at the pinned version, into target/tools (cargo install from
# crates.io), like any other build tool of the project; the header is committed so that building
# against libpreempt_kfd (and the static guest build) needs no cbindgen.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.29.4
CB=target/tools/bin/cbindgen
if ! { [ -x "$CB" ] && "$CB" --version | grep -qx "cbindgen $VERSION"; }; then
  cargo install -q cbindgen --version "$VERSION" --locked --root target/tools
fi
H=preempt-capi/include/preempt_kfd.h
out=$(mktemp); trap 'rm -f "$out"' EXIT
"$CB" --quiet --config preempt-capi/cbindgen.toml --crate preempt-capi --output "$out" preempt-capi
if [ "${1:-}" = --write ]; then cp "$out" "$H"; echo "check-capi-header: wrote $H"; exit 0; fi
if ! diff -u "$H" "$out"; then
  echo "check-capi-header: $H differs from cbindgen's output (run scripts/check-capi-header.sh --write)"; exit 1
fi
for lang in c c++; do
  printf '#include "preempt_kfd.h"\nint main(void) { return preempt_last_errno(); }\n' |
    cc -x "$lang" -std=$([ "$lang" = c ] && echo c11 || echo c++17) -Wall -Wextra -Werror -Ipreempt-capi/include -fsyntax-only -
done
echo "check-capi-header: $H is cbindgen $VERSION's output and compiles as C11 and C++17"
