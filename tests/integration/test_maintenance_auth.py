# SPDX-License-Identifier: Apache-2.0
# Maintenance and mountpath actions on the proxy's public port with authentication on: admin only (readonly 403, anonymous 401).
import json
import os

import pytest

from conftest import module_cluster
from ftutil import assert_json_error, session

mcluster = module_cluster("maintauth", "it changes the identity store and the cluster map", targets=2, mountpaths=1,
                          auth=True)

RO = ("RO", "ro-secret-0123456789")
RW = ("RW", "rw-secret-0123456789")


def restart_proxy(h):
    p = h.c.proxy
    p.signal(15)
    assert p.wait_dead(10)
    p.spawn(h.c.env)
    h.c.wait_ready(30)


def token(h, key):
    r = session(token="").post(h.url + "/v1/tokens", json={"access_key": key[0], "secret_key": key[1]}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["token"]


@pytest.fixture(scope="module")
def clients(mcluster):
    """Sessions as admin, readwrite, readonly and anonymous (the keys added to the identity store)."""
    path = os.path.join(mcluster.c.dir, "s3keys.json")
    with open(path) as f:
        doc = json.load(f)
    doc[RO[0]] = {"secret": RO[1], "role": "readonly"}
    doc[RW[0]] = {"secret": RW[1], "role": "readwrite"}
    with open(path, "w") as f:
        json.dump(doc, f)
    restart_proxy(mcluster)
    return {"admin": session(token=mcluster.token), "rw": session(token=token(mcluster, RW)),
            "ro": session(token=token(mcluster, RO)), "anon": session(token="")}


def flags(h, sid):
    r = session(token=h.token).get(h.url + "/v1/cluster", params={"what": "smap"}, timeout=30)
    assert r.status_code == 200, r.text
    return next(t.get("flags", 0) for t in r.json()["targets"] if t["id"] == sid)


def act(s, h, action, sid):
    return s.put(h.url + "/v1/cluster", json={"action": action, "value": {"sid": sid}}, timeout=30)


def test_maintenance_needs_admin(mcluster, clients):
    sid = mcluster.targets()[0]["id"]
    assert_json_error(act(clients["anon"], mcluster, "start-maintenance", sid), 401)
    assert_json_error(act(clients["ro"], mcluster, "start-maintenance", sid), 403, "admin")
    assert_json_error(act(clients["rw"], mcluster, "decommission", sid), 403, "admin")
    assert flags(mcluster, sid) == 0
    r = act(clients["admin"], mcluster, "start-maintenance", sid)
    j = r.json()
    assert r.status_code == 200 and (j["action"], j["sid"]) == ("start-maintenance", sid), r.text
    assert j["smap_version"] > 0, r.text
    assert flags(mcluster, sid) == 1
    assert_json_error(act(clients["ro"], mcluster, "stop-maintenance", sid), 403)
    assert act(clients["admin"], mcluster, "stop-maintenance", sid).status_code == 200
    assert flags(mcluster, sid) == 0


def test_maintenance_bad_input_on_the_public_port(mcluster, clients):
    s = clients["admin"]
    assert_json_error(act(s, mcluster, "start-maintenance", "no-such-target"), 404, "no-such-target")
    assert_json_error(act(s, mcluster, "decommission", "no-such-target"), 404)
    assert_json_error(s.put(mcluster.url + "/v1/cluster", json={"action": "start-maintenance"}, timeout=30), 400,
                      "sid")
    ids = [t["id"] for t in mcluster.targets()]
    assert act(s, mcluster, "start-maintenance", ids[0]).status_code == 200
    assert_json_error(act(s, mcluster, "start-maintenance", ids[1]), 409, "last")
    assert act(s, mcluster, "stop-maintenance", ids[0]).status_code == 200
    # other actions of PUT /v1/cluster are still AIStore's job stop (here of every copy-bck: none runs)
    r = s.put(mcluster.url + "/v1/cluster", json={"action": "stop", "value": {"kind": "copy-bck"}}, timeout=30)
    assert r.status_code == 200 and r.json() == [], r.text


def test_stop_by_kind_roles(mcluster, clients):
    # AIStore's stop (PUT /v1/cluster) is admin's, as stopping one job there; the native one needs readwrite,
    # as DELETE /v1/jobs/ID
    body = {"action": "stop", "value": {"kind": "prefetch-listrange"}}
    for who, status in (("anon", 401), ("ro", 403), ("rw", 403)):
        assert_json_error(clients[who].put(mcluster.url + "/v1/cluster", json=body, timeout=30), status)
    r = clients["admin"].put(mcluster.url + "/v1/cluster", json=body, timeout=30)
    assert r.status_code == 200 and r.json() == [], r.text
    url = mcluster.url + "/v1/jobs"
    assert_json_error(clients["anon"].delete(url, params={"kind": "prefetch"}, timeout=30), 401)
    assert_json_error(clients["ro"].delete(url, params={"kind": "prefetch"}, timeout=30), 403)
    for who in ("rw", "admin"):
        r = clients[who].delete(url, params={"kind": "prefetch"}, timeout=30)
        assert r.status_code == 200 and r.json() == {"kind": "prefetch", "stopped": []}, r.text


def test_mountpaths_need_admin(mcluster, clients, tmp_path):
    sid = mcluster.targets()[1]["id"]
    url = mcluster.url + "/v1/cluster/mountpaths"
    assert_json_error(clients["anon"].get(url, params={"sid": sid}, timeout=30), 401)
    assert_json_error(clients["ro"].get(url, params={"sid": sid}, timeout=30), 403, "admin")
    extra = tmp_path / "extra-mp"
    extra.mkdir()
    body = {"action": "attach", "path": str(extra)}
    assert_json_error(clients["anon"].post(url, params={"sid": sid}, json=body, timeout=30), 401)
    assert_json_error(clients["ro"].post(url, params={"sid": sid}, json=body, timeout=30), 403)
    assert_json_error(clients["rw"].post(url, params={"sid": sid}, json=body, timeout=30), 403)
    s = clients["admin"]
    r = s.get(url, params={"sid": sid}, timeout=30)
    assert r.status_code == 200 and str(extra) not in r.text, r.text
    r = s.post(url, params={"sid": sid}, json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert str(extra) in s.get(url, params={"sid": sid}, timeout=30).text
    r = s.post(url, params={"sid": sid}, json={"action": "detach", "path": str(extra)}, timeout=60)
    assert r.status_code in (200, 202), r.text
    assert_json_error(s.post(url, params={"sid": sid}, json={"action": "attach"}, timeout=30), 400)
    assert_json_error(s.post(url, params={"sid": sid}, data=b"not json", timeout=30), 400)
    assert_json_error(s.get(url, timeout=30), 400, "sid")
    assert_json_error(s.get(url, params={"sid": "nope"}, timeout=30), 404)
    # a method no row lists needs admin too; then the handler names the methods it takes
    assert_json_error(clients["ro"].delete(url, params={"sid": sid}, timeout=30), 403)
    assert_json_error(s.delete(url, params={"sid": sid}, timeout=30), 405, "GET, POST")
