# SPDX-License-Identifier: Apache-2.0
# Remote (ht) buckets read through the cluster: cold GET caching, coalescing, faults, latest-ver revalidation.
import hashlib
import json
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import urllib3

import peers
from ftutil import TIMEOUT, Api, assert_json_error, cksum_hex, create_remote, obj_url, unique

STALL_MS = 1500


def cached_files(cluster, provider, bucket, name):
    return [os.path.join(mp, provider, bucket, name) for mp in cluster.all_mountpaths()
            if os.path.exists(os.path.join(mp, provider, bucket, name))]


def access_count(peer, name, at_least=1):
    """GETs of name in the origin's access log. nginx logs a request after its last send, which
    can come a moment after our client already has the whole response: wait (a bounded while)
    until at least at_least lines are there, so an unwritten line does not pass for no fetch."""
    needle = f"GET /files/{name} "
    deadline = time.monotonic() + 10
    while True:
        n = 0
        if peer.access_log.exists():
            n = sum(1 for line in peer.access_log.read_text().splitlines() if needle in line)
        if n >= at_least or time.monotonic() > deadline:
            return n
        time.sleep(0.02)


origin = peers.nginx_origin_fixture()


@pytest.fixture(scope="module")
def ht_bucket(cluster, origin):
    b = unique("ht")
    create_remote(cluster.url, b, "ht", {"endpoint": origin.url, "stall_timeout_ms": STALL_MS})
    yield b
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def put_origin(origin, name, data):
    path = origin.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o644)
    os.replace(tmp, path)


# ---- a faulty origin ----
NOLEN_BODY = bytes(range(256)) * 4099  # about 1 MiB, not a multiple of any buffer size
class Faulty(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hits = {}
    lock = threading.Lock()
    gate = threading.Event()

    def log_message(self, *a):
        pass

    def do_GET(self):
        name = self.path.rsplit("/", 1)[-1]
        with Faulty.lock:
            Faulty.hits[name] = Faulty.hits.get(name, 0) + 1
        size = 1 << 20
        if name.startswith("e500"):
            body = b"boom"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        if name.startswith("nolen"):
            # no Content-Length: the body ends with the connection
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(NOLEN_BODY)
                self.wfile.flush()
            self.close_connection = True
            return
        self.send_header("Content-Length", str(size))
        self.send_header("Connection", "close")
        self.end_headers()
        if name.startswith("half"):
            self.wfile.write(b"h" * (size // 2))
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if name.startswith("gate"):
            # 64 KiB, then wait until the test opens the gate, 64 KiB more, then a cut.
            self.wfile.write(b"g" * (64 * 1024))
            self.wfile.flush()
            Faulty.gate.wait(60)
            self.wfile.write(b"g" * (64 * 1024))
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if name.startswith("stall"):
            self.wfile.write(b"s" * (64 * 1024))
            self.wfile.flush()
            time.sleep(STALL_MS / 1000 * 4)
            self.close_connection = True
            return
        self.wfile.write(b"o" * size)

    do_HEAD = do_GET


@pytest.fixture(scope="module")
def faulty(cluster):
    srv = ThreadingHTTPServer(("127.0.0.1", peers.free_port()), Faulty)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    b = unique("hf")
    create_remote(cluster.url, b, "ht", {"endpoint": f"http://127.0.0.1:{srv.server_address[1]}/x",
                                         "stall_timeout_ms": STALL_MS})
    yield b
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)
    srv.shutdown()
    srv.server_close()


# ---- bucket metadata ----
def test_remote_bucket_props_and_names(cluster):
    b = unique("rb")
    create_remote(cluster.url, b, "aws", {"bucket": "x", "endpoint": "http://127.0.0.1:1", "access_key": "AK",
                                          "secret_key": "SECRETVALUE"})
    Api(cluster.url).create_bucket(b)  # same name, provider ais: a different bucket
    create_remote(cluster.url, b, "aws", {"bucket": "x"}, expect=409)
    r = requests.head(f"{cluster.url}/v1/buckets/{b}?provider=aws", timeout=TIMEOUT)
    assert r.status_code == 200
    props = json.loads(r.headers["Ais-Bucket-Props"])
    assert props["provider"] == "aws" and props["backend"]["access_key"] == "AK"
    assert "SECRETVALUE" not in r.headers["Ais-Bucket-Props"]
    r = requests.get(f"{cluster.url}/v1/buckets?provider=aws&presence=2", timeout=TIMEOUT)
    assert r.status_code == 200 and b in [x["name"] for x in r.json()]
    assert "SECRETVALUE" not in r.text
    r = requests.get(f"{cluster.url}/v1/buckets", timeout=TIMEOUT)
    assert "SECRETVALUE" not in r.text
    # bad properties are refused
    r = requests.post(f"{cluster.url}/v1/buckets/{unique('rb')}?provider=ht",
                      json={"action": "create-bck", "value": {"backend": {"nope": 1}}}, timeout=TIMEOUT)
    assert_json_error(r, 400)
    r = requests.post(f"{cluster.url}/v1/buckets/{unique('rb')}?provider=ht",
                      json={"action": "create-bck"}, timeout=TIMEOUT)
    assert_json_error(r, 400)
    assert requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=aws", timeout=TIMEOUT).status_code == 200
    Api(cluster.url).destroy_bucket(b)


def test_writes_not_built(cluster, ht_bucket, origin):
    put_origin(origin, "w1", b"x")
    r = requests.put(obj_url(cluster.url, ht_bucket, "w1"), data=b"abc", allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307
    r = requests.put(r.headers["Location"], data=b"abc", timeout=TIMEOUT)
    assert_json_error(r, 501)
    r = requests.delete(obj_url(cluster.url, ht_bucket, "w1"), timeout=TIMEOUT)
    assert_json_error(r, 501)


# ---- cold and warm GET ----
def test_cold_then_warm(cluster, ht_bucket, origin):
    name = "d/cold1.bin"
    data = os.urandom(3 * 1024 * 1024 + 5)
    put_origin(origin, name, data)
    r = requests.get(obj_url(cluster.url, ht_bucket, name), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.content == data
    assert access_count(origin, name) == 1
    assert len(cached_files(cluster, "ht", ht_bucket, name)) == 1
    r = requests.get(obj_url(cluster.url, ht_bucket, name), timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == data
    assert access_count(origin, name) == 1, "warm GET went to the origin"
    # a cold range GET fetches the whole object once and serves the window
    name2 = "d/cold2.bin"
    put_origin(origin, name2, data)
    r = requests.get(obj_url(cluster.url, ht_bucket, name2), headers={"Range": "bytes=100-199"}, timeout=TIMEOUT)
    assert r.status_code == 206 and r.content == data[100:200]
    r = requests.get(obj_url(cluster.url, ht_bucket, name2), timeout=TIMEOUT)
    assert r.content == data
    assert access_count(origin, name2) == 1
    r = requests.get(obj_url(cluster.url, ht_bucket, "d/missing"), timeout=TIMEOUT)
    assert_json_error(r, 404)


@pytest.mark.parametrize("kind", ["xxh3", "crc32c", "xxhash", "sha512"])
def test_cold_get_stores_the_bucket_type(cluster, origin, kind):
    """A cold GET into a bucket of each type stores that type's value of the origin's bytes (the streaming checksum
    of the fetch), served by HEAD and by the warm GET; a range cold GET too."""
    b = unique("htck")
    create_remote(cluster.url, b, "ht", {"endpoint": origin.url, "stall_timeout_ms": STALL_MS}, cksum=kind)
    for name, size, rng in [(f"ck/{kind}/whole.bin", 3 * 1024 * 1024 + 5, None),
                            (f"ck/{kind}/range.bin", 700001, "bytes=10-19")]:
        data = os.urandom(size)
        put_origin(origin, name, data)
        want = cksum_hex(kind, data)
        headers = {"Range": rng} if rng else {}
        r = requests.get(obj_url(cluster.url, b, name), headers=headers, timeout=TIMEOUT)
        assert r.status_code == (206 if rng else 200) and r.content == (data[10:20] if rng else data), r.text
        r = requests.head(obj_url(cluster.url, b, name), allow_redirects=True, timeout=TIMEOUT)
        assert r.status_code == 200
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, want)
        r = requests.get(obj_url(cluster.url, b, name), timeout=TIMEOUT)
        assert r.content == data and r.headers["Ais-Checksum-Value"] == want
        assert access_count(origin, name) == 1
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def test_32_concurrent_cold_gets_one_fetch(cluster, ht_bucket, origin):
    name = "big64.bin"
    data = os.urandom(64 * 1024 * 1024)
    want = hashlib.md5(data).hexdigest()
    put_origin(origin, name, data)
    del data
    start = threading.Barrier(32)

    def one(_):
        start.wait()
        h = hashlib.md5()
        n = 0
        with requests.get(obj_url(cluster.url, ht_bucket, name), stream=True, timeout=120) as r:
            assert r.status_code == 200, r.text
            for chunk in r.iter_content(1 << 20):
                h.update(chunk)
                n += len(chunk)
        return h.hexdigest(), n

    with ThreadPoolExecutor(32) as ex:
        results = list(ex.map(one, range(32)))
    assert all(md == want for md, _ in results), results
    assert access_count(origin, name) == 1
    assert len(cached_files(cluster, "ht", ht_bucket, name)) == 1


def test_latest_ver(cluster, ht_bucket, origin):
    name = "lv.bin"
    v1, v2 = b"version-one" * 1000, b"version-two!" * 1200
    put_origin(origin, name, v1)
    assert requests.get(obj_url(cluster.url, ht_bucket, name), timeout=TIMEOUT).content == v1
    time.sleep(1.1)  # nginx's ETag holds the mtime in seconds
    put_origin(origin, name, v2)
    assert requests.get(obj_url(cluster.url, ht_bucket, name), timeout=TIMEOUT).content == v1  # cached
    r = requests.get(obj_url(cluster.url, ht_bucket, name, extra="&latest-ver=true"), timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == v2
    assert access_count(origin, name, 2) == 2
    r = requests.get(obj_url(cluster.url, ht_bucket, name, extra="&latest-ver=true"), timeout=TIMEOUT)
    assert r.content == v2 and access_count(origin, name, 2) == 2  # unchanged: HEAD only
    (origin.root / name).unlink()
    r = requests.get(obj_url(cluster.url, ht_bucket, name, extra="&latest-ver=true"), timeout=TIMEOUT)
    assert_json_error(r, 404)
    assert cached_files(cluster, "ht", ht_bucket, name) == []


# ---- faults: the client never gets a complete-looking body, nothing is cached ----
def assert_nothing_cached(cluster, bucket, name):
    assert cached_files(cluster, "ht", bucket, name) == []
    assert cluster.work_files() == []


def test_origin_500(cluster, faulty):
    r = requests.get(obj_url(cluster.url, faulty, "e500a"), timeout=TIMEOUT)
    assert r.status_code >= 500
    assert_json_error(r, r.status_code)
    assert_nothing_cached(cluster, faulty, "e500a")


def test_origin_down(cluster):
    b = unique("hd")
    create_remote(cluster.url, b, "ht", {"endpoint": f"http://127.0.0.1:{peers.free_port()}/x",
                                         "connect_timeout_ms": 2000})
    r = requests.get(obj_url(cluster.url, b, "o"), timeout=TIMEOUT)
    assert r.status_code in (502, 503, 504), r.text
    assert_json_error(r, r.status_code)
    assert_nothing_cached(cluster, b, "o")
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def cut_response(url):
    """GETs url; returns True when the body was visibly cut (error or fewer bytes than declared)."""
    try:
        r = requests.get(url, timeout=TIMEOUT)
    except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError):
        return True
    if r.status_code != 200:
        return True
    declared = r.headers.get("Content-Length")
    return declared is not None and len(r.content) < int(declared)


def test_origin_closes_mid_body(cluster, faulty):
    assert cut_response(obj_url(cluster.url, faulty, "half1"))
    assert_nothing_cached(cluster, faulty, "half1")
    # concurrent readers of the failing fetch all get cut responses, one origin request
    with ThreadPoolExecutor(4) as ex:
        cut = list(ex.map(cut_response, [obj_url(cluster.url, faulty, "half2")] * 4))
    assert all(cut)
    assert Faulty.hits.get("half2", 0) <= 4
    assert_nothing_cached(cluster, faulty, "half2")


def test_readers_of_a_failing_fetch_all_cut(cluster, faulty):
    # Four readers, all answered (headers) while the one fetch is still running, so all joined it;
    # then the origin cuts the body: each response must end visibly cut, after the origin's bytes only.
    n = 4
    Faulty.gate.clear()
    headers_in = threading.Semaphore(0)

    def one(_):
        with requests.get(obj_url(cluster.url, faulty, "gate1"), stream=True, timeout=120) as r:
            headers_in.release()
            if r.status_code != 200:
                return "status %d" % r.status_code
            declared = int(r.headers["Content-Length"])
            got = bytearray()
            try:
                for chunk in r.iter_content(1 << 16):
                    got += chunk
            except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError,
                    urllib3.exceptions.HTTPError):
                pass
            if got.strip(b"g"):
                return "bytes that are not the origin's"
            return "cut" if len(got) < declared else "whole %d of %d bytes" % (len(got), declared)

    try:
        with ThreadPoolExecutor(n) as ex:
            futs = [ex.submit(one, i) for i in range(n)]
            for _ in range(n):
                assert headers_in.acquire(timeout=60), "a reader got no response head"
            assert Faulty.hits.get("gate1", 0) == 1, "the readers did not share one fetch"
            Faulty.gate.set()
            results = [f.result() for f in futs]
    finally:
        Faulty.gate.set()
    assert results == ["cut"] * n, results
    assert Faulty.hits.get("gate1", 0) == 1
    assert_nothing_cached(cluster, faulty, "gate1")


def test_origin_without_length(cluster, faulty):
    # No Content-Length from the origin: the cold response is chunked (sent from the work file
    # chunk by chunk), ends properly, and the object is cached whole.
    url = obj_url(cluster.url, faulty, "nolen1")
    r = requests.get(url, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.headers.get("Transfer-Encoding") == "chunked"
    assert r.content == NOLEN_BODY
    assert len(cached_files(cluster, "ht", faulty, "nolen1")) == 1
    r = requests.get(url, timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == NOLEN_BODY
    assert Faulty.hits.get("nolen1", 0) == 1


def test_origin_stall(cluster, faulty):
    t0 = time.monotonic()
    assert cut_response(obj_url(cluster.url, faulty, "stall1"))
    assert time.monotonic() - t0 < STALL_MS / 1000 * 4, "the stall timeout did not fire"
    assert_nothing_cached(cluster, faulty, "stall1")


# ---- aws through s3rver (SigV4, path-style, custom endpoint) ----
def test_aws_cold_get_and_latest_ver(cluster):
    import boto3
    from botocore.config import Config
    peers.ensure_installed()
    d = peers.scratch_dir()
    p = peers.start_s3rver(d)
    try:
        s3 = boto3.client("s3", endpoint_url=p.url, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                          region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
        data = os.urandom(2 * 1024 * 1024 + 3)
        s3.put_object(Bucket=p.bucket, Key="k/one.bin", Body=data)
        b = unique("aw")
        create_remote(cluster.url, b, "aws", {"bucket": p.bucket, "endpoint": p.url, "addressing": "path",
                                              "region": "us-east-1", "access_key": "S3RVER",
                                              "secret_key": "S3RVER"})
        r = requests.get(obj_url(cluster.url, b, "k/one.bin", provider="aws"), timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        assert r.content == data
        assert len(cached_files(cluster, "aws", b, "k/one.bin")) == 1
        # The provider alias the proxy accepts must work at the target the 307 leads to.
        r = requests.get(obj_url(cluster.url, b, "k/one.bin", provider="s3"), timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        assert r.content == data
        s3.put_object(Bucket=p.bucket, Key="k/one.bin", Body=b"changed")
        assert requests.get(obj_url(cluster.url, b, "k/one.bin", provider="aws"), timeout=TIMEOUT).content == data
        r = requests.get(obj_url(cluster.url, b, "k/one.bin", provider="aws", extra="&latest-ver=true"),
                         timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == b"changed"
        s3.delete_object(Bucket=p.bucket, Key="k/one.bin")
        r = requests.get(obj_url(cluster.url, b, "k/one.bin", provider="aws", extra="&latest-ver=true"),
                         timeout=TIMEOUT)
        assert_json_error(r, 404)
        assert cached_files(cluster, "aws", b, "k/one.bin") == []
        r = requests.get(obj_url(cluster.url, b, "nope", provider="aws"), timeout=TIMEOUT)
        assert_json_error(r, 404)
        assert requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=aws", timeout=TIMEOUT).status_code == 200
    finally:
        p.stop()


def test_first_byte_before_origin_finishes(cluster, faulty):
    # The origin sends 64 KiB and then stalls: the client must see those bytes while it stalls.
    t0 = time.monotonic()
    with requests.get(obj_url(cluster.url, faulty, "stall2"), stream=True, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        first = r.raw.read(1000)
        assert len(first) == 1000 and first == b"s" * 1000
        assert time.monotonic() - t0 < STALL_MS / 1000, "first bytes only came after the stall"
        try:
            rest = r.raw.read()
            assert len(first) + len(rest) < int(r.headers["Content-Length"])
        except (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, ConnectionError):
            pass  # the cut shows as an error: fine
    assert_nothing_cached(cluster, faulty, "stall2")
