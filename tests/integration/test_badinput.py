# SPDX-License-Identifier: Apache-2.0
# Bad input: unsafe object names, bad buckets, cut-short and oversized PUT bodies; each with a JSON error.
import os
import socket
import tempfile
import time
import urllib.parse

import pytest

from ftutil import (Api, RawConn, assert_json_error, md5_hex, quote_bucket,
                    raw_request, unique)


@pytest.fixture(scope="module")
def bkt(cluster):
    a = Api(cluster.url)
    b = unique("bad")
    a.create_bucket(b, cksum="md5")
    yield b
    a.destroy_bucket(b, expect=None)


# Raw object-name parts of the URL path, sent byte for byte (no client normalization).
BAD_NAME_PATHS = [
    "a%00b",
    "%00",
    "a/%00/b",
    "",
    "x" * 1025,
    "/".join(["y" * 255] * 4) + "/zzzz",  # 1024 + 1 bytes
    "a%FFb",             # not UTF-8
    "%C3",
]

# Names S3 accepts that are no path: plain names here too (stored hashed, docs/s3.md), never a 400.
ODD_NAME_PATHS = [
    "a/../b",
    "..",
    "../escape",
    "a/..",
    "%2E%2E/escape",
    "a/%2e%2e/b",
    "./a",
    "a/./b",
    "/leading",          # i.e. /v1/objects/B//leading
    "%2Fleading",
    "a//b",
    "a/",
    "a%2F%2Fb",
    "s" * 256,           # one segment longer than a file name may be
]


def raw(url, method, path, body=b"", headers=()):
    u = urllib.parse.urlsplit(url)
    with RawConn(url) as c:
        c.send(raw_request(method, path, u.netloc, headers, body))
        return c.read_response(method)


@pytest.mark.parametrize("name", BAD_NAME_PATHS, ids=range(len(BAD_NAME_PATHS)))
def test_bad_object_name_is_400(cluster, bkt, name):
    path = "/v1/objects/%s/%s" % (quote_bucket(bkt), name)
    nodes = [cluster.url] + [t["public_url"] for t in cluster.targets()]
    for url in nodes:
        for method in ("PUT", "GET", "DELETE"):
            r = raw(url, method, path, body=b"payload" if method == "PUT" else b"")
            assert_json_error(r, 400)
        r = raw(url, "HEAD", path)
        assert r.status_code == 400


def test_odd_object_names_are_names(cluster, bkt):
    for name in ODD_NAME_PATHS:
        r = raw(cluster.url, "PUT", "/v1/objects/%s/%s" % (quote_bucket(bkt), name), body=b"x")
        assert r.status_code == 307, (name, r.status_code)


def test_bad_names_never_touch_the_disk(cluster, bkt):
    cluster.require_local("looks at files under the mountpaths")
    for url in [t["public_url"] for t in cluster.targets()]:
        for name in ("../../../../escaped", "%2E%2E/%2E%2E/escaped2", "a/../../escaped3"):
            raw(url, "PUT", "/v1/objects/%s/%s" % (bkt, name), body=b"x")
    found = []
    for dirpath, _, files in os.walk(cluster.c.dir):
        found += [os.path.join(dirpath, f) for f in files if f.startswith("escaped")]
    assert found == []


BAD_BUCKETS = ["%2E%2E", ".hidden", "a%20b", "a%00b", "x" * 65, "%C3%BC"]


@pytest.mark.parametrize("bucket", BAD_BUCKETS)
def test_bad_bucket_name_in_object_request_is_400(cluster, bucket):
    for url in [cluster.url] + [t["public_url"] for t in cluster.targets()]:
        r = raw(url, "PUT", "/v1/objects/%s/obj" % bucket, body=b"x")
        assert_json_error(r, 400)
        r = raw(url, "GET", "/v1/objects/%s/obj" % bucket)
        assert_json_error(r, 400)


def test_missing_bucket_or_object_part_is_400(cluster):
    for path in ("/v1/objects/", "/v1/objects", "/v1/objects//obj"):
        r = raw(cluster.url, "GET", path)
        assert r.status_code in (400, 404), (path, r.status_code)
        assert_json_error(r, r.status_code)


def test_unknown_path_and_method(cluster):
    assert_json_error(raw(cluster.url, "GET", "/v1/nonsense"), 404)
    assert_json_error(raw(cluster.url, "GET", "/"), 404)
    r = raw(cluster.url, "PATCH", "/v1/buckets")
    assert r.status_code in (400, 405, 501), r.status_code
    assert_json_error(r, r.status_code)


def test_nul_in_query_straight_to_a_target_is_400(cluster, api, bkt):
    """A %00 in a query sent to a target's own port (as a redirected client does) is refused like at the
    proxy, not read as a shorter value (archpath=a%00b as archpath=a) or ignored."""
    name = unique("nulq")
    api.put(bkt, name, b"x" * 100)
    loc, _ = _owner(cluster, api, bkt, name)
    u = urllib.parse.urlsplit(loc)
    base = u.path + "?" + (u.query + "&" if u.query else "")
    for q in ("x=%00", "archpath=a%00b", "offset=1%00"):
        assert_json_error(raw(loc, "GET", base + q), 400)
    assert raw(loc, "GET", base + "x=1").status_code == 200


def _owner(cluster, api, bkt, name):
    loc = api.owner(bkt, name)
    return loc, cluster.index_of_url(loc) if cluster.local else None


def _cut_put(loc, declared, send, chunked=False, how="close"):
    """Sends a PUT that stops short of its declared body, then closes (or half-closes)."""
    u = urllib.parse.urlsplit(loc)
    c = RawConn(loc)
    if chunked:
        head = raw_request("PUT", u.path, u.netloc, [("Transfer-Encoding", "chunked")])
        c.send(head + b"%x\r\n" % declared + os.urandom(send))
    else:
        head = raw_request("PUT", u.path, u.netloc, [("Content-Length", str(declared))])
        c.send(head + os.urandom(send))
    time.sleep(0.2)  # let the target start storing
    if how == "half":
        c.sock.shutdown(socket.SHUT_WR)
        try:
            c.sock.settimeout(5)
            c.read_to_close()  # any answer, or just the close
        except OSError:
            pass
    c.close()


@pytest.mark.parametrize("chunked,how", [(False, "close"), (False, "half"), (True, "close")])
def test_cut_short_put_keeps_old_version(cluster, api, bkt, chunked, how):
    name = unique("cut")
    old = os.urandom(50_000)
    api.put(bkt, name, old)
    v_old = api.head(bkt, name).headers["Ais-Version"]
    loc, idx = _owner(cluster, api, bkt, name)
    _cut_put(loc, 1_000_000, 300_000, chunked, how)
    fresh = unique("cutnew")
    floc, fidx = _owner(cluster, api, bkt, fresh)
    _cut_put(floc, 1_000_000, 300_000, chunked, how)
    time.sleep(0.3)
    r = api.get(bkt, name)
    assert r.status_code == 200 and r.content == old
    assert r.headers["Ais-Checksum-Value"] == md5_hex(old)
    assert r.headers["Ais-Version"] == v_old
    assert_json_error(api.get(bkt, fresh), 404)
    entries, _ = api.list_all(bkt, prefix="cut")
    listed = {e["name"]: e for e in entries}
    assert fresh not in listed
    assert listed[name]["checksum"] == md5_hex(old) and listed[name]["size"] == len(old)
    if cluster.local:
        deadline = time.monotonic() + 5
        while cluster.work_files([idx, fidx]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.work_files([idx, fidx]) == []


def test_put_body_stall_does_not_block_others(cluster, api, bkt):
    """A client that sends half a body and waits holds only its own request."""
    name = unique("stall")
    loc, _ = _owner(cluster, api, bkt, name)
    u = urllib.parse.urlsplit(loc)
    c = RawConn(loc)
    c.send(raw_request("PUT", u.path, u.netloc, [("Content-Length", "1000")]) + b"x" * 10)
    try:
        t0 = time.monotonic()
        for i in range(20):
            api.put(bkt, "%s-other%d" % (name, i), b"ok")
        assert time.monotonic() - t0 < 10
    finally:
        c.close()


def test_put_larger_than_free_space_is_507(cluster, api, bkt):
    cluster.require_local("reads the free space of a target's mountpath")
    name = unique("huge")
    old = b"old version"
    api.put(bkt, name, old)
    loc, idx = _owner(cluster, api, bkt, name)
    st = os.statvfs(cluster.mountpaths(idx)[0])
    too_big = st.f_bavail * st.f_frsize + (1 << 30)
    u = urllib.parse.urlsplit(loc)
    for extra in ([], [("Expect", "100-continue")]):
        with RawConn(loc) as c:
            c.send(raw_request("PUT", u.path, u.netloc,
                               [("Content-Length", str(too_big))] + extra) + b"z" * 100)
            r = c.read_response("PUT")
        assert_json_error(r, 507)
    fresh = unique("hugenew")
    floc, fidx = _owner(cluster, api, bkt, fresh)
    with RawConn(floc) as c:
        u = urllib.parse.urlsplit(floc)
        c.send(raw_request("PUT", u.path, u.netloc, [("Content-Length", str(too_big))]))
        assert_json_error(c.read_response("PUT"), 507)
    r = api.get(bkt, name)
    assert r.status_code == 200 and r.content == old
    assert_json_error(api.get(bkt, fresh), 404)
    time.sleep(0.2)
    assert cluster.work_files([idx, fidx]) == []


def test_put_into_reserve_is_507(make_cluster):
    """With the whole disk reserved, even a small PUT does not fit; nothing is left behind."""
    st = os.statvfs(tempfile.gettempdir())
    free = st.f_bavail * st.f_frsize
    h = make_cluster(targets=1, target_args=["--reserve_bytes", str(free + (1 << 30))])
    a = Api(h.url)
    b = unique("full")
    a.create_bucket(b)
    r = a.put(b, "o", b"x" * 100_000, expect=None)
    assert_json_error(r, 507)
    assert_json_error(a.get(b, "o"), 404)
    assert h.work_files() == []
    entries, _ = a.list_all(b)
    assert entries == []
