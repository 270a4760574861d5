# SPDX-License-Identifier: Apache-2.0
# Resilver: mountpaths attached and detached over REST on a running target; objects follow, none is lost.
import hashlib
import os
import random
import shutil
import tempfile
import threading

import pytest

from ftutil import Api, ctl, objects_on_disk, session, unique, wait_until

SETTLE = 120  # seconds a resilver may take on a loaded machine (not a speed check)


def _fill(api, bucket, n):
    rnd = random.Random(11)
    want = {}
    for i in range(n):
        data = os.urandom(rnd.randrange(1, 32 << 10))
        name = "p%02d/o-%04d" % (i % 13, i)
        api.put(bucket, name, data)
        want[name] = hashlib.md5(data).hexdigest()
    return want


def _mountpaths(t):
    return ctl("GET", t.control_url, "/v1/mountpaths")


def _resilvered(t, rid):
    j = _mountpaths(t)
    r = j["resilver"]
    return r["id"] == rid and r["state"] == "finished" and \
        all(m["state"] == "active" for m in j["mountpaths"])


def _change(t, action, path, status):
    j = ctl("POST", t.control_url, "/v1/mountpaths", {"action": action, "path": path}, expect=status)
    wait_until(lambda: _resilvered(t, j["resilver_id"]), SETTLE, 0.1, "%s %s resilvered" % (action, path))
    r = _mountpaths(t)["resilver"]
    assert r["errors"] == 0, r
    return r


def _check(api, bucket, want, paths, target_paths):
    """Every object once on the target's active mountpaths, none elsewhere; all read back."""
    on = objects_on_disk(target_paths, bucket)
    assert sorted(on) == sorted(want), "objects missing or extra on the target's disks"
    dups = {k: v for k, v in on.items() if len(v) != 1}
    assert not dups, "objects on several mountpaths: %s" % list(dups.items())[:5]
    stray = [k for k, v in on.items() if v[0] not in paths]
    assert not stray, "objects left on detached mountpaths: %s" % stray[:5]
    for name, md5 in want.items():
        r = api.get(bucket, name)
        assert r.status_code == 200 and hashlib.md5(r.content).hexdigest() == md5, (name, r.status_code)
    return on


def test_attach_detach_moves_objects(make_cluster):
    """One target: attach a third mountpath (about 1/3 of the objects move to it), detach the
    first (all of its objects move away, the directory is left empty), attach it again; after
    each step every object is on exactly one active mountpath and reads back intact."""
    cluster = make_cluster(targets=1, mountpaths=2)
    api = Api(cluster.url, session())
    bucket = unique("rs")
    api.create_bucket(bucket)
    want = _fill(api, bucket, 240)
    t = cluster.c.targets[0]
    mp0, mp1 = t.mountpaths
    mp2 = os.path.join(os.path.dirname(mp0), "mp-new")
    everywhere = [mp0, mp1, mp2]
    assert sorted(m["path"] for m in _mountpaths(t)["mountpaths"]) == sorted([mp0, mp1])

    r = _change(t, "attach", mp2, 200)
    on = _check(api, bucket, want, [mp0, mp1, mp2], everywhere)
    n2 = sum(1 for v in on.values() if v == [mp2])
    assert r["objects"] == n2
    assert 0.20 * len(want) <= n2 <= 0.47 * len(want), "%d of %d moved to the new mountpath" % (n2, len(want))
    assert sorted(m["path"] for m in _mountpaths(t)["mountpaths"]) == sorted([mp0, mp1, mp2])

    n0 = sum(1 for v in on.values() if v == [mp0])
    r = _change(t, "detach", mp0, 202)
    assert r["objects"] == n0
    on = _check(api, bucket, want, [mp1, mp2], everywhere)
    assert sorted(m["path"] for m in _mountpaths(t)["mountpaths"]) == sorted([mp1, mp2])
    assert not os.listdir(os.path.join(mp0, ".work")), "work files left on the detached mountpath"

    # PUTs, deletes and listing work on the new layout.
    api.put(bucket, "after/detach", b"fresh")
    want["after/detach"] = hashlib.md5(b"fresh").hexdigest()
    assert api.delete(bucket, "p00/o-0000").status_code == 200
    del want["p00/o-0000"]
    entries, _ = api.list_all(bucket)
    assert sorted(e["name"] for e in entries) == sorted(want)

    # The changes outlive a restart (state_dir/mountpaths.json), whatever the command line says.
    cluster.restart_target(0)
    assert sorted(m["path"] for m in _mountpaths(t)["mountpaths"]) == sorted([mp1, mp2])
    _check(api, bucket, want, [mp1, mp2], everywhere)

    _change(t, "attach", mp0, 200)  # the same path again: its old slot is reused
    on = _check(api, bucket, want, [mp0, mp1, mp2], everywhere)
    assert any(v == [mp0] for v in on.values()), "nothing moved back to the re-attached mountpath"


def test_mountpath_requests_refused(make_cluster):
    """Bad attach/detach requests get a clear 4xx and change nothing."""
    cluster = make_cluster(targets=1, mountpaths=2)
    t = cluster.c.targets[0]
    mp0, mp1 = t.mountpaths
    s = session()

    def post(body):
        return s.post(t.control_url + "/v1/mountpaths", json=body, timeout=30)

    for body, status in [({"action": "attach", "path": "relative/dir"}, 400),
                         ({"action": "attach", "path": mp0}, 409),
                         ({"action": "attach", "path": mp0 + "/../" + os.path.basename(mp0)}, 400),
                         ({"action": "detach", "path": "/no/such/mountpath"}, 404),
                         ({"action": "explode", "path": mp0}, 400),
                         ({"action": "attach"}, 400)]:
        r = post(body)
        assert r.status_code == status, (body, r.status_code, r.text)
        assert r.json()["message"], r.text
    link = os.path.join(os.path.dirname(mp0), "same-as-mp1")
    os.symlink(mp1, link)
    r = post({"action": "attach", "path": link})
    assert r.status_code == 409 and "same directory" in r.json()["message"], r.text
    r = post({"action": "detach", "path": mp0})
    assert r.status_code == 202, r.text
    wait_until(lambda: _resilvered(t, r.json()["resilver_id"]), SETTLE, 0.1, "detach done")
    r = post({"action": "detach", "path": mp1})
    assert r.status_code == 409 and "last" in r.json()["message"], r.text
    assert [m["path"] for m in _mountpaths(t)["mountpaths"]] == [mp1]
    r = s.put(t.control_url + "/v1/mountpaths", json={}, timeout=30)
    assert r.status_code == 405


def test_attach_on_another_filesystem(make_cluster):
    """A mountpath on another filesystem (tmpfs in /dev/shm): objects cannot be renamed there, so
    they are copied with their metadata, verified and published, then removed from the old one;
    detaching it copies them back, except a corrupt one, which stops the detach. Nothing is lost."""
    shm = "/dev/shm"
    if not os.path.isdir(shm) or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm: cannot put a mountpath on a second filesystem")
    cluster = make_cluster(targets=1, mountpaths=1)
    t = cluster.c.targets[0]
    (mp0,) = t.mountpaths
    if os.stat(shm).st_dev == os.stat(mp0).st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the test directory")
    api = Api(cluster.url, session())
    bucket = unique("rsfs")
    api.create_bucket(bucket)
    hdr = {"Content-Type": "text/x-kept", "x-amz-meta-k": "v"}
    want = _fill(api, bucket, 80)
    api.put(bucket, "with/meta", b"payload", headers=hdr)
    want["with/meta"] = hashlib.md5(b"payload").hexdigest()
    other = tempfile.mkdtemp(prefix="ft-resilver-", dir=shm)
    try:
        mp1 = os.path.join(other, "mp")
        r = _change(t, "attach", mp1, 200)
        on = _check(api, bucket, want, [mp0, mp1], [mp0, mp1])
        assert r["objects"] == sum(1 for v in on.values() if v == [mp1]) > 0
        g = api.get(bucket, "with/meta")
        assert g.headers["Content-Type"] == "text/x-kept" and g.headers["x-amz-meta-k"] == "v"
        # A corrupt object is never copied: the detach stops short and keeps the mountpath.
        bad = sorted(k for k, v in on.items() if v == [mp1] and k != "with/meta")[0]
        path = os.path.join(mp1, "ais", bucket, bad)
        with open(path, "r+b") as f:
            first = f.read(1)  # objects are at least 1 byte
            f.seek(0)
            f.write(bytes([first[0] ^ 0xFF]))
        j = ctl("POST", t.control_url, "/v1/mountpaths", {"action": "detach", "path": mp1}, expect=202)
        wait_until(lambda: _resilvered(t, j["resilver_id"]), SETTLE, 0.1, "detach attempt done")
        r = _mountpaths(t)["resilver"]
        assert r["errors"] >= 1 and any("checksum mismatch" in x for x in r["error_samples"]), r
        assert sorted(m["path"] for m in _mountpaths(t)["mountpaths"]) == sorted([mp0, mp1])
        assert objects_on_disk([mp0, mp1], bucket)[bad] == [mp1], "the corrupt copy moved"
        assert api.delete(bucket, bad).status_code == 200
        del want[bad]
        _change(t, "detach", mp1, 202)
        _check(api, bucket, want, [mp0], [mp0, mp1])
        g = api.get(bucket, "with/meta")
        assert g.headers["Content-Type"] == "text/x-kept" and g.headers["x-amz-meta-k"] == "v"
    finally:
        shutil.rmtree(other, ignore_errors=True)


# A GET in the window between a mountpath change and its object's move finds the object on its old
# mountpath: target/obj/get.c calls tgt_rebalance_pull on a miss, which looks on the other mountpaths first.
def test_reads_during_attach_and_detach(make_cluster):
    """Readers GET every object in turn while a mountpath is attached and another detached:
    not one GET fails."""
    cluster = make_cluster(targets=1, mountpaths=2)
    t = cluster.c.targets[0]
    mp0, mp1 = t.mountpaths
    api = Api(cluster.url, session())
    bucket = unique("rsload")
    api.create_bucket(bucket)
    want = _fill(api, bucket, 400)
    failures, stop = [], threading.Event()

    def reader(seed):
        s, names = Api(cluster.url, session()), sorted(want)
        random.Random(seed).shuffle(names)
        while not stop.is_set():
            for name in names:
                r = s.get(bucket, name)
                if r.status_code != 200 or hashlib.md5(r.content).hexdigest() != want[name]:
                    failures.append((name, r.status_code))
                if stop.is_set():
                    break

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(3)]
    for th in threads:
        th.start()
    try:
        mp2 = os.path.join(os.path.dirname(mp0), "mp-load")
        _change(t, "attach", mp2, 200)
        _change(t, "detach", mp0, 202)
    finally:
        stop.set()
        for th in threads:
            th.join(60)
    assert not failures, "%d failed GETs, e.g. %s" % (len(failures), failures[:5])
    _check(api, bucket, want, [mp1, mp2], [mp0, mp1, mp2])
