# SPDX-License-Identifier: Apache-2.0
# S3 with the AWS SDK for JavaScript v3 (npm @aws-sdk/client-s3, default configuration) against a real local cluster.
"""
Each test runs tests/integration/js/s3_jsv3.js with node: one SDK call a run, its result as JSON.
The SDK comes from tests/peers (package-lock.json, installed by scripts/peers-deps.sh). Its
defaults are today's S3 defaults: a stream body goes as STREAMING-UNSIGNED-PAYLOAD-TRAILER with an
x-amz-checksum-crc32 trailer, and every PutObject carries a CRC32. The canned ACL test runs on a
cluster of its own started with allow_public_read (docs/acl.md).
"""
import base64
import json
import os
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

import peers
import s3util
from conftest import module_cluster

SCRIPT = Path(__file__).resolve().parent / "js" / "s3_jsv3.js"
NODE_MODULES = peers.PEERS_DIR / "node_modules"


@pytest.fixture(scope="module")
def sdk():
    pkgs = [NODE_MODULES / "@aws-sdk" / p for p in ("client-s3", "lib-storage", "s3-request-presigner")]
    if not all(p.is_dir() for p in pkgs) or not (NODE_MODULES / ".ft-lock.sha256").is_file():
        peers.ensure_installed()
    assert all(p.is_dir() for p in pkgs)


s3 = s3util.client_fixture()
bucket = s3util.bucket_fixture("js")


def js(cluster, op, **args):
    """Runs one SDK operation; returns its JSON result."""
    ak, sk = s3util.keys(cluster)
    args = dict(endpoint=s3util.endpoint(cluster), access=ak, secret=sk, **args)
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), AWS_EC2_METADATA_DISABLED="true")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        env.pop(k, None)
    p = subprocess.run(["node", str(SCRIPT), op, json.dumps(args)], capture_output=True, text=True,
                       timeout=180, env=env)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    assert lines, (p.stdout, p.stderr)
    return json.loads(lines[-1])


def test_stream_put_unsigned_trailer_and_get(cluster, sdk, bucket):
    for size in (0, 1, 65536 + 7, 3 * 1024 * 1024 + 5):
        key = "stream-%d" % size
        r = js(cluster, "put-stream", bucket=bucket, key=key, size=size, seed=size + 1)
        assert r["ok"], r
        assert r["seen"]["content_sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
        assert r["seen"]["trailer"] == "x-amz-checksum-crc32"
        assert r["etag"].strip('"') == r["md5"]
        g = js(cluster, "get", bucket=bucket, key=key)
        assert g["ok"], g
        assert (g["size"], g["md5"]) == (size, r["md5"])


def test_bytes_put_with_crc32_header(cluster, sdk, s3, bucket):
    r = js(cluster, "put-bytes", bucket=bucket, key="bytes", size=300 * 1024, seed=7)
    assert r["ok"], r
    g = js(cluster, "get", bucket=bucket, key="bytes")
    assert g["ok"] and g["md5"] == r["md5"], g


def test_wrong_checksum_refused(cluster, sdk, s3, bucket):
    wrong = base64.b64encode(zlib.crc32(b"something else").to_bytes(4, "big")).decode()
    r = js(cluster, "put-checksum", bucket=bucket, key="bad", size=1000, crc32=wrong)
    assert not r["ok"] and (r["name"], r["status"]) == ("BadDigest", 400), r
    assert js(cluster, "get", bucket=bucket, key="bad")["name"] == "NoSuchKey"
    # the right value is taken (the script's data for seed 1, read back from a plain upload)
    js(cluster, "put-bytes", bucket=bucket, key="probe", size=1000, seed=1)
    body = s3.get_object(Bucket=bucket, Key="probe")["Body"].read()
    data_crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    r = js(cluster, "put-checksum", bucket=bucket, key="good", size=1000, seed=1, crc32=data_crc)
    assert r["ok"], r


def test_conditional_create_race(cluster, sdk, s3, bucket):
    """Two SDK processes create one key with IfNoneMatch: "*" at once: exactly one wins, twice over."""
    for rnd in range(2):
        key = "race-%d" % rnd
        with ThreadPoolExecutor(2) as ex:
            results = list(ex.map(lambda seed: js(cluster, "put-if-none-match", bucket=bucket, key=key,
                                                  size=100 * 1024, seed=seed), (11, 12)))
        ok = [r for r in results if r["ok"]]
        assert len(ok) == 1, results
        lost = [r for r in results if not r["ok"]][0]
        assert (lost["name"], lost["status"]) == ("PreconditionFailed", 412), lost
        g = js(cluster, "get", bucket=bucket, key=key)
        assert g["md5"] == ok[0]["md5"]
    # and on an existing key it is refused outright
    r = js(cluster, "put-if-none-match", bucket=bucket, key="race-0", size=10, seed=3)
    assert (r["ok"], r.get("status")) == (False, 412), r


def test_lib_storage_upload(cluster, sdk, bucket):
    """lib-storage's Upload: one PutObject below 5 MiB, a multipart upload with CRC32 parts above."""
    for size in (1024 * 1024, 12 * 1024 * 1024 + 3):
        key = "up-%d" % size
        r = js(cluster, "upload", bucket=bucket, key=key, size=size, seed=5)
        assert r["ok"], r
        g = js(cluster, "get", bucket=bucket, key=key)
        assert (g["size"], g["md5"]) == (size, r["md5"]), g


def test_lib_storage_multipart_response_checksums(cluster, sdk, s3, bucket):
    """lib-storage multipart with CRC32: COMPOSITE by default (GET returns "...-N", which the SDK
    does not validate), FULL_OBJECT on request (GET returns the whole object's CRC32, which the SDK
    validates as it reads)."""
    size = 11 * 1024 * 1024 + 5
    r = js(cluster, "upload", bucket=bucket, key="comp", size=size, seed=9, checksum="CRC32")
    assert r["ok"], r
    g = js(cluster, "get", bucket=bucket, key="comp")
    assert g["ok"] and g["md5"] == r["md5"], g
    assert g["seen"].get("content_sha256") is not None
    assert g["crc32"].endswith("-3") and g["checksum_type"] == "COMPOSITE", g
    r = js(cluster, "upload", bucket=bucket, key="full", size=size, seed=9, checksum="CRC32",
           checksum_type="FULL_OBJECT")
    assert r["ok"], r
    body = s3.get_object(Bucket=bucket, Key="full")["Body"].read()
    want = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    g = js(cluster, "get", bucket=bucket, key="full")
    assert g["ok"] and g["crc32"] == want and g["checksum_type"] == "FULL_OBJECT", g
    # a single PutObject: its CRC32 comes back and is validated
    js(cluster, "put-bytes", bucket=bucket, key="one", size=70000, seed=2)
    g = js(cluster, "get", bucket=bucket, key="one")
    assert g["ok"] and g["crc32"] and g["checksum_type"] == "FULL_OBJECT", g


def test_presigned_urls(cluster, sdk, s3, bucket):
    r = js(cluster, "presign-put", bucket=bucket, key="pre", size=200 * 1024, seed=4)
    assert r["ok"], r
    assert "X-Amz-Signature=" in r["url"]
    g = js(cluster, "presign-get", bucket=bucket, key="pre")
    assert g["ok"] and (g["size"], g["md5"]) == (200 * 1024, r["md5"]), g
    # a tampered URL is refused
    bad = js(cluster, "presign-get", bucket=bucket, key="absent")
    assert (bad["ok"], bad["status"]) == (False, 404), bad


def test_non_ascii_metadata(cluster, sdk, bucket):
    meta = {"note": "caf\u00e9 cr\u00e8me", "plain": "ascii"}
    r = js(cluster, "put-meta", bucket=bucket, key="m", size=10, meta=meta)
    assert r["ok"], r
    g = js(cluster, "get-meta", bucket=bucket, key="m")
    assert g["ok"] and g["meta"] == meta, g


# ---- canned ACLs (docs/acl.md): a cluster of its own with public reads allowed ----
PUBLIC = ("--allow_public_read", "true")
pcluster = module_cluster("jsacl", "it starts a cluster with public reads allowed", targets=1, mountpaths=1,
                          auth=True, proxy_args=PUBLIC, target_args=PUBLIC)
OWNER = ["CanonicalUser", "fasttier", "FULL_CONTROL"]
ALL_USERS_READ = ["Group", "http://acs.amazonaws.com/groups/global/AllUsers", "READ"]


def _anon(h, b, key):
    """An anonymous GET by the JS SDK (nothing signed) and by plain HTTP: (SDK result, HTTP status)."""
    r = js(h, "anon-get", bucket=b, key=key)
    assert r["sent"]["authorization"] is None, r
    plain = requests.get("%s/%s/%s" % (s3util.endpoint(h), b, key), timeout=30)
    return r, plain.status_code


def _assert_denied(h, b, key):
    r, status = _anon(h, b, key)
    assert (r["ok"], r["name"], r["status"], status) == (False, "AccessDenied", 403, 403), r


def test_canned_acls(pcluster, sdk):
    b = s3util.bucket_name("jsacl")
    assert js(pcluster, "create-bucket", bucket=b)["ok"]
    pub = js(pcluster, "put-acl", bucket=b, key="pub", size=4096, seed=3, acl="public-read")
    priv = js(pcluster, "put-acl", bucket=b, key="priv", size=4096, seed=4, acl="private")
    assert pub["ok"] and priv["ok"], (pub, priv)
    g = js(pcluster, "get-object-acl", bucket=b, key="pub")
    assert g["ok"] and g["owner"] == "fasttier" and g["grants"] == sorted([OWNER, ALL_USERS_READ]), g
    g = js(pcluster, "get-object-acl", bucket=b, key="priv")
    assert g["ok"] and g["grants"] == [OWNER], g
    # an anonymous GET reads the public-read object, not the private one
    r, status = _anon(pcluster, b, "pub")
    assert r["ok"] and (r["size"], r["md5"], status) == (4096, pub["md5"], 200), r
    _assert_denied(pcluster, b, "priv")
    # PutObjectAcl turns them around
    assert js(pcluster, "put-object-acl", bucket=b, key="pub", acl="private")["ok"]
    assert js(pcluster, "put-object-acl", bucket=b, key="priv", acl="public-read")["ok"]
    _assert_denied(pcluster, b, "pub")
    r, status = _anon(pcluster, b, "priv")
    assert r["ok"] and (r["md5"], status) == (priv["md5"], 200), r
    # a public-read bucket makes its objects readable; a private one again does not
    plain = js(pcluster, "put-bytes", bucket=b, key="plain", size=100, seed=5)
    _assert_denied(pcluster, b, "plain")
    g = js(pcluster, "get-bucket-acl", bucket=b)
    assert g["ok"] and g["grants"] == [OWNER], g
    assert js(pcluster, "put-bucket-acl", bucket=b, acl="public-read")["ok"]
    g = js(pcluster, "get-bucket-acl", bucket=b)
    assert g["ok"] and g["grants"] == sorted([OWNER, ALL_USERS_READ]), g
    r, status = _anon(pcluster, b, "plain")
    assert r["ok"] and (r["md5"], status) == (plain["md5"], 200), r
    assert js(pcluster, "put-bucket-acl", bucket=b, acl="private")["ok"]
    _assert_denied(pcluster, b, "plain")
    # a bucket created public-read
    b2 = s3util.bucket_name("jsacl")
    assert js(pcluster, "create-bucket", bucket=b2, acl="public-read")["ok"]
    assert js(pcluster, "get-bucket-acl", bucket=b2)["grants"] == sorted([OWNER, ALL_USERS_READ])
    c = s3util.client(pcluster)
    for bk in (b, b2):
        for o in c.list_objects_v2(Bucket=bk).get("Contents", []):
            c.delete_object(Bucket=bk, Key=o["Key"])
        c.delete_bucket(Bucket=bk)
