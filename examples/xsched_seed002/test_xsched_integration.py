#!/usr/bin/env python3
"""XSched Phase 2 integration test: six inference tasks in three priority groups (3, 3, 2, 2, 1,
1), each on a torch.cuda.Stream() of its own in a thread of its own, every request timed.
`--test baseline`: the tasks without XSched. `--test xsched`: each stream wrapped in an XQueue
(HipQueueCreate, XQueueCreate at kPreemptLevelBlock, XQueueSetLaunchConfig(8, 4)) and given its
priority with XHintPriority, under XHintSetScheduler(kSchedulerLocal,
kPolicyHighestPriorityFirst). `--test both`: baseline, then xsched, in one process.

    python3 test_xsched_integration.py --test both --requests 30

Assembled from the fragments of a user's test plan, which shows the ctypes bindings, the
XSchedQueue class, run_inference_with_xsched, the six-task set-up and this command line but not a
whole file. Those fragments are kept as the plan wrote them: the code unchanged (the set-up
indented into the function that holds it), the comments too, except characters the plan's text
had lost, restored. Everything else is filled in and says so where it is ("Filled in"): the
imports, XSched's enum values, the model, the baseline, the worker, the summary and main().

XSCHED_LIB_PATH in the environment overrides the plan's hard-coded library directory. Over this
project that directory is xsched-compat's (scripts/install-xsched-compat.sh), and the HIP
interposer, preloaded, enforces the priorities (docs/interposer.md#xscheds-c-api-names):

    LD_PRELOAD=DIR/libpreempt_hip.so XSCHED_LIB_PATH=DIR PREEMPT_OWN_QUEUES=always \\
        python3 test_xsched_integration.py --test both --requests 30

Without a GPU or PyTorch, PYTHONPATH=examples/xsched_seed002/standin_torch puts a stand-in torch
first (not PyTorch: one delay kernel per request on the stand-in HIP runtime; host figures);
xsched-compat/tests/seed_002.rs runs this file that way.

Read the figures knowing two things the fragments do:
- `torch.cuda.synchronize(xsched_queue.stream)` waits for every stream of the device, not for
  that stream: PyTorch's torch.cuda.synchronize takes a device, and reads a Stream as "the current
  device". Each request's latency therefore includes the other tasks' work in flight, whatever
  their priority; `xsched_queue.stream.synchronize()` is the wait for the task's own stream.
- Over xsched-compat, XSched priorities map onto HIP's three levels by sign: 3, 2 and 1 are all
  HIP's high level, so these six tasks do not preempt one another (docs/interposer.md, the
  priority mapping).
"""

# Filled in: the imports (the plan shows only `import ctypes`).
import argparse
import ctypes
import math
import os
import sys
import threading
import time
from typing import List

import torch

# 加载 XSched 库
XSCHED_LIB_PATH = "/workspace/xsched/output/lib"
# Filled in: XSCHED_LIB_PATH in the environment overrides the plan's directory (where the
# libraries are installed differs per machine; over this project it is xsched-compat's).
XSCHED_LIB_PATH = os.environ.get("XSCHED_LIB_PATH", XSCHED_LIB_PATH)
libpreempt = ctypes.CDLL(f"{XSCHED_LIB_PATH}/libpreempt.so")
libhalhip = ctypes.CDLL(f"{XSCHED_LIB_PATH}/libhalhip.so")

# 类型定义
XQueueHandle = ctypes.c_uint64
HwQueueHandle = ctypes.c_uint64
Priority = ctypes.c_int32

# Filled in: the types and values the bindings and the set-up use, from XSched's
# include/xsched/types.h as xsched-compat/src/types.rs declares them: the scheduler and the
# policy are C enums (int); XQueueCreate takes the level and the flags as int64_t.
XSchedulerType = ctypes.c_int32
XPolicyType = ctypes.c_int32
XPreemptLevel = ctypes.c_int64
XQueueCreateFlag = ctypes.c_int64
kSchedulerLocal = 2
kPolicyHighestPriorityFirst = 1
kPreemptLevelBlock = 1
kQueueCreateFlagNone = 0

# 函数签名
libpreempt.XHintSetScheduler.argtypes = [XSchedulerType, XPolicyType]
libpreempt.XHintPriority.argtypes = [XQueueHandle, Priority]
libpreempt.XQueueCreate.argtypes = [ctypes.POINTER(XQueueHandle), HwQueueHandle,
                                     XPreemptLevel, XQueueCreateFlag]
libhalhip.HipQueueCreate.argtypes = [ctypes.POINTER(HwQueueHandle), ctypes.c_void_p]

# Filled in: the declarations of the calls the plan uses without showing them (XSched's
# xqueue.h and hal.h), so that ctypes passes 64-bit handles and values as 64 bits.
libpreempt.XQueueSetLaunchConfig.argtypes = [XQueueHandle, ctypes.c_int64, ctypes.c_int64]
libpreempt.XQueueDestroy.argtypes = [XQueueHandle]
libpreempt.HwQueueDestroy.argtypes = [HwQueueHandle]


class XSchedQueue:
    """Wrapper for XSched queue with priority support"""

    def __init__(self, stream: torch.cuda.Stream, priority: int):
        self.stream = stream
        self.priority = priority

        # 1. 获取 HIP Stream 句柄
        hip_stream = ctypes.c_void_p(stream.cuda_stream)

        # 2. 创建 HwQueue（硬件队列抽象）
        self.hwq = HwQueueHandle()
        result = libhalhip.HipQueueCreate(ctypes.byref(self.hwq), hip_stream)

        # 3. 创建 XQueue（XSched 调度队列）
        self.xq = XQueueHandle()
        result = libpreempt.XQueueCreate(
            ctypes.byref(self.xq),
            self.hwq,
            kPreemptLevelBlock,  # Lv1: Block-level preemption
            kQueueCreateFlagNone
        )

        # 4. 设置启动配置（threshold=8, batch_size=4）
        result = libpreempt.XQueueSetLaunchConfig(self.xq, 8, 4)

        # 5. 设置优先级（这里才是真正的 GPU 优先级！）
        result = libpreempt.XHintPriority(self.xq, priority)


def destroy_xsched_queue(xsched_queue: XSchedQueue) -> None:
    """Filled in: the XQueue, then the HwQueue under it (XSched refuses the HwQueue first)."""
    libpreempt.XQueueDestroy(xsched_queue.xq)
    libpreempt.HwQueueDestroy(xsched_queue.hwq)


# Filled in: the plan's six tasks, for the baseline and the summary (the xsched set-up below keeps
# its own list, as written).
TASK_CONFIGS = [
    ("Task-High-1", 3),
    ("Task-High-2", 3),
    ("Task-Norm-1", 2),
    ("Task-Norm-2", 2),
    ("Task-Low-1", 1),
    ("Task-Low-2", 1),
]


class XSchedIntegrationTest:
    """Filled in: the plan's methods take `self` with a model and its inputs, not shown."""

    def __init__(self):
        # Filled in: the plan does not say which model. With the stand-in torch, its delay model;
        # with PyTorch, BERT-base built from its configuration (random weights, nothing to
        # download), batch 1, sequence 384, FP32, as examples/example5_inference.py builds it.
        if getattr(torch, "STANDIN", False):
            self.model = torch.standin_model()
            self.inputs = {}
            self.model_name = f"stand-in torch: one delay kernel of {self.model.ms:g} ms per request"
        else:
            from transformers import BertConfig, BertModel
            self.model = BertModel(BertConfig()).cuda().eval()
            self.inputs = {"input_ids": torch.randint(0, 30522, (1, 384), device="cuda")}
            self.model_name = "BERT-base (random weights), batch 1, seq 384, FP32"

    def run_inference_with_xsched(
        self,
        xsched_queue: XSchedQueue,
        num_requests: int,
        task_name: str
    ) -> List[float]:
        latencies = []

        for i in range(num_requests):
            start = time.time()

            # ✅ 在 XSched 管理的 Stream 上运行推理
            with torch.cuda.stream(xsched_queue.stream):
                with torch.no_grad():
                    outputs = self.model(**self.inputs)

            # 同步该 Stream
            torch.cuda.synchronize(xsched_queue.stream)

            latency = (time.time() - start) * 1000
            latencies.append(latency)

        return latencies

    def run_inference_baseline(self, stream, num_requests: int, task_name: str) -> List[float]:
        """Filled in: the same requests, timed the same way, on the task's own stream without
        XSched (so the two runs differ only by XSched)."""
        latencies = []
        for i in range(num_requests):
            start = time.time()
            with torch.cuda.stream(stream):
                with torch.no_grad():
                    outputs = self.model(**self.inputs)
            torch.cuda.synchronize(stream)
            latencies.append((time.time() - start) * 1000)
        return latencies

    def _worker(self, run, results, errors, barrier):
        """Filled in: a task's thread. One untimed request first (the first call pays one-time
        set-up: kernel loading, the stand-in's worker start), then every task starts its timed
        requests together."""

        def worker(task_name, queue_or_stream, num_requests):
            try:
                run(queue_or_stream, 1, task_name)
                barrier.wait()
                results[task_name] = run(queue_or_stream, num_requests, task_name)
            except Exception as e:  # reported by the summary, never lost with the thread
                barrier.abort()
                errors[task_name] = f"{type(e).__name__}: {e}"

        return worker

    def test_baseline(self, num_requests: int):
        """Filled in: the six tasks, each on its own stream in its own thread, without XSched."""
        results, errors = {}, {}
        worker = self._worker(self.run_inference_baseline, results, errors, threading.Barrier(len(TASK_CONFIGS)))
        threads = []
        for task_name, _ in TASK_CONFIGS:
            thread = threading.Thread(target=worker, args=(task_name, torch.cuda.Stream(), num_requests))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        return results, errors

    def test_xsched(self, num_requests: int):
        """Filled in: the function around the plan's set-up (kept as written from
        XHintSetScheduler to the threads' start), then the join and the queues' destruction."""
        results, errors = {}, {}
        worker = self._worker(self.run_inference_with_xsched, results, errors, threading.Barrier(len(TASK_CONFIGS)))

        # 初始化 XSched 调度器
        libpreempt.XHintSetScheduler(kSchedulerLocal, kPolicyHighestPriorityFirst)

        # 创建 6 个 XSched 队列
        task_configs = [
            ("Task-High-1", 3),  # HIGH 优先级
            ("Task-High-2", 3),
            ("Task-Norm-1", 2),  # NORM 优先级
            ("Task-Norm-2", 2),
            ("Task-Low-1", 1),   # LOW 优先级
            ("Task-Low-2", 1),
        ]

        queues = []
        for task_name, priority in task_configs:
            stream = torch.cuda.Stream()
            xsched_queue = XSchedQueue(stream, priority)
            queues.append((task_name, xsched_queue))

        # 并发运行所有任务
        threads = []
        for task_name, xsched_queue in queues:
            thread = threading.Thread(
                target=worker,
                args=(task_name, xsched_queue, num_requests)
            )
            thread.start()
            threads.append(thread)

        for thread in threads:
            thread.join()
        for _, xsched_queue in queues:
            destroy_xsched_queue(xsched_queue)
        return results, errors


def percentile(xs, p):
    """Filled in: nearest-rank percentile of sorted `xs`."""
    return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]


def summary(mode, results, errors, num_requests):
    """Filled in: per task n, mean, P50, P95, P99 and max (ms) and every latency; per priority
    group the median of its tasks' requests. True when every task made every request."""
    applied = "priorities applied by XHintPriority" if mode == "xsched" else "no priority applied"
    print(f"\n== {mode}: {len(TASK_CONFIGS)} tasks x {num_requests} requests, {applied}; latency in ms ==")
    ok = True
    groups = {}
    for task_name, priority in TASK_CONFIGS:
        lat = results.get(task_name)
        if lat is None or len(lat) != num_requests:
            ok = False
            print(f"{task_name:<12} prio {priority}  FAILED: {errors.get(task_name, 'no latencies')}")
            continue
        xs = sorted(lat)
        groups.setdefault(priority, []).extend(xs)
        print(f"{task_name:<12} prio {priority}  n={len(xs)} mean={sum(xs) / len(xs):.2f} "
              f"p50={percentile(xs, 50):.2f} p95={percentile(xs, 95):.2f} p99={percentile(xs, 99):.2f} "
              f"max={xs[-1]:.2f}")
        print("  latencies: " + " ".join(f"{x:.3f}" for x in lat))
    for priority in sorted(groups, reverse=True):
        xs = sorted(groups[priority])
        print(f"priority {priority}: p50={percentile(xs, 50):.2f} p99={percentile(xs, 99):.2f} ({len(xs)} requests)")
    return ok


def main():
    """Filled in: the command line the plan runs (--test baseline|xsched|both --requests N)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--test", choices=["baseline", "xsched", "both"], default="both",
                    help="baseline, xsched, or both (baseline first)")
    ap.add_argument("--requests", type=int, default=30, help="timed requests per task (30)")
    args = ap.parse_args()
    if not 1 <= args.requests <= 1_000_000:
        ap.error(f"--requests {args.requests}: give 1 to 1000000")
    tester = XSchedIntegrationTest()
    print(f"model: {tester.model_name}; XSched libraries: {XSCHED_LIB_PATH}")
    ok = True
    if args.test in ("baseline", "both"):
        ok &= summary("baseline", *tester.test_baseline(args.requests), args.requests)
    if args.test in ("xsched", "both"):
        ok &= summary("xsched", *tester.test_xsched(args.requests), args.requests)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
