# SPDX-License-Identifier: Apache-2.0
# Integrity: damaged objects are never served; GET heals them from a mirror copy; the scrub job finds and repairs them.
import os

import pytest

from conftest import module_cluster
from ftutil import TIMEOUT, Api, assert_json_error, bucket_path, cksum_hex, session, unique, wait_job
from test_mirror import LOM_XATTR, assert_replicas, create, read, replicas, set_props


# One target with three mountpaths: every replica of every object is on it.
icluster = module_cluster("integrity", "these tests damage files on the mountpaths", targets=1, mountpaths=3)


@pytest.fixture
def iapi(icluster):
    return Api(icluster.url, session())


def flip(path, offset):
    """Flips one byte in place: same size, same metadata, different content."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))


def integrity(h):
    """The target's integrity counters (GET /v1/health on its control port)."""
    t = h.targets()[0]
    r = session().get(t["control_url"] + "/v1/health", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["integrity"]


def target_log(h):
    with open(h.c.targets[0].log, "rb") as f:
        return f.read().decode("utf-8", "replace")


def assert_not_served(api, bucket, name, contains="damaged"):
    """500 with a JSON error, for GET and a range GET alike (the damaged bytes never leave)."""
    r = api.get(bucket, name)
    assert_json_error(r, 500, contains)
    r = api.get(bucket, name, headers={"Range": "bytes=0-9"})
    assert_json_error(r, 500, contains)


# ---- GET ----

def test_flipped_byte_healed_from_copy(icluster, iapi):
    b = unique("int")
    create(iapi, b, {"mirror": {"copies": 2}, "checksum_validate_warm_get": True})
    data = os.urandom(1 << 20)
    iapi.put(b, "obj", data)
    main, copies = assert_replicas(icluster, b, "obj", data, 2)
    flip(main, 123456)
    assert read(main) != data
    repaired = integrity(icluster)["repaired_replicas"]
    for _ in range(3):
        r = iapi.get(b, "obj")
        assert r.status_code == 200 and r.content == data
    assert_replicas(icluster, b, "obj", data, 2)  # main copy rewritten
    assert integrity(icluster)["repaired_replicas"] == repaired + 1
    assert "checksum mismatch" in target_log(icluster)
    # a damaged copy is never used either: flip it, then GET keeps serving the good main copy
    flip(copies[0], 5)
    r = iapi.get(b, "obj", headers={"Range": "bytes=0-99"})
    assert r.status_code == 206 and r.content == data[:100]
    iapi.destroy_bucket(b)


def test_flipped_byte_no_copy_is_500(icluster, iapi):
    b = unique("int")
    create(iapi, b, {"checksum_validate_warm_get": True})
    data = os.urandom(200000)
    iapi.put(b, "obj", data)
    (main,), _ = replicas(icluster, b, "obj")
    flip(main, 199999)
    before = integrity(icluster)["unrepairable_objects"]
    assert_not_served(iapi, b, "obj", "checksum mismatch")
    assert integrity(icluster)["unrepairable_objects"] >= before + 2  # reported, once per refused GET
    # the damaged copy stays in place (reported again, and found by a scrub), never replaced by a 404
    (again,), _ = replicas(icluster, b, "obj")
    assert again == main and len(read(main)) == len(data)
    assert_not_served(iapi, b, "obj")
    # a new PUT replaces it
    iapi.put(b, "obj", data)
    r = iapi.get(b, "obj")
    assert r.status_code == 200 and r.content == data
    iapi.destroy_bucket(b)


def test_all_replicas_damaged_is_500(icluster, iapi):
    b = unique("int")
    create(iapi, b, {"mirror": {"copies": 3}, "checksum_validate_warm_get": True})
    data = os.urandom(70000)
    iapi.put(b, "obj", data)
    main, copies = assert_replicas(icluster, b, "obj", data, 3)
    for i, p in enumerate([main] + copies):
        flip(p, 1000 * (i + 1))
    assert_not_served(iapi, b, "obj")
    iapi.destroy_bucket(b)


def test_bad_metadata_or_size_healed_without_validation(icluster, iapi):
    """No checksum validation: missing metadata and a wrong size are still caught on every GET."""
    b = unique("int")
    create(iapi, b, {"mirror": {"copies": 2}})
    data = os.urandom(50000)
    iapi.put(b, "a", data)
    iapi.put(b, "b", data)
    main_a, _ = assert_replicas(icluster, b, "a", data, 2)
    main_b, _ = assert_replicas(icluster, b, "b", data, 2)
    os.removexattr(main_a, LOM_XATTR)
    with open(main_b, "ab") as f:
        f.write(b"tail")
    for n in ("a", "b"):
        r = iapi.get(b, n)
        assert r.status_code == 200 and r.content == data
        assert_replicas(icluster, b, n, data, 2)
    r = iapi.head(b, "a")
    assert r.status_code == 200 and r.headers["Ais-Size"] == str(len(data))
    iapi.destroy_bucket(b)


def test_bad_metadata_no_copy_is_500(icluster, iapi):
    b = unique("int")
    create(iapi, b)
    iapi.put(b, "a", b"hello world")
    (main,), _ = replicas(icluster, b, "a")
    os.setxattr(main, LOM_XATTR, b"\x01garbage")
    assert_not_served(iapi, b, "a", "metadata corrupt")
    assert iapi.head(b, "a").status_code == 500
    # an object that never existed is still a plain 404
    r = iapi.get(b, "never")
    assert_json_error(r, 404, "does not exist")
    iapi.destroy_bucket(b)


def test_batch_item_damaged_is_not_missing(icluster, iapi):
    """A GetBatch item whose only copy is damaged is an error naming it, never served and never passed off as a
    missing item (404, or an empty __404__/ member with continue_on_error)."""
    b = unique("int")
    create(iapi, b)
    iapi.put(b, "good", b"good bytes")
    iapi.put(b, "bad", b"hello world")
    (main,), _ = replicas(icluster, b, "bad")
    os.setxattr(main, LOM_XATTR, b"\x01garbage")
    items = [{"bucket": b, "objname": "good"}, {"bucket": b, "objname": "bad"}]
    for coer in (False, True):
        r = iapi.s.post(iapi.url + "/v1/batch", json={"in": items, "continue_on_error": coer}, timeout=TIMEOUT)
        assert_json_error(r, 502, "metadata corrupt")
        assert "bad" in r.json()["message"]
    iapi.destroy_bucket(b)


# ---- scrub job ----

def start_scrub(api, bucket):
    r = api.s.post(api.url + bucket_path(bucket), json={"action": "scrub"}, timeout=TIMEOUT)
    assert r.status_code == 200, "scrub job not accepted: %d %r" % (r.status_code, r.text)
    return r.json()["job_id"]


def test_scrub_repairs_and_reports(icluster, iapi):
    b = unique("scr")
    create(iapi, b, {"mirror": {"copies": 2}})
    objs = {"s%02d" % i: os.urandom(3000 + 1000 * i) for i in range(10)}
    for n, d in objs.items():
        iapi.put(b, n, d)
    reps = {n: assert_replicas(icluster, b, n, objs[n], 2) for n in objs}
    flip(reps["s01"][0], 10)          # main copy: content
    flip(reps["s02"][1][0], 20)       # mirror copy: content
    os.unlink(reps["s03"][1][0])      # mirror copy: missing
    os.removexattr(reps["s04"][0], LOM_XATTR)  # main copy: metadata
    # s05: both replicas damaged: reported, left as they are
    flip(reps["s05"][0], 1)
    flip(reps["s05"][1][0], 2)
    st = wait_job(iapi, start_scrub(iapi, b), timeout=120)
    assert st["state"] == "finished", st
    assert st["kind"] == "scrub" and st["errors"] == 1, st
    assert st["objects"] >= 9, st
    assert len(st["error_samples"]) == 1 and "s05" in st["error_samples"][0], st
    assert "unrepairable" in st["error_samples"][0], st
    for n, d in objs.items():
        if n == "s05":
            continue
        assert_replicas(icluster, b, n, d, 2)
        r = iapi.get(b, n)
        assert r.status_code == 200 and r.content == d
    # content damage is caught on GET only with checksum validation (without it, by the scrub)
    set_props(iapi, b, {"checksum_validate_warm_get": True})
    assert_not_served(iapi, b, "s05")
    # a second pass finds nothing new to repair
    st = wait_job(iapi, start_scrub(iapi, b), timeout=120)
    assert st["errors"] == 1 and "s05" in st["error_samples"][0], st
    iapi.destroy_bucket(b)


# ---- the later checksum types ----

@pytest.mark.parametrize("kind", ["xxh3", "crc32c", "sha256", "sha512"])
def test_later_types_catch_damage(icluster, iapi, kind):
    """A flipped byte in an xxh3, crc32c, sha256 or sha512 bucket: refused by a validated warm GET, reported by the scrub
    (no copy to repair from), named with the object's type in the log."""
    b = unique("int" + kind)
    create(iapi, b, {"checksum": {"type": kind}, "checksum_validate_warm_get": True})
    objs = {"a": os.urandom(300000), "b": os.urandom(5000)}
    for n, d in objs.items():
        assert iapi.put(b, n, d).headers["Ais-Checksum-Type"] == kind
    (main,), _ = replicas(icluster, b, "a")
    flip(main, 123457)
    assert_not_served(iapi, b, "a", "checksum mismatch")
    r = iapi.get(b, "b")
    assert r.status_code == 200 and r.content == objs["b"]
    st = wait_job(iapi, start_scrub(iapi, b), timeout=120)
    assert st["state"] == "finished" and st["errors"] == 1, st
    assert "a" in st["error_samples"][0] and "unrepairable" in st["error_samples"][0], st
    assert "checksum mismatch" in target_log(icluster)
    iapi.destroy_bucket(b)


@pytest.mark.parametrize("kind", ["crc32c", "sha512"])
def test_old_type_objects_validated_by_their_own_type(icluster, iapi, kind):
    """After a change from xxhash to crc32c (or sha512), a stored xxhash object is still validated (and repaired from
    its mirror copy) with xxhash, and the scrub checks each object by its own type."""
    b = unique("intchg")
    create(iapi, b, {"mirror": {"copies": 2}, "checksum_validate_warm_get": True})
    old, new = os.urandom(200000), os.urandom(200000)
    iapi.put(b, "old", old)
    set_props(iapi, b, {"checksum": {"type": kind}})
    r = iapi.put(b, "new", new)
    assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, cksum_hex(kind, new))
    assert iapi.head(b, "old").headers["Ais-Checksum-Type"] == "xxhash"
    main_old, _ = assert_replicas(icluster, b, "old", old, 2)
    main_new, _ = assert_replicas(icluster, b, "new", new, 2)
    flip(main_old, 777)
    r = iapi.get(b, "old")
    assert r.status_code == 200 and r.content == old  # healed from the copy
    assert_replicas(icluster, b, "old", old, 2)
    assert iapi.head(b, "old").headers["Ais-Checksum-Type"] == "xxhash"
    flip(main_new, 888)
    flip(main_old, 999)
    st = wait_job(iapi, start_scrub(iapi, b), timeout=120)
    assert st["state"] == "finished" and st["errors"] == 0, st
    for n, d in (("old", old), ("new", new)):
        assert_replicas(icluster, b, n, d, 2)
    iapi.destroy_bucket(b)


# ---- copy jobs ----

def copy_bck(api, src, dst):
    r = api.s.post(api.url + bucket_path(src), json={"action": "copy-bck", "value": {"to": {"name": dst}}},
                   timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return wait_job(api, r.json()["job_id"], timeout=120)


@pytest.mark.parametrize("dst_kind", ["xxhash", "crc32c"])
def test_copy_refuses_a_damaged_source(icluster, iapi, dst_kind):
    """A source object damaged on disk is not copied, into a bucket of its own checksum type or of another: the
    destination checks the bytes against the source's checksum, stores nothing, and the job names the object."""
    src, dst = unique("intcs"), unique("intcd")
    create(iapi, src)
    create(iapi, dst, {"checksum": {"type": dst_kind}})
    good, bad = os.urandom(70000), os.urandom(70000)
    iapi.put(src, "good", good)
    iapi.put(src, "bad", bad)
    (main,), _ = replicas(icluster, src, "bad")
    flip(main, 4321)
    st = copy_bck(iapi, src, dst)
    assert st["state"] == "finished" and st["objects"] == 1 and st["errors"] == 1, st
    assert "bad" in str(st["error_samples"]) and "BadCksum" in str(st["error_samples"]), st
    r = iapi.get(dst, "good")
    assert r.status_code == 200 and r.content == good
    assert r.headers["Ais-Checksum-Type"] == dst_kind
    assert iapi.head(dst, "bad").status_code == 404
    assert replicas(icluster, dst, "bad") == ([], [])
    # repaired at the source (rewritten whole), the next run copies it (and "good" again across types: a copy is
    # known the same by its checksum only when both buckets use one type)
    iapi.put(src, "bad", bad)
    st = copy_bck(iapi, src, dst)
    again = dst_kind != "xxhash"
    assert st["objects"] == 1 + again and st["errors"] == 0 and st["skipped"] == 1 - again, st
    assert iapi.get(dst, "bad").content == bad
    for b in (src, dst):
        iapi.destroy_bucket(b)
