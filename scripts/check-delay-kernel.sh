#!/usr/bin/env bash
# Offline ISA check of the delay kernel (no GPU, no ROCm needed).
#
#   scripts/check-delay-kernel.sh            (from any directory)
#
# For each target (gfx942, gfx90a) it compiles gpu-device/kernels/delay.hip with Debian's
# clang-19 exactly as the runtime's hiprtc would see it minus HIP's headers:
#   clang-19 -x hip --offload-arch=<gfx> -nogpulib -nogpuinc --cuda-device-only --no-gpu-bundle-output -O3
# When clang cannot link a code object (no `lld` installed; Debian ships it as lld-19), the same
# device compile is stopped at assembly (-S) and assembled by clang's integrated assembler: the
# instructions are the same, only the final link into a loadable code object is skipped.
#
# Then, from `llvm-objdump-19 -d`, inside the function `delay_kernel` it looks for a backward
# s_cbranch_* (target address <= branch address) whose loop body [target, branch] contains
# s_memtime (clock64) or s_memrealtime (wall_clock64): the timing loop. It prints that loop and the
# register use from `llvm-readelf-19 --notes`. Any failed check exits non-zero with a message.
# Overrides: CLANG=..., OBJDUMP=..., READELF=..., PREEMPT_DELAY_KERNEL_SRC=... (e.g. to see it fail on a loop-free kernel).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${PREEMPT_DELAY_KERNEL_SRC:-"$here/../gpu-device/kernels/delay.hip"}
kernel=delay_kernel
CLANG=${CLANG:-clang-19}
OBJDUMP=${OBJDUMP:-llvm-objdump-19}
READELF=${READELF:-llvm-readelf-19}

die() { echo "check-delay-kernel: FAIL: $*" >&2; exit 1; }

[ -f "$src" ] || die "kernel source not found: $src"
for t in "$CLANG" "$OBJDUMP" "$READELF"; do
  command -v "$t" >/dev/null 2>&1 || die "'$t' not found (Debian: apt-get install clang-19 llvm-19; or run scripts/install-deps.sh kernel)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-delay-kernel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

compile() { # <gfx> <out>: prints how it compiled
  local gfx=$1 out=$2
  local flags=(-x hip "--offload-arch=$gfx" -nogpulib -nogpuinc --cuda-device-only --no-gpu-bundle-output -O3)
  if "$CLANG" "${flags[@]}" "$src" -o "$out" 2>"$tmp/cc.err"; then
    echo "linked code object"; return 0
  fi
  if grep -q '"lld"' "$tmp/cc.err"; then
    "$CLANG" "${flags[@]}" -S "$src" -o "$tmp/$gfx.s" 2>"$tmp/cc.err" || { cat "$tmp/cc.err" >&2; die "compile for $gfx failed"; }
    "$CLANG" --target=amdgcn-amd-amdhsa "-mcpu=$gfx" -c "$tmp/$gfx.s" -o "$out" 2>"$tmp/cc.err" \
      || { cat "$tmp/cc.err" >&2; die "assembling for $gfx failed"; }
    echo "relocatable object (no lld: -S + integrated assembler)"; return 0
  fi
  cat "$tmp/cc.err" >&2
  die "compile for $gfx failed"
}

# Reads `llvm-objdump -d` output; prints the timing loop of function $kernel, or an error line.
# objdump lines look like:
#   0000000000001900 <delay_kernel>:
#   	s_memtime s[10:11]            // 000000001994: C0900280 00000000
#   	s_cbranch_vccnz 65528         // 0000000019AC: BF87FFF8 <delay_kernel+0x90>
find_loop_awk='
function hex(s,   i, c, v) { v = 0; s = tolower(s); sub(/^0x/, "", s)
  for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)); if (c == 0) break; v = v * 16 + c - 1 }
  return v }
/^[0-9a-fA-F]+ <[^>]+>:$/ {
  name = $2; gsub(/[<>:]/, "", name); infn = (name == K); if (infn) { base = hex($1); seen = 1 }
  next }
infn && /\/\/ [0-9a-fA-F]+:/ {
  line = $0; sub(/^[ \t]+/, "", line)
  addr_s = line; sub(/.*\/\/ /, "", addr_s); sub(/:.*/, "", addr_s); addr = hex(addr_s)
  insn = line; sub(/[ \t]*\/\/.*/, "", insn)
  n++; A[n] = addr; I[n] = insn
  if (insn ~ /^s_cbranch_/ && match(line, /<[^>+]+\+0x[0-9a-fA-F]+>/)) {
    tgt = substr(line, RSTART + 1, RLENGTH - 2); tname = tgt; sub(/\+.*/, "", tname); sub(/.*\+/, "", tgt)
    if (tname == K) { T = base + hex(tgt); if (T <= addr) { nb++; BA[nb] = addr; BT[nb] = T } }
  }
}
END {
  if (!seen) { print "ERROR: function " K " not found in the disassembly"; exit }
  if (nb == 0) { print "ERROR: no backward s_cbranch_* (no loop) in " K; exit }
  for (b = 1; b <= nb; b++) {
    hit = 0
    for (i = 1; i <= n; i++) if (A[i] >= BT[b] && A[i] <= BA[b] && I[i] ~ /^s_mem(real)?time /) hit = 1
    if (hit) {
      printf "timing loop: 0x%x .. 0x%x (backward branch to 0x%x)\n", BT[b], BA[b], BT[b]
      for (i = 1; i <= n; i++) if (A[i] >= BT[b] && A[i] <= BA[b]) printf "  %6x: %s\n", A[i], I[i]
      found = 1; break
    }
  }
  if (!found) print "ERROR: " nb " backward branch(es) in " K " but none has s_memtime/s_memrealtime in its body"
}'

status=0
for gfx in gfx942 gfx90a; do
  obj="$tmp/delay-$gfx.o"
  how=$(compile "$gfx" "$obj")
  echo "== $gfx: $how"
  "$OBJDUMP" -d "$obj" > "$tmp/$gfx.dis" || die "$OBJDUMP -d failed for $gfx"
  result=$(awk -v K="$kernel" "$find_loop_awk" "$tmp/$gfx.dis")
  echo "$result"
  if grep -q '^ERROR' <<<"$result"; then
    echo "check-delay-kernel: FAIL ($gfx): ${result#ERROR: }" >&2; status=1; continue
  fi
  "$READELF" --notes "$obj" > "$tmp/$gfx.notes" || die "$READELF --notes failed for $gfx"
  grep -q "amdgcn-amd-amdhsa--$gfx" "$tmp/$gfx.notes" || { echo "check-delay-kernel: FAIL ($gfx): notes do not name target $gfx" >&2; status=1; }
  echo "register use (from the AMDGPU metadata note):"
  awk '/^  - / { if (name != "") printf "  %-14s sgpr=%s vgpr=%s agpr=%s spills(s/v)=%s/%s\n", name, sg, vg, ag, ss, vs; name = "" }
       /\.name:/ { name = $NF } /\.sgpr_count:/ { sg = $NF } /\.vgpr_count:/ { vg = $NF } /\.agpr_count:/ { ag = $NF }
       /\.sgpr_spill_count:/ { ss = $NF } /\.vgpr_spill_count:/ { vs = $NF }
       END { if (name != "") printf "  %-14s sgpr=%s vgpr=%s agpr=%s spills(s/v)=%s/%s\n", name, sg, vg, ag, ss, vs }' "$tmp/$gfx.notes"
done

if [ "$status" != 0 ]; then echo "check-delay-kernel: FAILED" >&2; exit 1; fi
echo "check-delay-kernel: OK (timing loop with s_memtime/s_memrealtime found for gfx942 and gfx90a)"
