#!/usr/bin/env python3
"""XSched's Example 5 through preempt_kfd: three replicas of one inference model at three
priorities (high / normal / low), each on a stream of its own, and the seeds' four runs:

  Test 1   each replica alone                        the standalone latency of each
  Test 2   the three at once, no priority            what contention costs
  Test 3   high's requests, then low's, one thread   no contention, no priority
  Phase 2  the three at once under the helper        HPF: high (2) > normal (1) > low (0)

Arrivals: high every --gap-high-ms (latency-sensitive, rare), normal every --gap-normal-ms (open
loop: a request's latency runs from its planned arrival to the end of its work, so queueing
behind the replica's own earlier requests counts); low back to back (closed loop, throughput-
oriented: each request as soon as the previous one ends). Phase 2 reports the
latency of every priority, the low/high ratio, the combined throughput and its loss against
Test 2, and high's P99 against Test 1 (alone).

The model:
  bert      (GPU with PyTorch) BERT-base, seq 384, batch 1, FP32, built from its configuration
            with random weights: nothing to download, the same work as a trained model
            (transformers' BertModel when installed, else torch.nn.TransformerEncoder with
            BERT-base's shapes: 12 layers, hidden 768, 12 heads, FFN 3072). Each replica's
            forward runs on its own stream: the low and normal replicas on the library's
            low-priority streams (torch.cuda.ExternalStream of their handles), high on the
            session's high-priority stream. PyTorch's kernels do not pass through the library's
            Lv1 launcher, so only Lv3 can hold them back: without Lv3, Phase 2 is skipped.
  stand-in  (anywhere; the host device here) one delay command of --standin-ms per request on
            the replica's stream: the library's own delay kernel on a GPU, CPU worker processes
            on the host device, whose figures are host figures, never GPU figures.

    python examples/example5_inference.py                     # auto: hip:0 if it runs, else host
    python examples/example5_inference.py --device hip:0 --model bert --requests 200
    python examples/example5_inference.py --device host --requests 8 --json example5.json
"""

import argparse
import json
import math
import sys
import threading
import time

import preempt_kfd as pk

MS = 1_000_000
PRIORITY = {"high": 2, "normal": 1, "low": 0}


def stats(latencies_ms):
    xs = sorted(latencies_ms)
    if not xs:
        return {"n": 0}

    def pct(p):
        return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]

    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    return {"n": len(xs), "mean": mean, "p50": pct(50), "p95": pct(95), "p99": pct(99),
            "min": xs[0], "max": xs[-1], "std": std}


class StandIn:
    """One delay command per request on the replica's stream."""

    def __init__(self, ms):
        self.ms = ms
        self.name = f"stand-in: one delay command of {ms:g} ms per request"

    def replica(self, stream):
        def run():
            stream.submit_delay(self.ms * MS)
            stream.synchronize()
        return run, stream


class Bert:
    """BERT-base with random weights on the replica's stream (GPU path, hardware only)."""

    def __init__(self, device_index):
        import torch
        self.torch = torch
        self.device = torch.device(f"cuda:{device_index}")
        try:
            from transformers import BertConfig, BertModel
            self.build = lambda: BertModel(BertConfig())  # bert-base-uncased's shapes
            self.name = "BERT-base (transformers BertModel(BertConfig()), random weights), seq 384, batch 1, FP32"
        except ImportError:
            self.build = self._encoder
            self.name = ("BERT-base shapes in torch.nn.TransformerEncoder (12 x 768, 12 heads, FFN 3072), "
                         "random weights, seq 384, batch 1, FP32 (transformers not installed)")
        self.ids = torch.randint(0, 30522, (1, 384), device=self.device)

    def _encoder(self):
        nn = self.torch.nn
        layer = nn.TransformerEncoderLayer(768, 12, 3072, activation="gelu", batch_first=True)
        return nn.Sequential(nn.Embedding(30522, 768), nn.TransformerEncoder(layer, 12))

    def replica(self, stream):
        torch = self.torch
        model = self.build().to(self.device).eval()
        ext = torch.cuda.ExternalStream(stream.handle, device=self.device)

        def run():
            with torch.inference_mode(), torch.cuda.stream(ext):
                model(self.ids)
            ext.synchronize()
        return run, ext


def drive(name, run, sync, n, gap_ms, helper, results, t_start):
    """One replica's requests: planned arrivals every gap_ms (open loop), or with gap_ms 0 each
    request as soon as the previous one ends (closed loop); latency = end - arrival."""
    lat = []
    base = time.perf_counter_ns() if t_start is None else t_start
    for i in range(n):
        arrival = base + int(i * gap_ms * MS) if gap_ms > 0 else max(base, time.perf_counter_ns())
        while (wait := arrival - time.perf_counter_ns()) > 0:
            time.sleep(wait / 1e9)
        if helper is not None and PRIORITY[name] > 0:
            with helper.high_priority(sync=sync, priority=PRIORITY[name]):
                run()
        else:
            run()
        lat.append((time.perf_counter_ns() - arrival) / MS)
    results[name] = lat


def one_run(args, model, names, concurrent, use_helper, gaps):
    """A fresh session, a stream per replica, the requests; returns per-replica stats."""
    with pk.Session(args.device, host_workers=1, lv1_threshold=4, lv1_batch=2) as s:
        if use_helper and isinstance(model, Bert) and not s.has_lv3:
            return {"skipped": f"no Lv3 here ({s.mechanism['why']}); PyTorch work cannot be held back at Lv1"}
        helper = s.helper() if use_helper else None
        replicas, lp_streams = {}, []
        for name in names:
            if name == "high":
                stream = s.high_priority_stream()
            else:
                stream = s.low_priority_stream("auto")
                lp_streams.append(stream)
                if helper is not None:
                    helper.register(stream, PRIORITY[name])
            replicas[name] = model.replica(stream)
        for run, _ in replicas.values():
            for _ in range(args.warmup):
                run()
        results = {}
        start = time.perf_counter_ns()
        if concurrent:
            t0 = start + 20 * MS  # every thread started and waiting for its first arrival
            threads = [threading.Thread(target=drive, args=(n, *replicas[n], args.requests, gaps[n], helper,
                                                            results, t0)) for n in names]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            start = t0
        else:
            for n in names:
                drive(n, *replicas[n], args.requests, gaps[n], helper, results, None)
        elapsed = (time.perf_counter_ns() - start) / 1e9
        checks = [st.check() for st in lp_streams] if isinstance(model, StandIn) else []
        out = {n: stats(results[n]) for n in names}
        out["throughput_per_s"] = sum(len(v) for v in results.values()) / elapsed
        out["exactly_once"] = all(c["ok"] for c in checks)
        out["level"] = s.mechanism["name"] if s.has_lv3 else "lv1"
        out["device"] = s.device
        return out


def table(title, run, names):
    print(f"\n### {title}\n")
    if "skipped" in run:
        print(f"skipped: {run['skipped']}")
        return
    print("| replica | n | mean | P50 | P95 | P99 | min | max | std |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        r = run[n]
        print(f"| {n} | {r['n']} | {r['mean']:.2f} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} "
              f"| {r['min']:.2f} | {r['max']:.2f} | {r['std']:.2f} |")
    print(f"\nthroughput: {run['throughput_per_s']:.1f} requests/s (all replicas)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--device", default="auto", help="auto, host or hip:N (default auto)")
    ap.add_argument("--model", default="auto", choices=["auto", "bert", "stand-in"],
                    help="auto: bert on a GPU with PyTorch, else the stand-in")
    ap.add_argument("--requests", type=int, default=20, help="requests per replica and run (20, as the seeds)")
    ap.add_argument("--warmup", type=int, default=2, help="unrecorded requests per replica first (2)")
    ap.add_argument("--gap-high-ms", type=float, default=20.0, help="high's arrivals (20 ms)")
    ap.add_argument("--gap-normal-ms", type=float, default=10.0, help="normal's arrivals (10 ms)")
    ap.add_argument("--standin-ms", type=float, default=5.0, help="the stand-in's work per request (5 ms)")
    ap.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = ap.parse_args()
    for flag, v in (("--requests", args.requests), ("--warmup", args.warmup)):
        if not 0 <= v <= 1_000_000 or (flag == "--requests" and v == 0):
            ap.error(f"{flag} {v}: out of range")
    for flag, v in (("--gap-high-ms", args.gap_high_ms), ("--gap-normal-ms", args.gap_normal_ms),
                    ("--standin-ms", args.standin_ms)):
        if not (math.isfinite(v) and 0 <= v <= 60_000):
            ap.error(f"{flag} {v}: give 0 to 60000 ms")

    torch_error = None
    if args.model != "stand-in":
        # PyTorch first: its HIP runtime is then the one in the process when the library opens
        # HIP, which takes it (found in the process, not a second copy from another ROCm on the
        # path: docs/kfd-facts.md#one-hip-runtime-per-process), so stream handles mean the same
        # thing on both sides.
        try:
            import torch  # noqa: F401
        except ImportError as e:
            torch_error = f"PyTorch is not installed ({e})"
    with pk.Session(args.device) as s:
        device = s.device
    gpu = device.startswith("hip:")
    model = None
    if args.model == "bert" or (args.model == "auto" and gpu):
        error = torch_error or (None if gpu else f"the bert model runs on a GPU (hip:N), not on {device}")
        if error is None:
            model = Bert(int(device.split(":")[1]))
        elif args.model == "bert":
            print(f"example5: --model bert: {error}", file=sys.stderr)
            return 2
    if model is None:
        model = StandIn(args.standin_ms)
    args.device = device

    gaps = {"high": args.gap_high_ms, "normal": args.gap_normal_ms, "low": 0.0}
    names = ["high", "normal", "low"]
    runs = {f"test1_{n}": one_run(args, model, [n], False, False, gaps) for n in names}
    runs["test2"] = one_run(args, model, names, True, False, gaps)
    runs["test3"] = one_run(args, model, ["high", "low"], False, False, {"high": 10.0, "low": 10.0})
    runs["phase2"] = one_run(args, model, names, True, True, gaps)

    kind = "host device: CPU worker processes; host figures, not GPU figures" if device == "host" else "GPU"
    print(f"Example 5, device {device} ({kind}); model: {model.name}")
    print(f"{args.requests} requests per replica; high every {gaps['high']:g} ms, normal every "
          f"{gaps['normal']:g} ms, low back to back (closed loop); latencies in ms")
    alone = {n: runs[f"test1_{n}"][n] for n in names}
    print("\n### Test 1: each replica alone\n")
    print("| replica | n | mean | P50 | P95 | P99 | min | max | std |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        r = alone[n]
        print(f"| {n} | {r['n']} | {r['mean']:.2f} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} "
              f"| {r['min']:.2f} | {r['max']:.2f} | {r['std']:.2f} |")
    table("Test 2: the three at once, no priority", runs["test2"], names)
    table("Test 3: high's requests, then low's (every 10 ms)", runs["test3"], ["high", "low"])
    p2 = runs["phase2"]
    table(f"Phase 2: the three at once under HPF (level {p2.get('level', '-')})", p2, names)
    summary = {}
    if "skipped" not in p2:
        summary = {
            "low_high_p50": p2["low"]["p50"] / p2["high"]["p50"],
            "low_high_p99": p2["low"]["p99"] / p2["high"]["p99"],
            "high_p99_vs_alone": p2["high"]["p99"] / alone["high"]["p99"],
            "throughput_loss_vs_test2": 1 - p2["throughput_per_s"] / runs["test2"]["throughput_per_s"],
        }
        print(f"\nlow/high latency: P50 {summary['low_high_p50']:.2f}x, P99 {summary['low_high_p99']:.2f}x; "
              f"high P99 {summary['high_p99_vs_alone']:.2f}x its P99 alone; "
              f"combined throughput {100 * summary['throughput_loss_vs_test2']:+.1f} % lost against Test 2"
              f"{' (host figures)' if device == 'host' else ''}")
    ok = all(r.get("exactly_once", True) for r in runs.values())
    if not ok:
        print("\nFAILED: a stream's delay commands did not complete exactly once", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "host_figures": device == "host", "model": model.name,
                       "requests": args.requests, "gaps_ms": gaps, "runs": runs, "summary": summary,
                       "exactly_once": ok}, f, indent=2)
    return 0 if ok else 3


if __name__ == "__main__":
    try:
        sys.exit(main())
    except pk.PreemptError as e:
        print(f"example5: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
