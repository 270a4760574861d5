#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Mechanical whitespace check of the sources: trailing blanks, indentation mixes, final newline.

Checks *.c *.h *.py *.sh, the Makefile and the extension-less scripts (scripts/*, .ci/*). Prints
"file:line: problem" for every offender and exits 1 if there is any. One process reads every file
(the shell version forked a dozen tools per file: minutes on a slow-forking machine).
"""
import os
import re
import subprocess
import sys

TRAILING = re.compile(rb"[ \t\r]+$")
SPACE_BEFORE_TAB = re.compile(rb"^\t* +\t")
TAB_IN_PY_INDENT = re.compile(rb"^ *\t")


def list_files():
    """The tracked and untracked-but-not-ignored files, or a walk when this is not a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout
        return sorted(set(out.decode().splitlines()))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for top, dirs, names in os.walk("."):
            dirs[:] = [d for d in dirs if os.path.join(top, d) not in ("./build", "./run", "./.git")]
            found += [os.path.relpath(os.path.join(top, n)) for n in names]
        return sorted(found)


def kind_of(path, head):
    """c, py, sh, make or None (not checked)."""
    if path.endswith((".c", ".h")):
        return "c"
    if path.endswith(".py"):
        return "py"
    if path.endswith(".sh"):
        return "sh"
    base = os.path.basename(path)
    if base == "Makefile" or path.endswith(".mk"):
        return "make"
    if path.startswith(("scripts/", ".ci/")):
        first = head.split(b"\n", 1)[0]
        if first.startswith(b"#!") and b"python" in first:
            return "py"
        if first.startswith(b"#!") and b"sh" in first:
            return "sh"
    return None


def problems(path, data, kind):
    """Yield 'file:line: why' for each offence in one file's bytes."""
    indent = TAB_IN_PY_INDENT if kind == "py" else SPACE_BEFORE_TAB
    indent_why = "tab in indentation" if kind == "py" else "space before tab in indentation"
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for n, line in enumerate(lines, 1):
        if TRAILING.search(line):
            yield f"{path}:{n}: trailing whitespace"
    for n, line in enumerate(lines, 1):
        if indent.search(line):
            yield f"{path}:{n}: {indent_why}"
    if not data.endswith(b"\n"):
        yield f"{path}: no newline at end of file"
    elif data.endswith(b"\n\n"):
        yield f"{path}: blank line at end of file"


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    bad = False
    for path in list_files():
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        kind = kind_of(path, data[:64])
        if kind is None or not data:
            continue
        for line in problems(path, data, kind):
            print(line)
            bad = True
    if bad:
        print("whitespace-check: offenders listed above", file=sys.stderr)
        return 1
    print("whitespace-check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
