# SPDX-License-Identifier: Apache-2.0
# Self-test of scripts/check-layers.py: a fake tree per rule, with one planted violation each, and a clean tree.
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check-layers.py")

# A tree that follows every rule, with includes resolved through each search root.
CLEAN = {
    "common/base/log.h": "",
    "common/base/log.c": '#include "base/log.h"\n',
    "common/cluster/smap.h": '#include "base/log.h"\n',
    "common/http/http.h": '#include <stdio.h>\n#include "log.h"\n',
    "common/http/log.h": "",
    "cloud/backend.h": '#include "cluster/smap.h"\n',
    "cloud/aws.c": '#include "cloud/backend.h"\n#include "backend.h"\n',
    "target/target.h": '#include "core/lom.h"\n#include "cloud/backend.h"\n',
    "target/main.c": '#include "target.h"\n#include "obj/get.h"\n',
    "target/core/lom.h": '#include "base/log.h"\n',
    "target/core/lom.c": '#include "core/lom.h"\n#include "lom.h"\n',
    "target/obj/get.h": '#include "core/lom.h"\n',
    "target/obj/get.c": '#include "obj/get.h"\n#include "protect/mirror.h"\n',
    "target/protect/mirror.h": '#include "core/lom.h"\n',
    "target/xact/lru.c": '#include "obj/get.h"\n',
    "proxy/proxy.h": '#include "http/http.h"\n',
    "proxy/main.c": '#include "proxy.h"\n#include "s3/s3.h"\n',
    "proxy/s3/s3.h": '#include "base/log.h"\n',
    "loader/loader.h": '#include "hist.h"\n',
    "loader/hist.h": "",
    "loader/main.c": '#include "loader.h"\n#include "cluster/smap.h"\n',
}


def make_tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run(root, *args):
    return subprocess.run([sys.executable, SCRIPT, "--root", str(root), *args], capture_output=True, text=True,
                          timeout=60)


def test_clean_tree_passes(tmp_path):
    make_tree(tmp_path, CLEAN)
    r = run(tmp_path, "--no-exceptions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize(
    "rel, text, want",
    [
        ("common/base/bad.c", '#include "cloud/backend.h"\n', "common/base/bad.c:1: common/ includes only common/"),
        ("common/http/bad.c", '#include "base/log.h"\n#include "target/target.h"\n',
         "common/http/bad.c:2: common/ includes only common/"),
        ("cloud/bad.c", '#include "cloud/backend.h"\n#include "proxy/proxy.h"\n',
         "cloud/bad.c:2: cloud/ includes only common/ and cloud/"),
        ("target/core/bad.c", '#include "obj/get.h"\n', "target/core/bad.c:1: target/core/ never includes target/obj/"),
        ("target/core/bad.c", '#include "protect/mirror.h"\n',
         "target/core/bad.c:1: target/core/ never includes target/protect/"),
        ("target/core/bad.c", '#include "xact/lru.h"\n', "target/core/bad.c:1: target/core/ never includes target/xact/"),
        ("target/core/bad.c", '\n#include "target.h"\n', "target/core/bad.c:2: target/core/ never includes target/target.h"),
        ("proxy/bad.c", '#include "nowhere.h"\n', 'proxy/bad.c:1: include "nowhere.h" does not resolve'),
        # A target file may not name a proxy-only header through the proxy's include root.
        ("target/bad.c", '#include "proxy.h"\n', 'target/bad.c:1: include "proxy.h" does not resolve'),
    ],
)
def test_rule_violation_fails(tmp_path, rel, text, want):
    files = dict(CLEAN)
    files["target/xact/lru.h"] = ""
    files[rel] = text
    make_tree(tmp_path, files)
    r = run(tmp_path, "--no-exceptions")
    assert r.returncode == 1, r.stdout + r.stderr
    assert want in r.stdout, r.stdout
    # Besides the planted include, only folder cycles it closes are named.
    for line in r.stdout.splitlines():
        assert line.startswith(rel + ":") or "include cycle between folders" in line, line


def test_folder_cycle_fails(tmp_path):
    # proxy -> proxy/s3 (main.c includes s3/s3.h) and, planted, proxy/s3 -> proxy.
    files = dict(CLEAN)
    files["proxy/s3/s3.h"] = '#include "base/log.h"\n#include "proxy.h"\n'
    make_tree(tmp_path, files)
    r = run(tmp_path, "--no-exceptions")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "proxy/s3/s3.h:2: include cycle between folders {proxy proxy/s3}: proxy/s3 -> proxy" in r.stdout, r.stdout
    assert "proxy/main.c:2: include cycle between folders {proxy proxy/s3}: proxy -> proxy/s3" in r.stdout, r.stdout


def test_three_folder_cycle_fails(tmp_path):
    # target/obj -> target/protect -> target/xact -> target/obj.
    files = dict(CLEAN)
    files["target/protect/mirror.h"] = '#include "core/lom.h"\n#include "xact/lru.h"\n'
    files["target/xact/lru.h"] = '#include "obj/get.h"\n'
    make_tree(tmp_path, files)
    r = run(tmp_path, "--no-exceptions")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "include cycle between folders {target/obj target/protect target/xact}" in r.stdout, r.stdout
    assert "target/protect/mirror.h:2:" in r.stdout, r.stdout


def test_repo_tree_passes():
    root = os.path.join(os.path.dirname(SCRIPT), "..")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
