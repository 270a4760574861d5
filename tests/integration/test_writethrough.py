# SPDX-License-Identifier: Apache-2.0
# Write-through PUT and DELETE on remote buckets against real s3rver, azurite and the GCS emulator, plus faults.
"""
Each provider test starts its emulator (tests/integration/peers.py), creates a remote bucket on the
cluster, and checks through the proxy and directly on the emulator:
PUT lands on the backend and in the cache (served with the emulator stopped), an overwrite is
served new, Content-Type and x-amz-meta-* are kept locally (and survive a latest-ver revalidation,
which shows the cached copy carries the backend's ETag/version), DELETE removes both, a DELETE of
an object the backend no longer has removes the cached copy and answers 404, and a PUT while the
backend is down fails with nothing cached. The GCS peer is firebase-tools' storage emulator with its
rules engine switched off (tests/peers/firebase-offline.js): it serves the JSON API, checks no auth.
A fake S3 server (in this file) answers 500 to PUTs, and stages the races of a PUT and of a DELETE
with an older cold GET of the same name.
"""
import base64
import contextlib
import datetime
import hashlib
import hmac
import os
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

import peers
from ftutil import TIMEOUT, assert_json_error, create_remote, obj_url, session, unique

WAIT = 60  # seconds to wait for a state the test drives (not a speed assertion)


# ---- cluster side ----
def destroy_remote(url, bucket, provider):
    requests.delete(f"{url}/v1/buckets/{bucket}?provider={provider}", timeout=TIMEOUT)


def put(url, bucket, name, data, provider, headers=None):
    """PUT through the proxy: its 307, then the body to the owning target."""
    s = session()
    r = s.put(obj_url(url, bucket, name, provider), data=data, headers=headers, allow_redirects=False,
              timeout=TIMEOUT)
    assert r.status_code == 307, r.text
    return s.put(r.headers["Location"], data=data, headers=headers, allow_redirects=False, timeout=TIMEOUT)


def get(url, bucket, name, provider, extra=""):
    return session().get(obj_url(url, bucket, name, provider, extra), timeout=TIMEOUT)


def delete(url, bucket, name, provider, extra=""):
    s = session()
    r = s.delete(obj_url(url, bucket, name, provider, extra), allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307, r.text
    return s.delete(r.headers["Location"], allow_redirects=False, timeout=TIMEOUT)


def cached(cluster, provider, bucket, name):
    """Paths of the cached copy of name on any mountpath of any target."""
    return [p for mp in cluster.all_mountpaths() for p in [os.path.join(mp, provider, bucket, name)]
            if os.path.isfile(p)]


def assert_not_cached(cluster, provider, bucket, name):
    assert cached(cluster, provider, bucket, name) == []
    assert cluster.work_files() == [], "a work file was left behind"


# ---- the emulators, read and written directly (not through the cluster) ----
class S3Direct:
    provider = "aws"

    def __init__(self, p):
        import boto3
        from botocore.config import Config
        self.p = p
        self.s3 = boto3.client("s3", endpoint_url=p.url, aws_access_key_id=peers.S3RVER_KEY,
                               aws_secret_access_key=peers.S3RVER_KEY, region_name="us-east-1",
                               config=Config(s3={"addressing_style": "path"}))

    def backend(self):
        return {"bucket": self.p.bucket, "endpoint": self.p.url, "addressing": "path", "region": "us-east-1",
                "access_key": peers.S3RVER_KEY, "secret_key": peers.S3RVER_KEY, "connect_timeout_ms": 2000}

    def read(self, name):
        try:
            return self.s3.get_object(Bucket=self.p.bucket, Key=name)["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None

    def remove(self, name):
        self.s3.delete_object(Bucket=self.p.bucket, Key=name)


class AzureDirect:
    provider = "azure"

    def __init__(self, p):
        self.p = p

    def backend(self):
        return {"bucket": self.p.container, "endpoint": self.p.url, "account": self.p.account,
                "account_key": self.p.key, "connect_timeout_ms": 2000}

    def _request(self, method, name):
        """A blob request signed with Shared Key, written here independently of the C signer."""
        path = f"/{self.p.account}/{self.p.container}/{urllib.parse.quote(name)}"
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
        headers = {"x-ms-date": date, "x-ms-version": "2021-08-06"}
        canonical = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
        to_sign = f"{method}\n" + "\n" * 11 + canonical + f"/{self.p.account}{path}"
        sig = base64.b64encode(hmac.new(base64.b64decode(self.p.key), to_sign.encode(), hashlib.sha256).digest())
        headers["Authorization"] = f"SharedKey {self.p.account}:{sig.decode()}"
        return session().request(method, f"http://127.0.0.1:{self.p.port}{path}", headers=headers, timeout=TIMEOUT)

    def read(self, name):
        r = self._request("GET", name)
        if r.status_code == 404:
            return None
        assert r.status_code == 200, r.text
        return r.content

    def remove(self, name):
        assert self._request("DELETE", name).status_code == 202


class GcsDirect:
    provider = "gcp"

    def __init__(self, p):
        self.p = p

    def backend(self):
        return {"bucket": self.p.bucket, "endpoint": self.p.url, "connect_timeout_ms": 2000}

    def _obj(self, name):
        return f"{self.p.url}/storage/v1/b/{self.p.bucket}/o/{urllib.parse.quote(name, safe='')}"

    def read(self, name):
        r = session().get(self._obj(name) + "?alt=media", timeout=TIMEOUT)
        if r.status_code == 404:
            return None
        assert r.status_code == 200, r.text
        return r.content

    def remove(self, name):
        assert session().delete(self._obj(name), timeout=TIMEOUT).status_code in (200, 204)


STARTERS = {"aws": (peers.start_s3rver, S3Direct), "azure": (peers.start_azurite, AzureDirect),
            "gcp": (peers.start_gcs, GcsDirect)}


@pytest.fixture
def remote(cluster, request):
    """(direct handle, bucket) for the provider in request.param, its emulator running; stopped at the end."""
    start, cls = STARTERS[request.param]
    peers.ensure_installed()
    d = peers.scratch_dir()
    p = start(d / request.param)
    b = unique("wt")
    try:
        direct = cls(p)
        create_remote(cluster.url, b, direct.provider, direct.backend())
        yield direct, b
    finally:
        destroy_remote(cluster.url, b, STARTERS[request.param][1].provider)
        p.stop()


@pytest.mark.parametrize("remote", ["aws", "azure", "gcp"], indirect=True)
def test_write_through(cluster, remote):
    direct, b = remote
    pv, url = direct.provider, cluster.url
    name = "dir/obj one.bin"
    v1 = os.urandom(3 * 1024 * 1024 + 17)
    meta = {"Content-Type": "text/x-fasttier", "x-amz-meta-Origin": "camera-7", "x-amz-meta-seq": "42"}

    # PUT: on the backend, and cached on exactly one mountpath
    r = put(url, b, name, v1, pv, headers=meta)
    assert r.status_code == 200, r.text
    assert r.headers.get("Ais-Cached") is None
    assert direct.read(name) == v1
    assert len(cached(cluster, pv, b, name)) == 1
    assert cluster.work_files() == []
    r = get(url, b, name, pv)
    assert r.status_code == 200 and r.content == v1
    assert r.headers["Content-Type"] == "text/x-fasttier"
    assert r.headers["x-amz-meta-origin"] == "camera-7" and r.headers["x-amz-meta-seq"] == "42"
    # The cached copy carries the backend's identity: a revalidation finds it current and serves it
    # locally (a refetch would come from the backend without the metadata given at PUT).
    r = get(url, b, name, pv, "&latest-ver=true")
    assert r.status_code == 200 and r.content == v1
    assert r.headers.get("x-amz-meta-origin") == "camera-7", "latest-ver refetched an object the PUT just wrote"

    # overwrite: the new content on the backend and served
    v2 = b"second version " * 5000
    r = put(url, b, name, v2, pv)
    assert r.status_code == 200, r.text
    assert direct.read(name) == v2
    r = get(url, b, name, pv)
    assert r.status_code == 200 and r.content == v2
    assert "x-amz-meta-origin" not in r.headers  # the new PUT's metadata (none) replaced the old
    assert len(cached(cluster, pv, b, name)) == 1

    # an empty object goes through like any other
    r = put(url, b, "empty", b"", pv)
    assert r.status_code == 200, r.text
    assert direct.read("empty") == b""
    assert len(cached(cluster, pv, b, "empty")) == 1
    r = get(url, b, "empty", pv)
    assert r.status_code == 200 and r.content == b""

    # DELETE removes both
    r = delete(url, b, name, pv)
    assert r.status_code == 200, r.text
    assert direct.read(name) is None
    assert cached(cluster, pv, b, name) == []
    assert_json_error(get(url, b, name, pv), 404)
    # a second DELETE: the backend's word (S3 deletes a missing key without an error)
    r = delete(url, b, name, pv)
    if pv == "aws":
        assert r.status_code == 200, r.text
    else:
        assert_json_error(r, 404)

    # deleted on the backend behind the cluster's back: DELETE removes the cached copy, answers 404
    put(url, b, "gone.bin", b"soon gone", pv)
    assert len(cached(cluster, pv, b, "gone.bin")) == 1
    direct.remove("gone.bin")
    r = delete(url, b, "gone.bin", pv)
    if pv == "aws":
        assert r.status_code == 200, r.text
    else:
        assert_json_error(r, 404)
    assert cached(cluster, pv, b, "gone.bin") == []

    # evict keeps its meaning: the cached copy only
    put(url, b, "ev.bin", b"evict me", pv)
    r = delete(url, b, "ev.bin", pv, "&evict=true")
    assert r.status_code == 200, r.text
    assert cached(cluster, pv, b, "ev.bin") == [] and direct.read("ev.bin") == b"evict me"

    # with the backend stopped: a cached object is served from the cache ...
    put(url, b, "warm.bin", v1, pv)
    direct.p.stop()
    r = get(url, b, "warm.bin", pv)
    assert r.status_code == 200 and r.content == v1
    # ... and a PUT fails with a backend status, caching nothing; a GET then goes to the backend
    r = put(url, b, "down.bin", v1, pv)
    assert r.status_code in (502, 503, 504), r.text
    assert_json_error(r, r.status_code)
    assert_not_cached(cluster, pv, b, "down.bin")
    r = get(url, b, "down.bin", pv)
    assert r.status_code in (502, 503, 504), r.text
    # a DELETE fails too and leaves the cached copy alone (the backend still has the object)
    r = delete(url, b, "warm.bin", pv)
    assert r.status_code in (502, 503, 504), r.text
    assert_json_error(r, r.status_code)
    assert len(cached(cluster, pv, b, "warm.bin")) == 1


# ---- a fake S3 endpoint: 500 on PUT, and a GET held back on demand ----
class FakeS3(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    objects = {}
    gets = {}
    puts = {}
    lock = threading.Lock()
    get_started = threading.Event()   # a GET of a "slow-" object is being answered
    release_get = threading.Event()   # lets it finish
    put_seen = threading.Event()      # a PUT of a "slow-" object was taken

    def log_message(self, *a):
        pass

    def _key(self):
        return urllib.parse.unquote(self.path.split("?", 1)[0].split("/", 2)[2])

    def _send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _not_found(self):
        self._send(404, b"<Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>",
                   [("Content-Type", "application/xml")])

    def do_PUT(self):
        key = self._key()
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with FakeS3.lock:
            FakeS3.puts[key] = FakeS3.puts.get(key, 0) + 1
        if key.startswith("e500"):
            self._send(500, b"<Error><Code>InternalError</Code><Message>boom</Message></Error>",
                       [("Content-Type", "application/xml")])
            return
        with FakeS3.lock:
            FakeS3.objects[key] = body
        self._send(200, b"", [("ETag", '"%s"' % hashlib.md5(body).hexdigest())])
        if key.startswith("slow-"):
            FakeS3.put_seen.set()

    def do_GET(self):
        key = self._key()
        with FakeS3.lock:
            FakeS3.gets[key] = FakeS3.gets.get(key, 0) + 1
            body = FakeS3.objects.get(key)
        if body is None:
            self._not_found()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"%s"' % hashlib.md5(body).hexdigest())
        self.end_headers()
        if key.startswith("slow-") and self.command == "GET":
            self.wfile.write(body[:1024])
            self.wfile.flush()
            FakeS3.get_started.set()
            FakeS3.release_get.wait(WAIT)
            self.wfile.write(body[1024:])
        elif self.command == "GET":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_DELETE(self):
        with FakeS3.lock:
            FakeS3.objects.pop(self._key(), None)
        self._send(204)


@contextlib.contextmanager
def fake_bucket(cluster):
    """A FakeS3 server and an aws bucket of the cluster on it; yields the bucket name."""
    srv = ThreadingHTTPServer(("127.0.0.1", peers.free_port()), FakeS3)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    b = unique("wf")
    try:
        create_remote(cluster.url, b, "aws", {"bucket": "fake", "addressing": "path", "region": "us-east-1",
                                              "endpoint": f"http://127.0.0.1:{srv.server_address[1]}",
                                              "access_key": "AK", "secret_key": "SK", "stall_timeout_ms": 20000})
        yield b
    finally:
        FakeS3.release_get.set()
        destroy_remote(cluster.url, b, "aws")
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def fake_s3(cluster):
    with fake_bucket(cluster) as b:
        yield b


def test_backend_500_on_put(cluster, fake_s3):
    b = fake_s3
    r = put(cluster.url, b, "e500.bin", os.urandom(100000), "aws")
    assert_json_error(r, 502)
    assert "backend" in r.json()["message"]
    assert FakeS3.puts.get("e500.bin") == 1
    assert_not_cached(cluster, "aws", b, "e500.bin")
    # not cached: the GET asks the backend (which has nothing)
    before = FakeS3.gets.get("e500.bin", 0)
    assert_json_error(get(cluster.url, b, "e500.bin", "aws"), 404)
    assert FakeS3.gets.get("e500.bin", 0) == before + 1


def hold_cold_get(name, content):
    """Puts content on the fake backend as name (a "slow-" name): its next GET stops after 1 KiB."""
    assert name.startswith("slow-")
    FakeS3.objects[name] = content
    FakeS3.get_started.clear()
    FakeS3.release_get.clear()
    FakeS3.put_seen.clear()


def test_put_beats_older_cold_get(cluster, fake_s3):
    """A cold GET reads the old content, the PUT is taken by the backend and cached, then the GET's
    fetch ends after the PUT answered: it must not publish the old content over the PUT's copy. The
    PUT does not wait for the older fetch, and a GET meanwhile gets the new content."""
    b, name = fake_s3, "slow-race.bin"
    old, new = b"O" * (256 * 1024), b"N" * (200 * 1024)
    hold_cold_get(name, old)
    with ThreadPoolExecutor(2) as ex:
        cold = ex.submit(get, cluster.url, b, name, "aws")
        assert FakeS3.get_started.wait(WAIT), "the cold GET never reached the backend"
        writer = ex.submit(put, cluster.url, b, name, new, "aws")
        assert FakeS3.put_seen.wait(WAIT), "the PUT never reached the backend"
        w = writer.result(timeout=WAIT)  # the older fetch is still held back by the backend
        assert w.status_code == 200, w.text
        assert [open(p, "rb").read() for p in cached(cluster, "aws", b, name)] == [new]
        r = get(cluster.url, b, name, "aws")
        assert r.status_code == 200 and r.content == new, "a GET after the PUT was served the old content"
        FakeS3.release_get.set()
        r = cold.result(timeout=WAIT)
        assert r.status_code == 200 and r.content == old  # it started before the PUT: old is right
    assert FakeS3.objects[name] == new
    assert [open(p, "rb").read() for p in cached(cluster, "aws", b, name)] == [new], \
        "a stale cold fetch overwrote the PUT"
    assert cluster.work_files() == []
    r = get(cluster.url, b, name, "aws")
    assert r.status_code == 200 and r.content == new
    assert get(cluster.url, b, name, "aws").content == new


def test_delete_beats_older_cold_get(cluster, fake_s3):
    """The object is not cached; a cold GET of it is under way (held by the backend) when a DELETE
    is taken by the backend: the DELETE answers without waiting, a GET after it asks the backend
    (404) instead of joining the older fetch, and when that fetch ends it serves its client the
    whole object and caches nothing: the next GET goes to the backend again and gets 404."""
    b, name = fake_s3, "slow-gone.bin"
    old = os.urandom(300 * 1024)
    hold_cold_get(name, old)
    assert_not_cached(cluster, "aws", b, name)
    with ThreadPoolExecutor(2) as ex:
        cold = ex.submit(get, cluster.url, b, name, "aws")
        assert FakeS3.get_started.wait(WAIT), "the cold GET never reached the backend"
        deleter = ex.submit(delete, cluster.url, b, name, "aws")
        d = deleter.result(timeout=WAIT)  # the older fetch is still held back by the backend
        assert d.status_code == 200, d.text
        assert name not in FakeS3.objects
        before = FakeS3.gets[name]
        assert_json_error(ex.submit(get, cluster.url, b, name, "aws").result(timeout=WAIT), 404)
        assert FakeS3.gets[name] == before + 1, "a GET after the DELETE did not ask the backend"
        FakeS3.release_get.set()
        r = cold.result(timeout=WAIT)
        assert r.status_code == 200 and r.content == old  # it started before the DELETE: old is right
    # the older fetch has ended (its client got the end of the body): it must have cached nothing
    assert_not_cached(cluster, "aws", b, name)
    before = FakeS3.gets[name]
    assert_json_error(get(cluster.url, b, name, "aws"), 404)
    assert FakeS3.gets[name] == before + 1, "the GET was not sent to the backend"
    assert_not_cached(cluster, "aws", b, name)


def test_concurrent_puts_cache_the_backends_last(cluster, fake_s3):
    """Concurrent PUTs of one name: whichever the backend took last is what the cache serves."""
    b, name = fake_s3, "many.bin"
    bodies = [bytes([65 + i]) * (64 * 1024 + i) for i in range(12)]
    with ThreadPoolExecutor(12) as ex:
        results = list(ex.map(lambda body: put(cluster.url, b, name, body, "aws"), bodies))
    assert all(r.status_code == 200 for r in results), [r.text for r in results]
    last = FakeS3.objects[name]
    assert last in bodies
    paths = cached(cluster, "aws", b, name)
    assert len(paths) == 1
    with open(paths[0], "rb") as f:
        assert f.read() == last
    assert get(cluster.url, b, name, "aws").content == last


def test_cached_under_a_cached_name(make_cluster):
    """One target, one mountpath: "clash" cached as a file and "clash/inner" written after it are
    both cached, the second in its hashed file (docs/s3.md). When even that place is blocked (a
    directory put there by hand), the backend takes the object all the same: 200 with Ais-Cached:
    false, nothing partial kept."""
    c = make_cluster(targets=1, mountpaths=1)
    with fake_bucket(c) as b:
        assert put(c.url, b, "clash", b"a file", "aws").status_code == 200
        r = put(c.url, b, "clash/inner", b"under it", "aws")
        assert r.status_code == 200, r.text
        assert r.headers.get("Ais-Cached") != "false"
        assert FakeS3.objects["clash/inner"] == b"under it" and FakeS3.objects["clash"] == b"a file"
        assert len(cached(c, "aws", b, "clash")) == 1
        h = hashlib.sha256(b"clash/inner").hexdigest()
        keyed = [os.path.join(mp, "aws", b, ".ft-keys", h[:2], h) for mp in c.all_mountpaths()]
        assert [os.getxattr(p, "user.ft.name") for p in keyed if os.path.isfile(p)] == [b"clash/inner"]
        for name, data in (("clash", b"a file"), ("clash/inner", b"under it")):
            FakeS3.objects.pop(name)  # from the cache now
            r = get(c.url, b, name, "aws")
            FakeS3.objects[name] = data
            assert r.status_code == 200 and r.content == data, (name, r.status_code, r.text)
        # blocked: "clash/deeper" cannot be a path under the file "clash", and its hashed file is a directory
        h = hashlib.sha256(b"clash/deeper").hexdigest()
        blocker = os.path.join(c.all_mountpaths()[0], "aws", b, ".ft-keys", h[:2], h)
        os.makedirs(os.path.join(blocker, "x"))
        r = put(c.url, b, "clash/deeper", b"deep", "aws")
        assert r.status_code == 200, r.text
        assert r.headers.get("Ais-Cached") == "false"
        assert FakeS3.objects["clash/deeper"] == b"deep"
        assert os.listdir(blocker) == ["x"] and c.work_files() == []


# ---- refused ----
def test_ht_is_read_only(cluster):
    b = unique("wh")
    create_remote(cluster.url, b, "ht", {"endpoint": f"http://127.0.0.1:{peers.free_port()}/x"})
    try:
        r = put(cluster.url, b, "o", b"abc", "ht")
        assert_json_error(r, 501)
        assert "read-only" in r.json()["message"]
        r = delete(cluster.url, b, "o", "ht")
        assert_json_error(r, 501)
        assert "read-only" in r.json()["message"]
        assert_json_error(delete(cluster.url, b, "o", "ht", "&evict=true"), 404)  # evict: the cache only
        assert_not_cached(cluster, "ht", b, "o")
    finally:
        destroy_remote(cluster.url, b, "ht")
