#!/usr/bin/env bash
# Puts a real identity on a copy of a patch series before it is sent.
#
#   patches/sign-off.sh "Full Name <address>" OUTDIR [SERIES_DIR]
#
# The committed series (patches/ and patches/dkms/) carries a TEMPLATE identity in its From: and
# Signed-off-by: lines, on purpose: a Signed-off-by is a person's Developer's Certificate of Origin
# statement (Documentation/process/submitting-patches.rst), which a repository cannot make for
# anyone. Whoever sends the series reads the DCO, then runs this script with their own identity; it
# writes signed copies of the cover letter and every patch of SERIES_DIR (default: patches/) to
# OUTDIR and leaves the committed files alone. patches/check.sh checks that the committed series
# carries the template and nothing else.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TEMPLATE='TEMPLATE Replace Before Sending <replace-before-sending@example.invalid>'
die() { echo "sign-off: $*" >&2; exit 1; }
[ $# -ge 2 ] || die 'usage: patches/sign-off.sh "Full Name <address>" OUTDIR [SERIES_DIR]'
who=$1 out=$2 dir=${3:-$HERE}
[[ "$who" =~ ^[^\<\>]+\ \<[^@\<\>\ ]+@[^@\<\>\ ]+\>$ ]] || die "\"$who\" is not of the form \"Full Name <address>\""
case "$who" in
  *example.invalid*|*example.com*|*TEMPLATE*) die "\"$who\" is a placeholder: sign with your own name and address" ;;
esac
[ -d "$dir" ] || die "no series directory $dir"
mapfile -t files < <(cd "$dir" && ls [0-9][0-9][0-9][0-9]-*.patch 2>/dev/null)
[ "${#files[@]}" -gt 0 ] || die "no NNNN-*.patch in $dir"
mkdir -p "$out"
for f in "${files[@]}"; do
  grep -qF "From: $TEMPLATE" "$dir/$f" || die "$f does not carry the template identity: refusing to guess what to replace"
  # Only the header lines: the identity is replaced in From: and the Signed-off-by trailer.
  awk -v t="$TEMPLATE" -v w="$who" '
    ($0 == "From: " t) || ($0 == "Signed-off-by: " t) { sub(/: .*/, ": " w) }
    { print }' "$dir/$f" > "$out/$f"
done
echo "sign-off: ${#files[@]} files of $dir signed off as $who in $out"
echo "sign-off: check them before sending: scripts/checkpatch.pl --strict $out/*.patch"
