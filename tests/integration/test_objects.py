# SPDX-License-Identifier: Apache-2.0
# Objects: PUT/GET/HEAD/DELETE through the proxy's 307 and directly on the owner, metadata headers, checksums.
import os
import time
import urllib.parse

import pytest

from ftutil import (TIMEOUT, assert_json_error, cksum_hex, md5_hex, obj_path, session, unique,
                    xxh64_hex)


@pytest.fixture(scope="module")
def buckets(cluster):
    """{"xxhash": name, "md5": name}, destroyed at the end of the module."""
    from ftutil import Api
    a = Api(cluster.url)
    out = {"xxhash": unique("objx"), "md5": unique("objm")}
    a.create_bucket(out["xxhash"])
    a.create_bucket(out["md5"], cksum="md5")
    yield out
    for b in out.values():
        a.destroy_bucket(b, expect=None)


def target_urls(cluster):
    return {t["public_url"]: t for t in cluster.targets()}


def check_meta_headers(r, kind, data):
    assert r.headers["Ais-Checksum-Type"] == kind
    assert r.headers["Ais-Checksum-Value"] == cksum_hex(kind, data)
    assert r.headers["Ais-Version"]
    assert int(r.headers["Ais-Atime"]) > 0


@pytest.mark.parametrize("kind", ["xxhash", "md5"])
def test_put_get_head_delete_via_redirect(cluster, api, buckets, kind):
    b = buckets[kind]
    name = "dir/sub/obj-%s" % kind
    data = os.urandom(100_000)
    path = obj_path(b, name)

    # PUT to the proxy: 307 to the owner's public URL, same path; then the body again there
    r = api.s.put(cluster.url + path, data=data, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307, r.text
    loc = r.headers["Location"]
    owners = [u for u in target_urls(cluster) if loc == u + path]
    assert len(owners) == 1, "Location %r is not <target public_url> + %r" % (loc, path)
    t0 = time.time_ns()
    r = api.s.put(loc, data=data, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.headers["Ais-Checksum-Type"] == kind
    assert r.headers["Ais-Checksum-Value"] == cksum_hex(kind, data)
    version = r.headers["Ais-Version"]
    assert version

    # GET through the proxy (requests follows the 307)
    r = api.get(b, name)
    assert r.status_code == 200
    assert [h.status_code for h in r.history] == [307]
    assert r.url == loc
    assert r.content == data
    assert int(r.headers["Content-Length"]) == len(data)
    check_meta_headers(r, kind, data)
    assert r.headers["Ais-Version"] == version
    assert r.headers["ETag"] == '"%s"' % cksum_hex(kind, data)
    assert r.headers["Accept-Ranges"] == "bytes"
    atime = int(r.headers["Ais-Atime"])
    assert t0 - 60 * 10**9 < atime < time.time_ns() + 60 * 10**9

    # HEAD through the proxy: headers only
    r = api.s.head(cluster.url + path, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307 and r.headers["Location"] == loc
    r = api.head(b, name)
    assert r.status_code == 200 and r.content == b""
    assert int(r.headers["Content-Length"]) == len(data)
    assert int(r.headers["Ais-Size"]) == len(data)
    check_meta_headers(r, kind, data)
    assert r.headers["Ais-Version"] == version

    # DELETE through the proxy, then it is gone everywhere
    r = api.s.delete(cluster.url + path, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307 and r.headers["Location"] == loc
    r = api.s.delete(loc, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert_json_error(api.get(b, name), 404)
    assert api.head(b, name).status_code == 404
    assert_json_error(api.s.delete(loc, timeout=TIMEOUT), 404)
    entries, _ = api.list_all(b, prefix=name)
    assert entries == []


def test_owner_serves_directly_and_others_redirect(cluster, api, buckets):
    b = buckets["xxhash"]
    s = session()
    for i in range(12):
        name = "direct/%d" % i
        data = ("direct %d" % i).encode() * 100
        loc = api.owner(b, name)
        path = obj_path(b, name)
        owner = loc[: -len(path)]
        # PUT straight to the owner, without asking the proxy first
        r = s.put(owner + path, data=data, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        r = s.get(owner + path, allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == data
        for url in target_urls(cluster):
            if url == owner:
                continue
            for method in ("GET", "HEAD", "PUT", "DELETE"):
                r = s.request(method, url + path, allow_redirects=False, timeout=TIMEOUT,
                              data=b"" if method == "PUT" else None)
                assert r.status_code == 307, (method, url, r.status_code)
                assert r.headers["Location"] == loc
        r = s.get(owner + path, timeout=TIMEOUT)
        assert r.content == data  # the redirected PUT/DELETE above never reached the owner


def test_redirect_keeps_query(cluster, api, buckets):
    b = buckets["xxhash"]
    api.put(b, "q", b"query")
    r = api.s.get(cluster.url + obj_path(b, "q") + "?provider=ais&x=1%202",
                  allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307
    assert r.headers["Location"].endswith(obj_path(b, "q") + "?provider=ais&x=1%202")
    r = api.s.get(r.headers["Location"], timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == b"query"


def test_overwrite_bumps_version_and_checksum(api, buckets):
    for kind, b in buckets.items():
        r1 = api.put(b, "ow", b"one")
        r2 = api.put(b, "ow", b"two-two")
        assert r1.headers["Ais-Checksum-Value"] != r2.headers["Ais-Checksum-Value"]
        assert r2.headers["Ais-Checksum-Value"] == cksum_hex(kind, b"two-two")
        assert int(r2.headers["Ais-Version"]) > int(r1.headers["Ais-Version"])
        r = api.get(b, "ow")
        assert r.content == b"two-two"
        assert r.headers["Ais-Version"] == r2.headers["Ais-Version"]
        entries, _ = api.list_all(b, prefix="ow")
        assert [(e["name"], e["size"], e["checksum"], e["version"]) for e in entries] == \
            [("ow", 7, cksum_hex(kind, b"two-two"), r2.headers["Ais-Version"])]


def test_xxhash_values_agree_everywhere(api, buckets):
    b = buckets["xxhash"]
    blobs = {"x/a": b"", "x/b": b"a", "x/c": os.urandom(1 << 20), "x/d": b"same", "x/e": b"same"}
    put = {n: api.put(b, n, d).headers["Ais-Checksum-Value"] for n, d in blobs.items()}
    for n, d in blobs.items():
        assert put[n] == xxh64_hex(d), n
        assert api.get(b, n).headers["Ais-Checksum-Value"] == put[n]
        assert api.head(b, n).headers["Ais-Checksum-Value"] == put[n]
    assert put["x/d"] == put["x/e"]
    entries, _ = api.list_all(b, prefix="x/")
    assert {e["name"]: e["checksum"] for e in entries} == put
    assert {e["name"]: e["size"] for e in entries} == {n: len(d) for n, d in blobs.items()}


def test_md5_values_agree_everywhere(api, buckets):
    b = buckets["md5"]
    blobs = {"m/%d" % i: os.urandom(i * 3000) for i in range(6)}
    for n, d in blobs.items():
        assert api.put(b, n, d).headers["Ais-Checksum-Value"] == md5_hex(d)
        r = api.get(b, n)
        assert r.content == d and r.headers["Ais-Checksum-Value"] == md5_hex(d)
        assert api.head(b, n).headers["Ais-Checksum-Value"] == md5_hex(d)
    entries, _ = api.list_all(b, prefix="m/")
    assert {e["name"]: e["checksum"] for e in entries} == {n: md5_hex(d) for n, d in blobs.items()}


def test_empty_object(api, buckets):
    b = buckets["xxhash"]
    r = api.put(b, "empty", b"")
    assert r.headers["Ais-Checksum-Value"] == xxh64_hex(b"")
    r = api.get(b, "empty")
    assert r.status_code == 200 and r.content == b"" and r.headers["Content-Length"] == "0"
    r = api.head(b, "empty")
    assert r.headers["Ais-Size"] == "0"


def test_large_object_roundtrip(api, buckets):
    b = buckets["md5"]
    data = os.urandom(24 << 20)
    r = api.put(b, "large", data)
    assert r.headers["Ais-Checksum-Value"] == md5_hex(data)
    r = api.get(b, "large")
    assert len(r.content) == len(data) and md5_hex(r.content) == md5_hex(data)
    api.delete(b, "large")


NAMES = [
    "plain",
    "with space",
    "percent%20literal",
    "question?mark",
    "hash#tag",
    "plus+sign",
    "amp&eq=",
    "ünïcödé/名前",
    "semi;colon",
    "quote'\"",
    "a" * 255,
    "/".join(["s" * 200] * 5),  # 1004 bytes, every segment under 255
    "...dots",
    "tail.",
    "x/.hidden/y",
    "~tilde",
]


@pytest.mark.parametrize("name", NAMES, ids=range(len(NAMES)))
def test_names_roundtrip(api, buckets, name):
    b = buckets["xxhash"]
    data = name.encode() * 3
    r = api.put(b, "names/" + name, data)
    r = api.get(b, "names/" + name)
    assert r.status_code == 200 and r.content == data
    entries, _ = api.list_all(b, prefix="names/" + name)
    assert ("names/" + name) in [e["name"] for e in entries]
    assert api.delete(b, "names/" + name).status_code == 200


def test_longest_name(api, buckets):
    b = buckets["xxhash"]
    name = "/".join(["n" * 254] * 4) + "/" + "z" * 4  # 4*255 + 4 = 1024 bytes
    assert len(name.encode()) == 1024
    api.put(b, name, b"max")
    assert api.get(b, name).content == b"max"
    entries, _ = api.list_all(b, prefix="nnn")
    assert name in [e["name"] for e in entries]


def test_object_under_object_coexists(cluster, api, buckets):
    """"a" and "a/b" are both objects, in either order, also when they land together (same target,
    same mountpath by HRW: with 80 names at 3 targets x 2 mountpaths some do; the second one then
    goes to its hashed file, docs/s3.md)."""
    b = buckets["xxhash"]
    for parent_first in (True, False):
        parent = unique("file")
        children = ["%s/child%d" % (parent, i) for i in range(80)]
        if parent_first:
            api.put(b, parent, b"i am a file")
            later = children
        else:
            for c in children:
                api.put(b, c, c.encode())
            later = [parent]
        for n in later:
            r = api.s.put(api.owner(b, n), data=n.encode() if parent_first else b"i am a file", timeout=TIMEOUT)
            assert r.status_code == 200, (n, r.status_code, r.text)
        assert api.get(b, parent).content == b"i am a file"
        for c in children:
            assert api.get(b, c).content == c.encode()
        entries, _ = api.list_all(b, prefix=parent)
        assert sorted(e["name"] for e in entries) == sorted([parent] + children)


def test_missing_object_is_404(cluster, api, buckets):
    b = buckets["xxhash"]
    assert_json_error(api.get(b, "no/such/object"), 404)
    assert api.head(b, "no/such/object").status_code == 404
    assert_json_error(api.delete(b, "no/such/object"), 404)
    # also when a directory of that name exists
    api.put(b, "dirlike/child", b"x")
    assert_json_error(api.get(b, "dirlike"), 404)


def test_unknown_bucket_is_404(cluster, api):
    b = unique("nobucket")
    for method in ("GET", "HEAD", "PUT", "DELETE"):
        r = api.s.request(method, cluster.url + obj_path(b, "o"), data=b"x" if method == "PUT"
                          else None, allow_redirects=False, timeout=TIMEOUT)
        if method == "HEAD":
            assert r.status_code == 404
        else:
            assert_json_error(r, 404)
    # a target checks too
    for url in target_urls(cluster):
        r = api.s.put(url + obj_path(b, "o"), data=b"x", allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code in (307, 404), r.status_code
        if r.status_code == 404:
            assert_json_error(r, 404)
        else:
            r = api.s.put(r.headers["Location"], data=b"x", timeout=TIMEOUT)
            assert_json_error(r, 404)


def test_put_needs_a_length(cluster, api, buckets):
    from ftutil import RawConn, raw_request
    b = buckets["xxhash"]
    loc = api.owner(b, "nolen")
    u = urllib.parse.urlsplit(loc)
    with RawConn(loc) as c:
        c.send(raw_request("PUT", u.path, u.netloc))
        r = c.read_response()
    assert_json_error(r, 411)
    assert_json_error(api.get(b, "nolen"), 404)
