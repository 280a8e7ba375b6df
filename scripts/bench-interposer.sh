#!/usr/bin/env bash
# The interposer's benchmarks on the host device (host figures, never GPU figures):
#  1. HP request latency of an unmodified HIP program (examples/hip/two_priorities.c, built
#     against Debian's HIP headers, run on the stand-in runtime): alone (no LP work), with a
#     saturating LP stream and no interposer, and under the interposer (LD_PRELOAD); the three
#     alternated, ROUNDS times, each a median over its requests' P50 and P99 with the range.
#     Then the same with PREEMPT_STANDIN_CUS=exclusive (kernels take the device one at a time, as
#     delay kernels that fill a GPU's CUs: a request waits for the running LP kernel).
#  2. Two unmodified processes: B's HP requests alone, beside A (a low-priority job: LP delay
#     kernels) without the interposer, and with both under the interposer and the scheduler
#     daemon (preempt-sched on a private socket); alternated the same way.
#  3. The interposer's own CPU per intercepted launch on a stream with nothing to schedule
#     (hip-interpose/examples/hook_cost.rs), and a launch on an Lv1 stream, with the stand-in
#     preloaded for the interposer's events.
#
#   scripts/bench-interposer.sh [ROUNDS]     (default 3; about 30 s a round)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
case "$rounds" in ''|*[!0-9]*|0) echo "bench-interposer: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
cargo build -q --release -p hip-interpose -p hip-standin -p host-device -p preempt-sched
rel=$PWD/target/release
work=$(mktemp -d)
daemon=""
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
for n in libamdhip64.so libamdhip64.so.5 libamdhip64.so.6 libamdhip64.so.7; do ln -s "$rel/libhip_standin.so" "$work/$n"; done
cc -O2 -D__HIP_PLATFORM_AMD__ examples/hip/two_priorities.c -lamdhip64 -o "$work/two_priorities"
echo "stand-in code object" > "$work/co"
args=(--lp 100 --lp-ms 20 --hp 200 --hp-ms 1 --gap-ms 5)
run() { # $1: alone|without|with (one process), -x: kernels fill the device
  local extra=() pre="" cus=shared
  case "$1" in *-x) cus=exclusive ;; esac
  case "$1" in alone | alone-x) extra=(--no-lp) ;; with | with-x) pre=$rel/libpreempt_hip.so ;; esac
  PREEMPT_STANDIN_CUS=$cus LD_PRELOAD=$pre PREEMPT_SCHEDULER=none LD_LIBRARY_PATH=$work PREEMPT_HOST_WORKER=$rel/preempt-host-worker \
    "$work/two_priorities" "$work/co" "${args[@]}" "${extra[@]}" 2>/dev/null
}
declare -A p50 p99
add() { # $1: mode, $2: the program's line
  case "$2" in *lp_bad=0*) ;; *) echo "bench-interposer: $1 run failed: $2" >&2; exit 1 ;; esac
  p50[$1]+="$(sed -n 's/.*p50_us=\([0-9]*\).*/\1/p' <<<"$2") "
  p99[$1]+="$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$2") "
}
# Two processes: A is the low-priority job, B makes the requests; "daemon" runs both under the
# interposer and the scheduler daemon.
sock=$work/sched.sock
"$rel/preempt-sched" --socket "$sock" >"$work/daemon.log" 2>&1 & daemon=$!
for _ in $(seq 100); do grep -q "listening on" "$work/daemon.log" 2>/dev/null && break; sleep 0.05; done
two() { # $1: two-alone|two-without|two-daemon
  local pre="" sched=none
  [ "$1" = two-daemon ] && { pre=$rel/libpreempt_hip.so; sched=unix:$sock; }
  local e=(env LD_PRELOAD="$pre" PREEMPT_SCHEDULER="$sched" LD_LIBRARY_PATH="$work" PREEMPT_HOST_WORKER="$rel/preempt-host-worker")
  local a=""
  if [ "$1" != two-alone ]; then
    "${e[@]}" "$work/two_priorities" "$work/co" --lp 200 --lp-ms 20 --hp 1 >"$work/a.out" 2>/dev/null & a=$!
    sleep 0.3
  fi
  "${e[@]}" "$work/two_priorities" "$work/co" --no-lp --hp 200 --hp-ms 1 --gap-ms 5 2>/dev/null
  if [ -n "$a" ]; then
    wait "$a" || { echo "bench-interposer: $1: A failed: $(cat "$work/a.out")" >&2; exit 1; }
  fi
}
for r in $(seq "$rounds"); do
  for mode in alone without with alone-x without-x with-x; do add "$mode" "$(run "$mode")"; done
  for mode in two-alone two-without two-daemon; do add "$mode" "$(two "$mode")"; done
  echo "round $r of $rounds done" >&2
done
stat() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR]=$1} END {printf "%d (%d-%d)", v[int((NR+1)/2)], v[1], v[NR]}'; }
med() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
table() { # the modes, the first being the one alone
  local a; a=$(med "${p99[$1]}")
  echo "| run | HP P50 us, median (range) | HP P99 us, median (range) | P99 / alone |"
  echo "| --- | --- | --- | --- |"
  for mode in "$@"; do
    m=$(med "${p99[$mode]}")
    printf '| %s | %s | %s | %s |\n' "$mode" "$(stat "${p50[$mode]}")" "$(stat "${p99[$mode]}")" "$(awk -v m="$m" -v a="$a" 'BEGIN {printf "%.2f", m / a}')"
  done
}
echo "HP requests of 1 ms (200 per run, $rounds alternated rounds; host figures, $(nproc) CPUs, rev $(git rev-parse --short HEAD))."
echo
echo "One process, LP commands of 20 ms on its low stream:"
echo
table alone without with
echo
echo "One process, kernels filling the device (PREEMPT_STANDIN_CUS=exclusive):"
echo
table alone-x without-x with-x
echo
echo "Two processes, B's requests beside A's LP commands of 20 ms (with: both under the interposer and the daemon):"
echo
table two-alone two-without two-daemon
echo
cargo build -q --release -p hip-interpose --example hook_cost
PREEMPT_HOST_WORKER=$rel/preempt-host-worker LD_PRELOAD=$rel/libhip_standin.so "$rel/examples/hook_cost"
