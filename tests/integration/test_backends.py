# SPDX-License-Identifier: Apache-2.0
"""Backend interface (cloud/backend.h) against real servers: s3rver, azurite, the GCS emulator, nginx.

Each test starts one peer on loopback (tests/integration/peers.py), runs the C driver
build/tests/test_backend with the peer's URL in FT_PEER_* and FT_BACKEND_PEERS_ONLY=1, and checks
from cmocka's output that exactly the expected cases ran and passed (so a driver that skipped
them, or ran nothing, fails here). The GCS peer is firebase-tools' storage emulator with its rules
engine switched off (tests/peers/firebase-offline.js): it serves the JSON API but checks no auth.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import peers

ROOT = Path(__file__).resolve().parents[2]
FT_BIN = Path(os.environ.get("FT_BIN") or ROOT / "build" / "bin")
DRIVER_TIMEOUT = 600

EXPECTED = {
    "aws": ["test_peer_aws_roundtrip", "test_peer_aws_errors", "test_peer_aws_virtual_host"],
    "azure": ["test_peer_azure_roundtrip", "test_peer_azure_errors", "test_peer_azure_sas"],
    "gcp": ["test_peer_gcp_roundtrip"],
    "ht": ["test_peer_ht"],
}


def driver():
    """build/<...>/tests/test_backend next to FT_BIN, (re)built by make with the same sanitizer."""
    build = FT_BIN.parent
    path = build / "tests" / "test_backend"
    try:
        rel = build.resolve().relative_to(ROOT)
    except ValueError:
        rel = None  # binaries from elsewhere: use the driver beside them as it is
    if rel is not None:
        args = ["make", "-C", str(ROOT)]
        if rel.parts[:1] == ("build",) and len(rel.parts) == 2:
            args.append(f"SANITIZER={rel.parts[1]}")
        args.append(str(rel / "tests" / "test_backend"))
        proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            pytest.fail(f"cannot build the backend test driver:\n{proc.stdout}\n{proc.stderr}")
    if not path.exists():
        pytest.fail(f"{path} is missing: build it first")
    return path


DRIVER = None


@pytest.fixture(scope="module")
def scratch():
    global DRIVER
    DRIVER = driver()
    peers.ensure_installed()
    d = peers.scratch_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run_driver(env_extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("FT_PEER_"):
            del env[k]
    env.update(env_extra)
    env["FT_BACKEND_PEERS_ONLY"] = "1"
    proc = subprocess.run([str(DRIVER)], capture_output=True, text=True, env=env, timeout=DRIVER_TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr


def check(provider, rc, out):
    """Exactly the expected cases ran and passed; no sanitizer report."""
    ran = sum(int(n) for n in re.findall(r"^\[==========\] (\d+) test\(s\) run\.", out, re.M))
    ok = re.findall(r"^\[       OK \] (\S+)", out, re.M)
    failed = re.findall(r"^\[  FAILED  \] (test_\S+)", out, re.M)
    assert not failed, f"{provider}: failed {failed}\n{out}"
    assert rc == 0, f"{provider}: driver exited {rc}\n{out}"
    assert ran == len(EXPECTED[provider]), f"{provider}: {ran} cases ran, want {len(EXPECTED[provider])}\n{out}"
    assert sorted(ok) == sorted(EXPECTED[provider]), f"{provider}: passed {ok}\n{out}"
    assert "Sanitizer" not in out, out


def test_backend_aws_s3rver(scratch):
    p = peers.start_s3rver(scratch / "s3")
    try:
        rc, out = run_driver({"FT_PEER_S3": p.url, "FT_PEER_S3_BUCKET": p.bucket, "FT_PEER_S3_VHOST": p.vhost_url})
    finally:
        p.stop()
    check("aws", rc, out)


def test_backend_azure_azurite(scratch):
    p = peers.start_azurite(scratch / "azure")
    try:
        rc, out = run_driver({"FT_PEER_AZURE": p.url, "FT_PEER_AZURE_CONTAINER": p.container,
                              "FT_PEER_AZURE_KEY": p.key})
    finally:
        p.stop()
    check("azure", rc, out)


def test_backend_gcp_emulator(scratch):
    p = peers.start_gcs(scratch / "gcs")
    try:
        rc, out = run_driver({"FT_PEER_GCS": p.url})
    finally:
        p.stop()
    check("gcp", rc, out)


def test_backend_ht_nginx(scratch):
    p = peers.start_nginx(scratch / "ht")
    try:
        rc, out = run_driver({"FT_PEER_HT": p.url, "FT_PEER_HT_ROOT": str(p.root)})
        gets = p.access_log.read_text().count('"GET ')
    finally:
        p.stop()
    check("ht", rc, out)
    assert gets >= 5, f"nginx logged {gets} GETs"
