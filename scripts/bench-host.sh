#!/usr/bin/env bash
# Host-device benchmark: the figures in README.md's "Benchmarks" section, regenerated.
#
#   scripts/bench-host.sh [--samples N]      (default 3000: ~30 tail samples behind each P99; ~1 minute)
#
# Runs preempt-lat on the host device (CPU worker processes; Lv3 = SIGSTOP/SIGCONT):
#   Lv3 at T = 0.1, 0.5, 1, 2 ms; Lv1 at T = 0.5 ms (threshold 8, batch 4); the launcher's CPU
#   cost per command at T -> 0. Raw JSON goes to target/bench-host/, and the table between the
#   bench-host markers in README.md is rewritten from it. These are HOST figures, never GPU figures.
set -euo pipefail
cd "$(dirname "$0")/.."
samples=3000
[ "${1:-}" = --samples ] && samples=$2
out=target/bench-host; mkdir -p "$out"
cargo build --release --locked -q -p microbench --bin preempt-lat
PL=target/release/preempt-lat
for t in 0.1 0.5 1 2; do
  "$PL" --device host --level 3 --t-ms "$t" --samples "$samples" --warmup 20 --format json --quiet --out "$out/lv3-$t.json"
done
"$PL" --device host --level 1 --t-ms 0.5 --threshold 8 --batch 4 --samples "$samples" --warmup 20 --format json --quiet --out "$out/lv1-0.5.json"
"$PL" launcher-cost --device host --commands 20000 > "$out/launcher-cost.json"
python3 - "$out" README.md <<'PY'
import json, sys, os, platform
out, readme = sys.argv[1], sys.argv[2]
ld = lambda n: json.load(open(os.path.join(out, n)))
us = lambda ns: f"{ns/1000:.1f}"
rows, p99s = [], []
for t in ("0.1", "0.5", "1", "2"):
    r = ld(f"lv3-{t}.json"); s = r["latency_ns"]["suspend"]; h = r["latency_ns"]["hp_start"]
    if t != "0.1" or True: p99s.append(s["p99"])
    rows.append(f"| Lv3 (SIGSTOP) | {t} | {us(s['p50'])} | {us(s['p99'])} | {us(s['max'])} | {us(h['p99'])} | {s['count']} | {'OK' if r['correctness']['ok'] else 'FAILED'} |")
r1 = ld("lv1-0.5.json"); s = r1["latency_ns"]["suspend"]; h = r1["latency_ns"]["hp_start"]
rows.append(f"| Lv1 (threshold 8) | 0.5 | {us(s['p50'])} | {us(s['p99'])} | {us(s['max'])} | {us(h['p99'])} | {s['count']} | {'OK' if r1['correctness']['ok'] else 'FAILED'} |")
lc = ld("launcher-cost.json"); env = r1["env"]
ratio = max(p99s) / min(p99s)
lv1_ratio = s["p99"] / (8 * 0.5e6)
table = "\n".join([
    f"Measured by `scripts/bench-host.sh` on the **host device** ({env['device_detail']}; kernel {env['kernel']}; rev {env['git_revision']}). "
    f"Latencies in microseconds; each P99 of {s['count']} samples rests on ~{s['count'] // 100} tail samples and moves by tens of percent between runs on this 2-core VM.",
    "",
    "| level | T (ms) | suspend p50 | suspend p99 | suspend max | HP start p99 | samples | correctness |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    *rows,
    "",
    f"- Lv3 (host) P99 suspend, max/min over T in {{0.1, 0.5, 1, 2}} ms: **{ratio:.2f}** (target <= 1.5); worst P99 {us(max(p99s))} us (target <= 100 us).",
    f"- Lv1 P99 suspend at T = 0.5 ms, threshold 8: **{lv1_ratio:.2f} x (threshold x T)** (target 0.5-1.5).",
    f"- Launcher CPU per command at T -> 0 (target <= 5 us): **{lc['launcher_cpu_ns_per_cmd_null_device']/1000:.1f} us** for the launcher alone "
    f"(over a queue that completes at launch); on the host device {lc['launcher_cpu_ns_per_cmd']/1000:.1f} us through the launcher vs. "
    f"{lc['direct_cpu_ns_per_cmd']/1000:.1f} us launched directly (the difference, {lc['launcher_extra_cpu_ns_per_cmd']/1000:.1f} us, also holds the "
    f"host device's extra pipe wake-ups at an in-flight depth of 8 instead of 256).",
])
text = open(readme).read()
b, e = "<!-- bench-host:begin -->", "<!-- bench-host:end -->"
i, j = text.index(b) + len(b), text.index(e)
open(readme, "w").write(text[:i] + "\n" + table + "\n" + text[j:])
print(table)
PY
