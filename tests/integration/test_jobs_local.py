# SPDX-License-Identifier: Apache-2.0
# Jobs over local objects (make-n-copies, ec-encode, scrub): every target walks its own objects of the bucket.
import os

import pytest
import requests

import peers
from ftutil import TIMEOUT, assert_json_error, create_remote, unique, wait_job

# Each kind only reads the bucket's properties to decide what to do; with none set, what is asserted here
# (every local object visited once, the job finishes) holds whatever the per-object action does.
ACTIONS = {"make-n-copies": "mirror", "ec-encode": "ec-encode", "scrub": "scrub"}


def post(cluster, bucket, body, provider="ais"):
    return requests.post(f"{cluster.url}/v1/buckets/{bucket}?provider={provider}", json=body, timeout=TIMEOUT)


def start(cluster, bucket, action, value=None, provider="ais"):
    body = {"action": action}
    if value is not None:
        body["value"] = value
    r = post(cluster, bucket, body, provider)
    assert r.status_code == 200, r.text
    return r.json()["job_id"]


@pytest.fixture
def ais_bucket(cluster):
    b = unique("loc")
    cluster.api.create_bucket(b)
    names = [f"p{i % 4}/o-{i:03d}" for i in range(41)]
    for n in names:
        cluster.api.put(b, n, os.urandom(64 + len(n)))
    yield b, names
    cluster.api.destroy_bucket(b, expect=None)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_job_visits_every_local_object(cluster, ais_bucket, action):
    b, names = ais_bucket
    jid = start(cluster, b, action)
    st = wait_job(cluster, jid, timeout=120)
    assert st["state"] == "finished", st
    assert st["kind"] == ACTIONS[action] and st["bucket"] == b and st["id"] == jid
    assert st["total"] == len(names), st  # each object on exactly one target, each visited once
    assert st["objects"] + st["errors"] <= st["total"]
    assert len(st["targets"]) == len(cluster.targets())
    # The job is listed with the others.
    r = requests.get(f"{cluster.url}/v1/jobs", timeout=TIMEOUT)
    assert r.status_code == 200
    [mine] = [j for j in r.json() if j["id"] == jid]
    assert mine["kind"] == ACTIONS[action] and mine["total"] == len(names)


def test_job_prefix_and_hidden_dirs(cluster, ais_bucket):
    b, names = ais_bucket
    cluster.require_local("writes into the mountpaths' hidden directories")
    # Files in the hidden per-mountpath trees (work files, mirror copies, EC slices) are never objects.
    planted = []
    for mp in cluster.all_mountpaths():
        for hidden in (".copies", ".ec"):
            path = os.path.join(mp, hidden, "ais", b, "p1", "ghost")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(b"ghost")
            planted.append(path)
    try:
        st = wait_job(cluster, start(cluster, b, "scrub"), timeout=120)
        assert st["state"] == "finished" and st["total"] == len(names), st
        st = wait_job(cluster, start(cluster, b, "scrub", {"prefix": "p1/"}), timeout=120)
        assert st["state"] == "finished" and st["total"] == sum(1 for n in names if n.startswith("p1/")), st
        st = wait_job(cluster, start(cluster, b, "make-n-copies", {"prefix": "nothing/"}), timeout=120)
        assert st["state"] == "finished" and st["total"] == 0 and st["objects"] == 0, st
    finally:
        for p in planted:
            os.remove(p)


def test_job_after_deletes(cluster, ais_bucket):
    b, names = ais_bucket
    for n in names[:10]:
        assert cluster.api.delete(b, n).status_code == 200
    st = wait_job(cluster, start(cluster, b, "ec-encode"), timeout=120)
    assert st["state"] == "finished" and st["total"] == len(names) - 10, st


def test_job_on_remote_bucket_cached_objects(cluster):
    peers.ensure_installed()
    d = peers.scratch_dir()
    origin = peers.start_nginx(d)
    b = unique("locr")
    try:
        create_remote(cluster.url, b, "ht", {"endpoint": origin.url})
        names = [f"r-{i}" for i in range(12)]
        for n in names:
            (origin.root / n).write_bytes(os.urandom(200))
            (origin.root / n).chmod(0o644)
        cached = names[:7]
        for n in cached:
            r = requests.get(f"{cluster.url}/v1/objects/{b}/{n}?provider=ht", timeout=TIMEOUT)
            assert r.status_code == 200, r.text
        # Only the cached copies are local objects: the backend's other names are not visited.
        st = wait_job(cluster, start(cluster, b, "scrub", provider="ht"), timeout=120)
        assert st["state"] == "finished" and st["total"] == len(cached), st
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)
        origin.stop()


def test_bad_local_job_requests(cluster, ais_bucket):
    b, _ = ais_bucket
    assert_json_error(post(cluster, b, {"action": "make-n-copies", "value": 2}), 400, "prefix")
    assert_json_error(post(cluster, b, {"action": "scrub", "value": {"prefix": 5}}), 400, "prefix")
    assert_json_error(post(cluster, b, {"action": "scrub", "value": {"other": 1}}), 400)
    assert_json_error(post(cluster, unique("nosuch"), {"action": "scrub"}), 404)
    assert_json_error(post(cluster, unique("nosuch"), {"action": "ec-encode"}, provider="aws"), 404)
