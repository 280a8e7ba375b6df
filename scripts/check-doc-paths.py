#!/usr/bin/env python3
"""Every repository path a doc or a comment names exists.

A path in prose goes stale silently when a file moves (`session.rs` becoming `session/mod.rs`),
and the reader who follows it finds nothing. This reads every *.md file of the repository and the
comments of its *.rs, *.c, *.h (`//`, `///`, `//!`, `/* */`), *.sh and *.py files (`#`, and
Python's docstrings); not the kernel patches (*.patch) nor kfd-sys's generated bindings, whose
text is the kernel's. It checks two kinds of names:

- a token that starts with one of the repository's top-level directories (`docs/`,
  `preempt-lat/`, `scripts/`, ...), or in a crate's file with one of the crate's (`src/`,
  `tests/`, `examples/`, ...), and ends in a known file extension (a file) or in `/` (a
  directory). It is looked up from the repository's root and from the file's crate, so the
  `examples/` that a crate's own comments name is the crate's. A `#anchor` after it is dropped
  (anchors are not checked);
- a markdown link `[text](path)`, relative to the file's directory (to the root if it starts
  with `/`).

What is not a repository path, by rule: URLs; absolute and home paths (`/tmp/..`, `/usr/..`,
`~/.cache/..`: their first part is not a directory of the repository); names built from a
variable (`$OUT/..`, `PREFIX/..`) or a brace list (`{a,b}`); anything under `target/` (build
output, including what scripts create there at run time, like `target/py-venv`). A name with a
placeholder (`measure/<name>.rs`, `*-dkms*.sh`) is a pattern and must match at least one path.
What remains and does not exist is stale, or listed in ALLOWED with the reason it is named.

Prints `FILE:LINE: PATH does not exist` for each and exits 1 if there is any.
"""
import ast
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Never scanned nor a base of names: build output (cargo's, maturin's, the scripts'), Python's
# caches, and hidden directories (git's own files, virtual environments).
SKIP_DIRS = {"target", "__pycache__"}
# Generated: its comments are the kernel header's, which names kernel paths.
SKIP_FILES = {"kfd-sys/src/bindings.rs"}

# A name ending in one of these is a file's name.
EXTENSIONS = (".rs", ".md", ".sh", ".py", ".c", ".h", ".toml", ".service", ".json", ".hip", ".patch",
              ".cfg", ".txt", ".lock", ".config", ".yml", ".yaml", ".csv", ".svg")

# Names of paths that are not in the repository on purpose, each with why it is named
# ("path": "reason"); none today: the rules above cover target/, /tmp, ~/.cache and patterns.
ALLOWED = {
}

# A path token's characters: anything else (spaces, quotes, backquotes, parentheses, commas,
# colons) ends it. `~`, `$`, `{` are kept so that the names built from them can be told apart.
TOKEN = re.compile(r"[A-Za-z0-9_.\-/<>*{}$~#]+")
URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://\S+")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
# In Rust and C: a one-line string or char literal (skipped), or where a comment starts.
SLASH_SCAN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'|//|/\*')


def skipped(name):
    return name in SKIP_DIRS or name.startswith(".")


def files():
    for dirpath, dirnames, names in os.walk(ROOT):
        dirnames[:] = sorted(d for d in dirnames if not skipped(d))
        for n in sorted(names):
            rel = os.path.relpath(os.path.join(dirpath, n), ROOT)
            if rel not in SKIP_FILES and n.endswith((".md", ".rs", ".c", ".h", ".sh", ".py")):
                yield rel


def bases(rel):
    """Where a file's names are looked up: the root, and the crate the file is in (the nearest
    directory above it with a Cargo.toml), each with the directories a name may start with."""
    out = [""]
    d = os.path.dirname(rel)
    while d and not os.path.isfile(os.path.join(ROOT, d, "Cargo.toml")):
        d = os.path.dirname(d)
    if d:
        out.append(d)
    return [(b, {e for e in os.listdir(os.path.join(ROOT, b))
                 if os.path.isdir(os.path.join(ROOT, b, e)) and not skipped(e)}) for b in out]


def slash_comments(lines):
    """(line, text) of the `//` and `/* */` comments of Rust or C source."""
    in_block = False
    for n, line in enumerate(lines, 1):
        out, i = [], 0
        while True:
            if in_block:
                j = line.find("*/", i)
                out.append(line[i:] if j < 0 else line[i:j])
                if j < 0:
                    break
                in_block, i = False, j + 2
            m = SLASH_SCAN.search(line, i)
            if not m:
                break
            if m.group() == "//":
                out.append(line[m.end():])
                break
            in_block, i = m.group() == "/*", m.end()
        if out:
            yield n, " ".join(out)


def hash_comments(lines):
    """(line, text) of the `#` comments of shell or Python: a `#` at the start of the line or after
    a blank or `;`, with an even count of each quote before it (not inside a one-line string)."""
    for n, line in enumerate(lines, 1):
        for m in re.finditer(r"(?:^|(?<=[ \t;]))#", line):
            before = line[:m.start()].replace("\\\\", "").replace('\\"', "").replace("\\'", "")
            if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
                yield n, line[m.end():]
                break


def docstrings(text, lines):
    """(line, text) of every line of a Python file's docstrings."""
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            for n in range(body[0].lineno, body[0].end_lineno + 1):
                yield n, lines[n - 1]


def prose(rel, text):
    """(line, text) of what a file says to its reader: all of a .md file, a source file's comments."""
    lines = text.split("\n")
    if rel.endswith(".md"):
        return enumerate(lines, 1)
    if rel.endswith((".rs", ".c", ".h")):
        return slash_comments(lines)
    if rel.endswith(".py"):
        return list(docstrings(text, lines)) + list(hash_comments(lines))
    return hash_comments(lines)


def names(rel, line, where):
    """The paths a line names, each with the repository paths it may stand for."""
    for tok in TOKEN.findall(URL.sub(" ", line)):
        tok = tok.split("#")[0].rstrip(".")
        if "/" not in tok or any(c in tok for c in "{}$") or not tok.endswith(EXTENSIONS + ("/",)):
            continue
        alts = [os.path.join(b, tok) for b, entries in where if tok.split("/")[0] in entries]
        if alts:
            yield tok, alts
    if rel.endswith(".md"):
        for target in MD_LINK.findall(line):
            target = target.split("#")[0]
            if not target or re.match(r"[a-z][a-z0-9+.\-]*:", target):
                continue  # an anchor of the same page, a URL, mailto:
            base = "" if target.startswith("/") else os.path.dirname(rel)
            yield target, [os.path.join(base, target.lstrip("/"))]


def exists(path):
    """Whether a path (a pattern, or a directory when it ends in '/') is in the repository."""
    full = os.path.join(ROOT, path)
    if any(c in path for c in "<>*"):
        return bool(glob.glob(re.sub(r"<[^>/]*>", "*", full)))
    return os.path.isdir(full) if path.endswith("/") else os.path.exists(full)


def main():
    missing, checked = [], 0
    for rel in files():
        where = bases(rel)
        with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        seen = set()
        for n, line in prose(rel, text):
            for name, alts in names(rel, line, where):
                if (n, name) in seen:
                    continue  # a Python line that is both a docstring's and a comment's
                seen.add((n, name))
                checked += 1
                if name not in ALLOWED and not any(exists(a) for a in alts):
                    missing.append(f"{rel}:{n}: {name} does not exist")
    for m in missing:
        print(m)
    if missing:
        print(f"check-doc-paths: FAIL: {len(missing)} of {checked} named paths do not exist")
        return 1
    print(f"check-doc-paths: all {checked} paths that docs and comments name exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
