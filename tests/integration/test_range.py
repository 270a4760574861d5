# SPDX-License-Identifier: Apache-2.0
# Range GETs: every edge of RFC 9110 single ranges, unsatisfiable and malformed ranges, through proxy and owner.
import os

import pytest

from ftutil import Api, TIMEOUT, assert_json_error, unique

SIZE = 1000
DATA = os.urandom(SIZE)
BIG = os.urandom(3 * 1024 * 1024 + 17)


@pytest.fixture(scope="module")
def obj(cluster):
    a = Api(cluster.url)
    b = unique("range")
    a.create_bucket(b)
    a.put(b, "r", DATA)
    a.put(b, "big", BIG)
    a.put(b, "empty", b"")
    owner = a.owner(b, "r")
    yield b, owner
    a.destroy_bucket(b, expect=None)


# (Range header, first byte, last byte) for size 1000
SATISFIABLE = [
    ("bytes=0-0", 0, 0),
    ("bytes=0-999", 0, 999),
    ("bytes=0-", 0, 999),
    ("bytes=1-1", 1, 1),
    ("bytes=10-20", 10, 20),
    ("bytes=998-999", 998, 999),
    ("bytes=999-999", 999, 999),
    ("bytes=999-", 999, 999),
    ("bytes=500-", 500, 999),
    ("bytes=-1", 999, 999),
    ("bytes=-10", 990, 999),
    ("bytes=-999", 1, 999),
    ("bytes=-1000", 0, 999),
    ("bytes=-5000", 0, 999),      # suffix longer than the object: whole object
    ("bytes=500-5000", 500, 999),  # last byte past the end: clamped
    ("bytes=0-1000", 0, 999),
    ("bytes=0-99999999999999", 0, 999),
    ("bytes=999-1000", 999, 999),
]


@pytest.mark.parametrize("hdr,first,last", SATISFIABLE)
def test_satisfiable_range(api, obj, hdr, first, last):
    b, _ = obj
    r = api.get(b, "r", headers={"Range": hdr})
    assert r.status_code == 206, (hdr, r.status_code, r.text[:200])
    assert r.content == DATA[first:last + 1]
    assert r.headers["Content-Range"] == "bytes %d-%d/%d" % (first, last, SIZE)
    assert int(r.headers["Content-Length"]) == last - first + 1
    assert r.headers["Ais-Checksum-Value"]  # the whole object's checksum, still sent


UNSATISFIABLE = ["bytes=1000-", "bytes=1000-1000", "bytes=1000-2000", "bytes=5000-", "bytes=-0"]


@pytest.mark.parametrize("hdr", UNSATISFIABLE)
def test_unsatisfiable_range_is_416(api, obj, hdr):
    b, _ = obj
    r = api.get(b, "r", headers={"Range": hdr})
    assert r.status_code == 416, (hdr, r.status_code)
    assert r.headers["Content-Range"] == "bytes */%d" % SIZE


def test_any_range_of_empty_object_is_416(api, obj):
    b, _ = obj
    for hdr in ("bytes=0-0", "bytes=0-", "bytes=-1"):
        r = api.get(b, "empty", headers={"Range": hdr})
        assert r.status_code == 416, hdr
        assert r.headers["Content-Range"] == "bytes */0"


MALFORMED = [
    "bytes=abc",
    "bytes=5-2",
    "bytes=",
    "bytes=-",
    "bytes=--1",
    "bytes=1-2-3",
    "bytes=0-1,5-6",
    "bytes=0x10-20",
    "bytes=+1-2",
    "bytes=1--2",
    "0-1",
    "bytes 0-1",
]


@pytest.mark.parametrize("hdr", MALFORMED)
def test_malformed_range_is_400(api, obj, hdr):
    b, owner = obj
    r = api.get(b, "r", headers={"Range": hdr})
    assert_json_error(r, 400)
    r = api.s.get(owner, headers={"Range": hdr}, timeout=TIMEOUT)
    assert_json_error(r, 400)


def test_range_numbers_past_uint64(api, obj):
    """Numbers too large for 64 bits: a parser may reject them (400) or read them as huge (RFC
    semantics); it must never wrap around and serve the wrong bytes."""
    b, _ = obj
    huge = "184467440737095516160"
    r = api.get(b, "r", headers={"Range": "bytes=%s-" % huge})
    assert r.status_code in (400, 416), r.status_code
    for hdr in ("bytes=0-%s" % huge, "bytes=-%s" % huge):
        r = api.get(b, "r", headers={"Range": hdr})
        if r.status_code == 206:
            assert r.content == DATA and r.headers["Content-Range"] == "bytes 0-999/1000", hdr
        else:
            assert_json_error(r, 400)


def test_range_directly_on_owner(api, obj):
    b, owner = obj
    r = api.s.get(owner, headers={"Range": "bytes=100-199"}, allow_redirects=False,
                  timeout=TIMEOUT)
    assert r.status_code == 206 and r.content == DATA[100:200]


@pytest.mark.parametrize("first,last", [
    (0, 1048575), (1048575, 1048576), (1048570, 2097160), (3 * 1024 * 1024, None),
    (len(BIG) - 1, None), (4095, 4096), (65535, 196609),
])
def test_ranges_of_a_large_object(api, obj, first, last):
    b, _ = obj
    hdr = "bytes=%d-%s" % (first, "" if last is None else last)
    r = api.get(b, "big", headers={"Range": hdr})
    end = len(BIG) - 1 if last is None else min(last, len(BIG) - 1)
    assert r.status_code == 206
    assert r.content == BIG[first:end + 1]
    assert r.headers["Content-Range"] == "bytes %d-%d/%d" % (first, end, len(BIG))


def test_head_with_range_has_no_body(api, obj):
    b, owner = obj
    r = api.s.head(owner, headers={"Range": "bytes=0-9"}, timeout=TIMEOUT)
    assert r.status_code in (200, 206)
    assert r.content == b""
