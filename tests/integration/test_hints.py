# SPDX-License-Identifier: Apache-2.0
# Epoch order hints: the split by owner, cursors following the GETs, expiry, bad input, eviction by next use.
import json
import os
import sys

import requests

import peers
from conftest import module_cluster
from ftutil import TIMEOUT, Api, assert_json_error, create_remote, ctl, obj_url, session, unique, wait_until
from test_coldget import access_count, put_origin

hcluster = module_cluster("hints", "these tests read the targets' control ports", targets=3, mountpaths=1,
                          proxy_args=["--hint_max_names", "5000"])


def post_hint(url, bucket, value, provider="ais", expect=200, raw=None):
    body = raw if raw is not None else json.dumps({"action": "order-hint", "value": value})
    r = session().post("%s/v1/buckets/%s?provider=%s" % (url, bucket, provider), data=body,
                       headers={"Content-Type": "application/json"}, timeout=TIMEOUT)
    if expect is not None:
        assert r.status_code == expect, (r.status_code, r.text[:500])
    return r


def hints_of(target, bucket=None, job=None):
    """The live hints of one target (a dict of the Smap), of bucket and job when given."""
    doc = ctl("GET", target["control_url"], "/v1/hints")
    return [h for h in doc["hints"] if (bucket is None or h["bucket"] == bucket) and (job is None or h["job"] == job)]


def owner_index(c, targets, bucket, name):
    loc = c.api.owner(bucket, name)
    for i, t in enumerate(targets):
        if loc.startswith(t["public_url"] + "/"):
            return i
    raise AssertionError("no target owns %s: %s" % (name, loc))


def shares(c, bucket, names):
    """Each target's names of the list, in the list's order."""
    targets = c.targets()
    out = [[] for _ in targets]
    for n in names:
        out[owner_index(c, targets, bucket, n)].append(n)
    return targets, out


def test_hint_split_across_targets(hcluster):
    c = hcluster
    b = unique("hs")
    c.api.create_bucket(b)
    names = ["s-%04d" % i for i in range(300)]
    names.reverse()  # the order is the list's, not the names'
    r = post_hint(c.url, b, {"epoch": 1, "objnames": names, "ttl_s": 600})
    doc = r.json()
    assert doc["names"] == 300 and doc["epoch"] == 1 and doc["job"] == "default"
    targets, parts = shares(c, b, names)
    assert all(len(p) > 0 for p in parts), [len(p) for p in parts]
    by_node = {t["node"]: t["names"] for t in doc["targets"]}
    for t, part in zip(targets, parts):
        assert by_node[t["id"]] == len(part)
        [h] = hints_of(t, b)
        assert h["names"] == len(part) and h["epoch"] == 1 and h["cursor"] == 0
        assert h["next"] == part[:4], "target %s holds its names in the hinted order" % t["id"]
        assert 0 < h["bytes"] <= len(part) * (29 + 8) + 4096  # the stated bound per name
    # The next epoch replaces the last; an older one is refused.
    post_hint(c.url, b, {"epoch": 2, "objnames": names[:10], "ttl_s": 600})
    assert sum(h["names"] for t in targets for h in hints_of(t, b)) == 10
    r = post_hint(c.url, b, {"epoch": 1, "objnames": names, "ttl_s": 600}, expect=409)
    assert_json_error(r, 409, "epoch")
    # Another job on the same bucket is held beside it.
    post_hint(c.url, b, {"epoch": 1, "objnames": names[:20], "ttl_s": 600, "job": "worker-1"})
    assert sorted({h["job"] for t in targets for h in hints_of(t, b)}) == ["default", "worker-1"]


def test_hint_cursor_follows_out_of_order_gets(hcluster):
    c = hcluster
    b = unique("hc")
    c.api.create_bucket(b)
    names = ["c-%04d" % i for i in range(1200)]
    targets, parts = shares(c, b, names)
    t = max(range(len(targets)), key=lambda i: len(parts[i]))
    mine = parts[t]
    assert len(mine) > 300
    for n in mine[:6] + [mine[300]]:
        c.api.put(b, n, b"x" * 100)
    post_hint(c.url, b, {"epoch": 7, "objnames": names, "ttl_s": 600})
    api = Api(c.url)

    def get(n):
        r = api.get(b, n)
        assert r.status_code == 200, (n, r.status_code)

    # Parallel readers swap neighbours: the cursor waits for the one not read yet.
    get(mine[1])
    [h] = hints_of(targets[t], b)
    assert h["cursor"] == 0 and h["read"] == 1 and h["next"][0] == mine[0]
    get(mine[0])
    get(mine[3])
    get(mine[2])
    [h] = hints_of(targets[t], b)
    assert h["cursor"] == 4 and h["read"] == 4 and h["skipped"] == 0
    assert h["next"][:2] == [mine[4], mine[5]]
    # A name not in the hint moves nothing.
    c.api.put(b, "not-hinted", b"y")
    api.get(b, "not-hinted")
    assert hints_of(targets[t], b)[0]["cursor"] == 4
    # A read far ahead: the names left behind count as skipped (mine[4]) ...
    get(mine[300])
    [h] = hints_of(targets[t], b)
    assert h["skipped"] >= 1 and h["cursor"] > 4 and mine[4] not in h["next"]
    # ... and one of them read late is still counted.
    get(mine[4])
    [h2] = hints_of(targets[t], b)
    assert h2["late"] == 1 and h2["skipped"] == h["skipped"] - 1 and h2["read"] == 6
    assert h2["hits"] == 6 and h2["misses"] == 0  # an ais bucket: every read is local


def test_hint_expires(hcluster):
    c = hcluster
    b = unique("he")
    c.api.create_bucket(b)
    names = ["e-%d" % i for i in range(30)]
    post_hint(c.url, b, {"epoch": 1, "objnames": names, "ttl_s": 1})
    targets = c.targets()
    assert sum(len(hints_of(t, b)) for t in targets) == 3
    wait_until(lambda: sum(len(hints_of(t, b)) for t in targets) == 0, 15, interval=0.2,
               what="the hints expire")
    # An expired epoch no longer blocks an older one.
    post_hint(c.url, b, {"epoch": 0, "objnames": names, "ttl_s": 600})


def test_hint_bad_input(hcluster):
    c = hcluster
    b = unique("hb")
    c.api.create_bucket(b)
    ok = {"epoch": 1, "objnames": ["a", "b"], "ttl_s": 60}
    cases = [
        (dict(ok, colour="red"), 400, "unknown field"),
        (dict(ok, objnames=[]), 400, "empty"),
        (dict(ok, objnames="a,b"), 400, "array"),
        (dict(ok, objnames=["a", 5]), 400, "objnames[1]"),
        (dict(ok, objnames=["a", "x" * 1025]), 400, "objnames[1]"),
        (dict(ok, epoch=-1), 400, "epoch"),
        (dict(ok, epoch="1"), 400, "epoch"),
        ({"objnames": ["a"], "ttl_s": 60}, 400, "epoch"),
        (dict(ok, ttl_s=0), 400, "ttl_s"),
        (dict(ok, ttl_s=10 ** 9), 400, "ttl_s"),
        (dict(ok, ttl_s="60"), 400, "ttl_s"),
        (dict(ok, job="a b"), 400, "job"),
        (dict(ok, template="x-{0..9}"), 400, "one way"),  # names given twice
        ({"epoch": 1, "ttl_s": 60}, 400, "one way"),  # no names
        ({"epoch": 1, "template": "x-{9..0}"}, 400, "empty"),
        ({"epoch": 1, "template": "x-{a..b}"}, 400, "template"),
        ({"epoch": 1, "template": 5}, 400, "template"),
        ({"epoch": 1, "template": "x-{0..5000}"}, 413, "hint_max_names"),
        (dict(ok, url_list_object="list.txt"), 400, "one way"),
        ({"epoch": 1, "url_list_object": 7}, 400, "url_list_object"),
        ({"epoch": 1, "url_list_object": "x" * 1025}, 400, "url_list_object"),
        ({"epoch": 1, "url_list_object": "no-such-list.txt"}, 404, "no such object"),
    ]
    for value, status, words in cases:
        r = post_hint(c.url, b, value, expect=status)
        assert_json_error(r, status, words)
    r = post_hint(c.url, b, None, raw='{"action": "order-hint", "value": {"epoch": 1, "objnames": ["a"]}, "x": 1}',
                  expect=400)
    assert_json_error(r, 400, "unknown field")
    r = post_hint(c.url, b, None, raw='{"action": "order-hint", "value": [1, 2]}', expect=400)
    assert_json_error(r, 400, "value")
    r = post_hint(c.url, unique("nosuch"), ok, expect=404)
    assert_json_error(r, 404, "does not exist")
    # More names than the proxy's hint_max_names: 413, nothing installed.
    r = post_hint(c.url, b, dict(ok, objnames=["n-%d" % i for i in range(5001)]), expect=413)
    assert_json_error(r, 413, "hint_max_names")
    # A body over 1 MiB is only for an order hint.
    big = json.dumps({"action": "create-bck", "value": {"pad": "x" * (1 << 20)}})
    r = post_hint(c.url, b, None, raw=big, expect=413)
    assert_json_error(r, 413, "order-hint")
    assert all(hints_of(t, b) == [] for t in c.targets())
    # Unknown names are fine: they count as skipped later.
    post_hint(c.url, b, ok)


def test_hint_url_list_object(hcluster):
    """The order read from an object of the bucket, one name per line (CRLF and blank lines allowed)."""
    c = hcluster
    b = unique("hl")
    c.api.create_bucket(b)
    names = ["img/%05d.jpg" % i for i in (7, 3, 11, 0, 5)]
    c.api.put(b, "lists/epoch-4.txt", ("\r\n".join(names) + "\n\n").encode())
    doc = post_hint(c.url, b, {"epoch": 4, "url_list_object": "lists/epoch-4.txt", "job": "fromlist"}).json()
    assert doc["names"] == 5
    targets, parts = shares(c, b, names)
    for t, part in zip(targets, parts):
        held = hints_of(t, b, "fromlist")
        assert (held[0]["names"] if held else 0) == len(part)
        if part:
            assert held[0]["next"] == part[:4]  # the status shows the next 4 names at most
    # A list longer than hint_max_names (5000 here) is refused whole.
    c.api.put(b, "lists/long.txt", "\n".join("n%d" % i for i in range(5001)).encode())
    r = post_hint(c.url, b, {"epoch": 5, "url_list_object": "lists/long.txt", "job": "fromlist"}, expect=413)
    assert_json_error(r, 413, "hint_max_names")
    # A name in the list that is not a valid object name is refused (400), naming its place.
    c.api.put(b, "lists/bad.txt", b"ok\n" + b"x" * 1025 + b"\n")
    r = post_hint(c.url, b, {"epoch": 6, "url_list_object": "lists/bad.txt", "job": "fromlist"}, expect=400)
    assert_json_error(r, 400, "objnames[1]")


def test_hint_template(hcluster):
    """A template names the objects in its range's order, split by owner like a list."""
    c = hcluster
    b = unique("ht")
    c.api.create_bucket(b)
    doc = post_hint(c.url, b, {"epoch": 3, "template": "shard-{098..102}.tar", "ttl_s": 600, "job": "tpl"}).json()
    names = ["shard-%03d.tar" % i for i in range(98, 103)]
    assert doc["names"] == 5 and doc["epoch"] == 3
    targets, parts = shares(c, b, names)
    for t, part in zip(targets, parts):
        held = hints_of(t, b, "tpl")
        assert (held[0]["names"] if held else 0) == len(part)
        if part:
            assert held[0]["next"] == part[:4]  # the status shows the next 4 names at most


def test_hint_over_target_memory_is_413_and_rolled_back(make_cluster):
    c = make_cluster(targets=2, mountpaths=1, target_args=["--hint_max_bytes", "20000"])
    b = unique("hm")
    c.api.create_bucket(b)
    names = ["m-%05d" % i for i in range(2000)]
    r = post_hint(c.url, b, {"epoch": 1, "objnames": names, "ttl_s": 60}, expect=413)
    assert_json_error(r, 413, "hint_max_bytes")
    assert all(hints_of(t, b) == [] for t in c.targets())
    post_hint(c.url, b, {"epoch": 1, "objnames": names[:100], "ttl_s": 60})
    assert sum(h["names"] for t in c.targets() for h in hints_of(t, b)) == 100


# ---- remote buckets: eviction by next use, staging ahead ----
MIB = 1 << 20
QUOTA = 8 * MIB
OBJ = 512 * 1024
LRU_ARGS = ["--lru_quota_bytes", str(QUOTA), "--lru_high_pct", "80", "--lru_low_pct", "50",
            "--lru_interval_ms", "200"]


origin = peers.nginx_origin_fixture()


def is_cached(mp, bucket, name):
    return os.path.isfile(os.path.join(mp, "ht", bucket, name))


def remote_bucket(c, origin, prefix, n):
    b = unique(prefix)
    create_remote(c.url, b, "ht", {"endpoint": origin.url})
    tag = unique("o")
    names = ["%s-%02d" % (tag, i) for i in range(n)]
    blobs = {name: os.urandom(OBJ) for name in names}
    for name in names:
        put_origin(origin, name, blobs[name])
    return b, names, blobs


def get_ok(url, bucket, name, data):
    r = requests.get(obj_url(url, bucket, name), timeout=TIMEOUT)
    assert r.status_code == 200, (name, r.status_code, r.text[:300])
    assert r.content == data, name


def test_hint_evicts_by_next_use(make_cluster, origin):
    """LRU would evict the objects read first (the oldest); under the hint they are the ones needed next, so the
    sweep evicts what was read this epoch instead."""
    c = make_cluster(targets=1, mountpaths=1, target_args=LRU_ARGS + ["--hint_prefetch_inflight", "0"])
    mp = c.mountpaths(0)[0]
    b, names, blobs = remote_bucket(c, origin, "hv", 13)
    future, past, extra = names[:6], names[6:12], names[12]
    for n in future:  # cached first: the oldest accesses
        get_ok(c.url, b, n, blobs[n])
    post_hint(c.url, b, {"epoch": 1, "objnames": past + future, "ttl_s": 600}, provider="ht")
    for n in past:  # read in the hinted order: no next use this epoch
        get_ok(c.url, b, n, blobs[n])
    assert all(is_cached(mp, b, n) for n in names[:12])  # 6 MiB: below the high mark
    get_ok(c.url, b, extra, blobs[extra])  # 6.5 MiB: over it; the sweep goes down to 4 MiB
    wait_until(lambda: sum(is_cached(mp, b, n) for n in names) <= 8, 15, what="the sweep")
    assert all(is_cached(mp, b, n) for n in future), "objects the hint needs next were evicted"
    # The sweep stops at the low mark (4 MiB: 8 objects, or 7 when it lands just past it): what it took are the
    # objects with no next use, oldest first, so the first ones read this epoch are gone.
    kept = [n for n in past + [extra] if is_cached(mp, b, n)]
    assert len(kept) <= 2 and not any(is_cached(mp, b, n) for n in past[:4]), kept
    for n in future:  # and they are hits: fetched once only
        get_ok(c.url, b, n, blobs[n])
        assert access_count(origin, n) == 1
    [h] = hints_of(c.targets()[0], b)
    assert h["cursor"] == 12 and h["done"] and h["hits"] == 6 and h["misses"] == 6


def test_hint_without_hint_is_lru(make_cluster, origin):
    """The same reads without a hint: the oldest go, as before."""
    c = make_cluster(targets=1, mountpaths=1, target_args=LRU_ARGS + ["--hint_prefetch_inflight", "0"])
    mp = c.mountpaths(0)[0]
    b, names, blobs = remote_bucket(c, origin, "hl", 13)
    for n in names:
        get_ok(c.url, b, n, blobs[n])
    wait_until(lambda: sum(is_cached(mp, b, n) for n in names) <= 8, 15, what="the sweep")
    assert not any(is_cached(mp, b, n) for n in names[:5])
    assert all(is_cached(mp, b, n) for n in names[7:])


def test_hint_stages_ahead(make_cluster, origin):
    c = make_cluster(targets=1, mountpaths=1, target_args=LRU_ARGS + ["--hint_prefetch_inflight", "2"])
    mp = c.mountpaths(0)[0]
    b, names, blobs = remote_bucket(c, origin, "hp", 20)
    post_hint(c.url, b, {"epoch": 1, "objnames": names, "ttl_s": 600}, provider="ht")
    t = c.targets()[0]
    # Before any read the first names are staged (as many as in flight, then as the window allows).
    wait_until(lambda: hints_of(t, b)[0]["prefetched"] >= 2, 20, what="the first names staged")
    assert is_cached(mp, b, names[0]) and is_cached(mp, b, names[1])
    for n in names[:2]:
        get_ok(c.url, b, n, blobs[n])
    wait_until(lambda: hints_of(t, b)[0]["prefetched"] >= 4, 20, what="staging follows the reads")
    for n in names[2:4]:
        get_ok(c.url, b, n, blobs[n])
    for n in names[:4]:
        assert access_count(origin, n) == 1, "%s fetched more than once" % n
    h = hints_of(t, b)[0]
    assert h["hits"] == 4 and h["misses"] == 0 and h["prefetch_failed"] == 0
    # The window never holds more than the cache at its low mark: 4 MiB of 512 KiB objects.
    assert h["prefetched"] - h["read"] <= 8
    assert sum(is_cached(mp, b, n) for n in names) * OBJ <= QUOTA * 80 // 100


def test_hint_parallel_readers_remote(make_cluster, origin):
    """Eight readers over three targets, a remote bucket with staging on: every name counts read once, none
    skipped, each object fetched from the origin once (staged or read cold, never both)."""
    from concurrent.futures import ThreadPoolExecutor

    c = make_cluster(targets=3, mountpaths=1, target_args=["--hint_prefetch_inflight", "2"])
    b, names, blobs = remote_bucket(c, origin, "hr", 60)
    doc = post_hint(c.url, b, {"epoch": 1, "objnames": names, "ttl_s": 600, "job": "loader"},
                    provider="ht").json()
    assert sum(t["names"] for t in doc["targets"]) == 60

    def read(name):
        r = requests.get(obj_url(c.url, b, name), timeout=TIMEOUT)
        return r.status_code == 200 and r.content == blobs[name]

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, names))
    hs = [h for t in c.targets() for h in hints_of(t, b, "loader")]
    assert len(hs) == 3
    assert sum(h["read"] for h in hs) == 60 and sum(h["skipped"] for h in hs) == 0
    assert all(h["done"] and h["rereads"] == 0 for h in hs)
    assert sum(h["hits"] + h["misses"] for h in hs) == 60
    for n in names:
        assert access_count(origin, n) == 1, n


def test_hint_reads_stored_copies_ahead(make_cluster):
    """An ais bucket: staging reads the stored copies of the next names into the page cache."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import sysprobe  # noqa: E402 (bench's page-cache probes: mincore, POSIX_FADV_DONTNEED)

    c = make_cluster(targets=1, mountpaths=1, target_args=["--hint_prefetch_inflight", "2"])
    mp = c.mountpaths(0)[0]
    b = unique("hw")
    c.api.create_bucket(b)
    names = ["w-%02d" % i for i in range(12)]
    for n in names:
        c.api.put(b, n, os.urandom(256 * 1024))
    paths = [os.path.join(mp, "ais", b, n) for n in names]
    assert sysprobe.evict_files(paths) == 0, "the page cache kept some of the objects' pages"
    cold = [n for n, p in zip(names, paths) if sysprobe.resident_pages(p) == 0]
    assert len(cold) >= 4, "too few objects left the page cache to tell staging from chance"
    post_hint(c.url, b, {"epoch": 1, "objnames": cold, "ttl_s": 600})
    t = c.targets()[0]
    # Before any read the first names (as many as in flight) are read ahead; nothing is fetched for ais.
    wait_until(lambda: hints_of(t, b)[0]["warmed"] >= 2, 20, what="the first names read ahead")
    first = [os.path.join(mp, "ais", b, n) for n in cold[:2]]
    wait_until(lambda: all(sysprobe.resident_pages(p) > 0 for p in first), 20, what="their pages in memory")
    h = hints_of(t, b)[0]
    assert h["prefetched"] == 0 and h["prefetch_failed"] == 0
    assert h["warmed"] < len(cold), "with no read, the window stays at the names in flight"
