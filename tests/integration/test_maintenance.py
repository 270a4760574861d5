# SPDX-License-Identifier: Apache-2.0
"""Target maintenance and decommission through the proxy (PUT /v1/cluster on its control port), and the mountpath
REST of a target relayed by the proxy: reads keep working (native and S3, failures counted), no new object lands on a
target in maintenance, a decommissioned target ends up empty and out of the map; bad input gets a 4xx JSON error."""
import hashlib
import os
import signal
import threading
import time

import requests

import s3util
from ftutil import Api, assert_json_error, session, unique, wait_until

N_OBJECTS = 40


def md5(b):
    return hashlib.md5(b).hexdigest()


def action(h, act, sid):
    return session().put(h.c.proxy.control_url + "/v1/cluster", json={"action": act, "value": {"sid": sid}},
                         timeout=30)


def held(target, bucket):
    """Names the target lists in bucket (its control port)."""
    r = session().get(target["control_url"] + "/v1/list",
                      params={"provider": "ais", "bucket": bucket, "pagesize": 10000}, timeout=30)
    assert r.status_code == 200, r.text
    return {e["name"] for e in r.json()["entries"]}


def fill(h, api, n=N_OBJECTS):
    b = unique("mnt").lower().replace("_", "-")
    api.create_bucket(b)
    objs = {}
    for i in range(n):
        data = os.urandom(1000 + 997 * i)
        api.put(b, "o%03d" % i, data)
        objs["o%03d" % i] = md5(data)
    return b, objs


class Readers:
    """Native and S3 GET loops over objs until stop(); every failure counted."""

    def __init__(self, h, b, objs):
        self.h, self.b, self.objs = h, b, objs
        self.lock = threading.Lock()
        self.ev = threading.Event()
        self.fail, self.ok = [], [0]
        self.threads = [threading.Thread(target=self.native), threading.Thread(target=self.s3)]
        for t in self.threads:
            t.start()

    def note(self, name, ok, why):
        with self.lock:
            if ok:
                self.ok[0] += 1
            else:
                self.fail.append((name, why))

    def native(self):
        s = session()
        while not self.ev.is_set():
            for name, digest in sorted(self.objs.items()):
                try:
                    r = s.get("%s/v1/objects/%s/%s" % (self.h.url, self.b, name), timeout=30)
                    self.note(name, r.status_code == 200 and md5(r.content) == digest, "native %d" % r.status_code)
                except Exception as e:  # noqa: BLE001 - any failure counts
                    self.note(name, False, repr(e)[:200])
                    s = session()

    def s3(self):
        c = s3util.client(self.h, read_timeout=30)
        while not self.ev.is_set():
            for name, digest in sorted(self.objs.items()):
                try:
                    body = c.get_object(Bucket=self.b, Key=name)["Body"].read()
                    self.note(name, md5(body) == digest, "s3 wrong bytes")
                except Exception as e:  # noqa: BLE001
                    self.note(name, False, repr(e)[:200])

    def stop(self):
        self.ev.set()
        for t in self.threads:
            t.join(60)
        return self.ok[0], self.fail


def test_maintenance_keeps_reads_and_takes_no_new_objects(make_cluster):
    h = make_cluster(targets=3, mountpaths=1)
    api = Api(h.url, session())
    b, objs = fill(h, api)
    victim = h.targets()[0]
    before = held(victim, b)
    assert before, "the victim holds none of the objects"
    readers = Readers(h, b, objs)
    try:
        time.sleep(0.5)
        r = action(h, "start-maintenance", victim["id"])
        assert r.status_code == 200, r.text
        flagged = [t for t in h.smap()["targets"] if t["id"] == victim["id"]]
        assert flagged and flagged[0].get("flags") == 1, h.smap()
        new = {}
        for i in range(30):
            data = os.urandom(500 + i)
            api.put(b, "new%03d" % i, data)
            new["new%03d" % i] = md5(data)
        time.sleep(2.0)
    finally:
        ok, fail = readers.stop()
    print("\nmaintenance: GETs ok %d failed %d" % (ok, len(fail)))
    assert not fail, fail[:5]
    assert ok > 0
    assert not (held(victim, b) & set(new)), "a new object landed on the target in maintenance"
    assert before <= held(victim, b), "the target in maintenance lost objects (it hands out copies only)"
    for name, digest in list(new.items()) + list(objs.items()):
        r = api.get(b, name)
        assert r.status_code == 200 and md5(r.content) == digest, name
    r = action(h, "stop-maintenance", victim["id"])
    assert r.status_code == 200, r.text
    assert all("flags" not in t for t in h.smap()["targets"])
    # Out of maintenance the target owns its share again: the objects written meanwhile come back to it.
    mine = {n for n in new if h.index_of_url(api.owner(b, n)) == h.index_of_url(victim["public_url"])}
    wait_until(lambda: mine <= held(victim, b), timeout=30, what="the new objects to reach their owner")
    # and the copies other targets got of its objects while it was in maintenance are gone again.
    others = [t for t in h.targets() if t["id"] != victim["id"]]
    wait_until(lambda: not any(held(t, b) & before for t in others), timeout=30,
               what="the copies made during maintenance to be dropped")
    for name, digest in list(new.items()) + list(objs.items()):
        r = api.get(b, name)
        assert r.status_code == 200 and md5(r.content) == digest, name


def test_a_target_behind_the_askers_map_hands_out_a_copy(make_cluster):
    """A peer whose map is newer asks the owner for an object (a rebalance pull): the newer map may put the owner in
    maintenance, so the owner sends a copy and keeps its own until its map says otherwise."""
    h = make_cluster(targets=2, mountpaths=1)
    api = Api(h.url, session())
    b, _ = fill(h, api, n=12)
    owner, other = sorted(h.targets(), key=lambda t: -len(held(t, b)))  # the one holding more (at least 6)
    name = sorted(held(owner, b))[0]
    version = h.smap()["version"]
    r = session().post(owner["control_url"] + "/v1/rebalance/send",
                       params={"provider": "ais", "bucket": b, "obj": name, "to": other["id"], "smap": version + 5},
                       timeout=30)
    assert r.status_code == 200, r.text
    assert name in held(owner, b), "the owner gave its object away on a map it has not seen"
    assert name in held(other, b)


def test_decommission_moves_everything_then_leaves(make_cluster):
    h = make_cluster(targets=3, mountpaths=1)
    api = Api(h.url, session())
    b, objs = fill(h, api)
    victim = h.targets()[0]
    vidx = h.index_of_url(victim["public_url"])
    assert held(victim, b)
    readers = Readers(h, b, objs)
    try:
        time.sleep(0.5)
        h.c.targets[vidx].expected_dead = True  # it shuts down when asked, at the end
        r = action(h, "decommission", victim["id"])
        assert r.status_code == 202, r.text
        wait_until(lambda: victim["id"] not in [t["id"] for t in h.smap()["targets"]], timeout=60,
                   what="the decommissioned target to leave the map")
        time.sleep(1.0)
    finally:
        ok, fail = readers.stop()
    print("\ndecommission: GETs ok %d failed %d" % (ok, len(fail)))
    assert not fail, fail[:5]
    assert ok > 0
    wait_until(lambda: not h.c.targets[vidx].alive(), timeout=20, what="the decommissioned target to exit")
    for t in h.targets():
        assert held(t, b) <= set(objs)
    together = set()
    for t in h.targets():
        together |= held(t, b)
    assert together == set(objs)
    for name, digest in objs.items():
        r = api.get(b, name)
        assert r.status_code == 200 and md5(r.content) == digest, name


def test_a_decommissioned_target_does_not_join_again(make_cluster):
    """The proxy asks a drained target to shut down, then takes it out of the map. Taken out first, a keepalive sent
    in between was told "not in the map" and the target joined again, without its flags: the owner of objects while
    it exited (GETs redirected to it saw their connections refused or reset). One target stopped with SIGSTOP makes
    each map push wait PX_PUSH_TIMEOUT_MS (2 s) for it, longer than the 1 s keepalive interval."""
    h = make_cluster(targets=3, mountpaths=1, keepalive_ms=1000)
    api = Api(h.url, session())
    api.create_bucket(unique("mntrj").lower().replace("_", "-"))
    victim, slow = h.targets()[0], h.targets()[1]
    vidx, sidx = h.index_of_url(victim["public_url"]), h.index_of_url(slow["public_url"])
    h.c.targets[vidx].expected_dead = True
    seen = []  # (map version, flags) of every map the proxy served listing the victim after the decommission
    h.c.targets[sidx].signal(signal.SIGSTOP)
    try:
        r = action(h, "decommission", victim["id"])
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 30
        while h.c.targets[vidx].alive() and time.monotonic() < deadline:
            m = h.smap()
            seen += [(m["version"], t.get("flags", 0)) for t in m["targets"] if t["id"] == victim["id"]]
            time.sleep(0.05)
        assert not h.c.targets[vidx].alive(), "the decommissioned target did not exit"
        end = time.monotonic() + 3  # past the push to the stopped target and one more keepalive interval
        while time.monotonic() < end:
            m = h.smap()
            seen += [(m["version"], t.get("flags", 0)) for t in m["targets"] if t["id"] == victim["id"]]
            time.sleep(0.05)
    finally:
        h.c.targets[sidx].signal(signal.SIGCONT)
    with open(h.c.proxy.log, errors="replace") as f:
        said = [line.rstrip() for line in f if victim["id"] in line]
    assert all(flags != 0 for _, flags in seen), "the decommissioned target came back: %s\n%s" % (
        sorted(set(seen)), "\n".join(said))
    assert victim["id"] not in [t["id"] for t in h.smap()["targets"]], "\n".join(said)
    # the stopped target was taken out as silent meanwhile; it joins again on its next keepalive
    wait_until(lambda: slow["id"] in [t["id"] for t in h.smap()["targets"]], timeout=30,
               what="the stopped target to be back in the map")


def test_a_redirect_given_before_the_decommission_is_answered(make_cluster):
    """A client given a 307 to a target just before it was flagged may follow it after the target left the map (a
    drain of a few objects takes milliseconds): the target answers for 2 s after the proxy's shutdown request,
    with a redirect to the object's new owner, rather than refusing or resetting the connection."""
    h = make_cluster(targets=3, mountpaths=1)
    api = Api(h.url, session())
    b, objs = fill(h, api, n=12)
    victim = max(h.targets(), key=lambda t: len(held(t, b)))  # at least 4 of the 12
    vidx = h.index_of_url(victim["public_url"])
    mine = sorted(held(victim, b))[:4]
    stale = {n: api.owner(b, n) for n in mine}  # the proxy's 307 Locations: the victim's public port
    assert all(h.index_of_url(loc) == vidx for loc in stale.values()), stale
    h.c.targets[vidx].expected_dead = True
    assert action(h, "decommission", victim["id"]).status_code == 202
    wait_until(lambda: victim["id"] not in [t["id"] for t in h.smap()["targets"]], timeout=60, interval=0.02,
               what="the decommissioned target to leave the map")
    s = session()
    for n in mine:
        r = s.get(stale[n], timeout=30)
        assert r.status_code == 200 and md5(r.content) == objs[n], (n, r.status_code, r.text[:200])
        assert [x.status_code for x in r.history] == [307], "not redirected by the leaving target"
        assert h.index_of_url(r.url) != vidx
    wait_until(lambda: not h.c.targets[vidx].alive(), timeout=20, what="the decommissioned target to exit")


def test_bad_input(make_cluster):
    h = make_cluster(targets=2, mountpaths=1)
    url = h.c.proxy.control_url + "/v1/cluster"
    s = session()
    assert_json_error(action(h, "start-maintenance", "no-such-target"), 404, "no-such-target")
    assert_json_error(action(h, "decommission", "no-such-target"), 404)
    assert_json_error(s.put(url, json={"action": "start-maintenance"}, timeout=10), 400, "sid")
    assert_json_error(s.put(url, json={"action": "reboot", "value": {"sid": "x"}}, timeout=10), 400, "unknown")
    assert_json_error(s.put(url, data=b"not json", timeout=10), 400)
    ids = [t["id"] for t in h.targets()]
    assert action(h, "start-maintenance", ids[0]).status_code == 200
    # The last target without maintenance can be neither put in maintenance nor decommissioned.
    assert_json_error(action(h, "start-maintenance", ids[1]), 409, "last")
    assert_json_error(action(h, "decommission", ids[1]), 409, "last")
    assert action(h, "stop-maintenance", ids[0]).status_code == 200
    assert_json_error(s.get(h.c.proxy.control_url + "/v1/cluster/mountpaths", timeout=10), 400, "sid")
    assert_json_error(s.get(h.c.proxy.control_url + "/v1/cluster/mountpaths", params={"sid": "nope"}, timeout=10),
                      404)


def test_mountpaths_through_the_proxy(make_cluster, tmp_path):
    h = make_cluster(targets=2, mountpaths=1)
    sid = h.targets()[0]["id"]
    url = h.c.proxy.control_url + "/v1/cluster/mountpaths"
    s = session()
    r = s.get(url, params={"sid": sid}, timeout=10)
    assert r.status_code == 200, r.text
    extra = tmp_path / "extra-mp"
    extra.mkdir()
    r = s.post(url, params={"sid": sid}, json={"action": "attach", "path": str(extra)}, timeout=60)
    assert r.status_code == 200, r.text
    assert str(extra) in s.get(url, params={"sid": sid}, timeout=10).text
    r = s.post(url, params={"sid": sid}, json={"action": "detach", "path": str(extra)}, timeout=60)
    assert r.status_code in (200, 202), r.text
    assert_json_error(s.post(url, params={"sid": sid}, json={"action": "attach"}, timeout=10), 400)


def ec_files(h, indexes):
    n = 0
    for i in indexes:
        for mp in h.mountpaths(i):
            for _, _, files in os.walk(os.path.join(mp, ".ec")):
                n += len(files)
    return n


def decommission_lines(h):
    """The lines of every node's log about the decommission and EC, for a failure's message."""
    out = []
    for path in h.c.log_paths():
        with open(path, errors="replace") as f:
            out += ["%s: %s" % (os.path.basename(path), line.rstrip()) for line in f
                    if "decommission" in line or " ec" in line or "rebalance" in line]
    return "\n".join(out[-80:])


def test_decommission_ec_bucket_keeps_its_redundancy(make_cluster):
    # EC 1+1 on 4 targets: the decommissioned target's objects move away, the slices it held are re-created on the
    # 3 left, so losing one more target afterwards still loses nothing.
    h = make_cluster(targets=4, mountpaths=1)
    api = Api(h.url, session())
    b = unique("mntec").lower().replace("_", "-")
    api.create_bucket(b)
    r = session().post(h.url + "/v1/buckets/" + b, timeout=30,
                       json={"action": "set-bprops", "value": {"ec": {"data_slices": 1, "parity_slices": 1}}})
    assert r.status_code == 200, r.text
    objs = {}
    for i in range(24):
        data = os.urandom(2000 + 1013 * i)
        api.put(b, "o%03d" % i, data)
        objs["o%03d" % i] = md5(data)
    victim = h.targets()[0]
    vidx = h.index_of_url(victim["public_url"])
    readers = Readers(h, b, objs)
    try:
        h.c.targets[vidx].expected_dead = True
        r = action(h, "decommission", victim["id"])
        assert r.status_code == 202, r.text
        wait_until(lambda: victim["id"] not in [t["id"] for t in h.smap()["targets"]], timeout=60,
                   what="the decommissioned target to leave the map")
    finally:
        ok, fail = readers.stop()
    print("\ndecommission (EC 1+1): GETs ok %d failed %d" % (ok, len(fail)))
    assert not fail, fail[:5]
    left = [i for i in range(4) if i != vidx]
    try:
        wait_until(lambda: ec_files(h, left) >= 2 * len(objs), timeout=60, what="the slices to be re-created")
    except AssertionError as e:
        raise AssertionError("%s; EC files per target %s; the logs say:\n%s" % (
            e, [ec_files(h, [i]) for i in left], decommission_lines(h))) from None
    # One more target lost: every object still reads (rebuilt from the slices left).
    other = left[0]
    oid = h.c.targets[other].id
    h.kill_target(other, "KILL")
    wait_until(lambda: oid not in [t["id"] for t in h.smap()["targets"]], timeout=10,
               what="the killed target to leave the map")
    # The proxy's map is out first; a target that has not got it yet may still redirect to the dead one
    # (connection refused at the client) for a moment: each object is read until it answers, within 10 s.
    for name, digest in objs.items():
        wait_until(lambda: _answers(api, b, name), timeout=10, what="GET %s to reach a live target" % name)
        r = api.get(b, name)
        assert r.status_code == 200 and md5(r.content) == digest, name


def _answers(api, bucket, name):
    try:
        api.get(bucket, name)
        return True
    except requests.exceptions.ConnectionError:
        return False


def test_decommission_says_when_slices_cannot_be_recreated(make_cluster):
    # EC 2+1 needs 3 targets besides an object's owner: with 3 left after the decommission, the ec-encode runs
    # fail, are run again (3 rounds in all) and the proxy says so. The objects stay readable.
    h = make_cluster(targets=4, mountpaths=1)
    api = Api(h.url, session())
    b = unique("mntec3").lower().replace("_", "-")
    api.create_bucket(b)
    r = session().post(h.url + "/v1/buckets/" + b, timeout=30,
                       json={"action": "set-bprops", "value": {"ec": {"data_slices": 2, "parity_slices": 1}}})
    assert r.status_code == 200, r.text
    objs = {}
    for i in range(6):
        data = os.urandom(5000 + 777 * i)
        api.put(b, "o%d" % i, data)
        objs["o%d" % i] = md5(data)
    victim = h.targets()[0]
    h.c.targets[h.index_of_url(victim["public_url"])].expected_dead = True
    assert action(h, "decommission", victim["id"]).status_code == 202
    wait_until(lambda: victim["id"] not in [t["id"] for t in h.smap()["targets"]], timeout=60,
               what="the decommissioned target to leave the map")

    def said():
        with open(h.c.proxy.log, errors="replace") as f:
            text = f.read()
        return "are not all re-created" in text and text

    text = wait_until(said, timeout=60, what="the proxy to say the slices are not all re-created")
    for rnd in (1, 2, 3):
        assert "-%d re-creates the slices and copies of ais/%s" % (rnd, b) in text
    for name, digest in objs.items():
        r = api.get(b, name)
        assert r.status_code == 200 and md5(r.content) == digest, name


def test_maintenance_takes_no_new_ec_slices(make_cluster):
    # EC 1+1 on 4 targets: while one is in maintenance, the owner's two slices of each new object go to the
    # other two (with 3 targets they could not: a flagged target is used only when too few others exist).
    h = make_cluster(targets=4, mountpaths=1)
    api = Api(h.url, session())
    b = unique("mntecs").lower().replace("_", "-")
    api.create_bucket(b)
    r = session().post(h.url + "/v1/buckets/" + b, timeout=30,
                       json={"action": "set-bprops", "value": {"ec": {"data_slices": 1, "parity_slices": 1}}})
    assert r.status_code == 200, r.text
    victim = h.targets()[0]
    vidx = h.index_of_url(victim["public_url"])
    assert action(h, "start-maintenance", victim["id"]).status_code == 200
    before = ec_files(h, [vidx])
    objs = {}
    for i in range(24):
        data = os.urandom(3000 + 1013 * i)
        api.put(b, "n%03d" % i, data)
        objs["n%03d" % i] = md5(data)
    assert ec_files(h, [vidx]) == before, "a target in maintenance received slices of new objects"
    others = [i for i in range(4) if i != vidx]
    assert ec_files(h, others) >= 2 * len(objs)
    assert action(h, "stop-maintenance", victim["id"]).status_code == 200
    for name, digest in objs.items():
        r = api.get(b, name)
        assert r.status_code == 200 and md5(r.content) == digest, name
