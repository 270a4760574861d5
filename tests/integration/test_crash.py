# SPDX-License-Identifier: Apache-2.0
# Crash safety: SIGKILL a target in the middle of PUT load, restart it, and check nothing acked is lost or torn.
import os
import random
import threading
import time
import urllib.parse

from ftutil import TIMEOUT, Api, RawConn, md5_hex, raw_request, session, unique

LOADERS = 6
VICTIM = 0


def test_sigkill_during_put_load(make_cluster):
    # Default keepalive and no probes: the victim stays in the map while it is down (with probes it would leave at
    # once, and rejoining would start a rebalance whose work files the checks below do not expect).
    h = make_cluster(proxy_args=("--probe_interval_ms", "0"))
    api = Api(h.url)
    b = unique("crash")
    api.create_bucket(b, cksum="md5")
    lock = threading.Lock()
    attempted = {}   # name -> md5 of what was sent (acked or not)
    acked = {}       # name -> md5 the target confirmed with 200
    victim_acks = [0]
    stop = threading.Event()
    victim_url = h.c.targets[VICTIM].public_url
    errors = []

    def loader(k):
        rnd = random.Random(k)
        a = Api(h.url, session())
        i = 0
        while not stop.is_set():
            name = "l%d/%05d" % (k, i)
            i += 1
            data = os.urandom(rnd.choice([1000, 64_000, 256_000, 1_000_000]))
            digest = md5_hex(data)
            with lock:
                attempted[name] = (digest, len(data))
            try:
                loc = a.owner(b, name)
                r = a.s.put(loc, data=data, timeout=TIMEOUT)
            except Exception:  # the victim died under us: not acked
                a = Api(h.url, session())
                continue
            if r.status_code == 200:
                if r.headers.get("Ais-Checksum-Value") != digest:
                    errors.append("%s: acked checksum %s != %s"
                                  % (name, r.headers.get("Ais-Checksum-Value"), digest))
                with lock:
                    acked[name] = digest
                    if loc.startswith(victim_url + "/"):
                        victim_acks[0] += 1

    threads = [threading.Thread(target=loader, args=(k,)) for k in range(LOADERS)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 30
        while victim_acks[0] < 15 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert victim_acks[0] >= 15, "the victim acked only %d PUTs" % victim_acks[0]
        # one PUT certainly in flight on the victim: half its body sent, then the kill
        half = "half/object"
        hloc = api.owner(b, half)
        while not hloc.startswith(victim_url + "/"):
            half += "x"
            hloc = api.owner(b, half)
        u = urllib.parse.urlsplit(hloc)
        hc = RawConn(hloc)
        hc.send(raw_request("PUT", u.path, u.netloc, [("Content-Length", "2000000")])
                + os.urandom(700_000))
        time.sleep(0.3)
        h.kill_target(VICTIM, "KILL")
        hc.close()
        time.sleep(0.3)  # load goes on against the others (and fails against the victim)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors[:5]
    assert len(acked) > 50, len(acked)

    h.restart_target(VICTIM)
    # leftover work files are gone once the target is back up; nothing in flight anywhere
    assert h.work_files([VICTIM]) == []
    time.sleep(0.2)
    assert h.work_files() == []

    s = session()
    for name, digest in sorted(acked.items()):
        r = s.get(h.url + "/v1/objects/%s/%s" % (b, urllib.parse.quote(name)), timeout=TIMEOUT)
        assert r.status_code == 200, "acked %s: GET %d" % (name, r.status_code)
        assert md5_hex(r.content) == digest, "acked %s came back different" % name
        assert r.headers["Ais-Checksum-Value"] == digest
    for name, (digest, size) in attempted.items():
        if name in acked:
            continue
        r = s.get(h.url + "/v1/objects/%s/%s" % (b, urllib.parse.quote(name)), timeout=TIMEOUT)
        assert r.status_code in (200, 404), (name, r.status_code)
        if r.status_code == 200:  # stored but not acked: must be whole
            assert md5_hex(r.content) == digest and len(r.content) == size, name
    r = s.get(h.url + "/v1/objects/%s/%s" % (b, urllib.parse.quote(half)), timeout=TIMEOUT)
    assert r.status_code == 404, "half-written object is served"

    entries, _ = api.list_all(b)
    listed = {e["name"]: e for e in entries}
    assert half not in listed
    assert set(acked) <= set(listed), sorted(set(acked) - set(listed))[:5]
    for n, e in listed.items():
        assert n in attempted, "listed %s was never PUT" % n
        digest, size = attempted[n]
        assert e["checksum"] == digest and e["size"] == size, e

    # on disk: the victim's bucket directories hold exactly the listed objects it owns
    on_disk = set()
    for mp in h.mountpaths(VICTIM):
        root = os.path.join(mp, "ais", b)
        for dirpath, _, files in os.walk(root):
            on_disk |= {os.path.relpath(os.path.join(dirpath, f), root) for f in files}
    owned = {n for n in listed if api.owner(b, n).startswith(victim_url + "/")}
    assert on_disk == owned, (sorted(on_disk - owned)[:5], sorted(owned - on_disk)[:5])
    api.destroy_bucket(b)
