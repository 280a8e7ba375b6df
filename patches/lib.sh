# Shell functions shared by patches/check.sh and patches/dkms/check.sh (sourced, not run): the
# checks a patch series gets whatever tree it is for. Each returns non-zero with the reason on
# stderr; the caller decides how to fail.

# checkpatch_series CHECKPATCH_PL LABEL DIR PATCH...: checkpatch.pl --strict --no-tree on each
# patch, one "checkpatch LABEL<patch>: total: ..." line each; 1 unless all are 0/0/0.
checkpatch_series() {
  local checkpatch=$1 label=$2 dir=$3 bad=0 p out summary verdict
  shift 3
  for p in "$@"; do
    out=$(perl "$checkpatch" --strict --no-tree "$dir/$p" 2>&1 || true)
    summary=$(printf '%s\n' "$out" | grep -E '^total: ' || echo "total: (no summary)")
    verdict=$(printf '%s\n' "$out" | grep -E 'ready for submission|has style problems' || true)
    echo "checkpatch $label$p: $summary"
    [ -z "$verdict" ] || echo "  $verdict"
    if ! printf '%s\n' "$summary" | grep -qE '^total: 0 errors, 0 warnings, 0 checks, '; then
      printf '%s\n' "$out" | grep -E '^(ERROR|WARNING|CHECK)|^#|^\+' >&2 || true
      bad=1
    fi
  done
  return "$bad"
}

# read_series DIR LABEL: the patches DIR/series lists (comments and blank lines skipped) into
# PATCHES; 1 if it lists none, names a file that does not exist, or lists the cover letter (which
# does not apply). LABEL names the series in the messages (e.g. patches/series).
read_series() {
  local dir=$1 label=$2 p
  mapfile -t PATCHES < <(grep -v '^\s*\(#\|$\)' "$dir/series")
  [ "${#PATCHES[@]}" -gt 0 ] || { echo "$label lists no patch" >&2; return 1; }
  for p in "${PATCHES[@]}"; do
    [ -f "$dir/$p" ] || { echo "$label names $p, which does not exist" >&2; return 1; }
    case "$p" in
      0000-cover-letter*) echo "the cover letter must not be listed in $label (it does not apply)" >&2; return 1 ;;
    esac
  done
}

# apply_series TREE DIR PATCH...: applies each DIR/PATCH to TREE (patch -p1, each after a dry run),
# one "applies: PATCH" line each, noting hunks that needed an offset or fuzz. At the first patch that
# does not apply: patch's output on stderr, the patch's name in APPLY_FAILED, 1 (TREE then holds the
# patches before it).
apply_series() {
  local tree=$1 dir=$2 p out fuzz
  shift 2
  for p in "$@"; do
    if ! out=$(patch -p1 -d "$tree" --dry-run < "$dir/$p" 2>&1); then
      printf '%s\n' "$out" >&2
      APPLY_FAILED=$p
      return 1
    fi
    fuzz=$(printf '%s\n' "$out" | grep -E 'with fuzz|offset' || true)
    patch -s -p1 -d "$tree" < "$dir/$p" || { APPLY_FAILED=$p; return 1; }
    echo "applies: $p${fuzz:+ (note: $(echo "$fuzz" | wc -l) hunk(s) with offset/fuzz)}"
  done
}

# abi_proof REPO HEADER: kfd-sys (bindgen feature) and lv3 built against HEADER, a patched
# kfd_ioctl.h; kfd-sys's build script then sets cfg(kfd_has_preempt) and its compile-time asserts
# prove the hand-written ABI copy (kfd-sys/src/preempt.rs) equal to the header's. 1 if the build
# fails (an ABI mismatch) or the cfg is missing (the check did not run).
abi_proof() {
  local repo=$1 header=$2 cfgs
  (cd "$repo" && KFD_IOCTL_H=$header nice -n 10 cargo check -q -p lv3 -p kfd-sys --features kfd-sys/bindgen --target-dir target/patched-check) || {
    echo "kfd-sys/lv3 do not build against $header (ABI mismatch?)" >&2; return 1; }
  # The build script's cfgs (reported for fresh builds too).
  cfgs=$(cd "$repo" && KFD_IOCTL_H=$header cargo check -q -p lv3 -p kfd-sys --features kfd-sys/bindgen --target-dir target/patched-check --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "build-script-executed" and "kfd-sys" in m["package_id"]: print(" ".join(m["cfgs"]))')
  case " $cfgs " in
    *" kfd_has_preempt "*) ;;
    *) echo "kfd-sys did not set cfg(kfd_has_preempt) for $header: the ABI check did not run" >&2; return 1 ;;
  esac
}
