# SPDX-License-Identifier: Apache-2.0
# Bucket protection properties (create-bck, set-bprops, HEAD) and n-way mirroring on the mountpaths of the owner.
import io
import json
import os
import shutil
import tarfile

import pytest

from conftest import module_cluster
from ftutil import TIMEOUT, Api, assert_json_error, bucket_path, session, unique

LOM_XATTR = "user.ft.lom"


# Two targets with four mountpaths each: room for 4 replicas, too few targets for any EC.
mcluster = module_cluster("mirror", "these tests look at the mountpaths", targets=2, mountpaths=4)


@pytest.fixture
def mapi(mcluster):
    return Api(mcluster.url, session())


def props(api, bucket):
    r = api.s.head(api.url + bucket_path(bucket), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return json.loads(r.headers["Ais-Bucket-Props"])


def create(api, bucket, value=None, expect=200):
    body = {"action": "create-bck"}
    if value is not None:
        body["value"] = value
    r = api.s.post(api.url + bucket_path(bucket), json=body, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def set_props(api, bucket, value, expect=200):
    r = api.s.post(api.url + bucket_path(bucket), json={"action": "set-bprops", "value": value}, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def replicas(h, bucket, name):
    """(main paths, copy paths) of an ais object over every mountpath of every target."""
    mains, copies = [], []
    for mp in h.all_mountpaths():
        p = os.path.join(mp, "ais", bucket, name)
        c = os.path.join(mp, ".copies", "ais", bucket, name)
        if os.path.isfile(p):
            mains.append(p)
        if os.path.isfile(c):
            copies.append(c)
    return mains, copies


def mountpath_of(h, path):
    for mp in h.all_mountpaths():
        if path.startswith(mp.rstrip("/") + "/"):
            return mp
    raise AssertionError("%s is on no mountpath" % path)


def target_of(h, path):
    for i in range(len(h.c.targets)):
        if mountpath_of(h, path) in h.mountpaths(i):
            return i
    raise AssertionError(path)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def assert_replicas(h, bucket, name, data, n):
    mains, copies = replicas(h, bucket, name)
    assert len(mains) == 1, mains
    assert len(copies) == n - 1, (mains, copies)
    mps = [mountpath_of(h, p) for p in mains + copies]
    assert len(set(mps)) == n, mps  # distinct mountpaths
    assert len({target_of(h, p) for p in mains + copies}) == 1  # all on the owner
    meta = os.getxattr(mains[0], LOM_XATTR)
    for c in copies:
        assert read(c) == data
        assert os.getxattr(c, LOM_XATTR) == meta
    assert read(mains[0]) == data
    return mains[0], copies


# ---- properties ----

def test_props_create_head_and_set(mapi):
    b = unique("mp")
    create(mapi, b, {"mirror": {"copies": 3}, "checksum_validate_warm_get": True})
    p = props(mapi, b)
    assert p["mirror"] == {"copies": 3}
    assert p["checksum_validate_warm_get"] is True
    assert p["ec"] == {"data_slices": 0, "parity_slices": 0, "objsize_limit": 0}
    v0 = mapi.bmd()["version"]
    set_props(mapi, b, {"mirror": {"copies": 2}})
    p = props(mapi, b)
    assert p["mirror"] == {"copies": 2} and p["checksum_validate_warm_get"] is True  # the rest kept
    assert mapi.bmd()["version"] == v0 + 1
    set_props(mapi, b, {"checksum_validate_warm_get": False, "mirror": {"copies": 1}})
    p = props(mapi, b)
    assert p["mirror"] == {"copies": 1} and p["checksum_validate_warm_get"] is False
    # a plain bucket shows the defaults
    plain = unique("mp")
    create(mapi, plain)
    assert props(mapi, plain)["mirror"] == {"copies": 1}
    mapi.destroy_bucket(b)
    mapi.destroy_bucket(plain)


@pytest.mark.parametrize("value,contains", [
    ({"mirror": {"copies": 0}}, "copies"),
    ({"mirror": {"copies": 17}}, "copies"),
    ({"mirror": {"copies": "2"}}, "copies"),
    ({"mirror": 2}, "mirror"),
    ({"mirror": {"copies": 2, "enabled": True}}, "mirror.enabled"),
    ({"ec": {"data_slices": 33, "parity_slices": 1}}, "data_slices"),
    ({"ec": {"data_slices": 2}}, "parity_slices"),
    ({"ec": {"data_slices": 1, "parity_slices": 1, "objsize_limit": -1}}, "objsize_limit"),
    ({"checksum_validate_warm_get": "yes"}, "checksum_validate_warm_get"),
    # two targets: D+P must stay <= 1, so no EC at all fits
    ({"ec": {"data_slices": 1, "parity_slices": 1}}, "targets"),
])
def test_props_rejected(mapi, value, contains):
    b = unique("mpbad")
    r = create(mapi, b, value, expect=400)
    assert_json_error(r, 400, contains)
    mapi.create_bucket(b)
    v0 = mapi.bmd()["version"]
    r = set_props(mapi, b, value, expect=400)
    assert_json_error(r, 400, contains)
    assert mapi.bmd()["version"] == v0  # nothing changed
    assert props(mapi, b)["mirror"] == {"copies": 1}
    mapi.destroy_bucket(b)


def test_set_bprops_bad_requests(mapi):
    b = unique("mpbad")
    r = set_props(mapi, b, {"mirror": {"copies": 2}}, expect=404)
    assert_json_error(r, 404, b)
    mapi.create_bucket(b)
    for value, contains in [({}, "value"), (None, "value"), ({"checksum": {"type": "sha384"}}, "sha512"),
                            ({"versioning": True}, "versioning")]:
        r = set_props(mapi, b, value, expect=400)
        assert_json_error(r, 400, contains)
    r = mapi.s.post(mapi.url + bucket_path(b), data=b'{"action":"set-bprops","value":', timeout=TIMEOUT)
    assert_json_error(r, 400, "json")
    mapi.destroy_bucket(b)


def test_ec_bounds_follow_the_cluster(api, cluster):
    """Three targets: D+P <= 2 is accepted (shown by HEAD), D+P = 3 is not."""
    b = unique("ecb")
    r = create(api, b, {"ec": {"data_slices": 2, "parity_slices": 1}}, expect=400)
    assert_json_error(r, 400, "targets")
    create(api, b, {"ec": {"data_slices": 1, "parity_slices": 1, "objsize_limit": 4096}})
    assert props(api, b)["ec"] == {"data_slices": 1, "parity_slices": 1, "objsize_limit": 4096}
    set_props(api, b, {"ec": {"data_slices": 0, "parity_slices": 0}})
    assert props(api, b)["ec"]["data_slices"] == 0
    r = set_props(api, b, {"ec": {"data_slices": 2, "parity_slices": 1}}, expect=400)
    assert_json_error(r, 400, "targets")
    api.destroy_bucket(b)


# ---- mirroring ----

@pytest.mark.parametrize("copies", [2, 3])
def test_put_makes_copies_on_distinct_mountpaths(mcluster, mapi, copies):
    b = unique("mir")
    create(mapi, b, {"mirror": {"copies": copies}})
    objs = {"o%d" % i: os.urandom(1000 + 4099 * i) for i in range(12)}
    objs["deep/dir/name"] = b"x" * 70000
    objs["empty"] = b""
    for n, d in objs.items():
        mapi.put(b, n, d)
    for n, d in objs.items():
        assert_replicas(mcluster, b, n, d, copies)
        r = mapi.get(b, n)
        assert r.status_code == 200 and r.content == d
    # a new version replaces every copy
    mapi.put(b, "o1", b"second version")
    assert_replicas(mcluster, b, "o1", b"second version", copies)
    # DELETE removes them all
    for n in objs:
        assert mapi.delete(b, n).status_code == 200
        assert replicas(mcluster, b, n) == ([], [])
        assert mapi.get(b, n).status_code == 404
    mapi.destroy_bucket(b)


def test_more_copies_than_mountpaths(mcluster, mapi):
    """copies = 16 on targets with 4 mountpaths: one replica per mountpath, and the PUT succeeds."""
    b = unique("mir")
    create(mapi, b, {"mirror": {"copies": 16}})
    mapi.put(b, "obj", b"data" * 1000)
    assert_replicas(mcluster, b, "obj", b"data" * 1000, 4)
    mapi.destroy_bucket(b)


def test_set_bprops_then_put_mirrors(mcluster, mapi):
    b = unique("mir")
    create(mapi, b)
    mapi.put(b, "before", b"1" * 100)
    assert_replicas(mcluster, b, "before", b"1" * 100, 1)
    set_props(mapi, b, {"mirror": {"copies": 2}})
    mapi.put(b, "after", b"2" * 100)
    assert_replicas(mcluster, b, "after", b"2" * 100, 2)
    mapi.destroy_bucket(b)


def test_missing_main_served_and_repaired(mcluster, mapi):
    b = unique("mir")
    create(mapi, b, {"mirror": {"copies": 2}})
    data = os.urandom(300000)
    mapi.put(b, "x/obj", data)
    main, copies = assert_replicas(mcluster, b, "x/obj", data, 2)
    os.unlink(main)
    r = mapi.get(b, "x/obj")
    assert r.status_code == 200 and r.content == data
    assert_replicas(mcluster, b, "x/obj", data, 2)  # main back in its place
    # every replica gone: nothing to serve
    os.unlink(main)
    os.unlink(copies[0])
    r = mapi.get(b, "x/obj")
    assert r.status_code == 404
    mapi.destroy_bucket(b)


def batch_tar(h, bucket, names, **kw):
    """POST /v1/batch of names through the proxy: the answer, and the TAR's (name, bytes) when it is a 200."""
    r = session(h.token).post(h.url + "/v1/batch", json=dict({"in": [{"bucket": bucket, "objname": n}
                                                                      for n in names]}, **kw), timeout=TIMEOUT)
    if r.status_code != 200:
        return r, None
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:") as t:
        return r, [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def test_batch_item_with_missing_main_served_and_repaired(mcluster, mapi):
    """A batch finds an item's main copy gone as a GET would: served from the mirror copy, the main copy back."""
    b = unique("mirb")
    create(mapi, b, {"mirror": {"copies": 2}})
    data = {n: os.urandom(size) for n, size in (("small", 20000), ("large", 300000))}
    for n, d in data.items():
        mapi.put(b, n, d)
    mains = {n: assert_replicas(mcluster, b, n, d, 2)[0] for n, d in data.items()}
    for n in data:
        os.unlink(mains[n])
    r, got = batch_tar(mcluster, b, ["small", "large"])
    assert r.status_code == 200, r.text[:300]
    assert got == [("%s/small" % b, data["small"]), ("%s/large" % b, data["large"])]
    for n, d in data.items():
        assert_replicas(mcluster, b, n, d, 2)  # main back in its place
    # no replica left: missing, as for a GET
    main, copies = replicas(mcluster, b, "small")
    for p in main + copies:
        os.unlink(p)
    r, got = batch_tar(mcluster, b, ["small"])
    assert_json_error(r, 404)
    mapi.destroy_bucket(b)


def test_batch_of_a_validated_bucket_checks_checksums(mcluster, mapi):
    """checksum_validate_warm_get: a batch item whose main copy was damaged in place (same size and mtime) is
    never served damaged: repaired from its mirror copy; without one, the item fails and the batch says why."""
    b = unique("mirv")
    create(mapi, b, {"mirror": {"copies": 2}, "checksum_validate_warm_get": True})
    data = os.urandom(50000)
    mapi.put(b, "v", data)
    main, copies = assert_replicas(mcluster, b, "v", data, 2)

    def flip(path):
        st = os.stat(path)
        with open(path, "r+b") as f:
            f.seek(100)
            old = f.read(1)
            f.seek(100)
            f.write(bytes([old[0] ^ 0xFF]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    flip(main)
    r, got = batch_tar(mcluster, b, ["v"])
    assert r.status_code == 200 and got == [("%s/v" % b, data)], r.text[:300]
    assert read(main) == data  # repaired from the mirror copy
    flip(main)
    flip(copies[0])
    r, _ = batch_tar(mcluster, b, ["v"])
    assert_json_error(r, 502, "checksum mismatch")
    r, _ = batch_tar(mcluster, b, ["v"], continue_on_error=True)  # a damaged item is no missing one
    assert_json_error(r, 502, "checksum mismatch")
    mapi.destroy_bucket(b)


def test_wipe_one_mountpath(mcluster, mapi):
    b = unique("mir")
    create(mapi, b, {"mirror": {"copies": 2}})
    objs = {"w%03d" % i: os.urandom(500 + 97 * i) for i in range(120)}  # ~30 mains and copies on the victim
    for n, d in objs.items():
        mapi.put(b, n, d)
    victim = mcluster.mountpaths(0)[1]
    hit_main = hit_copy = 0
    for n in objs:
        mains, copies = replicas(mcluster, b, n)
        hit_main += any(p.startswith(victim + "/") for p in mains)
        hit_copy += any(p.startswith(victim + "/") for p in copies)
    assert hit_main > 0 and hit_copy > 0, (hit_main, hit_copy)  # the test wipes both kinds
    shutil.rmtree(os.path.join(victim, "ais", b))
    shutil.rmtree(os.path.join(victim, ".copies", "ais", b))
    for n, d in objs.items():
        r = mapi.get(b, n)
        assert r.status_code == 200 and r.content == d, n
    # the main copies lost are back; HEAD and ranges work on them
    for n, d in objs.items():
        mains, _ = replicas(mcluster, b, n)
        assert len(mains) == 1 and read(mains[0]) == d
    r = mapi.get(b, "w007", headers={"Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == objs["w007"][10:20]
    mapi.destroy_bucket(b)


def test_destroy_removes_copies(mcluster, mapi):
    b = unique("mir")
    create(mapi, b, {"mirror": {"copies": 3}})
    mapi.put(b, "a", b"abc")
    mapi.destroy_bucket(b)
    assert replicas(mcluster, b, "a") == ([], [])
    # re-created under the same name: nothing of the old bucket comes back
    create(mapi, b, {"mirror": {"copies": 3}})
    assert mapi.get(b, "a").status_code == 404
    mapi.destroy_bucket(b)


def test_concurrent_gets_heal_once_and_puts_stay_whole(mcluster, mapi):
    """Many GETs of an object with a lost main copy all get the right bytes; GETs during overwrites
    only ever see one whole version."""
    import threading

    b = unique("mir")
    create(mapi, b, {"mirror": {"copies": 3}})
    data = os.urandom(2 << 20)
    mapi.put(b, "big", data)
    main, _ = assert_replicas(mcluster, b, "big", data, 3)
    os.unlink(main)
    errors = []

    def reader(versions, rounds):
        api = Api(mcluster.url, session())
        for _ in range(rounds):
            r = api.get(b, "big")
            if r.status_code != 200 or r.content not in versions:
                errors.append((r.status_code, len(r.content)))

    threads = [threading.Thread(target=reader, args=([data], 3)) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert_replicas(mcluster, b, "big", data, 3)

    versions = [data] + [bytes([i]) * (1 << 20) for i in range(1, 6)]
    threads = [threading.Thread(target=reader, args=(versions, 10)) for _ in range(6)]
    for t in threads:
        t.start()
    for v in versions[1:]:
        mapi.put(b, "big", v)
    for t in threads:
        t.join()
    assert errors == []
    assert_replicas(mcluster, b, "big", versions[-1], 3)
    mapi.destroy_bucket(b)
