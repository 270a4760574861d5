# SPDX-License-Identifier: Apache-2.0
# Remote buckets: a cached copy that vanished or is damaged is fetched again; GetBatch items fetched from the backend.
import io
import os
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

import peers
from ftutil import TIMEOUT, assert_json_error, create_remote, obj_url, unique
from test_coldget import access_count, put_origin

origin = peers.nginx_origin_fixture()


@pytest.fixture(scope="module")
def bucket(cluster, origin):
    b = unique("rf")
    create_remote(cluster.url, b, "ht", {"endpoint": origin.url})
    yield b
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def cached_file(cluster, bucket, name):
    found = [os.path.join(mp, "ht", bucket, name) for mp in cluster.all_mountpaths()
             if os.path.exists(os.path.join(mp, "ht", bucket, name))]
    assert len(found) == 1, found
    return found[0]


def get(cluster, bucket, name, **kw):
    return requests.get(obj_url(cluster.url, bucket, name, **kw), timeout=TIMEOUT)


def test_damaged_cached_copy_fetched_again(cluster, bucket, origin):
    """A cached copy cut short on disk (its size no longer its metadata's) is not served and not a 500: the backend
    has the object, so the GET fetches it again and serves the backend's bytes."""
    name = "dmg/cut.bin"
    data = os.urandom(300001)
    put_origin(origin, name, data)
    assert get(cluster, bucket, name).content == data
    path = cached_file(cluster, bucket, name)
    with open(path, "r+b") as f:
        f.truncate(1000)
    r = get(cluster, bucket, name)
    assert r.status_code == 200, r.text
    assert r.content == data
    assert os.path.getsize(cached_file(cluster, bucket, name)) == len(data)
    assert get(cluster, bucket, name).content == data
    assert cluster.work_files() == []


def test_damaged_copy_gone_from_the_backend_is_404(cluster, bucket, origin):
    """Damaged here and deleted from the backend: 404 (the backend's answer), the damaged copy not served."""
    name = "dmg/gone.bin"
    data = os.urandom(5000)
    put_origin(origin, name, data)
    assert get(cluster, bucket, name).content == data
    with open(cached_file(cluster, bucket, name), "r+b") as f:
        f.truncate(10)
    (origin.root / name).unlink()
    assert_json_error(get(cluster, bucket, name), 404)
    assert cluster.work_files() == []


def reads_while_evicted(cluster, bucket, name, read):
    """Runs read(i) -> [bad answers] on 4 threads while another client evicts name's cached copy (a pause of 1 ms
    between evictions: a busy cache, not one evicting after every fetch); returns the bad answers and the evictions."""
    stop = threading.Event()
    evictions = [0]

    def evict():
        url = obj_url(cluster.url, bucket, name, extra="&evict=true")
        s = requests.Session()
        while not stop.is_set():
            r = s.delete(url, timeout=TIMEOUT)
            assert r.status_code in (200, 404), r.text
            evictions[0] += r.status_code == 200
            time.sleep(0.001)

    ev = threading.Thread(target=evict)
    ev.start()
    try:
        with ThreadPoolExecutor(4) as ex:
            bad = [b for lst in ex.map(read, range(4)) for b in lst]
    finally:
        stop.set()
        ev.join()
    return bad, evictions[0]


def test_evicted_while_read(cluster, bucket, origin):
    """GETs (whole, ranged, HEAD) of a cached object while another client evicts it again and again: each one is
    served from the cache or fetched again, never a 404."""
    name = "race/obj.bin"
    data = os.urandom(40000)
    put_origin(origin, name, data)
    assert get(cluster, bucket, name).content == data

    def read(i):
        s = requests.Session()
        bad = []
        for k in range(150):
            if k % 3 == 0:
                r = s.head(obj_url(cluster.url, bucket, name), allow_redirects=True, timeout=TIMEOUT)
                ok = r.status_code == 200 and r.headers.get("Content-Length") == str(len(data))
            elif k % 3 == 1:
                r = s.get(obj_url(cluster.url, bucket, name), headers={"Range": "bytes=10-19"}, timeout=TIMEOUT)
                ok = r.status_code == 206 and r.content == data[10:20]
            else:
                r = s.get(obj_url(cluster.url, bucket, name), timeout=TIMEOUT)
                ok = r.status_code == 200 and r.content == data
            if not ok:
                bad.append((r.status_code, r.text[:200]))
        return bad

    bad, evictions = reads_while_evicted(cluster, bucket, name, read)
    assert bad == [], bad[:5]
    assert evictions > 10


def make_tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for n, d in members.items():
            info = tarfile.TarInfo(n)
            info.size = len(d)
            t.addfile(info, io.BytesIO(d))
    return buf.getvalue()


def test_shard_member_evicted_while_read(cluster, bucket, origin):
    """Member reads (?archpath=) of a cached remote shard while it is evicted again and again: never a 404."""
    members = {f"s/{i:03d}.cls": os.urandom(100 + i) for i in range(20)}
    name = "race/shard.tar"
    put_origin(origin, name, make_tar(members))
    assert get(cluster, bucket, name, extra="&archpath=s/000.cls").content == members["s/000.cls"]

    def read(i):
        s = requests.Session()
        bad = []
        for k in range(250):
            m = f"s/{(i * 7 + k) % 20:03d}.cls"
            r = s.get(obj_url(cluster.url, bucket, name, extra=f"&archpath={m}"), timeout=TIMEOUT)
            if r.status_code != 200 or r.content != members[m]:
                bad.append((m, r.status_code, r.text[:200]))
        return bad

    bad, evictions = reads_while_evicted(cluster, bucket, name, read)
    assert bad == [], bad[:5]
    assert evictions > 10


def batch(cluster, body):
    return requests.post(cluster.url + "/v1/batch", json=body, timeout=TIMEOUT)


def tar_members(body):
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def test_batch_fetches_remote_items(cluster, bucket, origin):
    """GetBatch over a remote bucket whose objects are not cached: each item is fetched from the backend (once),
    kept, and answered in order, with a range and a member of a shard among them."""
    objs = {f"gb/{i:02d}.bin": os.urandom(1000 + 977 * i) for i in range(12)}
    for n, d in objs.items():
        put_origin(origin, n, d)
    shard = {"a.jpg": os.urandom(3000), "a.cls": b"7"}
    put_origin(origin, "gb/shard.tar", make_tar(shard))
    names = sorted(objs)
    items = [{"bucket": bucket, "provider": "ht", "objname": n} for n in names]
    items.append({"bucket": bucket, "provider": "ht", "objname": names[3], "start": 5, "length": 10})
    items.append({"bucket": bucket, "provider": "ht", "objname": "gb/shard.tar", "archpath": "a.jpg"})
    r = batch(cluster, {"in": items})
    assert r.status_code == 200, r.text
    got = tar_members(r.content)
    want = [(f"{bucket}/{n}", objs[n]) for n in names]
    want.append((f"{bucket}/{names[3]}", objs[names[3]][5:15]))
    want.append((f"{bucket}/gb/shard.tar/a.jpg", shard["a.jpg"]))
    assert [n for n, _ in got] == [n for n, _ in want]
    assert got == want
    for n in names:
        assert access_count(origin, n) == 1, n
    # warm now: served from the cache, the origin not asked again
    r = batch(cluster, {"in": items[:4]})
    assert r.status_code == 200 and tar_members(r.content) == want[:4]
    for n in names[:4]:
        assert access_count(origin, n) == 1, n


def test_batch_remote_item_missing(cluster, bucket, origin):
    """An item the backend does not have: 404 for the batch, or an empty __404__/ member with continue_on_error."""
    put_origin(origin, "gm/here.bin", b"here")
    items = [{"bucket": bucket, "provider": "ht", "objname": "gm/here.bin"},
             {"bucket": bucket, "provider": "ht", "objname": "gm/absent.bin"}]
    assert_json_error(batch(cluster, {"in": items}), 404)
    r = batch(cluster, {"in": items, "continue_on_error": True})
    assert r.status_code == 200, r.text
    assert tar_members(r.content) == [(f"{bucket}/gm/here.bin", b"here"),
                                      (f"__404__/{bucket}/gm/absent.bin", b"")]


def test_batch_remote_backend_down(cluster):
    """The backend cannot be reached: the batch fails with a 5xx JSON error naming the item; nothing is kept."""
    b = unique("rfd")
    create_remote(cluster.url, b, "ht", {"endpoint": f"http://127.0.0.1:{peers.free_port()}/x",
                                         "connect_timeout_ms": 2000})
    try:
        r = batch(cluster, {"in": [{"bucket": b, "provider": "ht", "objname": "o1"}]})
        assert r.status_code in (502, 503, 504), r.text
        assert_json_error(r, r.status_code)
        assert "o1" in r.json()["message"]
        assert cluster.work_files() == []
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def test_etl_get_of_remote_objects(cluster, bucket, origin):
    """An inline transform of a remote object not cached fetches it first; one the backend lacks is 404, not 502."""
    etl = unique("up")
    r = requests.post(cluster.url + "/v1/etl", json={"name": etl, "command": ["tr", "a-z", "A-Z"]}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    try:
        put_origin(origin, "etl/low.txt", b"lower case")
        r = get(cluster, bucket, "etl/low.txt", extra=f"&etl={etl}")
        assert r.status_code == 200 and r.content == b"LOWER CASE", r.text
        assert_json_error(get(cluster, bucket, "etl/absent.txt", extra=f"&etl={etl}"), 404)
    finally:
        requests.delete(cluster.url + "/v1/etl/" + etl, timeout=TIMEOUT)


class _SlowOrigin(BaseHTTPRequestHandler):
    """An origin whose every GET takes DELAY s; it records the most GETs it served at once."""
    protocol_version = "HTTP/1.1"
    DELAY = 0.4
    lock = threading.Lock()
    now = 0
    most = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        cls = type(self)
        with cls.lock:
            cls.now += 1
            cls.most = max(cls.most, cls.now)
        try:
            time.sleep(cls.DELAY)
            body = self.path.encode() * 50
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        finally:
            with cls.lock:
                cls.now -= 1

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.path.encode() * 50)))
        self.end_headers()


def test_batch_fetches_cold_items_many_at_once(make_cluster):
    """A batch of 40 uncached items of a slow origin, all on one target: the owner fetches more of them at once than
    it prepares items (1 sender + 3 readers), and every member is the origin's bytes."""
    c = make_cluster(targets=1, mountpaths=1)
    srv = ThreadingHTTPServer(("127.0.0.1", peers.free_port()), _SlowOrigin)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        b = unique("rfs")
        create_remote(c.url, b, "ht", {"endpoint": f"http://127.0.0.1:{srv.server_address[1]}/o"})
        names = [f"s/{i:02d}" for i in range(40)]
        r = batch(c, {"in": [{"bucket": b, "provider": "ht", "objname": n} for n in names]})
        assert r.status_code == 200, r.text
        assert tar_members(r.content) == [(f"{b}/{n}", f"/o/{n}".encode() * 50) for n in names]
        assert _SlowOrigin.most > 4, _SlowOrigin.most
    finally:
        srv.shutdown()
        srv.server_close()
