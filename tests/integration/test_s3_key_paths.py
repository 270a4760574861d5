# SPDX-License-Identifier: Apache-2.0
# A key that is both an object and a "directory" of others ("a", "a/b", "a/b/c") through S3, the native API and jobs.
"""
S3 keys are flat: "a" and "a/b" are two objects. On disk "a/b" wants "a" to be a directory, so
whichever of the two finds its path taken is stored under its hashed file name with the real name
in an xattr (target/core/keymap.h, docs/s3.md "How object names are stored"). These tests PUT
such families in every order and check GET, HEAD, DELETE, listings (delimiter, prefix, paging),
the native API, a copy job, prefetch and evict of a remote bucket, and a rebalance. The module's
cluster has one target with one mountpath, so every family really shares a directory tree.
"""
import hashlib
import itertools
import os

import pytest
from botocore.exceptions import ClientError

import peers
import s3util
from conftest import module_cluster
from ftutil import TIMEOUT, Api, create_remote, session, unique, wait_job, wait_until

cluster = module_cluster("keypaths", "it looks at the target's mountpath", targets=1, mountpaths=1)
s3 = s3util.client_fixture()
bucket = s3util.bucket_fixture("kpath")

FAMILY = ["a", "a/b", "a/b/c"]


def _body(key):
    return ("body of %r " % key).encode() * (1 + len(key) % 5)


def _list_all(c, b, **kw):
    keys, prefixes, pages = [], [], 0
    for p in c.get_paginator("list_objects_v2").paginate(Bucket=b, **kw):
        pages += 1
        keys += [o["Key"] for o in p.get("Contents", [])]
        prefixes += [x["Prefix"] for x in p.get("CommonPrefixes", [])]
    return keys, prefixes, pages


def _hashed_files(cluster, provider, b):
    """{real name: path} of the hashed files of bucket b on every mountpath."""
    out = {}
    for mp in cluster.all_mountpaths():
        top = os.path.join(mp, provider, b, ".ft-keys")
        for dirpath, _, files in os.walk(top):
            for f in files:
                p = os.path.join(dirpath, f)
                name = os.getxattr(p, "user.ft.name").decode()
                assert f == hashlib.sha256(name.encode()).hexdigest()
                out[name] = p
    return out


def _assert_family(c, b, keys):
    for k in keys:
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == _body(k), k
        assert c.head_object(Bucket=b, Key=k)["ContentLength"] == len(_body(k)), k


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))), ids=lambda o: "".join(map(str, o)))
def test_every_put_order(cluster, s3, bucket, order):
    keys = [FAMILY[i] for i in order]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=_body(k))
    _assert_family(s3, bucket, FAMILY)
    assert _list_all(s3, bucket)[0] == FAMILY
    # exactly one place per name: two of the three are in the way of each other, so at least one
    # (and never all: the first PUT finds its path free) is a hashed file
    hashed = _hashed_files(cluster, "ais", bucket)
    assert 1 <= len(hashed) <= 2 and set(hashed) < set(FAMILY), hashed
    top = os.path.join(cluster.all_mountpaths()[0], "ais", bucket)
    for k in FAMILY:
        plain = os.path.isfile(os.path.join(top, k))
        assert plain != (k in hashed), k


def test_overwrite_head_and_delete_each(s3, bucket):
    for k in ("a/b", "a", "a/b/c"):
        s3.put_object(Bucket=bucket, Key=k, Body=_body(k))
    # overwriting a name whose path is taken keeps it where it is, new bytes
    s3.put_object(Bucket=bucket, Key="a", Body=b"second version of a")
    assert s3.get_object(Bucket=bucket, Key="a")["Body"].read() == b"second version of a"
    r = s3.get_object(Bucket=bucket, Key="a/b", Range="bytes=2-9")
    assert r["Body"].read() == _body("a/b")[2:10]
    # deleting the "directory" object leaves what is below it
    s3.delete_object(Bucket=bucket, Key="a")
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="a")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    _assert_family(s3, bucket, ["a/b", "a/b/c"])
    assert _list_all(s3, bucket)[0] == ["a/b", "a/b/c"]
    # and back again; then the middle one goes
    s3.put_object(Bucket=bucket, Key="a", Body=_body("a"))
    s3.delete_object(Bucket=bucket, Key="a/b")
    _assert_family(s3, bucket, ["a", "a/b/c"])
    with pytest.raises(ClientError):
        s3.get_object(Bucket=bucket, Key="a/b")
    assert _list_all(s3, bucket)[0] == ["a", "a/b/c"]
    # the deepest goes, the directories it needed are pruned, "a/b" can be a plain file again
    s3.delete_object(Bucket=bucket, Key="a/b/c")
    s3.put_object(Bucket=bucket, Key="a/b", Body=_body("a/b"))
    _assert_family(s3, bucket, ["a", "a/b"])
    assert _list_all(s3, bucket)[0] == ["a", "a/b"]
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a"}, {"Key": "a/b"}]})
    assert _list_all(s3, bucket)[0] == []


def test_listing_delimiter_prefix_paging(s3, bucket):
    keys = ["a", "a/b", "a/b/c", "a/x", "ab", "d/", "d/e", "d/e/f", "z"]
    for k in reversed(keys):
        s3.put_object(Bucket=bucket, Key=k, Body=_body(k))
    assert _list_all(s3, bucket)[0] == keys
    # "a" is a key and "a/" a common prefix at once
    got, prefixes, _ = _list_all(s3, bucket, Delimiter="/")
    assert got == ["a", "ab", "z"] and prefixes == ["a/", "d/"]
    got, prefixes, _ = _list_all(s3, bucket, Prefix="a/", Delimiter="/")
    assert got == ["a/b", "a/x"] and prefixes == ["a/b/"]
    got, prefixes, _ = _list_all(s3, bucket, Prefix="a/b", Delimiter="/")
    assert got == ["a/b"] and prefixes == ["a/b/"]
    got, prefixes, _ = _list_all(s3, bucket, Prefix="d/", Delimiter="/")
    assert got == ["d/", "d/e"] and prefixes == ["d/e/"]
    assert _list_all(s3, bucket, Prefix="a")[0] == ["a", "a/b", "a/b/c", "a/x", "ab"]
    # one key a page, with and without a delimiter
    got, _, pages = _list_all(s3, bucket, PaginationConfig={"PageSize": 1})
    assert got == keys and pages == len(keys)
    got, prefixes, pages = _list_all(s3, bucket, Delimiter="/", PaginationConfig={"PageSize": 1})
    assert got == ["a", "ab", "z"] and prefixes == ["a/", "d/"] and pages == 5
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, StartAfter="a")["Contents"]] == keys[1:]
    assert [o["Key"] for o in s3.list_objects(Bucket=bucket, Marker="a/b")["Contents"]] == keys[2:]


def test_native_api(cluster, s3):
    api = Api(cluster.url, session())
    b = unique("kpn")
    api.create_bucket(b)
    names = ["x/y/z", "x", "x/y", "x/w"]
    for n in names:
        api.put(b, n, _body(n))
    for n in names:
        r = api.get(b, n)
        assert r.status_code == 200 and r.content == _body(n), n
        r = api.head(b, n)
        assert r.status_code == 200 and int(r.headers["Content-Length"]) == len(_body(n)), n
    entries, _ = api.list_all(b, pagesize=1)
    assert [e["name"] for e in entries] == sorted(names)
    assert [e["size"] for e in entries] == [len(_body(n)) for n in sorted(names)]
    assert [e["name"] for e in api.list_all(b, prefix="x/y")[0]] == ["x/y", "x/y/z"]
    # the same objects through S3
    assert _list_all(s3, b)[0] == sorted(names)
    assert s3.get_object(Bucket=b, Key="x")["Body"].read() == _body("x")
    r = api.delete(b, "x/y")
    assert r.status_code == 200, r.text
    assert api.get(b, "x/y").status_code == 404
    for n in ("x", "x/y/z", "x/w"):
        assert api.get(b, n).content == _body(n), n
    for n in ("x", "x/y/z", "x/w"):
        assert api.delete(b, n).status_code == 200, n
    assert api.list_all(b)[0] == []
    api.destroy_bucket(b)


def test_copy_job(cluster, s3):
    api = Api(cluster.url, session())
    src, dst = unique("kpsrc"), unique("kpdst")
    api.create_bucket(src)
    keys = ["p/q", "p", "p/q/r", "s", "s/t"]
    for k in keys:
        s3.put_object(Bucket=src, Key=k, Body=_body(k))
    r = api.s.post(api.url + "/v1/buckets/" + src, json={"action": "copy-bck", "value": {"to": {"name": dst}}})
    assert r.status_code == 200, r.text
    st = wait_job(api, r.json()["job_id"])
    assert st["state"] == "finished" and st.get("errors", 0) == 0 and st["objects"] == len(keys), st
    assert _list_all(s3, dst)[0] == sorted(keys)
    _assert_family(s3, dst, keys)


# ---- prefetch and evict of a remote bucket (s3rver keeps "a" and "a/b" side by side) ----
@pytest.fixture(scope="module")
def s3peer():
    peers.ensure_installed()
    p = peers.start_s3rver(peers.scratch_dir())
    try:
        yield p
    finally:
        p.stop()


def test_prefetch_and_evict(cluster, s3peer):
    import boto3
    import requests
    from botocore.config import Config
    origin = boto3.client("s3", endpoint_url=s3peer.url, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                          region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
    b = unique("kpr")
    create_remote(cluster.url, b, "aws", {"bucket": s3peer.bucket, "endpoint": s3peer.url, "addressing": "path",
                                          "region": "us-east-1", "access_key": "S3RVER", "secret_key": "S3RVER"})
    pre = b + "/"
    keys = [pre + k for k in ("m", "m/n", "m/n/o", "q/r", "q")]
    for k in keys:
        origin.put_object(Bucket=s3peer.bucket, Key=k, Body=_body(k))
    url = "%s/v1/buckets/%s?provider=aws" % (cluster.url, b)

    def job(action, value):
        r = requests.post(url, json={"action": action, "value": value}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        return wait_job(cluster, r.json()["job_id"])

    st = job("prefetch-listrange", {"prefix": pre})
    assert st["state"] == "finished" and st["objects"] == len(keys) and st["errors"] == 0, st
    cached = _hashed_files(cluster, "aws", b)
    assert 1 <= len(cached) < len(keys), cached  # some of them found their path taken
    # served from the cache: the origin's copies go, the cached ones stay readable
    for k in keys:
        origin.delete_object(Bucket=s3peer.bucket, Key=k)
    for k in keys:
        r = requests.get("%s/v1/objects/%s/%s?provider=aws" % (cluster.url, b, k), timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == _body(k), k
    st = job("evict-listrange", {"objnames": [pre + "m", pre + "m/n/o", pre + "q"]})
    assert st["state"] == "finished" and st["objects"] == 3, st
    left = set(_hashed_files(cluster, "aws", b))
    top = os.path.join(cluster.all_mountpaths()[0], "aws", b)
    for k in keys:
        here = k in left or os.path.isfile(os.path.join(top, k))
        assert here == (k in (pre + "m/n", pre + "q/r")), k
    requests.delete(url, timeout=TIMEOUT)


# ---- a rebalance moves every one of them by its real name ----
def test_rebalance_keeps_them(make_cluster):
    h = make_cluster(targets=1, mountpaths=1)
    c = s3util.client(h)
    b = s3util.bucket_name("kprb")
    c.create_bucket(Bucket=b)
    keys = []
    for i in range(16):
        fam = ["f%02d" % i, "f%02d/g" % i, "f%02d/g/h" % i]
        keys += fam
        for k in (fam if i % 2 else reversed(fam)):
            c.put_object(Bucket=b, Key=k, Body=_body(k))
    assert len(_hashed_files(h, "ais", b)) >= 16
    version = h.smap()["version"]
    h.add_target()
    api = Api(h.url, session())

    def finished():
        for t in h.targets():
            st = session().get(t["control_url"] + "/v1/rebalance", timeout=TIMEOUT).json()
            if st.get("job"):
                st = dict(session().get(t["control_url"] + "/v1/jobs/" + st["job"], timeout=TIMEOUT).json(),
                          id=st["id"])
            if not st["id"].startswith("rebalance-") or int(st["id"].split("-")[1]) <= version:
                return False
            if st["state"] != "finished":
                return False
            assert st["errors"] == 0, st
        return True

    wait_until(finished, 120, 0.2, "rebalance finished everywhere")
    # the new target holds some of them, hashed ones among them
    new_top = os.path.join(h.c.targets[-1].mountpaths[0], "ais", b)
    on_new = [os.path.relpath(os.path.join(d, f), new_top) for d, _, fs in os.walk(new_top) for f in fs]
    assert any(f.startswith(".ft-keys/") for f in on_new), on_new
    assert any(not f.startswith(".ft-keys/") for f in on_new), on_new
    for k in keys:
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == _body(k), k
    assert _list_all(c, b)[0] == sorted(keys)
    assert [e["name"] for e in api.list_all(b)[0]] == sorted(keys)


# ---- mirror copies and EC slices of such families ----
def _main_files(h, b, key):
    """The main copies of key in bucket b: its path or its hashed file (named by its xattr)."""
    h256 = hashlib.sha256(key.encode()).hexdigest()
    out = []
    for mp in h.all_mountpaths():
        for p in (os.path.join(mp, "ais", b, key), os.path.join(mp, "ais", b, ".ft-keys", h256[:2], h256)):
            if os.path.isfile(p) and (".ft-keys" not in p or os.getxattr(p, "user.ft.name").decode() == key):
                out.append(p)
    return out


def _families(n):
    keys = []
    for i in range(n):
        fam = ["r%02d" % i, "r%02d/s" % i, "r%02d/s/t" % i]
        keys.append(fam if i % 2 else fam[::-1])
    return keys


def test_mirror_copies(make_cluster):
    h = make_cluster(targets=1, mountpaths=3)
    api = Api(h.url, session())
    c = s3util.client(h)
    b = unique("kpm")
    r = api.s.post(api.url + "/v1/buckets/" + b, json={"action": "create-bck", "value": {"mirror": {"copies": 2}}})
    assert r.status_code == 200, r.text
    fams = _families(8)
    for fam in fams:
        for k in fam:
            c.put_object(Bucket=b, Key=k, Body=_body(k))
    keys = sorted(k for fam in fams for k in fam)
    # every name has its main copy and one mirror copy, each in one place on its mountpath
    copies = {}
    for mp in h.all_mountpaths():
        top = os.path.join(mp, ".copies", "ais", b)
        for dirpath, _, files in os.walk(top):
            for f in files:
                p = os.path.join(dirpath, f)
                rel = os.path.relpath(p, top)
                name = os.getxattr(p, "user.ft.name").decode() if rel.startswith(".ft-keys/") else rel
                copies[name] = copies.get(name, 0) + 1
    assert copies == {k: 1 for k in keys}
    # the scrub job walks them by their real names and repairs damaged main copies from the copies
    for k in keys:
        with open(_main_files(h, b, k)[0], "r+b") as f:
            f.seek(3)
            byte = f.read(1)
            f.seek(3)
            f.write(bytes([byte[0] ^ 0xFF]))
    r = api.s.post(api.url + "/v1/buckets/" + b, json={"action": "scrub"}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    st = wait_job(api, r.json()["job_id"], timeout=120)
    assert st["state"] == "finished" and st["errors"] == 0 and st["objects"] == len(keys), st
    for k in keys:
        with open(_main_files(h, b, k)[0], "rb") as f:
            assert f.read() == _body(k), k
    # a lost main copy is served from its mirror copy
    for k in keys:
        mains = _main_files(h, b, k)
        assert len(mains) == 1, (k, mains)
        os.remove(mains[0])
    for k in keys:
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == _body(k), k
    assert _list_all(c, b)[0] == keys
    for k in keys:
        c.delete_object(Bucket=b, Key=k)
    assert _list_all(c, b)[0] == []
    for mp in h.all_mountpaths():
        left = [f for _, _, fs in os.walk(os.path.join(mp, ".copies", "ais", b)) for f in fs]
        assert left == [], left


def test_ec_slices_and_restore(make_cluster):
    h = make_cluster(targets=4, mountpaths=1)
    api = Api(h.url, session())
    c = s3util.client(h)
    b = s3util.bucket_name("kpec")
    c.create_bucket(Bucket=b)
    r = api.s.post(h.url + "/v1/buckets/" + b, json={"action": "set-bprops", "value": {
        "ec": {"data_slices": 2, "parity_slices": 1, "objsize_limit": 1000}}})
    assert r.status_code == 200, r.text
    want = api.bmd()["version"]
    for t in h.targets():
        wait_until(lambda: session().post(t["control_url"] + "/v1/metasync", json={}).json()["bmd_version"] >= want,
                   timeout=10, what="BMD v%d" % want)
    data = {}
    for i, fam in enumerate(_families(6)):
        for j, k in enumerate(fam):
            data[k] = os.urandom(500 if (i + j) % 2 else 5000)  # replicas and slices
            c.put_object(Bucket=b, Key=k, Body=data[k])
    # slices at hashed paths (a slice of "r00" and one of "r00/s" met on a holder) carry their names,
    # as the walks over .ec need
    keyed = 0
    for t in h.c.targets:
        for mp in t.mountpaths:
            for dirpath, _, files in os.walk(os.path.join(mp, ".ec", "ais", b, ".ft-keys")):
                for f in files:
                    name = os.getxattr(os.path.join(dirpath, f), "user.ft.name").decode()
                    assert name in data and f == hashlib.sha256(name.encode()).hexdigest(), (name, f)
                    keyed += 1
    assert keyed > 0, "no slice found its path taken"
    for k in data:
        mains = _main_files(h, b, k)
        assert len(mains) == 1, (k, mains)
        os.remove(mains[0])
    for k, d in data.items():
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == d, k
        assert len(_main_files(h, b, k)) == 1, "%s not restored" % k
    assert _list_all(c, b)[0] == sorted(data)
    for k in data:
        c.delete_object(Bucket=b, Key=k)
    slices = [f for t in h.c.targets for mp in t.mountpaths
              for _, _, fs in os.walk(os.path.join(mp, ".ec", "ais", b)) for f in fs]
    wait_until(lambda: not [f for t in h.c.targets for mp in t.mountpaths
                            for _, _, fs in os.walk(os.path.join(mp, ".ec", "ais", b)) for f in fs],
               10, what="every slice deleted (%d left at first)" % len(slices))


# ---- a version left in the other place (a crash between a publish and its cleanup) ----
def test_stale_version_in_the_other_place(cluster, s3, bucket, tmp_path):
    """A name found both at its path and in its hashed file (as a crash between the rename that
    publishes one and the unlink of the other leaves it): the path wins for GET and listing, a PUT
    at the path and a DELETE remove the other, so the older version never comes back."""
    import shutil
    s3.put_object(Bucket=bucket, Key="u/v", Body=b"an older version")
    top = os.path.join(cluster.all_mountpaths()[0], "ais", bucket)
    saved = str(tmp_path / "old")
    shutil.copy2(os.path.join(top, "u", "v"), saved)  # data and metadata xattrs
    h = hashlib.sha256(b"u/v").hexdigest()
    stale = os.path.join(top, ".ft-keys", h[:2], h)

    def plant():
        os.makedirs(os.path.dirname(stale), exist_ok=True)
        shutil.copy2(saved, stale)
        os.setxattr(stale, "user.ft.name", b"u/v")

    plant()
    s3.put_object(Bucket=bucket, Key="u/v", Body=b"new version")
    assert not os.path.exists(stale), "a PUT at the path drops the hashed copy"
    plant()
    assert s3.get_object(Bucket=bucket, Key="u/v")["Body"].read() == b"new version"
    assert [o["Size"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [len(b"new version")]
    s3.delete_object(Bucket=bucket, Key="u/v")
    assert not os.path.exists(stale)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="u/v")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert _list_all(s3, bucket)[0] == []


def test_both_places_blocked(cluster, s3, bucket):
    """The fault left: a name whose path is taken and whose hashed file is a directory (put there by
    hand) is refused with 409, nothing stored, nothing left in the work directory."""
    api = Api(cluster.url, session())
    s3.put_object(Bucket=bucket, Key="g", Body=b"g")
    h = hashlib.sha256(b"g/h").hexdigest()
    blocker = os.path.join(cluster.all_mountpaths()[0], "ais", bucket, ".ft-keys", h[:2], h)
    os.makedirs(os.path.join(blocker, "x"))
    r = api.put(bucket, "g/h", b"under g", expect=409)
    assert r.json()["status"] == 409 and "hashed file" in r.json()["message"], r.text
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="g/h", Body=b"under g")
    assert s3util.error_code(e.value) == "InvalidArgument"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert api.get(bucket, "g/h").status_code == 404
    assert _list_all(s3, bucket)[0] == ["g"]
    assert cluster.work_files() == []
    os.rmdir(os.path.join(blocker, "x"))
    os.rmdir(blocker)
    s3.put_object(Bucket=bucket, Key="g/h", Body=b"under g")
    assert s3.get_object(Bucket=bucket, Key="g/h")["Body"].read() == b"under g"


def test_get_batch(cluster, s3, bucket):
    """GetBatch reads each of a family (its open is its lookup: the path, else the hashed file)."""
    import io
    import tarfile
    import requests
    keys = ["w/x/y", "w", "w/x"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=_body(k))
    items = [{"bucket": bucket, "objname": k} for k in sorted(keys)]
    items.append({"bucket": bucket, "objname": "w", "start": 2, "length": 5})
    r = requests.post(cluster.c.targets[0].public_url + "/v1/batch", json={"in": items}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text[:300]
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:") as t:
        got = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
    want = [("%s/%s" % (bucket, k), _body(k)) for k in sorted(keys)] + [("%s/w" % bucket, _body("w")[2:7])]
    assert got == want


def test_js_sdk(cluster, s3, bucket):
    """The AWS SDK for JavaScript v3 PUTs a family deepest first and reads, lists and copies it."""
    import test_s3_keys
    pkg = test_s3_keys.NODE_MODULES / "@aws-sdk" / "client-s3"
    if not pkg.is_dir() or not (test_s3_keys.NODE_MODULES / ".ft-lock.sha256").is_file():
        peers.ensure_installed()
    keys = ["a/b/c", "a/b", "a", "a//b", "folder/x", "folder/", "folder"]
    r = test_s3_keys.js(cluster, bucket, keys)
    assert r["ok"], r
    assert r["got"] == {k: test_s3_keys._body(k).decode() for k in keys}
    assert r["listed"] == sorted(keys, key=lambda k: k.encode())
    assert r["folder"] == {"keys": ["folder/", "folder/x"], "prefixes": []}
    assert r["copied"] == test_s3_keys._body("a//b").decode()
    assert len(_hashed_files(cluster, "ais", bucket)) >= 3  # "a//b", "folder/" and the family's blocked ones
