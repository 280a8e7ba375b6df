#!/usr/bin/env bash
# Host-device benchmark: the host figures of docs/benchmarks.md, regenerated.
#
#   scripts/bench-host.sh [--samples N] [--runs R]
#       (defaults 3000 and 3: ~30 tail samples behind each P99, each point run 3 times; ~5 minutes)
#
# Runs preempt-lat on the host device (CPU worker processes; Lv3 = SIGSTOP/SIGCONT; Lv2 = the
# workers finish their command and take no new one), each point R times: Lv3 at T = 0.1, 0.5, 1,
# 2 ms; Lv2 at T = 0.1, 0.5, 2 ms; Lv1 at T = 0.5 ms (threshold 8, batch 4); the launcher's
# CPU cost per command at T -> 0; `priority` with its defaults (every mode, 3 s each). Prints and
# writes into docs/benchmarks.md (between the bench-host markers) the median over the R runs
# with the spread across them (min-max). Raw JSON goes to target/bench-host/. These are HOST
# figures, never GPU figures.
set -euo pipefail
cd "$(dirname "$0")/.."
samples=3000
runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --samples) samples=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--samples N] [--runs R]" >&2; exit 2 ;;
  esac
done
out=target/bench-host; rm -rf "$out"; mkdir -p "$out"
# preempt-lat, and beside it the host device's worker (host-device's preempt-host-worker).
cargo build --release --locked -q -p preempt-lat -p host-device
PL=target/release/preempt-lat
cut -d' ' -f1 /proc/loadavg > "$out/loadavg-start"
for r in $(seq 1 "$runs"); do
  # Runs interleave points, so slow phases of a shared machine spread over all of them.
  for t in 0.1 0.5 1 2; do
    "$PL" --device host --level 3 --t-ms "$t" --samples "$samples" --warmup 20 --seed "$r" --format json --quiet --out "$out/lv3-$t-run$r.json"
  done
  for t in 0.1 0.5 2; do
    "$PL" --device host --level 2 --t-ms "$t" --samples "$samples" --warmup 20 --seed "$r" --format json --quiet --out "$out/lv2-$t-run$r.json"
  done
  "$PL" --device host --level 1 --t-ms 0.5 --threshold 8 --batch 4 --samples "$samples" --warmup 20 --seed "$r" --format json --quiet --out "$out/lv1-0.5-run$r.json"
  "$PL" launcher-cost --device host --commands 20000 --runs 1 --format json > "$out/launcher-cost-run$r.json"
  "$PL" priority --device host --seed "$r" --format json --quiet --out-dir "$out/priority-run$r" > /dev/null
done
cut -d' ' -f1 /proc/loadavg > "$out/loadavg-end"
python3 - "$out" docs/benchmarks.md "$runs" "$samples" <<'PY'
import json, sys, os, statistics
out, page, runs, samples = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
load = [open(os.path.join(out, f)).read().strip() for f in ("loadavg-start", "loadavg-end")]
ld = lambda n: json.load(open(os.path.join(out, n)))
us = lambda ns: f"{ns/1000:.1f}"
med = statistics.median
def spread(vals, f=us):
    return f"{f(med(vals))} [{f(min(vals))}-{f(max(vals))}]"
def point(name):
    rs = [ld(f"{name}-run{r}.json") for r in range(1, runs + 1)]
    s = [r["latency_ns"]["suspend"] for r in rs]; h = [r["latency_ns"]["hp_start"] for r in rs]
    return rs, s, h
rows, p99_meds, p99_all = [], [], []
for t in ("0.1", "0.5", "1", "2"):
    rs, s, h = point(f"lv3-{t}")
    p99 = [x["p99"] for x in s]; p99_meds.append(med(p99)); p99_all += p99
    ok = all(r["correctness"]["ok"] for r in rs)
    rows.append(f"| Lv3 (SIGSTOP) | {t} | {us(med([x['p50'] for x in s]))} | {spread(p99)} | {us(med([x['max'] for x in s]))} | {spread([x['p99'] for x in h])} | {runs} x {s[0]['count']} | {'OK' if ok else 'FAILED'} |")
lv2_ratio = {}
for t in ("0.1", "0.5", "2"):
    rs, s, h = point(f"lv2-{t}")
    p99 = [x["p99"] for x in s]
    lv2_ratio[t] = [p / (float(t) * 1e6) for p in p99]
    ok = all(r["correctness"]["ok"] for r in rs)
    rows.append(f"| Lv2 (hold) | {t} | {us(med([x['p50'] for x in s]))} | {spread(p99)} | {us(med([x['max'] for x in s]))} | {spread([x['p99'] for x in h])} | {runs} x {s[0]['count']} | {'OK' if ok else 'FAILED'} |")
rs, s, h = point("lv1-0.5")
lv1_p99 = [x["p99"] for x in s]
rows.append(f"| Lv1 (threshold 8) | 0.5 | {us(med([x['p50'] for x in s]))} | {spread(lv1_p99)} | {us(med([x['max'] for x in s]))} | {spread([x['p99'] for x in h])} | {runs} x {s[0]['count']} | {'OK' if all(r['correctness']['ok'] for r in rs) else 'FAILED'} |")
env = rs[0]["env"]
lcs = [ld(f"launcher-cost-run{r}.json") for r in range(1, runs + 1)]
lc = lambda k: spread([x[k] for x in lcs])
ratio = max(p99_meds) / min(p99_meds)
lv1_ratio = [p / (8 * 0.5e6) for p in lv1_p99]
prios = [ld(f"priority-run{r}/priority.json") for r in range(1, runs + 1)]
pp = prios[0]["params"]
prow = []
for i, m in enumerate(prios[0]["modes"]):
    ms = [p["modes"][i] for p in prios]
    hp = [x["hp_latency_ns"]["p99"] for x in ms if x["hp_latency_ns"]]
    ratio_hp = [x["hp_p99_vs_standalone"] for x in ms if x["hp_p99_vs_standalone"] is not None]
    lp = [x["lp_throughput_vs_standalone"] for x in ms if x["lp_throughput_vs_standalone"] is not None]
    f2 = lambda v: f"{v:.2f}"
    ok = [x["correctness"]["ok"] for x in ms if x["correctness"]]
    prow.append(f"| {m['mode']} | {spread(hp, lambda v: f'{v/1e6:.2f}') if hp else '-'} | {spread(ratio_hp, f2) if ratio_hp and m['mode'] != 'standalone-hp' else '-'} | {spread(lp, f2) if lp and m['mode'] != 'standalone-lp' else '-'} | {med([x['preemptions'] for x in ms]):.0f} | {('OK' if all(ok) else 'FAILED') if ok else '-'} |")
table = "\n".join([
    f"Measured by `scripts/bench-host.sh` (`--samples {samples} --runs {runs}`) on the **host device** ({env['device_detail']}; kernel {env['kernel']}; rev {env['git_revision']}). "
    f"Each point ran {runs} times (seeds 1-{runs}, runs interleaved); cells show the median over the runs and, in brackets, the spread across them (min-max). "
    f"Latencies in microseconds; each P99 of {s[0]['count']} samples rests on ~{s[0]['count'] // 100} tail samples. "
    f"The machine's 1-minute load average was {load[0]} before and {load[1]} after the runs ({env['cores']} cores): "
    f"other work sharing the CPUs with the workers shows up in the tails and in the spread.",
    "",
    "| level | T (ms) | suspend p50 | suspend p99 [min-max] | suspend max | HP start p99 [min-max] | samples | correctness |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    *rows,
    "",
    f"- Spread: across the {runs} runs, each point's suspend P99 moved by up to **{max(max(p99_all[i:i+runs]) / min(p99_all[i:i+runs]) for i in range(0, len(p99_all), runs)):.2f}x** (max/min) for Lv3 and **{max(lv1_p99) / min(lv1_p99):.2f}x** for Lv1.",
    f"- Lv3 (host) median P99 suspend, max/min over T in {{0.1, 0.5, 1, 2}} ms: **{ratio:.2f}** (target <= 1.5); worst median P99 {us(max(p99_meds))} us (target <= 100 us).",
    "- Lv2 (host) P99 suspend / T (the rest of the running command, at most T; target 0.5-1.5): "
    + ", ".join(f"**{med(v):.2f}** [{min(v):.2f}-{max(v):.2f}] at T = {t} ms" for t, v in lv2_ratio.items()) + ".",
    f"- Lv1 P99 suspend at T = 0.5 ms, threshold 8: **{med(lv1_ratio):.2f} x (threshold x T)** [{min(lv1_ratio):.2f}-{max(lv1_ratio):.2f}] (target 0.5-1.5).",
    f"- Launcher CPU per command at T -> 0 in us (target <= 5 us): **{lc('launcher_cpu_ns_per_cmd_null_device')}** for the launcher alone "
    f"(over a queue that completes at launch); on the host device {lc('launcher_cpu_ns_per_cmd')} through the launcher vs. "
    f"{lc('direct_cpu_ns_per_cmd')} launched directly (the difference also holds the "
    f"host device's extra pipe wake-ups at an in-flight depth of 8 instead of 256).",
    "",
    f"`preempt-lat priority --device host` (defaults: HP {pp['hp_rate']:g}/s {pp['arrival']}, {pp['hp_cmds']} x {pp['hp_t_ms']:g} ms per request; LP T = {pp['t_ms']:g} ms, "
    f"{pp['workers']} LP workers on {env['cores']} cores; {pp['duration_s']:g} s per mode), median [min-max] over the {runs} runs:",
    "",
    "| mode | HP p99 (ms) | HP p99 / standalone-hp | LP throughput / standalone-lp | preemptions | LP correctness |",
    "| --- | --- | --- | --- | --- | --- |",
    *prow,
])
text = open(page).read()
b, e = "<!-- bench-host:begin -->", "<!-- bench-host:end -->"
i, j = text.index(b) + len(b), text.index(e)
open(page, "w").write(text[:i] + "\n" + table + "\n" + text[j:])
print(table)
PY
