#!/usr/bin/env python3
"""No module cycle inside any crate of the workspace.

For every module, the paths it names (`crate::a::b`, `super::x`, `self::x`, and names brought in
by `use`) are resolved to modules; a reference from module M to module T becomes an edge between
the two siblings under their lowest common ancestor (a parent naming its children, or a child its
parent, is not an edge: that is how a module declares and re-exports its parts). A cycle among
siblings is reported with its path. Comments and `#[cfg(test)] mod tests` are ignored (tests may
reach anywhere). Text-based, not a Rust parser: it reads `crate::`/`super::` paths, which is how
this workspace writes cross-module references.
"""
import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def modules(src_root):
    mods = {}
    for dirpath, _, files in os.walk(src_root):
        for f in files:
            if not f.endswith(".rs") or f == "bindings.rs":
                continue
            path = os.path.join(dirpath, f)
            parts = os.path.relpath(path, src_root)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if parts and parts[-1] == "tests":
                continue
            if "bin" in parts[:1]:
                continue  # binaries are crate roots of their own
            with open(path) as fh:
                mods[tuple(parts)] = fh.read()
    return mods


def strip(src):
    src = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", src, flags=re.S)
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return "\n".join(re.sub(r"//.*", "", line) for line in src.split("\n"))


def resolve(mods, segs):
    for k in range(len(segs), 0, -1):
        if tuple(segs[:k]) in mods:
            return tuple(segs[:k])
    return None


def edges(mods):
    g = collections.defaultdict(set)
    for m, src in mods.items():
        src = strip(src)
        refs = []
        for p in re.findall(r"\bcrate((?:::\w+)+)", src):
            refs.append(p.split("::")[1:])
        for p in re.findall(r"\bsuper((?:::\w+)+)", src):
            refs.append(list(m[:-1]) + p.split("::")[1:])
        # `use super::{a, b}` / `use crate::x::{a, b}` groups
        for base, group in re.findall(r"\b(crate(?:::\w+)*|super(?:::\w+)*)::\{([^}]*)\}", src):
            segs = base.split("::")
            prefix = list(m[:-1]) + segs[1:] if segs[0] == "super" else segs[1:]
            for name in re.findall(r"\b(\w+)\b", group):
                refs.append(prefix + [name])
        for segs in refs:
            t = resolve(mods, segs)
            if t is None or t == m:
                continue
            # lowest common ancestor; skip ancestor/descendant pairs
            i = 0
            while i < min(len(m), len(t)) and m[i] == t[i]:
                i += 1
            if i == len(m) or i == len(t):
                continue
            g[m[: i + 1]].add(t[: i + 1])
    return g


def find_cycle(g):
    color, stack = {}, []

    def dfs(v):
        color[v] = 1
        stack.append(v)
        for w in sorted(g.get(v, ())):
            if color.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if color.get(w) is None:
                c = dfs(w)
                if c:
                    return c
        stack.pop()
        color[v] = 2
        return None

    for v in sorted(g):
        if color.get(v) is None:
            c = dfs(v)
            if c:
                return c
    return None


def main():
    bad = False
    crates = sorted(d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "Cargo.toml")) and os.path.isdir(os.path.join(ROOT, d, "src")))
    for crate in crates:
        mods = modules(os.path.join(ROOT, crate, "src"))
        cycle = find_cycle(edges(mods))
        if cycle:
            bad = True
            print(f"check-module-cycles: FAIL: {crate}: " + " -> ".join("::".join(m) for m in cycle))
    if not bad:
        print(f"check-module-cycles: no module cycle in {len(crates)} crates ({', '.join(crates)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
