#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Layering check: every quoted #include of common/, cloud/, proxy/, target/, loader/, cli/ points only where allowed.

Resolves each `#include "..."` as the compiler does (the including file's own directory, then common/, then the
repository top, then the program's own folder: target/, proxy/, loader/ or cli/) and enforces:
  - common/** includes only common/**;
  - cloud/** includes only common/** and cloud/**;
  - cli/** (the ft client) includes only common/** and cli/**;
  - target/core/** never includes target/obj/**, target/protect/**, target/xact/**, target/shard/** nor target/target.h;
  - no include cycle between folders (a file's folder is its directory: common/base, cloud, target, target/core, ...);
  - every quoted include resolves.
Prints "file:line: rule" per violation and exits 1 on any. Usage: scripts/check-layers.py [--root DIR] [--no-exceptions]
"""
import argparse
import fnmatch
import os
import re
import sys

# Deliberate exceptions: (including file, included file, reason). Both sides are paths relative to the root and may be
# fnmatch patterns ("*" also matches "/"). An excepted include is exempt from every rule and is left out of the folder
# graph the cycle check walks.
EXCEPTIONS = [
]

SCANNED = ("common", "cloud", "proxy", "target", "loader", "cli")
PROGRAMS = ("target", "proxy", "loader", "cli")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def source_files(root):
    """Every *.c and *.h under the scanned folders, as sorted paths relative to root."""
    out = []
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in filenames:
                if name.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(out)


def includes(root, rel):
    """(line number, included name) for each quoted #include of rel."""
    out = []
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if m:
                out.append((lineno, m.group(1)))
    return out


def resolve(root, rel, name):
    """The file (relative to root) that `#include "name"` in rel names, or None. Search order: rel's directory,
    common/, the root, then the program's own folder."""
    dirs = [os.path.dirname(rel), "common", ""]
    top = rel.split("/", 1)[0]
    if top in PROGRAMS:
        dirs.append(top)
    for d in dirs:
        cand = os.path.normpath(os.path.join(d, name)).replace(os.sep, "/")
        if cand.startswith("../") or cand == "..":
            continue
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def folder(rel):
    return os.path.dirname(rel) or "."


def under(path, top):
    return path == top or path.startswith(top + "/")


def excepted(src, dst, exceptions):
    return any(fnmatch.fnmatchcase(src, a) and fnmatch.fnmatchcase(dst, b) for a, b, _ in exceptions)


def rule_violation(src, dst):
    """The name of the rule src including dst breaks, or None."""
    if under(src, "common") and not under(dst, "common"):
        return "common/ includes only common/ (includes %s)" % dst
    if under(src, "cloud") and not (under(dst, "common") or under(dst, "cloud")):
        return "cloud/ includes only common/ and cloud/ (includes %s)" % dst
    if under(src, "cli") and not (under(dst, "common") or under(dst, "cli")):
        return "cli/ includes only common/ and cli/ (includes %s)" % dst
    if under(src, "target/core"):
        for up in ("target/obj", "target/protect", "target/xact", "target/shard"):
            if under(dst, up):
                return "target/core/ never includes %s/ (includes %s)" % (up, dst)
        if dst == "target/target.h":
            return "target/core/ never includes target/target.h"
    return None


def cycles(edges):
    """Strongly connected components with 2+ folders of the folder graph edges {(a, b): [...]} (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def check(root, exceptions=EXCEPTIONS):
    """All violations under root, but the includes exceptions lists, as sorted (file, line, rule) tuples."""
    out = []
    edges = {}  # (from folder, to folder) -> [(file, line, included file)]
    for src in source_files(root):
        for lineno, name in includes(root, src):
            dst = resolve(root, src, name)
            if dst is None:
                out.append((src, lineno, 'include "%s" does not resolve' % name))
                continue
            if excepted(src, dst, exceptions):
                continue
            rule = rule_violation(src, dst)
            if rule:
                out.append((src, lineno, rule))
            a, b = folder(src), folder(dst)
            if a != b:
                edges.setdefault((a, b), []).append((src, lineno, dst))
    for comp in cycles(edges):
        names = " ".join(sorted(comp))
        for (a, b), sites in sorted(edges.items()):
            if a in comp and b in comp:
                for src, lineno, dst in sites:
                    out.append((src, lineno, "include cycle between folders {%s}: %s -> %s (%s)" % (names, a, b, dst)))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="repository top (default: this script's parent folder)")
    ap.add_argument("--no-exceptions", action="store_true", help="ignore EXCEPTIONS (for checking a fake tree)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    found = check(root, [] if args.no_exceptions else EXCEPTIONS)
    for src, lineno, rule in found:
        print("%s:%d: %s" % (src, lineno, rule))
    if found:
        print("check-layers: %d violation(s); deliberate exceptions go in EXCEPTIONS in %s" % (len(found), sys.argv[0]),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
