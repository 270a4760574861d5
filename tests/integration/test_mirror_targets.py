# SPDX-License-Identifier: Apache-2.0
"""Mirror copies on other targets (mirror.scope "targets"): the copies on the targets after the owner, made before the
PUT is answered, replaced by an overwrite, removed by a DELETE (also one of an object whose owner is dead), read by
the new owner when the owner dies (two dead targets with 3 copies), made for older objects by the mirror job, kept
off a target in maintenance, re-created when a target is decommissioned, and the properties refused with a 400 when
the cluster cannot hold them."""
import json
import os

import s3util
from ftutil import TIMEOUT, Api, assert_json_error, bucket_path, session, unique, wait_job, wait_until
from test_cli import ft


def name_of(prefix):
    return unique(prefix).lower().replace("_", "-")


def bucket_props(api, b):
    r = api.s.head(api.url + bucket_path(b), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return json.loads(r.headers["Ais-Bucket-Props"])


def post_bucket(api, b, action, value=None):
    body = {"action": action}
    if value is not None:
        body["value"] = value
    return api.s.post(api.url + bucket_path(b), json=body, timeout=TIMEOUT)


def files(h, i, top, b, n):
    """Paths of object n of bucket b under top ("", ".copies", ".ec") on target i's mountpaths."""
    return [p for mp in h.mountpaths(i) for p in [os.path.join(mp, top, "ais", b, n)] if os.path.isfile(p)]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def holders(h, b, n, indexes):
    """{target index: replica bytes} of the targets in indexes holding a copy of n under .ec (the payload is the
    file's tail: a header comes first)."""
    out = {}
    for i in indexes:
        got = files(h, i, ".ec", b, n)
        assert len(got) <= 1, got
        if got:
            out[i] = read(got[0])
    return out


def wait_out(h, index):
    tid = h.c.targets[index].id
    wait_until(lambda: tid not in [t["id"] for t in h.smap()["targets"]], timeout=10,
               what="target %d out of the map" % index)


def answered(call, what):
    """call()'s answer once the map without a dead target reached every node (a redirect may still point to the
    dead target for a moment, as in test_dead_target.py: the connection fails, nothing was done, ask again; or a
    target whose map is not yet the new one redirects once more, toward the dead one: ask again)."""
    def once():
        try:
            r = call()
        except Exception:  # noqa: BLE001
            return None
        return None if r.status_code == 307 else [r]  # in a list: a Response with an error status is falsy
    return wait_until(once, timeout=10, what=what)[0]


def test_props_fit_the_cluster(make_cluster):
    h = make_cluster(targets=3, mountpaths=1)
    api = Api(h.url, session())
    b = name_of("mtp")
    # One copy per target: 4 copies need 4 targets, the cluster has 3.
    r = post_bucket(api, b, "create-bck", {"mirror": {"copies": 4, "scope": "targets"}})
    assert_json_error(r, 400, "needs at least 4 targets")
    assert api.s.head(api.url + bucket_path(b), timeout=TIMEOUT).status_code == 404  # nothing created
    assert_json_error(post_bucket(api, b, "create-bck", {"mirror": {"copies": 2, "scope": "disks"}}), 400,
                      "mirror.scope")
    assert_json_error(post_bucket(api, b, "create-bck", {"mirror": {"copies": 2, "scope": "targets"},
                                                           "ec": {"data_slices": 1, "parity_slices": 1}}),
                      400, "cannot be combined")
    assert post_bucket(api, b, "create-bck", {"mirror": {"copies": 3, "scope": "targets"}}).status_code == 200
    assert bucket_props(api, b)["mirror"] == {"copies": 3, "scope": "targets"}
    # Changes that do not fit leave the properties as they were.
    assert_json_error(post_bucket(api, b, "set-bprops", {"mirror": {"copies": 4}}), 400, "needs at least 4")
    assert_json_error(post_bucket(api, b, "set-bprops", {"ec": {"data_slices": 1, "parity_slices": 1}}), 400,
                      "cannot be combined")
    assert_json_error(post_bucket(api, b, "set-bprops", {"mirror": {"scope": 2}}), 400, "mirror.scope")
    assert bucket_props(api, b)["mirror"] == {"copies": 3, "scope": "targets"}
    # Back to the default scope: written without "scope", as for a bucket that never had it.
    assert post_bucket(api, b, "set-bprops", {"mirror": {"scope": "mountpaths"}}).status_code == 200
    assert bucket_props(api, b)["mirror"] == {"copies": 3}
    # The CLI sets it as any other property.
    c = name_of("mtc")
    assert post_bucket(api, c, "create-bck").status_code == 200
    rc, out, err = ft(h, "bucket", "props", c, "--set", "mirror.copies=2", "--set", "mirror.scope=targets", "--json",
                      env={"FT_TOKEN": h.token} if h.token else None)
    assert rc == 0, err
    assert json.loads(out)["mirror"] == {"copies": 2, "scope": "targets"}


def test_copies_on_targets_overwrite_delete_and_two_dead_targets(make_cluster):
    h = make_cluster(targets=4, mountpaths=1)
    api = Api(h.url, session())
    b = name_of("mtt")
    assert post_bucket(api, b, "create-bck", {"mirror": {"copies": 3, "scope": "targets"}}).status_code == 200
    everyone = range(4)
    objs = {}
    for k in range(24):
        n = "o%02d" % k
        objs[n] = os.urandom(1000 + 7919 * k)
        api.put(b, n, objs[n])
    owner = {n: h.index_of_url(api.owner(b, n)) for n in objs}
    # The main copy on the owner, a whole copy on each of two other targets, nothing under .copies.
    for n, data in objs.items():
        mains = [i for i in everyone if files(h, i, "", b, n)]
        assert mains == [owner[n]], (n, mains)
        held = holders(h, b, n, everyone)
        assert len(held) == 2 and owner[n] not in held, (n, sorted(held))
        assert all(v.endswith(data) for v in held.values()), n
        assert not any(files(h, i, ".copies", b, n) for i in everyone), n

    # The target owning the most objects (at least 6 of the 24 on 4 targets): placement follows the random target
    # ids, so a given object's owner may own fewer than the 3 needed (about 1 run in 85 with o00's owner).
    victim = max(everyone, key=lambda i: sum(o == i for o in owner.values()))
    mine = sorted(n for n in objs if owner[n] == victim)
    assert len(mine) >= 3, "target %d owns too few objects: %s" % (victim, mine)
    over, gone_before, gone_after = mine[0], mine[1], mine[2]
    # An overwrite replaces every copy (different size: a stale copy could not pass for the new one).
    objs[over] = os.urandom(50_000)
    api.put(b, over, objs[over])
    held = holders(h, b, over, everyone)
    assert len(held) == 2 and all(v.endswith(objs[over]) for v in held.values())
    over_holders = set(held)
    # A DELETE removes the main copy and every copy before it is answered.
    r = api.delete(b, gone_before)
    assert r.status_code == 200, r.text
    del objs[gone_before]
    assert api.get(b, gone_before).status_code == 404
    assert not any(files(h, i, top, b, gone_before) for i in everyone for top in ("", ".ec"))

    # The owner dies: its objects are read from the copies by the next target in HRW order, the first holder.
    h.kill_target(victim, "KILL")
    wait_out(h, victim)
    alive = [i for i in everyone if i != victim]
    # A DELETE of a dead owner's object, before any GET rebuilt it (no main copy anywhere): its copies go, it
    # stays gone.
    r = answered(lambda: api.delete(b, gone_after), "a DELETE of %s answered" % gone_after)
    assert r.status_code == 200, r.text
    del objs[gone_after]
    assert not any(files(h, i, top, b, gone_after) for i in alive for top in ("", ".ec"))
    # Never served again. The new owner cannot ask the dead previous owner whether it holds the name (an object
    # stored there before the copies were asked for would be): 503 saying so rather than a 404 (docs/dead-targets.md).
    r = api.get(b, gone_after)
    assert r.status_code == 404 or (r.status_code == 503 and "previous owner" in r.text), r.text
    r = api.get(b, over)
    assert r.status_code == 200 and r.content == objs[over], "the overwritten object read back wrong"
    assert h.index_of_url(api.owner(b, over)) in over_holders
    s3 = s3util.client(h, read_timeout=30)
    for n, data in objs.items():
        assert s3.get_object(Bucket=b, Key=n)["Body"].read() == data, n
    # The dead owner's objects got their copies for the new map when rebuilt; those whose copy the dead target held
    # get theirs from the mirror job: every object has its copies on the two live targets besides its owner.
    r = post_bucket(api, b, "make-n-copies")
    assert r.status_code == 200, r.text
    st = wait_job(h, r.json()["job_id"], timeout=120)
    assert st["state"] == "finished" and st["errors"] == 0, st
    for n in objs:
        o = h.index_of_url(api.owner(b, n))
        held = holders(h, b, n, [i for i in alive if i != o])
        assert len(held) == 2 and all(v.endswith(objs[n]) for v in held.values()), (n, o, sorted(held))

    # A second dead target: 3 copies survive two lost targets.
    second = alive[0]
    h.kill_target(second, "KILL")
    wait_out(h, second)
    left = [i for i in alive if i != second]
    for n, data in objs.items():
        r = answered(lambda: api.get(b, n), "a GET of %s answered" % n)
        assert r.status_code == 200 and r.content == data, n
    # Two targets left cannot hold 3 copies on distinct targets: a PUT says so (500, the redundancy missing).
    loc = api.owner(b, "late")
    r = api.s.put(loc, data=b"x" * 100, timeout=TIMEOUT)
    assert_json_error(r, 500, "needs 2 other targets")
    assert len(left) == 2


def test_mirror_job_makes_copies_of_older_objects(make_cluster):
    h = make_cluster(targets=3, mountpaths=2)
    api = Api(h.url, session())
    b = name_of("mtj")
    assert post_bucket(api, b, "create-bck", {"mirror": {"copies": 2}}).status_code == 200
    objs = {"j%02d" % k: os.urandom(3000 + k) for k in range(12)}
    for n, d in objs.items():
        api.put(b, n, d)
    everyone = range(3)
    assert all(any(files(h, i, ".copies", b, n) for i in everyone) for n in objs)  # mountpath copies first
    assert post_bucket(api, b, "set-bprops", {"mirror": {"scope": "targets"}}).status_code == 200
    assert not any(holders(h, b, n, everyone) for n in objs)  # the change alone copies nothing
    r = post_bucket(api, b, "make-n-copies")
    assert r.status_code == 200, r.text
    st = wait_job(h, r.json()["job_id"], timeout=120)
    assert st["state"] == "finished" and st["errors"] == 0, st
    assert st["objects"] == len(objs), st
    for n, data in objs.items():
        o = h.index_of_url(api.owner(b, n))
        held = holders(h, b, n, everyone)
        assert len(held) == 1 and o not in held and list(held.values())[0].endswith(data), (n, sorted(held))
        assert not any(files(h, i, ".copies", b, n) for i in everyone), n  # the mountpath copies went
    # Run again: all in place, nothing to do.
    r = post_bucket(api, b, "make-n-copies")
    st = wait_job(h, r.json()["job_id"], timeout=120)
    assert st["state"] == "finished" and st["errors"] == 0 and st["objects"] == 0, st


def cluster_action(h, act, sid):
    return session().put(h.c.proxy.control_url + "/v1/cluster", json={"action": act, "value": {"sid": sid}},
                         timeout=30)


def placed(h, api, b, objs, indexes, n_copies):
    """Whether every object of objs has its main copy on its owner and at least n_copies-1 copies with its bytes on
    other targets among indexes (copies placed for an earlier map stay where they are: a new owner finds them)."""
    for n, data in objs.items():
        o = h.index_of_url(api.owner(b, n))
        held = holders(h, b, n, [i for i in indexes if i != o])
        if not files(h, o, "", b, n) or sum(v.endswith(data) for v in held.values()) < n_copies - 1:
            return False
    return True


def test_maintenance_takes_no_copies_and_decommission_recreates_them(make_cluster):
    h = make_cluster(targets=4, mountpaths=1)
    api = Api(h.url, session())
    b = name_of("mtm")
    r = post_bucket(api, b, "create-bck", {"mirror": {"copies": 2, "scope": "targets"}})
    assert r.status_code == 200, r.text
    # A target in maintenance takes neither objects nor copies while the others can.
    flagged = 3
    assert cluster_action(h, "start-maintenance", h.c.targets[flagged].id).status_code == 200
    objs = {}
    for k in range(16):
        n = "m%02d" % k
        objs[n] = os.urandom(2000 + k)
        api.put(b, n, objs[n])
    for n in objs:
        assert not files(h, flagged, "", b, n) and not holders(h, b, n, [flagged]), n
    assert placed(h, api, b, objs, range(3), 2)
    assert cluster_action(h, "stop-maintenance", h.c.targets[flagged].id).status_code == 200
    wait_until(lambda: placed(h, api, b, objs, range(4), 2), timeout=60,
               what="the objects and their copies placed for the map with all 4 targets")

    # Decommission: the leaving target's objects move away, and the copies it held are re-created on the others.
    # The victim is the target holding the most copies (at least 4: every object has one): a given target may hold
    # none, placement following the random target ids (target 0 in at most 1 run in 650, (2/3)^16).
    victim = max(range(4), key=lambda i: sum(bool(holders(h, b, n, [i])) for n in objs))
    rest = [i for i in range(4) if i != victim]
    held_by_victim = [n for n in objs if holders(h, b, n, [victim])]
    assert held_by_victim, "the victim holds no copy"
    h.c.targets[victim].expected_dead = True  # it shuts down when asked, at the end
    r = cluster_action(h, "decommission", h.c.targets[victim].id)
    assert r.status_code == 202, r.text
    wait_out(h, victim)
    wait_until(lambda: placed(h, api, b, objs, rest, 2), timeout=60,
               what="every object with its copy on the 3 targets left")
    for n, data in objs.items():
        r = api.get(b, n)
        assert r.status_code == 200 and r.content == data, n


def test_copies_a_dead_target_held_are_recreated_after_restore_after_s(make_cluster):
    """A target SIGKILLed for good: once restore_after_s has passed without it joining again, the primary has every
    copy it held re-created on the targets left, so a second dead target later loses nothing (with 2 copies and no
    re-creation, the objects whose two copies were on those two targets would be gone)."""
    h = make_cluster(targets=4, mountpaths=1, proxy_args=["--restore_after_s", "1"])
    api = Api(h.url, session())
    b = name_of("mtres")
    assert post_bucket(api, b, "create-bck", {"mirror": {"copies": 2, "scope": "targets"}}).status_code == 200
    data = {"o%03d" % i: os.urandom(3000 + i) for i in range(60)}
    for n, d in data.items():
        api.put(b, n, d)
    first = h.c.targets[1]
    first.expected_dead = True
    h.kill_target(1, "KILL")
    wait_out(h, 1)

    def restored():
        with open(h.c.proxy.log, errors="replace") as f:
            log = f.read()
        assert "restore %s: the slices and copies of ais/%s are not all re-created" % (first.id, b) not in log
        return "restore %s: job restore-%s" % (first.id, first.id) in log and "ended clean on every target" in log
    wait_until(restored, 60, interval=0.2, what="the copies of the dead target re-created")
    h.c.targets[2].expected_dead = True
    h.kill_target(2, "KILL")
    wait_out(h, 2)
    s3 = s3util.client(h)
    for n, d in data.items():
        assert s3.get_object(Bucket=b, Key=n)["Body"].read() == d, n


def test_a_target_back_in_time_is_not_restored(make_cluster):
    """A target that joins again before restore_after_s: nothing is re-created, and the log says so."""
    h = make_cluster(targets=3, mountpaths=1, proxy_args=["--restore_after_s", "8"])  # room for a slow restart
    api = Api(h.url, session())
    b = name_of("mtback")
    assert post_bucket(api, b, "create-bck", {"mirror": {"copies": 2, "scope": "targets"}}).status_code == 200
    api.put(b, "o", b"x" * 5000)
    tid = h.c.targets[1].id
    h.kill_target(1, "KILL")
    wait_out(h, 1)
    h.restart_target(1)

    def said():
        with open(h.c.proxy.log, errors="replace") as f:
            return "restore %s: the target is back in the cluster map" % tid in f.read()
    wait_until(said, 40, interval=0.2, what="the proxy to see the target back")
    with open(h.c.proxy.log, errors="replace") as f:
        assert "job restore-%s" % tid not in f.read()
    assert api.get(b, "o").content == b"x" * 5000
