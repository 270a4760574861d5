# SPDX-License-Identifier: Apache-2.0
# Copy jobs: copy-bck and copy-listrange between ais buckets and from a remote (ht) bucket; re-runs, sync, dry run.
import os

import pytest
import requests

import peers
from ftutil import TIMEOUT, assert_json_error, cksum_hex, create_remote, unique, wait_job
from test_coldget import put_origin

origin = peers.nginx_origin_fixture()


def action(api, bucket, act, value, provider="ais", expect=200):
    r = api.s.post(f"{api.url}/v1/buckets/{bucket}?provider={provider}", json={"action": act, "value": value},
                   timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def run(api, bucket, act, value, provider="ais"):
    jid = action(api, bucket, act, value, provider).json()["job_id"]
    st = wait_job(api, jid)
    assert st["state"] == "finished", st
    return st


def fill(api, bucket, n, prefix="d/"):
    data = {}
    for i in range(n):
        name = f"{prefix}obj-{i:03d}"
        data[name] = os.urandom(500 + 97 * i)
        api.put(bucket, name, data[name], headers={"Content-Type": "image/x-test", "x-amz-meta-idx": str(i)})
    return data


def names(api, bucket):
    entries, _ = api.list_all(bucket)
    return {e["name"] for e in entries}


@pytest.fixture
def src(api):
    b = unique("csrc")
    api.create_bucket(b, cksum="md5")
    yield b
    api.destroy_bucket(b, expect=None)


def test_copy_bck_creates_destination_keeps_metadata_and_skips_on_rerun(api, src):
    data = fill(api, src, 30)
    dst = unique("cdst")
    st = run(api, src, "copy-bck", {"to": {"name": dst}})
    try:
        assert st["kind"] == "copy" and st["to"] == {"provider": "ais", "bucket": dst}, st
        assert st["objects"] == 30 and st["errors"] == 0 and st["total"] == 30, st
        assert st["bytes"] == sum(len(v) for v in data.values())
        assert st["eta_s"] == 0 and st["rate"] >= 0 and len(st["targets"]) == 3
        for p in st["targets"]:
            assert {"node", "state", "objects", "bytes", "errors", "total", "rate", "eta_s"} <= set(p), p
        # created with the source's properties
        props = {b["name"]: b for b in api.bmd()["buckets"]}
        assert props[dst]["checksum"] == "md5"
        for name, body in data.items():
            r = api.get(dst, name)
            assert r.status_code == 200 and r.content == body
            assert r.headers["Content-Type"] == "image/x-test"
            assert r.headers["x-amz-meta-idx"] == str(int(name[-3:]))
            s = api.head(src, name)
            assert r.headers["Ais-Checksum-Type"] == "md5"
            assert r.headers["Ais-Checksum-Value"] == s.headers["Ais-Checksum-Value"]
        # a re-run copies nothing: every object is there already
        st = run(api, src, "copy-bck", {"to": {"name": dst}})
        assert st["objects"] == 0 and st["skipped"] == 30 and st["errors"] == 0, st
        # force copies again
        st = run(api, src, "copy-bck", {"to": {"name": dst}, "force": True})
        assert st["objects"] == 30, st
    finally:
        api.destroy_bucket(dst, expect=None)


def test_copy_bck_of_a_sha512_bucket(api):
    """A sha512 source: the destination is created sha512, each copy's 128-digit value equals the source's (checked
    by the job), a re-run skips them all (HEAD's value compared whole), a changed source object is copied again."""
    src = unique("csrc512")
    api.create_bucket(src, cksum="sha512")
    dst = unique("cdst512")
    try:
        data = fill(api, src, 8)
        st = run(api, src, "copy-bck", {"to": {"name": dst}})
        assert st["objects"] == 8 and st["errors"] == 0, st
        assert {b["name"]: b for b in api.bmd()["buckets"]}[dst]["checksum"] == "sha512"
        for name, body in data.items():
            r = api.get(dst, name)
            assert r.status_code == 200 and r.content == body
            assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == ("sha512",
                                                                                        cksum_hex("sha512", body))
        st = run(api, src, "copy-bck", {"to": {"name": dst}})
        assert st["objects"] == 0 and st["skipped"] == 8 and st["errors"] == 0, st
        changed = os.urandom(999)
        api.put(src, "d/obj-003", changed)
        st = run(api, src, "copy-bck", {"to": {"name": dst}})
        assert st["objects"] == 1 and st["skipped"] == 7 and st["errors"] == 0, st
        assert api.get(dst, "d/obj-003").headers["Ais-Checksum-Value"] == cksum_hex("sha512", changed)
    finally:
        api.destroy_bucket(dst, expect=None)
        api.destroy_bucket(src, expect=None)


def test_copy_sync_removes_what_is_gone_and_recopies_changes(api, src):
    data = fill(api, src, 12)
    dst = unique("cdst")
    run(api, src, "copy-bck", {"to": {"name": dst}})
    try:
        gone = ["d/obj-001", "d/obj-005", "d/obj-009"]
        for n in gone:
            assert api.delete(src, n).status_code == 200
        api.put(dst, "d/extra", b"not in the source")
        api.put(dst, "other/kept", b"outside the prefix")
        changed = os.urandom(777)
        api.put(src, "d/obj-002", changed)
        # without sync nothing is removed
        run(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "d/"})
        assert set(gone) <= names(api, dst)
        assert api.get(dst, "d/obj-002").content == changed
        st = run(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "d/", "sync": True})
        assert st["errors"] == 0, st
        left = names(api, dst)
        assert not (set(gone) & left) and "d/extra" not in left, left
        assert "other/kept" in left
        assert left - {"other/kept"} == set(data) - set(gone)
    finally:
        api.destroy_bucket(dst, expect=None)


def test_copy_listrange_template_names_and_dry_run(api, src):
    data = fill(api, src, 20)
    dst = unique("cdst")
    api.create_bucket(dst)
    try:
        st = run(api, src, "copy-listrange", {"to": {"name": dst}, "template": "d/obj-{000..009}", "dry_run": True})
        assert st["objects"] == 10 and st["dry_run"] is True, st
        assert st["bytes"] == sum(len(data[f"d/obj-{i:03d}"]) for i in range(10))
        assert names(api, dst) == set()
        st = run(api, src, "copy-listrange", {"to": {"name": dst}, "template": "d/obj-{000..009}"})
        assert st["objects"] == 10 and st["errors"] == 0
        st = run(api, src, "copy-listrange", {"to": {"name": dst}, "objnames": ["d/obj-015", "d/missing"]})
        assert st["objects"] == 1 and st["errors"] == 1, st
        assert any("d/missing" in e and "no such object" in e for e in st["error_samples"]), st
        assert names(api, dst) == {f"d/obj-{i:03d}" for i in range(10)} | {"d/obj-015"}
        assert api.get(dst, "d/obj-015").content == data["d/obj-015"]
    finally:
        api.destroy_bucket(dst, expect=None)


def test_copy_remote_to_ais(api, origin):
    rb = unique("crem")
    create_remote(api.url, rb, "ht", {"endpoint": origin.url})
    data = {}
    for i in range(8):
        n = f"{rb}-s-{i}.bin"
        data[n] = os.urandom(1000 + i)
        put_origin(origin, n, data[n])
    dst = unique("cdst")
    try:
        st = run(api, rb, "copy-listrange", {"to": {"name": dst, "provider": "ais"},
                                             "template": f"{rb}-s-{{0..7}}.bin"}, provider="ht")
        assert st["objects"] == 8 and st["errors"] == 0, st
        for n, body in data.items():
            assert api.get(dst, n).content == body
        # the origin changed one object: latest revalidates the cached copy first
        n = f"{rb}-s-3.bin"
        data[n] = os.urandom(1500)  # another size: nginx ETags have one-second mtimes
        put_origin(origin, n, data[n])
        st = run(api, rb, "copy-listrange", {"to": {"name": dst}, "objnames": [n], "latest": True}, provider="ht")
        assert st["objects"] == 1, st
        assert api.get(dst, n).content == data[n]
        # by prefix an ht bucket cannot be listed
        assert_json_error(action(api, rb, "copy-bck", {"to": {"name": dst}}, provider="ht", expect=400), 400,
                          "cannot be listed")
    finally:
        api.destroy_bucket(dst, expect=None)
        requests.delete(f"{api.url}/v1/buckets/{rb}?provider=ht", timeout=TIMEOUT)


def test_copy_prepend_names_the_copies(api, src):
    data = fill(api, src, 10)
    dst = unique("cdst")
    api.create_bucket(dst, cksum="md5")  # the source's type: a re-run can tell the copies are there
    try:
        api.put(dst, "d/obj-000", b"an object of dst's own: not a copy")
        api.put(dst, "bak/other", b"outside the copied prefix")
        # a dry run counts the copies under their new names and writes nothing
        st = run(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "d/", "prepend": "bak/", "dry_run": True})
        assert st["objects"] == 10 and st["to"]["prepend"] == "bak/", st
        assert names(api, dst) == {"d/obj-000", "bak/other"}
        st = run(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "d/", "prepend": "bak/"})
        assert st["objects"] == 10 and st["errors"] == 0 and st["to"] == {"provider": "ais", "bucket": dst,
                                                                          "prepend": "bak/"}, st
        assert names(api, dst) == {"bak/" + n for n in data} | {"d/obj-000", "bak/other"}
        for n, body in data.items():
            r = api.get(dst, "bak/" + n)
            assert r.status_code == 200 and r.content == body, n
            assert r.headers["x-amz-meta-idx"] == str(int(n[-3:]))
        assert api.get(dst, "d/obj-000").content == b"an object of dst's own: not a copy"
        # a re-run finds every copy under its new name
        st = run(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "d/", "prepend": "bak/"})
        assert st["objects"] == 0 and st["skipped"] == 10, st
        # sync: walks bak/d/ and looks for each source without the prepend
        assert api.delete(src, "d/obj-001").status_code == 200
        api.put(dst, "bak/d/extra", b"no source d/extra")
        st = run(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "d/", "prepend": "bak/", "sync": True})
        assert st["errors"] == 0, st
        assert names(api, dst) == {"bak/" + n for n in data if n != "d/obj-001"} | {"d/obj-000", "bak/other"}
        # a list of names, another prepend
        st = run(api, src, "copy-listrange", {"to": {"name": dst}, "template": "d/obj-{002..003}", "prepend": "v2-"})
        assert st["objects"] == 2, st
        assert api.get(dst, "v2-d/obj-003").content == data["d/obj-003"]
        assert {n for n in names(api, dst) if n.startswith("v2-")} == {"v2-d/obj-002", "v2-d/obj-003"}
    finally:
        api.destroy_bucket(dst, expect=None)


def test_copy_prepend_past_the_name_limit_fails_that_object_only(api, src):
    api.put(src, "d/" + "z" * 30, b"long")  # 1000 + 32 bytes with the prepend
    api.put(src, "d/short", b"short")
    dst = unique("cdst")
    try:
        st = action(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "d/", "prepend": "p" * 1000}).json()
        st = wait_job(api, st["job_id"])
        assert st["state"] == "finished" and st["objects"] == 1 and st["errors"] == 1, st
        assert any("longer than 1024" in e for e in st["error_samples"]), st["error_samples"]
        assert names(api, dst) == {"p" * 1000 + "d/short"}
        assert api.get(dst, "p" * 1000 + "d/short").content == b"short"
    finally:
        api.destroy_bucket(dst, expect=None)


@pytest.mark.parametrize("act,value,text", [
    ("copy-bck", {"prepend": 7}, "must be a string"),
    ("copy-bck", {"prepend": "p" * 1024}, "no room for a name"),
    ("copy-bck", {"prepend": "p" * 1000, "prefix": "q" * 30}, "plus prefix"),
    ("copy-listrange", {"prepend": "p" * 1000, "objnames": ["d/ok", "d/" + "n" * 30]}, "past 1024"),
    ("copy-listrange", {"prepend": "p" * 1020, "template": "d/obj-{000..009}"}, "past 1024"),
])
def test_copy_prepend_bad(api, src, act, value, text):
    dst = unique("cdst")
    assert_json_error(action(api, src, act, {"to": {"name": dst}, **value}, expect=400), 400, text)
    assert api.s.head(f"{api.url}/v1/buckets/{dst}", timeout=TIMEOUT).status_code == 404  # not created


@pytest.mark.parametrize("value,status,text", [
    ({}, 400, "to"),
    ({"to": "x"}, 400, "to"),
    ({"to": {"name": "bad/name"}}, 400, "destination bucket name"),
    ({"to": {"name": "x", "provider": "nope"}}, 400, "unknown destination provider"),
    ({"to": {"name": "x"}, "bogus": 1}, 400, "unknown field"),
    ({"to": {"name": "x"}, "sync": "yes"}, 400, "true or false"),
    ({"to": {"name": "x"}, "objnames": ["a"]}, 400, "unknown field"),
    ({"to": {"name": "x", "provider": "aws"}}, 404, "does not exist"),
    ({"to": {"name": "absent-dst"}, "dry_run": True}, 404, "dry run"),
])
def test_copy_bck_bad_values(api, src, value, status, text):
    assert_json_error(action(api, src, "copy-bck", value, expect=status), status, text)


def test_copy_bad_requests(api, src):
    assert_json_error(action(api, src, "copy-bck", {"to": {"name": src}}, expect=400), 400, "onto itself")
    assert_json_error(action(api, src, "copy-listrange", {"to": {"name": "x"}, "objnames": ["a"], "sync": True},
                             expect=400), 400, "sync needs a prefix")
    assert_json_error(action(api, src, "copy-listrange", {"to": {"name": "x"}, "template": "a{1..}"}, expect=400),
                      400, "template")
    assert_json_error(action(api, src, "copy-listrange", {"to": {"name": "x"}}, expect=400), 400, "objnames")
    assert_json_error(action(api, unique("nosuch"), "copy-bck", {"to": {"name": "x"}}, expect=404), 404,
                      "does not exist")


@pytest.fixture(scope="module")
def s3peer():
    peers.ensure_installed()
    p = peers.start_s3rver(peers.scratch_dir())
    try:
        yield p
    finally:
        p.stop()


def test_copy_ais_to_aws_writes_through_then_aws_to_ais(api, src, s3peer):
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=s3peer.url, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                      region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
    rb = unique("caws")
    create_remote(api.url, rb, "aws", {"bucket": s3peer.bucket, "endpoint": s3peer.url, "addressing": "path",
                                       "region": "us-east-1", "access_key": "S3RVER", "secret_key": "S3RVER"})
    data = fill(api, src, 6, prefix=f"{rb}/")
    back = unique("cback")
    try:
        st = run(api, src, "copy-bck", {"to": {"name": rb, "provider": "aws"}, "prefix": f"{rb}/"})
        assert st["objects"] == 6 and st["errors"] == 0, st
        for name, body in data.items():  # in the backend itself; the cluster's copy keeps the user metadata
            assert s3.get_object(Bucket=s3peer.bucket, Key=name)["Body"].read() == body
            r = api.s.get(f"{api.url}/v1/objects/{rb}/{name}?provider=aws", timeout=TIMEOUT)
            assert r.status_code == 200 and r.content == body
            assert r.headers.get("x-amz-meta-idx") == str(int(name[-3:]))
        # and back: remote -> ais by prefix (every target lists the backend and copies the names it owns)
        st = run(api, rb, "copy-bck", {"to": {"name": back}, "prefix": f"{rb}/"}, provider="aws")
        assert st["objects"] == 6 and st["errors"] == 0, st
        assert names(api, back) == set(data)
        for name, body in data.items():
            assert api.get(back, name).content == body
    finally:
        api.destroy_bucket(back, expect=None)
        requests.delete(f"{api.url}/v1/buckets/{rb}?provider=aws", timeout=TIMEOUT)


def test_copy_ext_replaces_the_copies_extensions(api, src):
    """"ext" ({"jpg": "png"}, leading dots taken off) renames each copy whose name ends in a mapped extension,
    after its last dot, before the prepend is put in front; other names stay."""
    data = {"e/a.jpg": b"a" * 100, "e/b.JPG": b"b" * 100, "e/c.jpg.txt": b"c" * 100, "e/d": b"d" * 100,
            "e/dir.jpg/f": b"f" * 100, "e/g.cls": b"g" * 100}
    for n, d in data.items():
        api.put(src, n, d)
    dst = unique("cdst")
    try:
        st = run(api, src, "copy-bck", {"to": {"name": dst}, "prefix": "e/", "ext": {".jpg": ".png", "cls": "label"}})
        assert st["objects"] == len(data) and st["errors"] == 0, st
        assert st["to"]["ext"] == {"jpg": "png", "cls": "label"}, st
        want = {"e/a.png": "e/a.jpg", "e/b.JPG": "e/b.JPG", "e/c.jpg.txt": "e/c.jpg.txt", "e/d": "e/d",
                "e/dir.jpg/f": "e/dir.jpg/f", "e/g.label": "e/g.cls"}
        assert names(api, dst) == set(want)
        for n, s in want.items():
            assert api.get(dst, n).content == data[s], n
        # a list of names, with a prepend: <prepend><name with its extension replaced>
        st = run(api, src, "copy-listrange", {"to": {"name": dst}, "objnames": ["e/a.jpg"], "prepend": "v2/",
                                              "ext": {"jpg": "webp"}})
        assert st["objects"] == 1, st
        assert api.get(dst, "v2/e/a.webp").content == data["e/a.jpg"]
    finally:
        api.destroy_bucket(dst, expect=None)


@pytest.mark.parametrize("value,status,text", [
    ({"ext": ["jpg"]}, 400, "must be an object"),
    ({"ext": {"jpg": 5}}, 400, "without dots or slashes"),
    ({"ext": {"": "png"}}, 400, "without dots or slashes"),
    ({"ext": {"jpg": "."}}, 400, "without dots or slashes"),
    ({"ext": {"jpg": "p/ng"}}, 400, "without dots or slashes"),
    ({"ext": {"tar.gz": "tgz"}}, 400, "without dots or slashes"),
    ({"ext": {"jpg": "png"}, "sync": True}, 501, "sync with ext"),
    ({"etl_timeout_ms": 1000}, 400, "needs an etl"),
    ({"etl_timeout_ms": "1s"}, 400, "positive integer"),
])
def test_copy_ext_and_etl_timeout_bad(api, src, value, status, text):
    dst = unique("cdst")
    assert_json_error(action(api, src, "copy-bck", {"to": {"name": dst}, **value}, expect=status), status, text)
    assert api.s.head(f"{api.url}/v1/buckets/{dst}", timeout=TIMEOUT).status_code == 404  # not created
