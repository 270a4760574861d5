# SPDX-License-Identifier: Apache-2.0
# Jobs: prefetch and evict of remote buckets (ht, aws via s3rver) across the targets, by names and by prefix.
import concurrent.futures
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

import peers
from ftutil import TIMEOUT, assert_json_error, create_remote, obj_url, unique, wait_job, wait_until
from test_coldget import access_count, cached_files, put_origin


origin = peers.nginx_origin_fixture()


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


def fill(origin, names, size=lambda i: 1000 + 37 * i):
    data = {}
    for i, n in enumerate(names):
        data[n] = os.urandom(size(i))
        put_origin(origin, n, data[n])
    return data


def wait_refetched(origin, name, before):
    """The origin served name once more: nginx logs a request after sending its response, so poll."""
    wait_until(lambda: access_count(origin, name) >= before + 1, 10, what=f"nginx logs the GET of {name}")
    assert access_count(origin, name) == before + 1


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
    wait_refetched(origin, names[0], before)
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
                  {"template": "a-{0..999999}"}, {"objnames": ["x" * 1025]}, {"objnames": [1]}, {}):
        r = requests.post(url, json={"action": "prefetch-listrange", "value": value}, timeout=TIMEOUT)
        assert_json_error(r, 400)
    # An ht origin cannot be listed: prefetch by prefix is refused, with the alternatives named.
    r = requests.post(url, json={"action": "prefetch-listrange", "value": {"prefix": "x/"}}, timeout=TIMEOUT)
    assert_json_error(r, 400, "cannot be listed")
    for value in ({"prefix": 7}, {"prefix": "a", "objnames": ["a"]}):
        r = requests.post(url, json={"action": "evict-listrange", "value": value}, timeout=TIMEOUT)
        assert_json_error(r, 400)
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
                      404, f'object "ht://{bucket}/{n}" is not cached')
    before = access_count(origin, n)
    assert requests.get(obj_url(cluster.url, bucket, n), timeout=TIMEOUT).content == data
    wait_refetched(origin, n, before)


def test_evict_prefix_ht(cluster, origin, bucket):
    # Evict by prefix walks the cached objects (an ht origin cannot be listed): exactly those under it go.
    names = [f"{bucket}-px/a{i}" for i in range(5)] + [f"{bucket}-px/b{i}" for i in range(4)] + [f"{bucket}-q0"]
    data = fill(origin, names)
    st = wait_job(cluster, start_job(cluster, bucket, "prefetch-listrange", {"objnames": names}))
    assert st["objects"] == len(names) and st["errors"] == 0, st
    st = wait_job(cluster, start_job(cluster, bucket, "evict-listrange", {"prefix": f"{bucket}-px/a"}))
    assert st["state"] == "finished" and st["kind"] == "evict", st
    assert st["objects"] == 5 and st["total"] == 5 and st["errors"] == 0, st
    assert st["bytes"] == sum(len(data[n]) for n in names[:5])
    for n in names[:5]:
        assert cached_files(cluster, "ht", bucket, n) == []
    for n in names[5:]:
        assert len(cached_files(cluster, "ht", bucket, n)) == 1
    # Nothing left under the prefix: a second run visits nothing.
    st = wait_job(cluster, start_job(cluster, bucket, "evict-listrange", {"prefix": f"{bucket}-px/a"}))
    assert st["state"] == "finished" and st["objects"] == 0 and st["total"] == 0, st


# ---- prefetch by prefix: every target lists the backend (s3rver) and fetches the names it owns ----
@pytest.fixture(scope="module")
def s3peer():
    peers.ensure_installed()
    d = peers.scratch_dir()
    p = peers.start_s3rver(d)
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def aws_bucket(cluster, s3peer):
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=s3peer.url, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                      region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
    b = unique("pfx")
    create_remote(cluster.url, b, "aws", {"bucket": s3peer.bucket, "endpoint": s3peer.url, "addressing": "path",
                                          "region": "us-east-1", "access_key": "S3RVER", "secret_key": "S3RVER"})
    yield b, s3, s3peer.bucket
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=aws", timeout=TIMEOUT)


def remote_cached(cluster, bucket, prefix):
    """{name: cached} of the remote listing under prefix (all pages)."""
    out, token = {}, ""
    while True:
        r = requests.get(f"{cluster.url}/v1/buckets/{bucket}", timeout=TIMEOUT,
                         params={"provider": "aws", "prefix": prefix, "continuation_token": token, "pagesize": "7"})
        assert r.status_code == 200, r.text
        out.update({e["name"]: e["cached"] for e in r.json()["entries"]})
        token = r.json()["continuation_token"]
        if not token:
            return out


def test_prefetch_prefix_parallel(cluster, aws_bucket):
    b, s3, backend_bucket = aws_bucket
    pre = f"{b}/in/"
    inside = [f"{pre}{i:04d}.bin" for i in range(1150)]  # more than one backend page (1000)
    outside = [f"{b}/out/{i}.bin" for i in range(5)] + [f"{b}/inx"]
    data = {n: bytes([i % 251]) * (10 + i % 97) for i, n in enumerate(inside + outside)}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: s3.put_object(Bucket=backend_bucket, Key=n, Body=data[n]), data))
    # A folder marker: a key like any other (stored under a hashed file name, docs/s3.md).
    marker = f"{pre}zz/"
    s3.put_object(Bucket=backend_bucket, Key=marker, Body=b"")
    jid = start_job_aws(cluster, b, "prefetch-listrange", {"prefix": pre})
    st = wait_job(cluster, jid, timeout=300)
    assert st["state"] == "finished" and st["kind"] == "prefetch", st
    assert st["objects"] == len(inside) + 1 and st["total"] == len(inside) + 1 and st["errors"] == 0, st
    assert st["bytes"] == sum(len(data[n]) for n in inside)
    # Each target fetched its own share, in parallel.
    shares = [t["objects"] for t in st["targets"]]
    assert len(shares) == len(cluster.targets()) and sum(shares) == len(inside) + 1
    assert sum(1 for s in shares if s > 0) >= 2, shares
    for n in inside[:: 97] + outside:
        assert len(cached_files(cluster, "aws", b, n)) == (1 if n in inside else 0), n
    seen = remote_cached(cluster, b, f"{b}/")
    assert sorted(seen) == sorted(inside + outside + [marker])
    assert sorted(n for n, c in seen.items() if c) == sorted(inside + [marker])
    s3.delete_object(Bucket=backend_bucket, Key=marker)
    # Everything under the prefix is cached now: a second run counts every object, fetching nothing new.
    st = wait_job(cluster, start_job_aws(cluster, b, "prefetch-listrange", {"prefix": pre}), timeout=300)
    assert st["objects"] == len(inside) and st["errors"] == 0, st
    # Evict by prefix, then prefetch of an empty prefix range.
    st = wait_job(cluster, start_job_aws(cluster, b, "evict-listrange", {"prefix": f"{pre}00"}))
    assert st["objects"] == 100 and st["errors"] == 0, st
    seen = remote_cached(cluster, b, pre)
    assert sorted(n for n, c in seen.items() if not c) == inside[:100]
    st = wait_job(cluster, start_job_aws(cluster, b, "prefetch-listrange", {"prefix": f"{b}/none/"}))
    assert st["state"] == "finished" and st["total"] == 0 and st["objects"] == 0, st


def start_job_aws(cluster, bucket, action, value):
    r = requests.post(f"{cluster.url}/v1/buckets/{bucket}?provider=aws", json={"action": action, "value": value},
                      timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["job_id"]


def test_prefetch_prefix_listing_fails(cluster):
    # A backend that cannot be reached: every target's listing fails, the job says so and ends failed.
    b = unique("pfd")
    create_remote(cluster.url, b, "aws", {"bucket": "x", "endpoint": f"http://127.0.0.1:{peers.free_port()}",
                                          "addressing": "path", "region": "us-east-1", "access_key": "AK",
                                          "secret_key": "SK", "connect_timeout_ms": 500})
    try:
        st = wait_job(cluster, start_job_aws(cluster, b, "prefetch-listrange", {"prefix": "p/"}))
        assert st["state"] == "failed" and st["total"] == 0 and st["objects"] == 0, st
        assert st["errors"] == len(cluster.targets()), st
        assert all(s.startswith("listing: ") for s in st["error_samples"]), st
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=aws", timeout=TIMEOUT)
