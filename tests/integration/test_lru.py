# SPDX-License-Identifier: Apache-2.0
# LRU eviction under a small per-mountpath quota: watermarks, recency, refetch, ais never evicted, 507 on no room.
import os
import time

import requests

import peers
from ftutil import TIMEOUT, Api, create_remote, obj_url, unique
from test_coldget import access_count, put_origin

MIB = 1 << 20
QUOTA = 8 * MIB
HIGH, LOW = 80, 50
OBJ = 512 * 1024
LRU_ARGS = ["--lru_quota_bytes", str(QUOTA), "--lru_high_pct", str(HIGH), "--lru_low_pct", str(LOW),
            "--lru_interval_ms", "200"]


origin = peers.nginx_origin_fixture()


def usage(mp):
    """Bytes of published objects on a mountpath (what the quota counts: .work excluded)."""
    total = 0
    for dirpath, dirs, files in os.walk(mp):
        if dirpath == mp and ".work" in dirs:
            dirs.remove(".work")
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except FileNotFoundError:  # evicted meanwhile
                pass
    return total


def wait_usage_below(mp, limit, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        u = usage(mp)
        if u <= limit or time.monotonic() > deadline:
            return u
        time.sleep(0.05)


def is_cached(mp, provider, bucket, name):
    return os.path.isfile(os.path.join(mp, provider, bucket, name))


def lru_cluster(make_cluster):
    c = make_cluster(targets=1, mountpaths=1, target_args=LRU_ARGS)
    return c, c.mountpaths(0)[0]


def get_ok(url, bucket, name, data):
    r = requests.get(obj_url(url, bucket, name), timeout=TIMEOUT)
    assert r.status_code == 200, (name, r.status_code, r.text[:300])
    assert r.content == data, name


def test_lru_evicts_oldest_keeps_recent(make_cluster, origin):
    c, mp = lru_cluster(make_cluster)
    b = unique("lru")
    create_remote(c.url, b, "ht", {"endpoint": origin.url})
    prefix = unique("o")
    names = ["%s-%02d" % (prefix, i) for i in range(40)]
    blobs = {n: os.urandom(OBJ) for n in names}
    for n in names:
        put_origin(origin, n, blobs[n])
    hot = names[:3]
    high = QUOTA * HIGH // 100
    for i, n in enumerate(names):
        get_ok(c.url, b, n, blobs[n])
        if i % 3 == 2:
            for h in hot:
                get_ok(c.url, b, h, blobs[h])
        u = wait_usage_below(mp, high)
        assert u <= high, "after reading %d objects usage %d > high mark %d" % (i + 1, u, high)
    assert all(is_cached(mp, "ht", b, h) for h in hot), "recently re-read objects were evicted"
    # ...and never were (an evicted one would have been fetched again on its re-read).
    assert [access_count(origin, h) for h in hot] == [1, 1, 1]
    old = names[3:12]
    evicted = [n for n in old if not is_cached(mp, "ht", b, n)]
    assert evicted == old, "oldest unread objects still cached: %s" % sorted(set(old) - set(evicted))
    cached = [n for n in names if is_cached(mp, "ht", b, n)]
    assert 0 < len(cached) * OBJ <= high
    # An evicted object reads again correctly, fetched from the origin a second time.
    before = access_count(origin, old[0])
    get_ok(c.url, b, old[0], blobs[old[0]])
    assert access_count(origin, old[0], at_least=before + 1) == before + 1
    assert is_cached(mp, "ht", b, old[0])


def test_lru_never_evicts_ais_and_full_gives_507(make_cluster, origin):
    c, mp = lru_cluster(make_cluster)
    api = Api(c.url)
    hb = unique("lruh")
    create_remote(c.url, hb, "ht", {"endpoint": origin.url})
    prefix = unique("r")
    remote = {"%s-%d" % (prefix, i): os.urandom(OBJ) for i in range(5)}
    for n, d in remote.items():
        put_origin(origin, n, d)
    names = list(remote)
    for n in names[:4]:
        get_ok(c.url, hb, n, remote[n])
    assert all(is_cached(mp, "ht", hb, n) for n in names[:4])

    ab = unique("lrua")
    api.create_bucket(ab)
    local = {"a-%02d" % i: os.urandom(OBJ) for i in range(16)}  # 8 MiB: at the quota by itself
    for n, d in local.items():
        api.put(ab, n, d)
    # Over the mark: every cached remote object goes, no ais object does.
    deadline = time.monotonic() + 5
    while any(is_cached(mp, "ht", hb, n) for n in names[:4]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(is_cached(mp, "ht", hb, n) for n in names[:4])
    time.sleep(1.0)  # several more sweeps while still over the high mark
    assert usage(mp) > QUOTA * HIGH // 100
    for n, d in local.items():
        assert is_cached(mp, "ais", ab, n), "ais object %s was evicted" % n
        r = api.get(ab, n)
        assert r.status_code == 200 and r.content == d

    # No room even after eviction: 507 JSON, nothing cached, no work file left.
    r = requests.get(obj_url(c.url, hb, names[4]), timeout=TIMEOUT)
    assert r.status_code == 507, (r.status_code, r.text[:300])
    j = r.json()
    assert j["status"] == 507 and "does not fit" in j["message"]
    assert not is_cached(mp, "ht", hb, names[4])
    assert c.work_files() == []


def open_files(pid, mp):
    """Paths under mp the process holds open, as /proc shows them (" (deleted)" after an unlinked one's)."""
    d = "/proc/%d/fd" % pid
    out = []
    for fd in os.listdir(d):
        try:
            link = os.readlink(os.path.join(d, fd))
        except OSError:  # closed meanwhile
            continue
        if link.startswith(mp + "/"):
            out.append(link)
    return out


def test_an_evicted_file_the_open_file_cache_kept_is_closed_by_the_eviction(make_cluster, origin):
    # The open-file cache keeps small warm objects open. An evicted one would hold its space until its loop's next
    # sweep (up to a second), where statvfs (the LRU's measure without a quota) and a cold GET making room need it
    # free: the LRU has every loop sweep at once, so when it logs the eviction no evicted file is open any more.
    c, mp = lru_cluster(make_cluster)
    b = unique("lrufc")
    create_remote(c.url, b, "ht", {"endpoint": origin.url})
    names = ["%s-%02d" % (unique("f"), i) for i in range(14)]
    blobs = {n: os.urandom(OBJ) for n in names}
    for n in names:
        put_origin(origin, n, blobs[n])
    for n in names[:12]:  # 6 MiB, under the high mark; read again so the cache keeps them (on either loop)
        for _ in range(6):
            get_ok(c.url, b, n, blobs[n])
    assert not any(link.endswith(" (deleted)") for link in open_files(c.c.targets[0].pid, mp))
    kept = [n for n in names[:12] if os.path.join(mp, "ht", b, n) in open_files(c.c.targets[0].pid, mp)]
    assert kept, "the open-file cache kept none of the objects read 6 times"
    log = c.c.targets[0].log
    start = os.path.getsize(log)

    def evicted():
        with open(log, errors="replace") as f:
            f.seek(start)
            return "lru: mountpath %s: evicted" % mp in f.read()
    for n in names[12:]:  # past the high mark: evicted down to the low one, the oldest (kept ones among them) first
        get_ok(c.url, b, n, blobs[n])
    deadline = time.monotonic() + 10
    while not evicted():
        assert time.monotonic() < deadline, "no eviction logged"
        time.sleep(0.005)
    held = [link for link in open_files(c.c.targets[0].pid, mp) if link.endswith(" (deleted)")]
    assert held == [], "evicted files still open after the eviction: %s" % held
    gone = [n for n in kept if not is_cached(mp, "ht", b, n)]
    assert gone, "no kept object was evicted (kept %s)" % kept
