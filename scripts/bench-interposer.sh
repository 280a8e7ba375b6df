#!/usr/bin/env bash
# The interposer's benchmarks on the host device (host figures, never GPU figures):
#  1. HP request latency of an unmodified HIP program (examples/hip/two_priorities.c, built
#     against Debian's HIP headers, run on the stand-in runtime): alone (no LP work), with a
#     saturating LP stream and no interposer, and under the interposer (LD_PRELOAD); the three
#     alternated, ROUNDS times, each a median over its requests' P50 and P99 with the range.
#  2. The interposer's own CPU per intercepted launch on a stream with nothing to schedule
#     (hip-interpose/examples/hook_cost.rs).
#
#   scripts/bench-interposer.sh [ROUNDS]     (default 3; about 15 s a round)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
case "$rounds" in ''|*[!0-9]*|0) echo "bench-interposer: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
cargo build -q --release -p hip-interpose -p hip-standin -p host-device
rel=$PWD/target/release
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for n in libamdhip64.so libamdhip64.so.5 libamdhip64.so.6 libamdhip64.so.7; do ln -s "$rel/libhip_standin.so" "$work/$n"; done
cc -O2 -D__HIP_PLATFORM_AMD__ examples/hip/two_priorities.c -lamdhip64 -o "$work/two_priorities"
echo "stand-in code object" > "$work/co"
args=(--lp 100 --lp-ms 20 --hp 200 --hp-ms 1 --gap-ms 5)
run() { # $1: alone|without|with
  local extra=() pre=""
  [ "$1" = alone ] && extra=(--no-lp)
  [ "$1" = with ] && pre=$rel/libpreempt_hip.so
  LD_PRELOAD=$pre LD_LIBRARY_PATH=$work PREEMPT_HOST_WORKER=$rel/preempt-host-worker \
    "$work/two_priorities" "$work/co" "${args[@]}" "${extra[@]}" 2>/dev/null
}
declare -A p50 p99
for r in $(seq "$rounds"); do
  for mode in alone without with; do
    line=$(run "$mode")
    case "$line" in *lp_bad=0*) ;; *) echo "bench-interposer: $mode run failed: $line" >&2; exit 1 ;; esac
    p50[$mode]+="$(sed -n 's/.*p50_us=\([0-9]*\).*/\1/p' <<<"$line") "
    p99[$mode]+="$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$line") "
  done
  echo "round $r of $rounds done" >&2
done
stat() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR]=$1} END {printf "%d (%d-%d)", v[int((NR+1)/2)], v[1], v[NR]}'; }
med() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
a=$(med "${p99[alone]}")
echo "HP requests of 1 ms against LP commands of 20 ms ($rounds alternated rounds x 200 requests; host figures, $(nproc) CPUs, rev $(git rev-parse --short HEAD)):"
echo
echo "| run | HP P50 us, median (range) | HP P99 us, median (range) | P99 / alone |"
echo "| --- | --- | --- | --- |"
for mode in alone without with; do
  m=$(med "${p99[$mode]}")
  printf '| %s | %s | %s | %s |\n' "$mode" "$(stat "${p50[$mode]}")" "$(stat "${p99[$mode]}")" "$(awk -v m="$m" -v a="$a" 'BEGIN {printf "%.2f", m / a}')"
done
echo
cargo run -q --release -p hip-interpose --example hook_cost
