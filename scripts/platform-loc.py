#!/usr/bin/env python3
"""What a device platform costs in this workspace, in lines of code (the seeds' test 7.1.1, after
XSched's Table 3, which counts a platform's XShim and its Lv1 support: 316 and 841 lines for AMD's
HIP).

Each device of the workspace (the host device, an AMD GPU through HIP and KFD) is split into the
roles XSched counts, plus the ones this toolkit adds, and every file of a role is named below (the
one table; a file that no longer exists fails the count, so the table cannot go stale):

- `backend`: what a device gives an application-API session (preempt-api's device backend): the
  counterpart of XSched's XShim, which turns the platform's calls into XQueue commands;
- `lv1`: the hardware queue behind lv1's launcher (lv1's `HwQueue` and what it launches): XSched's
  "Lv1" row;
- `lv3`: what suspends a running queue at Lv3 (the KFD mechanisms with queue discovery and
  binding on a GPU, SIGSTOP of the worker processes on the host device);
- `runtime`: the binding of the platform's own runtime (hip-rt's HIP calls; the host device's
  worker processes and their protocol), which XSched gets from the vendor.

A line of code is a line that is neither blank nor a comment, outside `#[cfg(test)]` modules and
test files. Prints a table, and with `--json FILE` writes the counts. The counts are of this
checkout: they are computed, never typed, so they follow the code.
"""
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))

# XSched's Table 3, AMD row, as the seeds quote it.
XSCHED_HIP = {"backend": 316, "lv1": 841}

PLATFORMS = {
    "hip (AMD GPU)": {
        "backend": ["preempt-api/src/gpu/mod.rs", "preempt-api/src/gpu/streams.rs",
                    "preempt-api/src/gpu/suspension.rs", "preempt-api/src/gpu/prepare.rs"],
        "lv1": ["gpu-device/src/device.rs", "gpu-device/src/kernel.rs"],
        "lv3": ["lv3/src/mechanism/mod.rs", "lv3/src/mechanism/choose.rs", "lv3/src/mechanism/guard.rs",
                "lv3/src/mechanism/preempt_queues.rs", "lv3/src/mechanism/dbg_trap.rs",
                "lv3/src/mechanism/update_queue.rs", "lv3/src/binding.rs", "lv3/src/discovery.rs",
                "gpu-device/src/discover.rs"],
        "runtime": ["hip-rt/src/lib.rs", "hip-rt/src/loader.rs", "hip-rt/src/device.rs", "hip-rt/src/objects.rs",
                    "hip-rt/src/launch.rs", "hip-rt/src/args.rs", "hip-rt/src/error.rs",
                    "hip-rt/src/null_stream.rs", "hip-rt/src/code_object.rs", "hip-rt/src/msgpack.rs",
                    "hip-rt/src/ffi/"],
    },
    "host (CPU worker processes)": {
        "backend": ["preempt-api/src/host.rs", "preempt-api/src/host_records.rs"],
        "lv1": ["host-device/src/queue.rs", "host-device/src/inbox.rs"],
        "lv3": ["host-device/src/stop.rs", "host-device/src/hold.rs"],
        "runtime": ["host-device/src/lib.rs", "host-device/src/process.rs", "host-device/src/spawn.rs",
                    "host-device/src/proto.rs", "host-device/src/worker.rs", "host-device/src/ended.rs",
                    "host-device/src/bin/"],
    },
}

TEST_MOD = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")


def rust_files(path):
    full = os.path.join(ROOT, path)
    if path.endswith("/"):
        if not os.path.isdir(full):
            raise FileNotFoundError(path)
        out = []
        for d, _, names in os.walk(full):
            out += [os.path.join(d, n) for n in sorted(names) if n.endswith(".rs") and not n.startswith("test")]
        return sorted(out)
    if not os.path.isfile(full):
        raise FileNotFoundError(path)
    return [full]


def code_lines(file):
    """Lines that are neither blank nor comments, leaving out every `#[cfg(test)]` item (a test
    module, inline or a `mod tests;` line, or a test-only function), found by its braces."""
    n = 0
    in_block = False
    skip_depth = None  # inside a #[cfg(test)] item: the brace depth so far
    with open(file, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if skip_depth is not None:
                skip_depth += s.count("{") - s.count("}")
                opened = skip_depth > 0 or "{" in s
                if skip_depth <= 0 and (opened or s.endswith(";")):
                    skip_depth = None
                continue
            if TEST_MOD.match(line):
                skip_depth = 0
                continue
            if in_block:
                if "*/" in s:
                    in_block = False
                continue
            if not s or s.startswith("//"):
                continue
            if s.startswith("/*"):
                in_block = "*/" not in s
                continue
            n += 1
    return n


def count():
    out = {}
    for platform, roles in PLATFORMS.items():
        out[platform] = {}
        for role, paths in roles.items():
            files = [f for p in paths for f in rust_files(p)]
            out[platform][role] = {"lines": sum(code_lines(f) for f in files),
                                   "files": [os.path.relpath(f, ROOT) for f in files]}
    return out


def main(argv):
    if argv[1:2] not in ([], ["--json"]) or (argv[1:2] == ["--json"] and len(argv) != 3):
        print("usage: platform-loc.py [--json FILE]", file=sys.stderr)
        return 2
    try:
        counts = count()
    except FileNotFoundError as e:
        print(f"platform-loc: {e} is in the table but not in the repository: update PLATFORMS", file=sys.stderr)
        return 1
    print("| platform | role | lines of code | files | XSched (HIP, Table 3) |")
    print("| --- | --- | --- | --- | --- |")
    for platform, roles in counts.items():
        for role, c in roles.items():
            ref = XSCHED_HIP.get(role, "-") if platform.startswith("hip") else "-"
            print(f"| {platform} | {role} | {c['lines']} | {len(c['files'])} | {ref} |")
    if len(argv) == 3:
        with open(argv[2], "w", encoding="utf-8") as f:
            json.dump({"xsched_hip": XSCHED_HIP, "platforms": counts}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
