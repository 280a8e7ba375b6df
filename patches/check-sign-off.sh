#!/usr/bin/env bash
# The sign-off rules of a committed patch series (patches/check.sh and patches/dkms/check.sh):
# every patch and the cover letter carry the template identity in From:, each patch exactly one
# Signed-off-by, the template (a Signed-off-by is a person's DCO statement, added by
# patches/sign-off.sh when someone sends the series), and a copy signed by sign-off.sh is
# checkpatch-clean too.
#
#   patches/check-sign-off.sh SERIES_DIR CHECKPATCH_PL
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
dir=${1:?SERIES_DIR} checkpatch=${2:?CHECKPATCH_PL}
TEMPLATE='TEMPLATE Replace Before Sending <replace-before-sending@example.invalid>'
die() { echo "check-sign-off: FAIL: $*" >&2; exit 1; }
mapfile -t PATCHES < <(grep -v '^\s*\(#\|$\)' "$dir/series")
for p in 0000-cover-letter.patch "${PATCHES[@]}"; do
  from=$(sed -n 's/^From: //p' "$dir/$p" | head -1)
  [ "$from" = "$TEMPLATE" ] ||
    die "$p: From: is \"$from\", not the template identity (sign copies with patches/sign-off.sh; never commit them)"
  [ "$p" = 0000-cover-letter.patch ] && continue
  sobs=$(grep -c '^Signed-off-by: ' "$dir/$p" || true)
  [ "$sobs" = 1 ] && grep -qxF "Signed-off-by: $TEMPLATE" "$dir/$p" ||
    die "$p: needs exactly one Signed-off-by, the template identity (has $sobs)"
done
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
bash "$HERE/sign-off.sh" "Check Script <check@kernel.test>" "$out" "$dir" >/dev/null
for p in "${PATCHES[@]}"; do
  grep -qxF "Signed-off-by: Check Script <check@kernel.test>" "$out/$p" || die "sign-off.sh did not sign $p"
  perl "$checkpatch" --strict --no-tree "$out/$p" 2>&1 | grep -qE '^total: 0 errors, 0 warnings, 0 checks, ' ||
    die "the copy of $p signed by patches/sign-off.sh is not checkpatch-clean"
done
echo "sign-off: template identity in all ${#PATCHES[@]} patches of $dir and its cover letter; a copy signed by patches/sign-off.sh is checkpatch-clean"
