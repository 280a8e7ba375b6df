#!/usr/bin/env python3
"""High- and low-priority request streams in one process, with and without the
highest-priority-first helper, at Lv1, Lv2 and Lv3: the shape of XSched's Example 5 experiment,
with delay kernels instead of a model (nothing to download).

A low-priority (LP) stream is kept busy with delay commands of T_lp (a training-like backlog);
high-priority (HP) requests arrive at random (uniform gaps in [gap/2, 3*gap/2]) and each runs one
delay command of T_hp on the HP stream. The figure is each HP request's latency, from its arrival
to the completion of its work. Up to four configurations, each with a fresh session:

  no helper    the LP stream runs undisturbed next to the HP requests
  helper Lv1   every HP request is a `high_priority` block: the LP launcher stops and drains
  helper Lv2   every HP request is a `high_priority` block: the LP stream's running commands
               finish and no new one starts (host device only; on a GPU the row says why it is
               skipped: no per-queue Lv2 on gfx942 under HWS,
               docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws)
  helper Lv3   every HP request is a `high_priority` block: the LP stream is preempted (CWSR on a
               GPU, SIGSTOP of its worker processes on the host device)

--levels picks the helper configurations (default lv1,lv2,lv3; "no helper" always runs, it is the
reference):

    python examples/hpf_requests.py                      # auto: hip:0 if it can run, else host
    python examples/hpf_requests.py --device hip:0 --requests 500
    python examples/hpf_requests.py --device host --levels lv2,lv3

On the host device the LP stream gets one worker process per core, so that, like LP kernels
filling every CU of a GPU, it competes with the HP worker for the processors; its figures are
host figures (process scheduling), never GPU figures. Needs the preempt_kfd package
(scripts/check-python.sh builds it into target/py-venv).
"""

import argparse
import os
import random
import sys
import time

import preempt_kfd as pk

MS = 1_000_000
# Configuration -> the LP stream's level ("no helper": the session's own choice).
CONFIGS = {"no helper": "auto", "helper Lv1": "lv1", "helper Lv2": "lv2", "helper Lv3": "lv3"}
HELPER_LEVELS = ("lv1", "lv2", "lv3")


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def run(args, config):
    """One configuration; returns its row."""
    level = CONFIGS[config]
    workers = os.cpu_count() or 1
    with pk.Session(args.device, host_workers=workers, lv1_threshold=args.threshold,
                    lv1_batch=min(args.batch, args.threshold)) as s:
        if level == "lv3" and not s.has_lv3:
            return {"config": config, "skipped": f"no Lv3 here: {s.mechanism['why']}"}
        try:
            lp = s.low_priority_stream(level)
        except pk.Unavailable as e:  # Lv2 on a GPU: the library says why, in one line
            return {"config": config, "skipped": str(e)}
        hp = s.high_priority_stream()
        hpf = s.helper()
        use_helper = config != "no helper"
        if use_helper:
            hpf.register(lp)
        hp.submit_delay(args.hp_ms * MS)  # warm-up (GPU: calibration happens at the first delay)
        hp.synchronize()
        rng = random.Random(args.seed)
        # The LP backlog: enough commands to outlast the HP requests.
        duration_ms = args.requests * args.gap_ms + 100
        n_lp = int(duration_ms / args.lp_ms) + 2 * args.threshold
        for _ in range(n_lp):
            lp.submit_delay(args.lp_ms * MS)
        time.sleep(2 * args.lp_ms / 1e3)  # the LP stream is running
        latencies = []
        next_arrival = time.perf_counter_ns()
        start = next_arrival
        for _ in range(args.requests):
            next_arrival += int(rng.uniform(0.5, 1.5) * args.gap_ms * MS)
            while time.perf_counter_ns() < next_arrival:
                time.sleep(max(0.0, (next_arrival - time.perf_counter_ns()) / 1e9 - 0.0002))
            if use_helper:
                with hpf.high_priority(sync=hp):
                    hp.submit_delay(args.hp_ms * MS)
            else:
                hp.submit_delay(args.hp_ms * MS)
                hp.synchronize()
            latencies.append((time.perf_counter_ns() - next_arrival) / MS)
        elapsed_s = (time.perf_counter_ns() - start) / 1e9
        done_during = lp.check()["completed"]
        lp.synchronize()
        check = lp.check()
        latencies.sort()
        return {
            "config": config,
            "mechanism": {"no helper": "-", "helper Lv1": "lv1-drain", "helper Lv2": "lv2-hold"}.get(
                config, s.mechanism["name"]),
            "p50": percentile(latencies, 50),
            "p90": percentile(latencies, 90),
            "p99": percentile(latencies, 99),
            "max": latencies[-1],
            "n": len(latencies),
            "lp_per_s": done_during / elapsed_s,
            "lp_ok": check["ok"] and check["exactly_once"] == n_lp,
            "device": s.device,
        }


def helper_levels(text):
    """--levels: a comma-separated list of lv1, lv2, lv3, each once (argparse makes a refusal one
    line and exit status 2)."""
    levels = [w.strip() for w in text.split(",")]
    bad = [w for w in levels if w not in HELPER_LEVELS]
    if bad or not levels or len(set(levels)) != len(levels):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give lv1, lv2 and/or lv3, comma-separated, each once (e.g. lv1,lv3)")
    return levels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", help="auto, host or hip:N (default auto)")
    ap.add_argument("--requests", type=int, default=100, help="HP requests per configuration (100)")
    ap.add_argument("--gap-ms", type=float, default=20.0, help="mean gap between HP requests (20 ms)")
    ap.add_argument("--hp-ms", type=float, default=0.5, help="work of one HP request (0.5 ms)")
    ap.add_argument("--lp-ms", type=float, default=1.0, help="T of one LP delay command (1 ms)")
    ap.add_argument("--threshold", type=int, default=4, help="Lv1 launcher: commands in flight (4)")
    ap.add_argument("--batch", type=int, default=2, help="Lv1 launcher: a sync point every N commands (2)")
    ap.add_argument("--levels", type=helper_levels, default=list(HELPER_LEVELS),
                    help="helper configurations to run, from lv1, lv2 (host device only), lv3 (default all three; "
                         "'no helper' always runs)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    configs = ["no helper"] + [c for c, lvl in CONFIGS.items() if lvl in args.levels]
    rows = [run(args, c) for c in configs]
    device = next((r["device"] for r in rows if "device" in r), args.device)
    kind = "host device: CPU worker processes; host figures, not GPU figures" if device == "host" else "GPU"
    print(f"HP request latency (ms), {args.requests} requests every ~{args.gap_ms:g} ms, HP work {args.hp_ms:g} ms, "
          f"LP commands of {args.lp_ms:g} ms; device {device} ({kind})")
    print()
    print("| configuration | mechanism | HP p50 | HP p90 | HP p99 | HP max | requests | LP cmds/s | LP exactly once |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ok = True
    for r in rows:
        if "skipped" in r:
            print(f"| {r['config']} | - | skipped: {r['skipped']} | | | | | | |")
            continue
        ok &= r["lp_ok"]
        print(f"| {r['config']} | {r['mechanism']} | {r['p50']:.2f} | {r['p90']:.2f} | {r['p99']:.2f} | {r['max']:.2f} "
              f"| {r['n']} | {r['lp_per_s']:.0f} | {'yes' if r['lp_ok'] else 'NO'} |")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
