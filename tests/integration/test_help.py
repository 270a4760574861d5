# SPDX-License-Identifier: Apache-2.0
"""Every key of the daemons' configuration table is described by ft-proxy --help or ft-target --help."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("FT_BIN", str(ROOT / "build" / "bin"))


def config_keys():
    text = (ROOT / "common" / "base" / "config.c").read_text()
    table = text[text.index("config_keys[] = {"):]
    table = table[:table.index("};")]
    keys = re.findall(r'^\s*(?:STR|INT|BOOL)\((\w+)', table, re.M) + re.findall(r'^\s*\{"(\w+)"', table, re.M)
    assert len(keys) > 40, keys
    return keys


def help_text(name):
    p = subprocess.run([os.path.join(BIN, name), "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_every_config_key_in_a_help():
    text = help_text("ft-proxy") + help_text("ft-target")
    missing = [k for k in config_keys()
               if not re.search(r"--(%s|%s)\b" % (k, k.replace("_", "-")), text)
               and not (k == "mountpaths" and "--mountpath DIR" in text)]
    assert missing == []
