# SPDX-License-Identifier: Apache-2.0
# Cluster membership: the map, health, versions, leaving and rejoining, and never going back a version.
import copy
import os
import socket
import subprocess
import time

import pytest

import s3util
from conftest import FT_BIN
from ftutil import Api, assert_json_error, session, unique, wait_until

TIMEOUT = 10


def test_smap_lists_every_node(cluster):
    smap = cluster.smap()
    assert isinstance(smap["version"], int) and smap["version"] >= 1
    assert smap["uuid"]
    assert len(smap["proxies"]) == 1
    proxy = smap["proxies"][0]
    assert smap["primary"] == proxy["id"]
    assert proxy["public_url"] == cluster.url
    ids = [t["id"] for t in smap["targets"]]
    assert len(ids) == 3 and len(set(ids)) == 3, ids
    urls = [t["public_url"] for t in smap["targets"]] + [t["control_url"] for t in smap["targets"]]
    assert len(set(urls)) == 6, urls
    for t in smap["targets"]:
        assert t["public_url"].startswith("http://") and t["control_url"].startswith("http://")
    if cluster.local:
        want = sorted(n.public_url for n in cluster.c.targets)
        assert sorted(t["public_url"] for t in smap["targets"]) == want
        assert sorted(t["control_url"] for t in smap["targets"]) == \
            sorted(n.control_url for n in cluster.c.targets)
        assert proxy["control_url"] == cluster.c.proxy.control_url
    # the control port serves the same map
    r = session().get(proxy["control_url"] + "/v1/cluster?what=smap", timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.json()["version"] >= smap["version"]
    assert sorted(t["id"] for t in r.json()["targets"]) == sorted(ids)


def test_health_on_every_node(cluster):
    s = session()
    smap = cluster.smap()
    r = s.get(cluster.url + "/v1/health", timeout=TIMEOUT)
    assert r.status_code == 200
    j = r.json()
    assert j["status"] == "ok" and j["role"] == "proxy" and j["id"] == smap["primary"]
    for t in smap["targets"]:
        r = s.get(t["public_url"] + "/v1/health", timeout=TIMEOUT)
        assert r.status_code == 200, t
        j = r.json()
        assert j["status"] == "ok" and j["role"] == "target" and j["id"] == t["id"]
        r = s.get(t["control_url"] + "/v1/health", timeout=TIMEOUT)
        assert r.status_code == 200, t
    r = s.get(smap["proxies"][0]["control_url"] + "/v1/health", timeout=TIMEOUT)
    assert r.status_code == 200


def test_unknown_cluster_query_is_an_error(cluster):
    r = session().get(cluster.url + "/v1/cluster?what=nonsense", timeout=TIMEOUT)
    assert_json_error(r, 400)


def test_bmd_version_increases_on_every_change(cluster, api):
    v0 = api.bmd()["version"]
    b = unique("ver")
    api.create_bucket(b)
    bmd1 = api.bmd()
    assert bmd1["version"] > v0
    assert b in [x["name"] for x in bmd1["buckets"]]
    api.destroy_bucket(b)
    bmd2 = api.bmd()
    assert bmd2["version"] > bmd1["version"]
    assert b not in [x["name"] for x in bmd2["buckets"]]
    # every target got the pushes: each reports at least the proxy's BMD version
    for t in cluster.targets():
        assert target_versions(t)["bmd_version"] >= bmd2["version"], t


def target_versions(target):
    """The (smap_version, bmd_version) a target holds: a metasync carrying no document."""
    return _metasync(target, {})


def _metasync(target, body):
    r = session().post(target["control_url"] + "/v1/metasync", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def test_target_refuses_older_or_equal_smap(cluster, api):
    smap = cluster.smap()
    bucket = unique("msync")
    api.create_bucket(bucket)
    names = ["n%02d" % i for i in range(24)]
    for n in names:
        api.put(bucket, n, n.encode())
    for t in smap["targets"]:
        # an older map without any target, and one of the same version without this target
        old = copy.deepcopy(smap)
        old["version"] = smap["version"] - 1
        old["targets"] = []
        reply = _metasync(t, {"smap": old})
        assert reply["smap_version"] == smap["version"], reply
        same = copy.deepcopy(smap)
        same["targets"] = [x for x in smap["targets"] if x["id"] != t["id"]]
        reply = _metasync(t, {"smap": same})
        assert reply["smap_version"] == smap["version"], reply
    # each target still routes by the full map: a target answers for what it owns and redirects
    # the rest to the owner the proxy names
    s = session()
    for n in names:
        owner = api.owner(bucket, n)
        for t in smap["targets"]:
            r = s.get(t["public_url"] + owner[owner.index("/v1/"):], allow_redirects=False,
                      timeout=TIMEOUT)
            if owner.startswith(t["public_url"] + "/"):
                assert r.status_code == 200 and r.content == n.encode(), (n, t["id"], r.status_code)
            else:
                assert r.status_code == 307 and r.headers["Location"] == owner, \
                    (n, t["id"], r.status_code, r.headers.get("Location"))
    api.destroy_bucket(bucket)


def test_target_refuses_older_or_equal_bmd(cluster, api):
    bucket = unique("msync")
    api.create_bucket(bucket)
    api.put(bucket, "keep", b"still here")
    bmd = api.bmd()
    for t in cluster.targets():
        older = copy.deepcopy(bmd)
        older["version"] = bmd["version"] - 1
        older["buckets"] = [b for b in bmd["buckets"] if b["name"] != bucket]
        reply = _metasync(t, {"bmd": older})
        assert reply["bmd_version"] == bmd["version"], reply
        same = copy.deepcopy(older)
        same["version"] = bmd["version"]
        reply = _metasync(t, {"bmd": same})
        assert reply["bmd_version"] == bmd["version"], reply
    # the bucket and its object survived: no target installed a BMD without it
    r = api.get(bucket, "keep")
    assert r.status_code == 200 and r.content == b"still here"
    api.destroy_bucket(bucket)


def test_metasync_malformed_is_400(cluster):
    s = session()
    for t in cluster.targets():
        r = s.post(t["control_url"] + "/v1/metasync", data=b"{not json", timeout=TIMEOUT,
                   headers={"Content-Type": "application/json"})
        assert_json_error(r, 400)
        r = s.post(t["control_url"] + "/v1/metasync", json={"smap": {"version": "x"}},
                   timeout=TIMEOUT)
        assert_json_error(r, 400)


def test_keepalive_from_unknown_node_is_404(cluster):
    proxy = cluster.smap()["proxies"][0]
    r = session().post(proxy["control_url"] + "/v1/cluster/keepalive",
                       json={"id": "t-nosuchnode", "smap_version": 1, "bmd_version": 1},
                       timeout=TIMEOUT)
    assert r.status_code == 404, r.text


def test_killed_target_leaves_and_rejoins_with_same_id(make_cluster):
    ka_ms = 300
    # Keepalives alone (the probes, which take a killed target out at once, are test_dead_target.py's).
    h = make_cluster(keepalive_ms=ka_ms, proxy_args=("--probe_interval_ms", "0"))
    api = Api(h.url)
    smap0 = h.smap()
    victim = h.c.targets[1]
    vid = victim.id
    assert vid in [t["id"] for t in smap0["targets"]]

    bucket = unique("rejoin")
    api.create_bucket(bucket)
    mine = {}
    i = 0
    while len(mine) < 5:  # objects the victim owns, to read after it comes back
        name = "o%d" % i
        i += 1
        if h.index_of_url(api.owner(bucket, name)) == 1:
            mine[name] = ("payload of %s" % name).encode()
            api.put(bucket, name, mine[name])
    v_before = h.smap()["version"]

    h.kill_target(1, "KILL")
    t0 = time.monotonic()

    def gone():
        m = h.smap()
        return m if vid not in [t["id"] for t in m["targets"]] else None
    # 3 intervals of silence, plus the proxy's check period and scheduling slack
    smap1 = wait_until(gone, timeout=3 * ka_ms / 1000 + 5, what="killed target to leave the map")
    elapsed = time.monotonic() - t0
    assert elapsed >= 2 * ka_ms / 1000 * 0.9, "removed after %.2f s: too eager" % elapsed
    assert len(smap1["targets"]) == 2
    assert smap1["version"] > v_before
    # the proxy routes only to live targets now
    live = {t["public_url"] for t in smap1["targets"]}
    for n in ["x%d" % k for k in range(40)]:
        loc = api.owner(bucket, n)
        assert any(loc.startswith(u + "/") for u in live), loc
    # and every remaining target got the new map
    for t in smap1["targets"]:
        wait_until(lambda: target_versions(t)["smap_version"] >= smap1["version"], timeout=5,
                   what="map pushed to %s" % t["id"])

    h.restart_target(1)
    smap2 = wait_until(lambda: (lambda m: m if len(m["targets"]) == 3 else None)(h.smap()),
                       timeout=10, what="target to rejoin")
    assert smap2["version"] > smap1["version"]
    assert vid in [t["id"] for t in smap2["targets"]]
    assert sorted(t["id"] for t in smap2["targets"]) == sorted(t["id"] for t in smap0["targets"])
    r = session().get(victim.public_url + "/v1/health", timeout=TIMEOUT)
    assert r.json()["id"] == vid
    for name, data in mine.items():
        r = api.get(bucket, name)
        assert r.status_code == 200 and r.content == data, name


def test_proxy_without_targets_answers_503(make_cluster):
    h = make_cluster(targets=0)
    api = Api(h.url)
    assert h.smap()["targets"] == []
    b = unique("empty")
    api.create_bucket(b)
    r = api.s.get(h.url + "/v1/objects/%s/x" % b, allow_redirects=False, timeout=TIMEOUT)
    assert_json_error(r, 503)


def test_target_not_joined_yet_answers_503_not_404(tmp_path):
    """A target serves its public port before it has joined (the proxy is not up yet, or it restarts): it knows no
    bucket then, and must not answer that objects or buckets are missing (a reader would give up on them: a dsort
    reading members from a restarting target did), but 503, which readers try again; on the control port too."""
    socks = [socket.socket() for _ in range(3)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    public, control, no_proxy = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    (tmp_path / "mp").mkdir()
    argv = [os.path.join(FT_BIN, "ft-target"), "--public_port", str(public), "--control_port", str(control),
            "--state_dir", str(tmp_path), "--mountpath", str(tmp_path / "mp"),
            "--proxy_url", "http://127.0.0.1:%d" % no_proxy]
    with open(tmp_path / "log", "w") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:%d" % public
        wait_until(lambda: _answers(url + "/v1/health"), timeout=20, what="the target's public port")
        s = session()
        for method, path, body in [("GET", "/v1/objects/b/o", None), ("HEAD", "/v1/objects/b/o", None),
                                   ("GET", "/v1/objects/b/shard.tar?archpath=a.jpg", None),
                                   ("PUT", "/v1/objects/b/o", b"data"), ("DELETE", "/v1/objects/b/o", None),
                                   ("POST", "/v1/batch", b'{"in":[{"bucket":"b","objname":"o"}]}')]:
            r = s.request(method, url + path, data=body, allow_redirects=False, timeout=TIMEOUT)
            assert r.status_code == 503, (method, path, r.status_code, r.text)
            if method != "HEAD":
                assert_json_error(r, 503)
                assert "has not joined a cluster yet" in r.json()["message"], r.text
        ctl_url = "http://127.0.0.1:%d" % control
        for path in ["/v1/ec/held?provider=ais&bucket=b", "/v1/ec/encode?provider=ais&bucket=b&obj=o"]:
            r = s.post(ctl_url + path, timeout=TIMEOUT)
            assert_json_error(r, 503)
            assert "has not joined a cluster yet" in r.json()["message"], r.text
        assert not any((tmp_path / "mp").rglob("o")), "nothing stored"
    finally:
        p.terminate()
        p.wait(20)


def _answers(url):
    try:
        return session().get(url, timeout=TIMEOUT).status_code > 0
    except OSError:
        return False


@pytest.mark.parametrize("what", ["smap", "bmd"])
def test_node_version_never_decreases_under_changes(make_cluster, what):
    """Versions seen on the proxy and every target only grow while buckets come and go."""
    h = make_cluster(targets=2)
    api = Api(h.url)
    seen = {}
    key = what + "_version"

    def sample():
        versions = {"proxy": (api.smap() if what == "smap" else api.bmd())["version"]}
        for t in h.targets():
            versions[t["id"]] = target_versions(t)[key]
        for k, v in versions.items():
            assert v >= seen.get(k, -1), "%s went back from %s to %s" % (k, seen.get(k), v)
            seen[k] = v

    for i in range(6):
        b = unique("v%d" % i)
        api.create_bucket(b)
        sample()
        if what == "smap" and i == 2:
            h.kill_target(0, "KILL")
            h.restart_target(0)
            sample()
        api.destroy_bucket(b)
        sample()


def test_redirects_carry_the_public_address_not_the_bind_address(make_cluster):
    """Nodes bind 127.0.0.1 but advertise "localhost": the map and every 307 say localhost."""
    h = make_cluster(targets=2, public_host="localhost")
    assert h.url.startswith("http://localhost:")
    api = Api(h.url)
    smap = h.smap()
    for n in smap["proxies"] + smap["targets"]:
        assert n["public_url"].startswith("http://localhost:"), n
        assert n["control_url"].startswith("http://localhost:"), n
    b = unique("pub")
    api.create_bucket(b)
    for i in range(6):
        r = api.put(b, "o%d" % i, b"data %d" % i)
        loc = api.owner(b, "o%d" % i)
        assert loc.startswith("http://localhost:"), loc
        # a non-owner target redirects to the owner's public address too
        for t in smap["targets"]:
            if not loc.startswith(t["public_url"] + "/"):
                r = session().get(t["public_url"] + loc[loc.index("/v1/"):],
                                  allow_redirects=False, timeout=TIMEOUT)
                assert r.status_code == 307 and r.headers["Location"] == loc
        assert api.get(b, "o%d" % i).content == b"data %d" % i
    # S3 GETs relayed to targets advertised by name (dialed by a worker, then kept by the relay loops), twice
    s3 = s3util.client(h)
    for _ in range(2):
        for i in range(6):
            assert s3.get_object(Bucket=b, Key="o%d" % i)["Body"].read() == b"data %d" % i
