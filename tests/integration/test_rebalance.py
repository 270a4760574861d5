# SPDX-License-Identifier: Apache-2.0
# Rebalance: a target joins a running cluster; objects move to their new owner, and are served while they move.
import hashlib
import os
import random
import threading


from ftutil import Api, ctl, objects_on_disk, obj_path, session, unique, wait_until

N_OBJECTS = 300
BIG = 9 << 20  # one object above the 8 MiB transfer chunk: sent in two pieces
SETTLE = 120   # seconds a rebalance may take on a loaded 2-core machine (not a speed check)


def _fill(api, bucket, n):
    """PUTs n objects (one of BIG bytes) and returns {name: md5}."""
    rnd = random.Random(7)
    want = {}
    for i in range(n):
        size = BIG if i == 0 else rnd.randrange(0, 48 << 10)
        data = os.urandom(size)
        name = "d%02d/obj-%04d" % (i % 17, i)
        api.put(bucket, name, data)
        want[name] = hashlib.md5(data).hexdigest()
    return want


def _placement(cluster, bucket):
    """{object name: [target index, ...]} from what is on the targets' disks."""
    where = {}
    for i, t in enumerate(cluster.c.targets):
        for name in objects_on_disk(t.mountpaths, bucket):
            where.setdefault(name, []).append(i)
    return where


def _status(t):
    return ctl("GET", t.control_url, "/v1/rebalance")


def _run(t):
    """The target's last rebalance: its job document when the job framework ran it ("job" in the
    status), else the status of rebalance.c's own walker. Both have id, state, objects, errors."""
    st = _status(t)
    if st.get("job"):
        job = ctl("GET", t.control_url, "/v1/jobs/" + st["job"])
        job["id"] = st["id"]
        return job
    return st


def _finished_since(cluster, version):
    """Every target has finished a rebalance for a map at least this new (job or local walker)."""
    for t in cluster.c.targets:
        st = _run(t)
        if not st["id"].startswith("rebalance-") or int(st["id"].split("-")[1]) < version:
            return False
        if st["state"] != "finished":
            return False
    return True


def _read_all(api, bucket, want):
    """Objects of want that do not read back with their content: [(name, status)]."""
    bad = []
    for name, md5 in want.items():
        r = api.get(bucket, name)
        if r.status_code != 200 or hashlib.md5(r.content).hexdigest() != md5:
            bad.append((name, r.status_code))
    return bad


def _check_after_join(cluster, api, bucket, want, before, new_index):
    after = _placement(cluster, bucket)
    assert sorted(after) == sorted(want), "objects missing or extra on disk"
    dups = {k: v for k, v in after.items() if len(v) != 1}
    assert not dups, "objects on several targets: %s" % list(dups.items())[:5]
    moved = [k for k in want if after[k] != before[k]]
    on_new = [k for k in want if after[k] == [new_index]]
    assert sorted(moved) == sorted(on_new), "objects moved between old targets"
    # HRW: each object goes to the new target with probability 1/5 (binomial); 4.5 sigma bounds.
    mean = len(want) / 5.0
    sigma = (len(want) * 0.2 * 0.8) ** 0.5
    assert mean - 4.5 * sigma <= len(on_new) <= mean + 4.5 * sigma, \
        "%d of %d objects moved to the new target (want about 1/5)" % (len(on_new), len(want))
    new_url = cluster.c.targets[new_index].public_url
    for name in want:
        loc = api.owner(bucket, name)
        assert loc.startswith(new_url + "/") == (after[name] == [new_index]), \
            "%s is on target %s but the map places it at %s" % (name, after[name], loc)
    bad = _read_all(api, bucket, want)
    assert not bad, "unreadable after the rebalance: %s" % bad[:10]
    assert not [f for f in cluster.work_files() if os.path.basename(f).startswith("rb.")], \
        "transfer work files left behind"
    for t in cluster.c.targets:
        st = _run(t)
        assert st["errors"] == 0, st


def test_join_moves_a_fifth(make_cluster):
    """4 targets, then a 5th joins: about 1/5 of the objects move to it and only to it; each
    object is on its owner once, with its content; the rebalance reports finished everywhere."""
    cluster = make_cluster(targets=4, mountpaths=2)
    api = Api(cluster.url, session())
    bucket = unique("rb")
    api.create_bucket(bucket)
    want = _fill(api, bucket, N_OBJECTS)
    before = _placement(cluster, bucket)
    assert all(len(v) == 1 for v in before.values()) and len(before) == N_OBJECTS

    new = cluster.add_target()
    version = cluster.smap()["version"]
    wait_until(lambda: _finished_since(cluster, version), SETTLE, 0.2, "rebalance finished everywhere")
    _check_after_join(cluster, api, bucket, want, before, new)
    moved = sum(_run(t)["objects"] for t in cluster.c.targets[:new])
    assert moved == sum(1 for k in want if _placement(cluster, bucket)[k] == [new])


def test_pull_serves_objects_not_moved_yet(make_cluster):
    """With rebalance held back on the old targets, the new owner fetches an object from the
    target that had it (the step a GET miss takes), keeping its version and metadata; enabling
    rebalance then moves the rest."""
    cluster = make_cluster(targets=4, mountpaths=1)
    api = Api(cluster.url, session())
    bucket = unique("rbpull")
    api.create_bucket(bucket)
    want = _fill(api, bucket, 120)
    hdr = {"Content-Type": "text/x-test", "x-amz-meta-color": "blue"}
    api.put(bucket, "meta/obj", b"v1", headers=hdr)
    api.put(bucket, "meta/obj", b"version two", headers=hdr)
    want["meta/obj"] = hashlib.md5(b"version two").hexdigest()
    for t in cluster.c.targets:
        ctl("POST", t.control_url, "/v1/rebalance", {"action": "disable"})
    before = _placement(cluster, bucket)

    new = cluster.add_target()
    nt = cluster.c.targets[new]
    owned = [k for k in want if api.owner(bucket, k).startswith(nt.public_url + "/")]
    assert owned, "the new target owns nothing"
    assert not objects_on_disk(nt.mountpaths, bucket), "moved although rebalance is disabled"
    for name in owned:
        j = ctl("POST", nt.control_url, "/v1/rebalance/pull",
                params={"provider": "ais", "bucket": bucket, "obj": name}, expect=202)
        assert j["result"] == "started", j
        wait_until(lambda: _placement(cluster, bucket)[name] == [new], 60, 0.05,
                   "%s pulled from target %s" % (name, before[name]))
        r = api.get(bucket, name)
        assert r.status_code == 200 and hashlib.md5(r.content).hexdigest() == want[name], name
    if "meta/obj" in owned:
        r = api.get(bucket, "meta/obj")
        assert r.headers["Ais-Version"] == "2" and r.headers["Content-Type"] == "text/x-test"
        assert r.headers["x-amz-meta-color"] == "blue"
    # Pulling twice, or an object no one has: clear answers.
    j = ctl("POST", nt.control_url, "/v1/rebalance/pull",
            params={"provider": "ais", "bucket": bucket, "obj": owned[0]})
    assert j["result"] == "present"
    misses = _status(nt)["pull_misses"]
    ctl("POST", nt.control_url, "/v1/rebalance/pull",
        params={"provider": "ais", "bucket": bucket, "obj": "no/such/object"}, expect=202)
    wait_until(lambda: _status(nt)["pull_misses"] == misses + 1, 60, 0.05, "the pull to find nothing")
    assert _status(nt)["errors"] == 0

    version = cluster.smap()["version"]
    for t in cluster.c.targets[:new]:
        ctl("POST", t.control_url, "/v1/rebalance", {"action": "enable"})
    wait_until(lambda: _finished_since(cluster, version), SETTLE, 0.2, "rebalance finished everywhere")
    _check_after_join(cluster, api, bucket, want, before, new)


def test_transfer_endpoint_refuses_bad_input(make_cluster):
    """The receiving side of a transfer checks what it is given (400/404/409), stores nothing."""
    cluster = make_cluster(targets=1, mountpaths=1)
    api = Api(cluster.url, session())
    bucket = unique("rbbad")
    api.create_bucket(bucket)
    t = cluster.c.targets[0]
    base = {"provider": "ais", "bucket": bucket, "obj": "x", "xfer": "a.1", "offset": "0",
            "total": "3", "lom": "0"}
    s = session()

    def put(params, body=b"abc"):
        return s.put(t.control_url + "/v1/rebalance/obj", params=params, data=body, timeout=30)

    r = put(dict(base, lom="2", total="1"))  # last chunk: metadata bytes that do not decode
    assert r.status_code == 400, r.text
    r = put(dict(base, xfer="../../x"))
    assert r.status_code == 400, r.text
    r = put(dict(base, bucket="nosuchbucket"))
    assert r.status_code == 404, r.text
    r = put(dict(base, bucket="nosuchbucket", bmd="999999"))  # the sender knows a newer BMD: retry
    assert r.status_code == 503, r.text
    r = put(dict(base, total="2"))  # more bytes than the total
    assert r.status_code == 400, r.text
    r = put(dict(base, offset="1", total="10"))  # a later chunk of an unknown transfer
    assert r.status_code == 409, r.text
    r = put({k: v for k, v in base.items() if k != "obj"})
    assert r.status_code == 400, r.text
    assert api.get(bucket, "x").status_code == 404
    assert not cluster.work_files(), "work files left: %s" % cluster.work_files()
    r = s.get(t.control_url + "/v1/rebalance/obj", timeout=30)
    assert r.status_code == 405


class _Readers:
    """Threads GETting random objects through the proxy until stopped; records every failure."""

    def __init__(self, url, bucket, want, n=4):
        self.url, self.bucket, self.want = url, bucket, want
        self.stop = threading.Event()
        self.failures, self.count = [], [0] * n
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(n)]

    def run(self, i):
        s = session()
        names = list(self.want)
        rnd = random.Random(i)
        while not self.stop.is_set():
            name = rnd.choice(names)
            try:
                r = s.get(self.url + obj_path(self.bucket, name), timeout=60)
                ok = r.status_code == 200 and hashlib.md5(r.content).hexdigest() == self.want[name]
                if not ok:
                    self.failures.append((name, r.status_code, r.text[:200]))
            except Exception as e:  # noqa: BLE001 - any failure counts
                self.failures.append((name, "exception", str(e)))
            self.count[i] += 1

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(90)


# In both load tests a GET reaching the new owner before its object arrived is served through
# tgt_rebalance_pull (target/obj/get.c calls it on a miss): without it such a GET would answer 404.


def test_join_under_read_load(make_cluster):
    """Item 5(d): 4 targets under a steady GET load, a 5th joins: not one GET fails (a miss on
    the new owner is served by pulling from the previous one), about 1/5 of the objects move,
    all are readable afterwards and the rebalance finishes."""
    cluster = make_cluster(targets=4, mountpaths=2)
    api = Api(cluster.url, session())
    bucket = unique("rbload")
    api.create_bucket(bucket)
    want = _fill(api, bucket, N_OBJECTS)
    before = _placement(cluster, bucket)
    with _Readers(cluster.url, bucket, want) as readers:
        wait_until(lambda: sum(readers.count) >= 200, 60, 0.1, "readers running")
        new = cluster.add_target()
        version = cluster.smap()["version"]
        wait_until(lambda: _finished_since(cluster, version), SETTLE, 0.2,
                   "rebalance finished everywhere")
        n0 = sum(readers.count)
        wait_until(lambda: sum(readers.count) >= n0 + 200, 60, 0.1, "reads after the rebalance")
    assert sum(readers.count) > 400
    assert not readers.failures, "%d failed GETs of %d, e.g. %s" % (
        len(readers.failures), sum(readers.count), readers.failures[:5])
    _check_after_join(cluster, api, bucket, want, before, new)


def _held_back(make_cluster, prefix, n):
    """4 targets holding n objects of a new bucket, their rebalance disabled: (cluster, api, bucket, want, before)."""
    cluster = make_cluster(targets=4, mountpaths=1)
    api = Api(cluster.url, session())
    bucket = unique(prefix)
    api.create_bucket(bucket)
    want = _fill(api, bucket, n)
    before = _placement(cluster, bucket)
    for t in cluster.c.targets:
        ctl("POST", t.control_url, "/v1/rebalance", {"action": "disable"})
    return cluster, api, bucket, want, before


def test_operator_starts_a_rebalance(make_cluster):
    """`ais start rebalance` (PUT /v1/cluster {"action":"start","value":{"kind":"rebalance"}} on the public port):
    objects left where a held-back rebalance did not move them reach their owners through one job, under one id
    on every target, which the job queries follow to its end."""
    cluster, api, bucket, want, before = _held_back(make_cluster, "rbstart", 80)
    new = cluster.add_target()
    assert _placement(cluster, bucket) == before  # held back: nothing moved
    r = api.s.put(cluster.url + "/v1/cluster", json={"action": "start", "name": "", "value": {"kind": "rebalance"}},
                  timeout=30)
    assert r.status_code == 200, r.text
    job = r.text
    wait_until(lambda: api.s.get(cluster.url + "/v1/jobs/" + job, timeout=30).json()["state"] == "finished",
               SETTLE, 0.2, "the rebalance job finished")
    doc = api.s.get(cluster.url + "/v1/jobs/" + job, timeout=30).json()
    assert doc["kind"] == "rebalance" and len(doc["targets"]) == len(cluster.c.targets) and doc["errors"] == 0, doc
    for t in cluster.c.targets:
        assert _status(t)["job"] == job
    _check_after_join(cluster, api, bucket, want, before, new)
    # a target refuses an id in use or one that is no job id: 409, and the proxy passes that on
    t0 = cluster.c.targets[0]
    for bad in (job, "bad/id", "x" * 200):
        r = ctl("POST", t0.control_url, "/v1/rebalance", {"action": "start", "id": bad}, expect=409)
        assert "cannot start" in r["message"], r


def test_reads_while_rebalance_held_back(make_cluster):
    """With the old targets' rebalance disabled, every GET of an object the new target now owns
    misses there and must be served by a pull: under a read load not one GET fails; then the
    rebalance is enabled and finishes with every object in place."""
    cluster, api, bucket, want, before = _held_back(make_cluster, "rbheld", 150)
    with _Readers(cluster.url, bucket, want) as readers:
        new = cluster.add_target()
        n0 = sum(readers.count)
        wait_until(lambda: sum(readers.count) >= n0 + 300, 120, 0.1, "reads while held back")
        assert _status(cluster.c.targets[new])["pulled"] > 0
        version = cluster.smap()["version"]
        for t in cluster.c.targets[:new]:
            ctl("POST", t.control_url, "/v1/rebalance", {"action": "enable"})
        wait_until(lambda: _finished_since(cluster, version), SETTLE, 0.2,
                   "rebalance finished everywhere")
    assert not readers.failures, "%d failed GETs of %d, e.g. %s" % (
        len(readers.failures), sum(readers.count), readers.failures[:5])
    _check_after_join(cluster, api, bucket, want, before, new)
