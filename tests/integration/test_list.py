# SPDX-License-Identifier: Apache-2.0
# Listing objects: exact across targets (10,000 objects, several page sizes), prefixes, tokens, order.
import concurrent.futures
import threading
import time

import pytest

from ftutil import Api, TIMEOUT, assert_json_error, bucket_path, unique, xxh64_hex

N = 10000
THREADS = 16


def name_of(i):
    return "d%d/obj-%05d" % (i % 10, i)


def data_of(i):
    return b"%d" % i * (1 + i % 7)


@pytest.fixture(scope="module")
def big(cluster):
    """A bucket holding N objects spread over every target, PUT from THREADS clients."""
    a = Api(cluster.url)
    b = unique("list")
    a.create_bucket(b)
    local = threading.local()

    def put(i):
        if not hasattr(local, "api"):
            local.api = Api(cluster.url)
        name, data = name_of(i), data_of(i)
        loc = local.api.owner(b, name)
        r = local.api.s.put(loc, data=data, allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code == 200, (name, r.status_code, r.text)
        return loc[: loc.index("/v1/")]

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(THREADS) as ex:
        owners = list(ex.map(put, range(N)))
    per_target = {u: owners.count(u) for u in set(owners)}
    print("PUT %d objects in %.1f s; per target: %s" % (N, time.monotonic() - t0, per_target))
    yield b, per_target
    a.destroy_bucket(b, expect=None)


def test_objects_spread_over_every_target(cluster, big):
    _, per_target = big
    k = len(cluster.targets())
    assert len(per_target) == k
    for u, n in per_target.items():
        assert 0.75 * N / k < n < 1.25 * N / k, per_target


# Page size 1 is test_list_prefix's ("d3/obj-00": 100 pages of one name each); over the whole bucket it made
# 10,000 listings of every target, most of this file's time.
@pytest.mark.parametrize("pagesize", [7, 1000, 10000])
def test_list_exact_at_page_size(api, big, pagesize):
    b, _ = big
    t0 = time.monotonic()
    entries, pages = api.list_all(b, pagesize=pagesize)
    print("pagesize %d: %d pages in %.1f s" % (pagesize, pages, time.monotonic() - t0))
    names = [e["name"] for e in entries]
    want = sorted(name_of(i) for i in range(N))
    missing = set(want) - set(names)
    assert not missing, "%d missing, e.g. %s" % (len(missing), sorted(missing)[:5])
    assert len(names) == len(set(names)), "duplicates: %s" % \
        sorted(n for n in set(names) if names.count(n) > 1)[:5]
    assert names == want  # byte order, nothing extra
    full_pages = -(-N // pagesize)
    assert pages in (full_pages, full_pages + 1), pages


def test_list_entries_carry_metadata(api, big):
    b, _ = big
    entries, _ = api.list_all(b, prefix="d7/", pagesize=10000)
    assert len(entries) == N // 10
    for e in entries:
        i = int(e["name"].rsplit("-", 1)[1])
        assert e["size"] == len(data_of(i)), e
        assert e["checksum"] == xxh64_hex(data_of(i)), e
        assert e["version"] == "1", e
        assert isinstance(e["atime"], int) and e["atime"] > 0, e


@pytest.mark.parametrize("prefix,pagesize", [
    ("d3/", 1000), ("d3/", 333), ("d3/obj-001", 3), ("d3/obj-0", 10000), ("d", 10000),
    ("d9/obj-09999", 5), ("", 2500), ("d3/obj-00013", 1), ("d3/obj-00", 1), ("nothing", 10), ("d3/obj-00013x", 1),
    ("d", 0),
])
def test_list_prefix(api, big, prefix, pagesize):
    b, _ = big
    entries, _ = api.list_all(b, prefix=prefix, pagesize=pagesize)
    want = sorted(n for n in (name_of(i) for i in range(N)) if n.startswith(prefix))
    assert [e["name"] for e in entries] == want


def test_default_page_size_is_1000(api, big):
    b, _ = big
    for ps in (None, 0):
        r = api.list_page(b, pagesize=ps)
        assert r.status_code == 200
        j = r.json()
        assert len(j["entries"]) == 1000
        assert j["continuation_token"]


def test_token_resumes_after_the_name(api, big):
    b, _ = big
    want = sorted(name_of(i) for i in range(N))
    # any name works as a token: the next page starts right after it
    for k in (0, 1, 4999, 9998):
        r = api.list_page(b, pagesize=3, token=want[k])
        assert [e["name"] for e in r.json()["entries"]] == want[k + 1:k + 4]
    r = api.list_page(b, pagesize=3, token=want[-1])
    j = r.json()
    assert j["entries"] == [] and j["continuation_token"] == ""
    # a token between names
    r = api.list_page(b, pagesize=2, token="d3/obj-00013a")
    assert [e["name"] for e in r.json()["entries"]] == ["d3/obj-00023", "d3/obj-00033"]


def test_list_small_bucket_byte_order(api):
    b = unique("order")
    api.create_bucket(b)
    names = ["B", "a-b", "a.b", "a/b", "a0", "a~", "é", "z", "Z", "a b", "_", "ab/c/d", "ab/c-d",
             "日本"]
    for n in names:
        api.put(b, n, n.encode())
    for ps in (1, 2, 5, 100):
        entries, _ = api.list_all(b, pagesize=ps)
        assert [e["name"] for e in entries] == sorted(names, key=lambda x: x.encode())
    api.delete(b, "a.b")
    entries, _ = api.list_all(b)
    assert "a.b" not in [e["name"] for e in entries] and len(entries) == len(names) - 1
    api.destroy_bucket(b)


def test_list_empty_bucket(api):
    b = unique("empty")
    api.create_bucket(b)
    r = api.list_page(b)
    assert r.status_code == 200
    assert r.json() == {"entries": [], "continuation_token": ""}
    api.destroy_bucket(b)


def test_list_unknown_bucket_is_404(api):
    assert_json_error(api.list_page(unique("none")), 404)


@pytest.mark.parametrize("q", ["pagesize=abc", "pagesize=-1", "pagesize=1x"])
def test_list_bad_pagesize_is_400(api, big, q):
    b, _ = big
    r = api.s.get(api.url + bucket_path(b) + "?" + q, timeout=TIMEOUT)
    assert_json_error(r, 400)
