#!/usr/bin/env bash
# Offline ISA check of the delay kernels (no GPU, no ROCm needed).
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
# Then, for each LP kernel (`delay_kernel`, the light one, and `delay_kernel_heavy`), from
# `llvm-objdump-19 -d` it looks for a backward s_cbranch_* (target address <= branch address)
# whose loop body [target, branch] contains s_memrealtime (wall_clock64, the constant-rate clock):
# the timing loop. A loop on s_memtime (the shader clock, which DVFS changes) does not count.
#
# For the heavy kernel it also checks, from the AMDGPU metadata note (`llvm-readelf-19 --notes`),
# that the state CWSR has to save is the whole of what one wave and one block can hold on these
# targets, and that nothing of it went to scratch:
#   .vgpr_count 512   the unified VGPR file per lane in wave64 at 1 wave per SIMD (256 ArchVGPRs +
#                     256 AccVGPRs; LLVM AMDGPUBaseInfo getTotalNumVGPRs = 512 for gfx90a/gfx94x)
#   .agpr_count 256   every AccVGPR (a0..a255)
#   .group_segment_fixed_size 65536   64 KiB of LDS per block (the gfx9 per-workgroup limit)
#   .max_flat_workgroup_size 256      what the host launches (4 waves: one per SIMD)
#   .vgpr_spill_count/.sgpr_spill_count/.private_segment_fixed_size 0
# and, from the disassembly, that every AccVGPR and at least HEAVY_VGPRS (read from the source)
# distinct VGPRs are used by its instructions, i.e. the registers hold data, not only a count.
# Any failed check exits non-zero with a message.
# Overrides: CLANG=..., OBJDUMP=..., READELF=..., PREEMPT_DELAY_KERNEL_SRC=... (e.g. to see it fail
# on a kernel that lost its loop, its registers or its LDS).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${PREEMPT_DELAY_KERNEL_SRC:-"$here/../gpu-device/kernels/delay.hip"}
kernels=(delay_kernel delay_kernel_heavy)
heavy=delay_kernel_heavy
# Expected heavy-kernel resources (see the header above for where each number comes from).
want_vgpr=512 want_agpr=256 want_lds=65536 want_threads=256
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

# Reads `llvm-objdump -d` output; prints the timing loop of function K, or an error line.
# objdump lines look like:
#   0000000000001900 <delay_kernel>:
#   	s_memrealtime s[10:11]        // 000000001994: C0940280 00000000
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
    for (i = 1; i <= n; i++) if (A[i] >= BT[b] && A[i] <= BA[b] && I[i] ~ /^s_memrealtime /) hit = 1
    if (hit) {
      printf "timing loop: 0x%x .. 0x%x (backward branch to 0x%x)\n", BT[b], BA[b], BT[b]
      for (i = 1; i <= n; i++) if (A[i] >= BT[b] && A[i] <= BA[b]) printf "  %6x: %s\n", A[i], I[i]
      found = 1; break
    }
  }
  if (!found) print "ERROR: " nb " backward branch(es) in " K " but none has s_memrealtime (the wall clock) in its body"
}'

# Reads `llvm-readelf --notes` output; prints one line per kernel: `name key=value ...` with the
# kernel-level keys only (4-space indent, or the `  - ` line that opens a kernel's map; the
# arguments' own keys are indented deeper).
kernel_meta_awk='
function flush() { if (name != "") print name line; name = ""; line = "" }
/^  - \./ { flush(); sub(/^  - /, "    ") }
/^    \.[a-z_]+:/ { k = $1; sub(/^\./, "", k); sub(/:$/, "", k); v = $2
  if (k == "name") name = v; else line = line " " k "=" v }
/^[a-z]/ { flush() }
END { flush() }'

# meta <gfx> <kernel> <key>: the value of a kernel-level metadata key (empty if absent).
meta() { awk -v K="$2" -v Q="$3" '$1 == K { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == Q) print kv[2] } }' "$tmp/$1.meta"; }

# Distinct registers of one file (a or v) that the function's instructions name, single or in
# ranges (v[4:5] counts v4 and v5).
distinct_regs() { # <disassembly of one function> <a|v>
  awk -v R="$2" '
    { line = $0; sub(/[ \t]*\/\/.*/, "", line)
      while (match(line, "(^|[^a-zA-Z0-9_])" R "(\\[[0-9]+:[0-9]+\\]|[0-9]+)")) {
        tok = substr(line, RSTART, RLENGTH); line = substr(line, RSTART + RLENGTH)
        sub("^[^" R "]*" R, "", tok)
        if (tok ~ /^\[/) { gsub(/[\[\]]/, "", tok); split(tok, r, ":"); for (j = r[1]; j <= r[2]; j++) seen[j] = 1 }
        else seen[tok + 0] = 1 } }
    END { n = 0; for (j in seen) n++; print n }' "$1"
}

# The disassembly of one function.
function_dis() { # <disassembly> <name>
  awk -v K="$2" '/^[0-9a-fA-F]+ <[^>]+>:$/ { n = $2; gsub(/[<>:]/, "", n); f = (n == K); next } f' "$1"
}

fail() { echo "check-delay-kernel: FAIL ($1): $2" >&2; status=1; }

heavy_vgprs=$(sed -n 's/^#define HEAVY_VGPRS \([0-9][0-9]*\).*/\1/p' "$src" | head -1)

status=0
for gfx in gfx942 gfx90a; do
  obj="$tmp/delay-$gfx.o"
  how=$(compile "$gfx" "$obj")
  echo "== $gfx: $how"
  "$OBJDUMP" -d "$obj" > "$tmp/$gfx.dis" || die "$OBJDUMP -d failed for $gfx"
  for k in "${kernels[@]}"; do
    result=$(awk -v K="$k" "$find_loop_awk" "$tmp/$gfx.dis")
    echo "-- $k: $result"
    if grep -q '^ERROR' <<<"$result"; then
      fail "$gfx" "${result#ERROR: }"
    fi
  done
  "$READELF" --notes "$obj" > "$tmp/$gfx.notes" || die "$READELF --notes failed for $gfx"
  grep -q "amdgcn-amd-amdhsa--$gfx" "$tmp/$gfx.notes" || fail "$gfx" "notes do not name target $gfx"
  awk "$kernel_meta_awk" "$tmp/$gfx.notes" > "$tmp/$gfx.meta"
  echo "register and LDS use (from the AMDGPU metadata note):"
  while read -r name _; do
    printf '  %-20s sgpr=%s vgpr=%s agpr=%s lds=%s spills(s/v)=%s/%s scratch=%s\n' "$name" \
      "$(meta "$gfx" "$name" sgpr_count)" "$(meta "$gfx" "$name" vgpr_count)" "$(meta "$gfx" "$name" agpr_count)" \
      "$(meta "$gfx" "$name" group_segment_fixed_size)" "$(meta "$gfx" "$name" sgpr_spill_count)" \
      "$(meta "$gfx" "$name" vgpr_spill_count)" "$(meta "$gfx" "$name" private_segment_fixed_size)"
  done < "$tmp/$gfx.meta"

  # The heavy kernel's state.
  if [ -z "$(meta "$gfx" "$heavy" vgpr_count)" ]; then
    fail "$gfx" "no metadata for $heavy (not compiled for $gfx?)"; continue
  fi
  expect() { # <key> <want> <why>
    local got; got=$(meta "$gfx" "$heavy" "$1")
    [ "$got" = "$2" ] || fail "$gfx" "$heavy .$1 = ${got:-absent}, want $2 ($3)"
  }
  expect vgpr_count "$want_vgpr" "all 512 unified VGPRs+AGPRs per lane"
  expect agpr_count "$want_agpr" "every AccVGPR"
  expect group_segment_fixed_size "$want_lds" "64 KiB of LDS per block"
  expect max_flat_workgroup_size "$want_threads" "the host launches 256 threads per block"
  expect vgpr_spill_count 0 "no register spilled to scratch"
  expect sgpr_spill_count 0 "no register spilled"
  expect private_segment_fixed_size 0 "no scratch"
  function_dis "$tmp/$gfx.dis" "$heavy" > "$tmp/$gfx.heavy.dis"
  na=$(distinct_regs "$tmp/$gfx.heavy.dis" a)
  nv=$(distinct_regs "$tmp/$gfx.heavy.dis" v)
  echo "$heavy instructions name $na distinct AccVGPRs and $nv distinct VGPRs (source: HEAVY_VGPRS=${heavy_vgprs:-?} values)"
  [ "$na" = "$want_agpr" ] || fail "$gfx" "$heavy names $na distinct AccVGPRs, want $want_agpr"
  if [ -z "$heavy_vgprs" ]; then
    fail "$gfx" "no '#define HEAVY_VGPRS <n>' in $src"
  elif [ "$nv" -lt "$heavy_vgprs" ]; then
    fail "$gfx" "$heavy names only $nv distinct VGPRs, fewer than its HEAVY_VGPRS=$heavy_vgprs live values"
  fi
done

if [ "$status" != 0 ]; then echo "check-delay-kernel: FAILED" >&2; exit 1; fi
echo "check-delay-kernel: OK (gfx942, gfx90a: both LP kernels time on s_memrealtime; $heavy holds $want_vgpr VGPRs ($want_agpr AGPRs) per lane and $want_lds bytes of LDS per block, no spills)"
