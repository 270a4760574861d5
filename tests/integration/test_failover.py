# SPDX-License-Identifier: Apache-2.0
"""Several proxies on etcd, with real processes: etcd + 3 proxies + 4 targets under GET+PUT load through every proxy.
SIGKILL of the primary: another proxy is primary within the lease TTL, no acknowledged PUT is lost, every node ends on
the same map, and the failed client requests are counted (the goal: only those in flight on the killed proxy; a
client drops a proxy that refuses connections, as any client with a list of endpoints does). Then SIGKILL of etcd for
10 s: the data path keeps serving, bucket creation (through any proxy) fails with a clear 503 JSON error, and works
again once etcd is back. The killed proxy, restarted, follows the new primary; killed again (a follower now), it leaves the map once
its lease is gone. The figures measured are printed (pytest -s shows them)."""
import hashlib
import os
import random
import signal
import threading
import time

import pytest
import requests

import ftcluster
from ftutil import assert_json_error, obj_path, session, unique, wait_until

LEASE_TTL = 3  # --lease_ttl_s: the stated bound on a failover
# A new primary within the TTL, plus the election tick (200 ms) and etcd's expiry check (up to ~0.5 s).
FAILOVER_BOUND_S = LEASE_TTL + 1.5
ETCD_OUTAGE_S = 10
WORKERS = 6
TIMEOUT = 10


def md5(b):
    return hashlib.md5(b).hexdigest()


class Load:
    """GET+PUT clients, each rotating over its own list of proxies: PUT a new object (acknowledged = the target's
    200), GET an acknowledged one and check its content. A proxy that refuses or drops a connection is dropped from
    that client's list; every failed request is counted with the time and the proxy it went to."""

    def __init__(self, token, bucket, proxies, acked, tag):
        self.token, self.bucket, self.tag = token, bucket, tag  # tag: names new to this load (never overwritten)
        self.proxies = list(proxies)
        self.acked = acked  # name -> md5, shared with the checks
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.failures = []  # (time, proxy url, what)
        self.ok = 0
        self.threads = []

    def start(self):
        self.stop_ev.clear()
        self.threads = [threading.Thread(target=self._worker, args=(i,), daemon=True) for i in range(WORKERS)]
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(30)

    def failed_between(self, t0, t1):
        with self.lock:
            return [f for f in self.failures if t0 <= f[0] < t1]

    def _fail(self, url, what):
        with self.lock:
            self.failures.append((time.monotonic(), url, what))

    def _one(self, s, url, rnd, i, n):
        if rnd.random() < 0.5 or not self.acked:
            name = "%s-w%d-%06d" % (self.tag, i, n)
            data = os.urandom(rnd.choice([100, 4000, 60000]))
            r = s.put(url + obj_path(self.bucket, name), data=data, allow_redirects=False, timeout=TIMEOUT)
            if r.status_code != 307:
                return "PUT at proxy: %d %s" % (r.status_code, r.text[:200])
            r = s.put(r.headers["Location"], data=data, allow_redirects=False, timeout=TIMEOUT)
            if r.status_code != 200:
                return "PUT at target: %d %s" % (r.status_code, r.text[:200])
            with self.lock:
                self.acked[name] = md5(data)
            return None
        with self.lock:
            name, want = rnd.choice(list(self.acked.items()))
        r = s.get(url + obj_path(self.bucket, name), timeout=TIMEOUT)
        if r.status_code != 200:
            return "GET %s: %d %s" % (name, r.status_code, r.text[:200])
        if md5(r.content) != want:
            return "GET %s: wrong content" % name
        return None

    def _worker(self, i):
        rnd = random.Random(i)
        s = session(self.token)
        mine = list(self.proxies)
        n = 0
        while not self.stop_ev.is_set() and mine:
            url = mine[n % len(mine)]
            n += 1
            try:
                why = self._one(s, url, rnd, i, n)
            except requests.ConnectionError as e:
                why = "connection: %s" % str(e)[:160]
                if url in mine:  # refused, or reset while the killed process is torn down: use the others
                    mine.remove(url)
            except requests.RequestException as e:
                why = "request: %s" % str(e)[:160]
            if why is None:
                with self.lock:
                    self.ok += 1
            else:
                self._fail(url, why)


def primary_of(h, nodes):
    """The proxy node whose /v1/health says it is the primary, or None."""
    for p in nodes:
        try:
            r = session(h.token).get(p.public_url + "/v1/health", timeout=1)
        except requests.RequestException:
            continue
        if r.status_code == 200 and r.json().get("primary") is True:
            return p
    return None


def smap_versions(h, proxies):
    """{node name: (smap version, primary)} from every live proxy and target."""
    out = {}
    for p in proxies:
        m = session(h.token).get(p.public_url + "/v1/cluster?what=smap", timeout=5).json()
        out[p.name] = (m["version"], m["primary"])
    for t in h.c.targets:
        st, body = ftcluster.http_json("POST", t.control_url + "/v1/metasync", {}, timeout=5, secret=h.c.secret)
        assert st == 200, body
        out[t.name] = (body["smap_version"], None)
    return out


def create_bucket(h, url, bucket):
    return session(h.token).post(url + "/v1/buckets/" + bucket, json={"action": "create-bck"}, timeout=TIMEOUT)


def check_acked(h, url, bucket, acked):
    """Every acknowledged PUT reads back with its content through url. Returns the names that do not."""
    s = session(h.token)
    bad = []
    for name, want in sorted(acked.items()):
        r = s.get(url + obj_path(bucket, name), timeout=TIMEOUT)
        if r.status_code != 200 or md5(r.content) != want:
            bad.append("%s: %d" % (name, r.status_code))
    return bad


def check_follower_refusals(h, primary, follower):
    """What a follower refuses and how: a target's keepalive and join (503 naming the primary's control URL, which
    targets follow), a join with a bad role (400), a malformed metasync (400); and the control plane stays signed
    between proxies (unsigned: refused). Bucket metadata changes it takes (test_follower_meta.py)."""
    for path, body in (("/v1/cluster/keepalive", {"id": h.c.targets[0].id, "smap_version": 0}),
                       ("/v1/cluster/join", {"id": "t-x", "public_url": "http://127.0.0.1:9",
                                             "control_url": "http://127.0.0.1:9"})):
        st, j = ftcluster.http_json("POST", follower.control_url + path, body, timeout=5, secret=h.c.secret)
        assert st == 503 and j["primary_url"] == primary.control_url, (path, st, j)
        assert "not the primary" in j["message"]
    st, j = ftcluster.http_json("POST", primary.control_url + "/v1/cluster/join",
                                {"id": "x", "role": "client", "public_url": "http://a:1", "control_url": "http://a:2"},
                                timeout=5, secret=h.c.secret)
    assert st == 400 and "role" in j["message"], j
    st, j = ftcluster.http_json("POST", follower.control_url + "/v1/metasync", {"smap": {"version": "x"}},
                                timeout=5, secret=h.c.secret)
    assert st == 400, j
    st, _ = ftcluster.http_json("POST", follower.control_url + "/v1/metasync", {}, timeout=5)
    assert st in (401, 403), st


def test_primary_sigkill_and_etcd_outage(make_cluster):
    h = make_cluster(targets=4, mountpaths=1, proxies=3, lease_ttl=LEASE_TTL, auth=True)
    c = h.c
    proxies = list(c.proxies)
    old = primary_of(h, proxies)
    assert old is not None, "no proxy says it is the primary"
    urls = [p.public_url for p in proxies]

    # a follower takes a metadata change: the primary makes it
    follower = next(p for p in proxies if p is not old)
    b = unique("fo")
    r = create_bucket(h, follower.public_url, b)
    assert r.status_code == 200, r.text
    assert_json_error(create_bucket(h, old.public_url, b), 409, "exists")
    check_follower_refusals(h, old, follower)
    wait_until(lambda: all(session(h.token).head(u + "/v1/buckets/" + b, timeout=5).status_code == 200 for u in urls),
               10, what="every proxy knows the bucket")

    acked = {}
    load = Load(h.token, b, urls, acked, "a")
    load.start()
    time.sleep(3)

    # ---- SIGKILL of the primary ----
    t_kill = time.monotonic()
    old.expected_dead = True
    old.signal(signal.SIGKILL)
    assert old.wait_dead(5)
    rest = [p for p in proxies if p is not old]
    new = None
    while time.monotonic() - t_kill < 20 and new is None:
        new = primary_of(h, rest)
        if new is None:
            time.sleep(0.05)
    t_new = time.monotonic()
    assert new is not None, "no new primary 20 s after the kill:\n%s" % c.logs_tails(rest)
    failover_s = t_new - t_kill
    time.sleep(3)
    load.stop()
    t_end = time.monotonic()

    failed_before = load.failed_between(0, t_kill)
    failed_failover = load.failed_between(t_kill, t_end)
    on_killed = [f for f in failed_failover if f[1] == old.public_url]
    print("\nfailover: lease TTL %d s, new primary %s after %.2f s; %d requests ok, %d failed during the failover "
          "(%d of them at the killed proxy), %d acknowledged PUTs"
          % (LEASE_TTL, new.name, failover_s, load.ok, len(failed_failover), len(on_killed), len(acked)))
    for f in failed_failover[:10]:
        print("  failed: %s %s" % (f[1], f[2]))
    assert not failed_before, failed_before[:5]
    assert failover_s <= FAILOVER_BOUND_S, "new primary after %.2f s (TTL %d s)" % (failover_s, LEASE_TTL)
    # only requests that went to the killed proxy fail (each client drops it at the first refused connection)
    assert len(failed_failover) == len(on_killed), [f for f in failed_failover if f[1] != old.public_url][:5]
    assert len(on_killed) <= WORKERS * 2, on_killed[:5]

    # no acknowledged PUT lost
    assert not check_acked(h, new.public_url, b, acked)

    # the same map on every live node, with the new primary and without the dead one
    def consistent():
        try:
            v = smap_versions(h, rest)
        except requests.RequestException:  # a proxy just restarted may not listen yet
            return False
        return len(set(x[0] for x in v.values())) == 1 and all(x[1] in (None, new.id) for x in v.values())

    wait_until(consistent, 10, what="every node holds the new primary's map")
    m = session(h.token).get(new.public_url + "/v1/cluster?what=smap", timeout=5).json()
    assert m["primary"] == new.id
    assert sorted(p["public_url"] for p in m["proxies"]) == sorted(p.public_url for p in rest)
    assert len(m["targets"]) == 4
    # metadata changes work again, through the new primary
    b2 = unique("fo2")
    r = create_bucket(h, new.public_url, b2)
    assert r.status_code == 200, r.text

    # ---- SIGKILL of etcd for 10 s ----
    load = Load(h.token, b, [p.public_url for p in rest], acked, "b")
    load.start()
    time.sleep(1)
    t_down = time.monotonic()
    c.etcd.expected_dead = True
    c.etcd.signal(signal.SIGKILL)
    assert c.etcd.wait_dead(5)
    refused = []
    while time.monotonic() - t_down < ETCD_OUTAGE_S:
        for p in rest:
            r = create_bucket(h, p.public_url, unique("down"))
            refused.append(r.status_code)
            assert_json_error(r, 503)
        time.sleep(1)
    c.etcd.spawn(c.env)
    c.save()
    t_up = time.monotonic()
    c.wait_etcd()
    b3 = unique("fo3")
    status = []

    def created():
        r = create_bucket(h, new.public_url, b3)
        status.append(r.status_code)
        return r.status_code == 200

    wait_until(created, 20, interval=0.2, what="bucket creation after etcd is back")
    t_resumed = time.monotonic()
    time.sleep(1)
    load.stop()
    failed_outage = load.failed_between(t_down, time.monotonic())
    print("etcd outage: %.1f s; %d requests ok, %d failed; %d bucket creations answered 503; metadata changes "
          "resumed %.2f s after etcd restarted" % (t_up - t_down, load.ok, len(failed_outage), len(refused),
                                                     t_resumed - t_up))
    for f in failed_outage[:10]:
        print("  failed: %s %s" % (f[1], f[2]))
    assert not failed_outage, failed_outage[:5]
    assert refused and all(s == 503 for s in refused)
    assert not check_acked(h, rest[0].public_url, b, acked)
    wait_until(lambda: all(session(h.token).head(p.public_url + "/v1/buckets/" + b3, timeout=5).status_code == 200
                           for p in rest), 10, what="every proxy knows the bucket made after the outage")
    wait_until(consistent, 10, what="every node holds the same map after the outage")

    # the killed proxy, restarted, follows the new primary and is listed again
    old.spawn(c.env)
    c.save()

    def rejoined():
        m = session(h.token).get(new.public_url + "/v1/cluster?what=smap", timeout=5).json()
        return old.public_url in [p["public_url"] for p in m["proxies"]]

    wait_until(rejoined, 20, what="the restarted proxy back in the map")
    assert primary_of(h, [old]) is None
    rest.append(old)
    wait_until(consistent, 10, what="every node, the restarted proxy too, holds the same map")
    r = create_bucket(h, old.public_url, unique("fo4"))  # a follower now: the new primary makes it
    assert r.status_code == 200, r.text

    # a follower SIGKILLed leaves the map once its lease is gone
    t_kill = time.monotonic()
    old.expected_dead = True
    old.signal(signal.SIGKILL)
    assert old.wait_dead(5)
    rest.remove(old)
    wait_until(lambda: not rejoined(), 20, what="the killed follower out of the map")
    gone_s = time.monotonic() - t_kill
    print("a SIGKILLed follower left the map after %.2f s" % gone_s)
    assert gone_s <= FAILOVER_BOUND_S + 1.0
    wait_until(consistent, 10, what="every node holds the map without the killed follower")


def test_single_proxy_has_no_etcd(cluster):
    """The embedded default: one proxy, no etcd, and it is the primary."""
    r = session(cluster.token).get(cluster.url + "/v1/health", timeout=5)
    assert r.status_code == 200 and r.json()["primary"] is True
    if cluster.local:
        assert cluster.c.etcd is None
        assert not any("--etcd" in a for a in cluster.c.proxy.argv)


@pytest.mark.parametrize("flag", ["--lease_ttl_s=0", "--lease_ttl_s=x", "--etcd_prefix="])
def test_bad_etcd_flags(flag):
    """The new flags are checked like every other (exit 2, a message)."""
    import subprocess
    from conftest import FT_BIN
    p = subprocess.run([os.path.join(FT_BIN, "ft-proxy"), "--check-config", flag], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert flag.split("=")[0].lstrip("-") in p.stderr
