# Jobs: prefetch and evict of remote (ht) buckets across the targets, status, abort, bad input.
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

import peers
from ftutil import TIMEOUT, assert_json_error, unique, wait_until
from test_coldget import access_count, cached_files, create_remote, obj_url, put_origin


@pytest.fixture(scope="module")
def origin():
    peers.ensure_installed()
    p = peers.start_nginx(peers.scratch_dir())
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def bucket(cluster, origin):
    b = unique("job")
    create_remote(cluster.url, b, "ht", {"endpoint": origin.url})
    yield b
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def post_action(cluster, bucket, action, value=None, provider="ht", expect=200):
    msg = {"action": action}
    if value is not None:
        msg["value"] = value
    r = requests.post(f"{cluster.url}/v1/buckets/{bucket}?provider={provider}", json=msg, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def start_job(cluster, bucket, action, value=None):
    job_id = post_action(cluster, bucket, action, value).json()["job_id"]
    assert job_id
    return job_id


def job(cluster, job_id):
    r = requests.get(f"{cluster.url}/v1/jobs/{job_id}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def wait_job(cluster, job_id, timeout=60):
    st = {}

    def done():
        st.update(job(cluster, job_id))
        return st["state"] != "running"
    wait_until(done, timeout, interval=0.1, what=f"job {job_id} ends")
    return st


def fill(origin, names, size=lambda i: 1000 + 37 * i):
    data = {}
    for i, n in enumerate(names):
        data[n] = os.urandom(size(i))
        put_origin(origin, n, data[n])
    return data


def test_prefetch_template_then_warm(cluster, origin, bucket):
    names = [f"{bucket}-train-{i:04d}.tar" for i in range(50)]
    data = fill(origin, names)
    jid = start_job(cluster, bucket, "prefetch-listrange", {"template": f"{bucket}-train-{{0000..0049}}.tar"})
    st = wait_job(cluster, jid)
    assert st["state"] == "finished", st
    assert st["kind"] == "prefetch" and st["bucket"] == bucket and st["id"] == jid
    assert st["objects"] == 50 and st["errors"] == 0 and st["total"] == 50
    assert st["bytes"] == sum(len(v) for v in data.values())
    assert 0 < st["start"] <= st["end"]
    # spread: every one of the 3 targets did part of it, and the parts add up
    parts = st["targets"]
    assert len(parts) == 3 and all(p["objects"] > 0 for p in parts), parts
    assert sum(p["objects"] for p in parts) == 50
    before = {n: access_count(origin, n) for n in names}
    assert all(v == 1 for v in before.values()), before
    for n in names:
        r = requests.get(obj_url(cluster.url, bucket, n), timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == data[n]
    assert {n: access_count(origin, n) for n in names} == before  # all served from the cache
    listed = requests.get(f"{cluster.url}/v1/jobs", timeout=TIMEOUT).json()
    assert any(j["id"] == jid and j["objects"] == 50 for j in listed)


def test_prefetch_missing_name(cluster, origin, bucket):
    names = [f"{bucket}-m{i}" for i in range(5)]
    fill(origin, names[:2] + names[3:])
    jid = start_job(cluster, bucket, "prefetch-listrange", {"template": f"{bucket}-m{{0..4}}"})
    st = wait_job(cluster, jid)
    assert st["errors"] == 1 and st["objects"] == 4, st
    assert len(st["error_samples"]) == 1 and names[2] in st["error_samples"][0]
    for n in names[:2] + names[3:]:
        assert len(cached_files(cluster, "ht", bucket, n)) == 1
    assert cached_files(cluster, "ht", bucket, names[2]) == []


def test_evict_listrange_and_bucket(cluster, origin, bucket):
    names = [f"{bucket}-e{i}" for i in range(6)]
    data = fill(origin, names)
    st = wait_job(cluster, start_job(cluster, bucket, "prefetch-listrange", {"objnames": names}))
    assert st["objects"] == 6 and st["errors"] == 0, st
    st = wait_job(cluster, start_job(cluster, bucket, "evict-listrange", {"objnames": names[:2]}))
    assert st["state"] == "finished" and st["kind"] == "evict" and st["objects"] == 2, st
    assert st["bytes"] == len(data[names[0]]) + len(data[names[1]])
    for n in names[:2]:
        assert cached_files(cluster, "ht", bucket, n) == []
        assert (origin.root / n).read_bytes() == data[n]  # the backend keeps it
    for n in names[2:]:
        assert len(cached_files(cluster, "ht", bucket, n)) == 1
    before = access_count(origin, names[0])
    r = requests.get(obj_url(cluster.url, bucket, names[0]), timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == data[names[0]]
    assert access_count(origin, names[0]) == before + 1  # refetched
    st = wait_job(cluster, start_job(cluster, bucket, "evict-remote-bucket"))
    assert st["state"] == "finished" and st["kind"] == "evict-bucket", st
    wait_until(lambda: all(cached_files(cluster, "ht", bucket, n) == [] for n in names), 10,
               what="all cached copies gone")
    for n in names:
        assert (origin.root / n).read_bytes() == data[n]
    r = requests.get(obj_url(cluster.url, bucket, names[3]), timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == data[names[3]]


class Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        time.sleep(0.2)
        body = b"x" * 1000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET


@pytest.fixture(scope="module")
def slow_origin():
    srv = ThreadingHTTPServer(("127.0.0.1", peers.free_port()), Slow)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_abort(cluster, slow_origin):
    b = unique("slow")
    create_remote(cluster.url, b, "ht", {"endpoint": slow_origin})
    try:
        jid = start_job(cluster, b, "prefetch-listrange", {"template": "s-{0..1999}"})
        time.sleep(1.0)
        assert job(cluster, jid)["state"] == "running"
        r = requests.delete(f"{cluster.url}/v1/jobs/{jid}", timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        st = wait_job(cluster, jid, timeout=20)
        assert st["state"] == "aborted", st
        assert 0 < st["objects"] < 2000
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def test_shutdown_with_running_job(slow_origin, make_cluster):
    # The job is still running when make_cluster stops the daemons: they must exit cleanly (status 0,
    # no sanitizer report), which make_cluster's teardown checks.
    h = make_cluster(targets=2, mountpaths=1)
    b = unique("slow")
    create_remote(h.url, b, "ht", {"endpoint": slow_origin})
    jid = start_job(h, b, "prefetch-listrange", {"template": "s-{0..999}"})
    time.sleep(0.5)
    assert job(h, jid)["state"] == "running"


def test_bad_input(cluster, bucket):
    url = f"{cluster.url}/v1/buckets/{bucket}?provider=ht"
    for value in ({"template": "a-{1..}"}, {"template": "no-range"}, {"template": "a-{5..1}"},
                  {"template": "a-{0..999999}"}, {"objnames": ["../x"]}, {"objnames": [1]}, {}):
        r = requests.post(url, json={"action": "prefetch-listrange", "value": value}, timeout=TIMEOUT)
        assert_json_error(r, 400)
    r = requests.post(url, json={"action": "prefetch-listrange", "value": {"prefix": "x/"}}, timeout=TIMEOUT)
    assert_json_error(r, 501, "not built")
    r = requests.post(url, json={"action": "frobnicate"}, timeout=TIMEOUT)
    assert_json_error(r, 400, "unknown action")
    ais = unique("aisb")
    assert requests.post(f"{cluster.url}/v1/buckets/{ais}", json={"action": "create-bck"},
                         timeout=TIMEOUT).status_code == 200
    try:
        for action in ("evict-remote-bucket", "evict-listrange"):
            r = requests.post(f"{cluster.url}/v1/buckets/{ais}", timeout=TIMEOUT,
                              json={"action": action, "value": {"objnames": ["a"]}})
            assert_json_error(r, 400, "remote buckets only")
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{ais}", timeout=TIMEOUT)
    r = requests.post(f"{cluster.url}/v1/buckets/{unique('nosuch')}?provider=ht", timeout=TIMEOUT,
                      json={"action": "evict-remote-bucket"})
    assert_json_error(r, 404)
    assert_json_error(requests.get(f"{cluster.url}/v1/jobs/j-nosuch", timeout=TIMEOUT), 404)
    assert_json_error(requests.get(f"{cluster.url}/v1/jobs/a..b", timeout=TIMEOUT), 400)


def test_evict_single_object(cluster, origin, bucket):
    n = f"{bucket}-one"
    data = fill(origin, [n])[n]
    assert requests.get(obj_url(cluster.url, bucket, n), timeout=TIMEOUT).content == data
    assert len(cached_files(cluster, "ht", bucket, n)) == 1
    r = requests.delete(obj_url(cluster.url, bucket, n, extra="&evict=true"), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert cached_files(cluster, "ht", bucket, n) == []
    assert (origin.root / n).read_bytes() == data  # the backend keeps it
    assert_json_error(requests.delete(obj_url(cluster.url, bucket, n, extra="&evict=true"), timeout=TIMEOUT),
                      404, "not cached")
    before = access_count(origin, n)
    assert requests.get(obj_url(cluster.url, bucket, n), timeout=TIMEOUT).content == data
    assert access_count(origin, n) == before + 1
