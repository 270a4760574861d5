# SPDX-License-Identifier: Apache-2.0
# Any key S3 accepts (folder markers, "//", leading '/', "." and ".." segments, long segments, 1,024 bytes) by S3 and the native API.
"""
Names that are no path are stored under a hashed file name with the name in an xattr
(target/core/keymap.h, docs/s3.md "How object names are stored"). These tests go through boto3,
the AWS SDK for JavaScript v3 (tests/integration/js/s3_keys.js), the native API with
percent-encoded names, listing (prefix, delimiter, paging), copy, multipart and a rebalance.
"""
import hashlib
import http.client
import json
import os
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

import peers
import s3util
from ftutil import Api, ctl, session, unique, wait_job, wait_until

s3 = s3util.client_fixture()
bucket = s3util.bucket_fixture("keys")

LONG_SEG = "s" * 300
KEY_1024 = ("k/" * 400) + "x" * (1024 - 800)
ODD = [
    "folder/",                 # a folder marker
    "folder/inner/",
    "a//b",
    "/lead",
    "//",
    "/",
    "a/./b",
    "a/../b",
    "..",
    ".",
    "../../etc/passwd",
    "dir/" + LONG_SEG,
    LONG_SEG + "/tail",
    KEY_1024,
    ".ft-keys/x",              # the store's reserved directory name is a plain name too
    "caf\u00e9/\u00fc//",
]
PLAIN = ["folder/a", "folder/inner/b", "a/b", "plain", "a/c"]


def _body(key):
    return ("body of %r" % key).encode()


def _put_all(s3, bucket, keys):
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=_body(k))


def _list_all(s3, bucket, **kw):
    keys, prefixes, pages = [], [], 0
    for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, **kw):
        pages += 1
        keys += [o["Key"] for o in p.get("Contents", [])]
        prefixes += [c["Prefix"] for c in p.get("CommonPrefixes", [])]
    return keys, prefixes, pages


def _utf8_sorted(keys):
    return sorted(keys, key=lambda k: k.encode())


def test_odd_keys_roundtrip(s3, bucket):
    _put_all(s3, bucket, ODD + PLAIN)
    for k in ODD + PLAIN:
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == _body(k), k
        assert s3.head_object(Bucket=bucket, Key=k)["ContentLength"] == len(_body(k)), k
    # ".." never climbs out of the bucket: the plain name "b" and "etc/passwd" do not exist
    for k in ("b", "etc/passwd"):
        with pytest.raises(ClientError) as e:
            s3.head_object(Bucket=bucket, Key=k)
        assert e.value.response["Error"]["Code"] in ("404", "NoSuchKey")
    # overwrite and delete
    s3.put_object(Bucket=bucket, Key="folder/", Body=b"")
    assert s3.get_object(Bucket=bucket, Key="folder/")["Body"].read() == b""
    s3.delete_object(Bucket=bucket, Key="a/../b")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="a/../b")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    assert s3.get_object(Bucket=bucket, Key="a/b")["Body"].read() == _body("a/b")


def test_key_length_limit(s3, bucket):
    assert len(KEY_1024.encode()) == 1024
    s3.put_object(Bucket=bucket, Key=KEY_1024, Body=b"x")
    assert s3.get_object(Bucket=bucket, Key=KEY_1024)["Body"].read() == b"x"
    multi = "\u00e9" * 512  # 1,024 bytes of two-byte characters
    s3.put_object(Bucket=bucket, Key=multi, Body=b"y")
    assert s3.get_object(Bucket=bucket, Key=multi)["Body"].read() == b"y"
    for too_long in (KEY_1024 + "z", "\u00e9" * 512 + "z"):
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key=too_long, Body=b"x")
        assert e.value.response["Error"]["Code"] == "KeyTooLongError"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_listing_over_a_mix(s3, bucket):
    keys = ODD + PLAIN
    _put_all(s3, bucket, keys)
    got, _, _ = _list_all(s3, bucket)
    assert got == _utf8_sorted(keys)
    # paging: two keys a page, continuation tokens over hashed and plain names alike
    got, _, pages = _list_all(s3, bucket, PaginationConfig={"PageSize": 2})
    assert got == _utf8_sorted(keys) and pages == (len(keys) + 1) // 2
    # delimiter at the top: folder markers roll up as S3 rolls them up
    got, prefixes, _ = _list_all(s3, bucket, Delimiter="/")
    assert got == _utf8_sorted(k for k in keys if "/" not in k)
    assert prefixes == _utf8_sorted({k[:k.index("/") + 1] for k in keys if "/" in k})
    assert "folder/" in prefixes and "/" in prefixes
    # one level down: the marker "folder/" itself is listed under its own prefix
    got, prefixes, _ = _list_all(s3, bucket, Prefix="folder/", Delimiter="/")
    assert got == ["folder/", "folder/a"]
    assert prefixes == ["folder/inner/"]
    got, _, _ = _list_all(s3, bucket, Prefix="a/")
    assert got == _utf8_sorted(["a//b", "a/./b", "a/../b", "a/b", "a/c"])
    got, prefixes, _ = _list_all(s3, bucket, Prefix="a/", Delimiter="/")
    assert got == _utf8_sorted(["a/b", "a/c"]) and prefixes == _utf8_sorted(["a//", "a/./", "a/../"])
    got, _, _ = _list_all(s3, bucket, StartAfter="a/b")
    assert got == [k for k in _utf8_sorted(keys) if k.encode() > b"a/b"]


def test_copy_and_multipart(s3, bucket):
    src, dst = "src/../" + LONG_SEG, "copies//" + LONG_SEG + "/"
    s3.put_object(Bucket=bucket, Key=src, Body=b"copy me")
    s3.copy_object(Bucket=bucket, Key=dst, CopySource={"Bucket": bucket, "Key": src})
    assert s3.get_object(Bucket=bucket, Key=dst)["Body"].read() == b"copy me"
    s3.copy_object(Bucket=bucket, Key="plain-copy", CopySource={"Bucket": bucket, "Key": src})
    assert s3.get_object(Bucket=bucket, Key="plain-copy")["Body"].read() == b"copy me"

    key = "/mpu/./" + LONG_SEG + "//"
    parts = [os.urandom(5 << 20), os.urandom(1000)]
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["Key"] for u in uploads] == [key]
    etags = [s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=i + 1, Body=p)["ETag"]
             for i, p in enumerate(parts)]
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert hashlib.md5(body).hexdigest() == hashlib.md5(b"".join(parts)).hexdigest()
    got, _, _ = _list_all(s3, bucket)
    assert key in got and dst in got and src in got


def test_delete_objects_batch(s3, bucket):
    keys = ["x/", "x//y", "/x", "x/../y"]
    _put_all(s3, bucket, keys)
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    assert sorted(d["Key"] for d in r["Deleted"]) == sorted(keys)
    assert _list_all(s3, bucket)[0] == []


def _native(bucket, name):
    """The native API path of name: every byte but the unreserved ones percent-encoded, '/' too,
    and a name of dots only spelled as %2E."""
    q = urllib.parse.quote(name.encode(), safe="")
    return "/v1/objects/%s/%s" % (bucket, q.replace(".", "%2E") if set(q) == {"."} else q)


def _raw(method, url, body=None):
    """One request sent exactly as written (requests would turn %2E into '.' and then drop a "."
    path segment), following a 307 once. (status, body)."""
    for _ in range(2):
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        try:
            c.request(method, u.path + ("?" + u.query if u.query else ""), body=body)
            r = c.getresponse()
            data = r.read()
            if r.status != 307:
                return r.status, data
            url = r.getheader("Location")
        finally:
            c.close()
    return r.status, data


def test_native_api_percent_encoded(cluster, s3):
    api = Api(cluster.url, session())
    b = unique("keys")
    api.create_bucket(b)
    names = ["n/", "n//m", "/n", "n/../m", ".", "..", LONG_SEG]
    for n in names:
        st, text = _raw("PUT", cluster.url + _native(b, n), _body(n))
        assert st == 200, (n, st, text)
    for n in names:
        assert _raw("GET", cluster.url + _native(b, n)) == (200, _body(n)), n
    listed = [e["name"] for e in api.list_page(b).json()["entries"]]
    assert listed == _utf8_sorted(names)
    # the same objects through S3
    assert _list_all(s3, b)[0] == _utf8_sorted(names)
    for n in names:
        assert s3.get_object(Bucket=b, Key=n)["Body"].read() == _body(n)
        st, text = _raw("DELETE", cluster.url + _native(b, n))
        assert st == 200, (n, st, text)
    assert api.list_page(b).json()["entries"] == []
    # still refused: NUL and bytes that are not UTF-8
    for bad in ("a%00b", "a%FFb", "%C3"):
        st, _ = _raw("PUT", cluster.url + "/v1/objects/%s/%s" % (b, bad), b"x")
        assert st == 400, bad


def test_files_stay_inside_the_bucket(cluster, s3, bucket):
    """What the keys became on disk: hashed files under <bucket>/.ft-keys with their names in an
    xattr; names that are paths keep their path; nothing outside the bucket's directory."""
    cluster.require_local("looks at the targets' mountpaths")
    _put_all(s3, bucket, ["../escape", "plain/name", "trail/"])
    found = []
    for mp in cluster.all_mountpaths():
        top = os.path.join(mp, "ais", bucket)
        for dirpath, _, files in os.walk(top):
            for f in files:
                found.append(os.path.relpath(os.path.join(dirpath, f), top))
        assert not os.path.exists(os.path.join(mp, "ais", "escape"))
    assert "plain/name" in found
    hashed = [f for f in found if f.startswith(".ft-keys/")]
    assert len(hashed) == 2 and len(found) == 3
    for mp in cluster.all_mountpaths():
        for f in hashed:
            p = os.path.join(mp, "ais", bucket, f)
            if os.path.exists(p):
                name = os.getxattr(p, "user.ft.name").decode()
                assert name in ("../escape", "trail/")
                assert os.path.basename(p) == hashlib.sha256(name.encode()).hexdigest()


# ---- the AWS SDK for JavaScript v3 ----
SCRIPT = Path(__file__).resolve().parent / "js" / "s3_keys.js"
NODE_MODULES = peers.PEERS_DIR / "node_modules"


@pytest.fixture(scope="module")
def sdk():
    pkg = NODE_MODULES / "@aws-sdk" / "client-s3"
    if not pkg.is_dir() or not (NODE_MODULES / ".ft-lock.sha256").is_file():
        peers.ensure_installed()
    assert pkg.is_dir()


def js(cluster, bucket, keys):
    ak, sk = s3util.keys(cluster)
    args = dict(endpoint=s3util.endpoint(cluster), access=ak, secret=sk, bucket=bucket, keys=keys)
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), AWS_EC2_METADATA_DISABLED="true")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        env.pop(k, None)
    p = subprocess.run(["node", str(SCRIPT), json.dumps(args)], capture_output=True, text=True,
                       timeout=180, env=env)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    assert lines, (p.stdout, p.stderr)
    return json.loads(lines[-1])


def test_js_sdk_keys(cluster, sdk, s3, bucket):
    keys = ODD + PLAIN
    r = js(cluster, bucket, keys)
    assert r["ok"], r
    assert r["got"] == {k: _body(k).decode() for k in keys}
    assert r["listed"] == _utf8_sorted(keys)
    assert r["folder"] == {"keys": ["folder/", "folder/a"], "prefixes": ["folder/inner/"]}
    assert r["too_long"] == {"name": "KeyTooLongError", "status": 400}
    assert r["copied"] == _body("a//b").decode()


# ---- a rebalance moves such names by their real names ----

def test_rebalance_keeps_them_readable(make_cluster):
    cluster = make_cluster(targets=2, mountpaths=2)
    c = s3util.client(cluster)
    b = s3util.bucket_name("keys")
    c.create_bucket(Bucket=b)
    keys = ["m%02d/%s" % (i, k) for i in range(12) for k in ("", "/", "./x", "../y", LONG_SEG)]
    keys += ["p%02d/plain" % i for i in range(12)]
    _put_all(c, b, keys)
    cluster.add_target()
    version = cluster.smap()["version"]

    def run(t):
        st = ctl("GET", t.control_url, "/v1/rebalance")
        if st.get("job"):  # run by the job framework: its document has the state
            job = ctl("GET", t.control_url, "/v1/jobs/" + st["job"])
            job["id"] = st["id"]
            return job
        return st

    def finished():
        for t in cluster.c.targets:
            st = run(t)
            if not st["id"].startswith("rebalance-") or int(st["id"].split("-")[1]) < version:
                return False
            if st["state"] != "finished":
                return False
        return True

    wait_until(finished, 120, 0.2, "rebalance finished everywhere")
    assert [run(t)["errors"] for t in cluster.c.targets] == [0] * len(cluster.c.targets)
    new = cluster.c.targets[-1]
    on_new = []
    for mp in new.mountpaths:
        top = os.path.join(mp, "ais", b)
        for dirpath, _, files in os.walk(top):
            on_new += files
    assert any(len(f) == 64 for f in on_new), "no hashed name moved to the new target"
    for k in keys:
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == _body(k), k
    assert _list_all(c, b)[0] == _utf8_sorted(keys)


# ---- jobs and mirror copies see the real names ----

def test_copy_job_and_mirror_copies(cluster, s3):
    api = Api(cluster.url, session())
    src, dst = unique("ksrc"), unique("kdst")
    r = api.s.post(api.url + "/v1/buckets/" + src, json={"action": "create-bck", "value": {"mirror": {"copies": 2}}})
    assert r.status_code == 200, r.text
    keys = ["c/", "c//d", "/c", "c/../d", "..", "e/" + LONG_SEG, "plain/x"]
    _put_all(s3, src, keys)
    r = api.s.post(api.url + "/v1/buckets/" + src, json={"action": "copy-bck", "value": {"to": {"name": dst}}})
    assert r.status_code == 200, r.text
    st = wait_job(api, r.json()["job_id"])
    assert st["state"] == "finished" and st.get("errors", 0) == 0, st
    assert _list_all(s3, dst)[0] == _utf8_sorted(keys)
    for k in keys:
        assert s3.get_object(Bucket=dst, Key=k)["Body"].read() == _body(k), k
    if not cluster.local:
        return
    # every hashed main copy has its mirror copy under .copies, named by the same xattr
    named = {}
    for mp in cluster.all_mountpaths():
        for top in (os.path.join(mp, "ais", src), os.path.join(mp, ".copies", "ais", src)):
            for dirpath, _, files in os.walk(top):
                for f in files:
                    if len(f) == 64:
                        name = os.getxattr(os.path.join(dirpath, f), "user.ft.name").decode()
                        named[name] = named.get(name, 0) + 1
    assert named == {k: 2 for k in keys if k != "plain/x"}


def _hashed_rel(name):
    h = hashlib.sha256(name.encode()).hexdigest()
    return os.path.join(".ft-keys", h[:2], h)


def test_ec_slices_and_restore(make_cluster):
    """EC over hashed names: slices and replicas are kept under the hashed path on the other
    targets; a lost main copy is restored from them, under its hashed name with its real name."""
    h = make_cluster(targets=4, mountpaths=1)
    api = Api(h.url, session())
    c = s3util.client(h)
    b = s3util.bucket_name("keysec")
    c.create_bucket(Bucket=b)
    r = api.s.post(h.url + "/v1/buckets/" + b, json={"action": "set-bprops", "value": {
        "ec": {"data_slices": 2, "parity_slices": 1, "objsize_limit": 50_000}}})
    assert r.status_code == 200, r.text
    want = api.bmd()["version"]
    for t in h.targets():
        wait_until(lambda: session().post(t["control_url"] + "/v1/metasync", json={}).json()["bmd_version"] >= want,
                   timeout=10, what="BMD v%d" % want)
    objs = {"big/../" + LONG_SEG: os.urandom(120_001), "small//": os.urandom(999), "/lead/": os.urandom(70_000)}
    for k, data in objs.items():
        c.put_object(Bucket=b, Key=k, Body=data)
    for k, data in objs.items():
        rel = _hashed_rel(k)
        slices = [os.path.join(mp, ".ec", "ais", b, rel) for t in h.c.targets for mp in t.mountpaths]
        assert len([p for p in slices if os.path.isfile(p)]) == (1 if len(data) < 50_000 else 3), k
        mains = [os.path.join(mp, "ais", b, rel) for t in h.c.targets for mp in t.mountpaths]
        mains = [p for p in mains if os.path.isfile(p)]
        assert len(mains) == 1, (k, mains)
        os.remove(mains[0])
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == data, k
        assert os.path.isfile(mains[0]), "%s not restored on its owner" % k
        assert os.getxattr(mains[0], "user.ft.name").decode() == k
    assert _list_all(c, b)[0] == _utf8_sorted(objs)
