# SPDX-License-Identifier: Apache-2.0
# GETs of objects not in the page cache: read through io_uring, so other GETs of the same loop thread go on meanwhile.
"""
The target runs one loop thread, so every connection shares it. Object files are evicted from the page
cache (fsync, then POSIX_FADV_DONTNEED, checked with cachestat(2)) before the GETs that must read them
from the disk. The ordering test slows the disk down for the target alone with a block I/O throttle
(cgroup v1 blkio.throttle.read_bps_device, or v2 io.max) and needs root and that controller; without
them it skips, saying which is missing.
"""
import ctypes
import hashlib
import io
import os
import re
import socket
import subprocess
import tarfile
import threading
import time
import uuid

import pytest

from conftest import module_cluster
from ftutil import Api, RawConn, TIMEOUT, raw_request, session

KIB, MIB = 1024, 1024 * 1024
BIG = 32 * MIB
THROTTLE = 4 * MIB  # bytes/s the target may read while throttled: BIG takes 8 s to read
SMALL_GETS = 20

pcluster = module_cluster("pagecache", "it evicts object files and throttles the target's disk reads",
                          targets=1, mountpaths=1, target_args=["--loop_threads", "1"])
tcluster = module_cluster("pagecache-tls", "it evicts object files of a TLS target",
                          targets=1, mountpaths=1, target_args=["--loop_threads", "1"], tls=True)

_libc = ctypes.CDLL(None, use_errno=True)


class _CacheStat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted",
                                                "nr_recently_evicted")]


def cached_pages(path):
    """Pages of path in the page cache (cachestat(2)), or None where the kernel lacks it."""
    rng = (ctypes.c_uint64 * 2)(0, 0)  # offset 0, length 0: the whole file
    cs = _CacheStat()
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.syscall(451, fd, ctypes.byref(rng), ctypes.byref(cs), 0) != 0:
            return None
        return cs.nr_cache
    finally:
        os.close(fd)


def evict(path):
    """Drops path's pages from the page cache (written back first, so they can go). Pages still under a
    read-ahead of the previous GET cannot go until it completes: tries again a few times."""
    for attempt in range(10):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        n = cached_pages(path)
        if n is None or n <= 2:
            return
        time.sleep(0.05 * (attempt + 1))
    raise AssertionError("%s kept %d pages in the page cache after eviction" % (path, n))


def obj_file(h, bucket, name):
    path = os.path.join(h.mountpaths(0)[0], "ais", bucket, name)
    assert os.path.isfile(path), path
    return path


def target_url(h):
    return h.c.targets[0].public_url


@pytest.fixture(scope="module")
def objs(pcluster):
    a = Api(pcluster.url)
    b = "pc-" + uuid.uuid4().hex[:8]
    a.create_bucket(b)
    big = os.urandom(BIG)
    mid = os.urandom(3 * MIB + 4097)
    small = os.urandom(16 * KIB)
    a.put(b, "big", big)
    a.put(b, "mid", mid)
    a.put(b, "small", small)
    yield b, {"big": big, "mid": mid, "small": small}
    a.destroy_bucket(b, expect=None)


# ---- a slow disk for the target alone ----
def _blkdev(path):
    """"major:minor" of the whole disk holding path (a throttle is set on a disk, not a partition)."""
    st = os.stat(path)
    dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    sysdir = "/sys/dev/block/" + dev
    if not os.path.isdir(sysdir):
        return None
    if os.path.exists(os.path.join(sysdir, "partition")):
        with open(os.path.join(sysdir, "..", "dev")) as f:
            dev = f.read().strip()
    return dev


class Throttle:
    """A cgroup that limits the disk reads of the processes put in it (v1 blkio or v2 io)."""

    def __init__(self, path, rate):
        self.dev = _blkdev(path)
        self.dir = None
        self.root = None
        self.why = None
        if os.geteuid() != 0:
            self.why = "needs root to set a block I/O throttle"
        elif self.dev is None:
            self.why = "the mountpath's device is not a block device (%s)" % path
        elif os.path.isfile("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device"):
            self.root = "/sys/fs/cgroup/blkio"
            self.file, self.line = "blkio.throttle.read_bps_device", "%s %d" % (self.dev, rate)
        elif os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                if "io" not in f.read().split():
                    self.why = "cgroup v2 without the io controller"
            self.root = "/sys/fs/cgroup"
            self.file, self.line = "io.max", "%s rbps=%d" % (self.dev, rate)
        else:
            self.why = "no block I/O cgroup controller mounted"

    def start(self, pid):
        self.dir = os.path.join(self.root, "ft-pagecache-%d" % os.getpid())
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, self.file), "w") as f:
            f.write(self.line)
        with open(os.path.join(self.dir, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def stop(self, pid):
        if self.dir is None:
            return
        try:
            with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            pass  # the process is gone
        os.rmdir(self.dir)
        self.dir = None


def _get_stream(url, path, out):
    """GET path, reading the body as it comes: out["got"] counts bytes; out["body"], out["status"] at the end."""
    try:
        with RawConn(url, timeout=120) as c:
            c.send(raw_request("GET", path, "%s:%d" % (c.host, c.port)))
            head = c._read_until(b"\r\n\r\n")
            out["status"] = int(head.split(b" ", 2)[1])
            clen = int([ln.split(b":", 1)[1] for ln in head.split(b"\r\n")
                        if ln.lower().startswith(b"content-length:")][0])
            body = bytearray(c.buf)
            c.buf.clear()
            out["got"] = len(body)
            while len(body) < clen:
                chunk = c.sock.recv(256 * KIB)
                if not chunk:
                    break
                body += chunk
                out["got"] = len(body)
            out["body"] = bytes(body)
    except Exception as e:  # reported by the test
        out["error"] = repr(e)
    finally:
        out["done"] = True


def test_cached_gets_go_on_while_an_uncached_read_waits_for_the_disk(pcluster, objs):
    """A 32 MiB object read from a disk throttled to 4 MiB/s takes 8 s; the target's only loop thread
    serves 20 GETs of a cached object on another connection before that GET is over (ordering, not
    timing: a loop thread stuck in sendfile(2) on the disk would serve them only between its reads)."""
    b, data = objs
    url = target_url(pcluster)
    s = session("")
    assert s.get(url + "/v1/objects/%s/small" % b, timeout=TIMEOUT).content == data["small"]  # cached
    path = obj_file(pcluster, b, "big")
    thr = Throttle(path, THROTTLE)
    if thr.why:
        pytest.skip(thr.why)
    pid = pcluster.c.targets[0].pid
    evict(path)
    out = {"got": 0}
    t = threading.Thread(target=_get_stream, args=(url, "/v1/objects/%s/big" % b, out), daemon=True)
    thr.start(pid)
    try:
        t.start()
        deadline = threading.Event()
        while out["got"] == 0 and not out.get("done"):  # the big GET is under way (its first bytes are here)
            deadline.wait(0.01)
        assert not out.get("done"), "the big GET ended before any byte: %r" % out
        for i in range(SMALL_GETS):
            r = s.get(url + "/v1/objects/%s/small" % b, timeout=TIMEOUT)
            assert r.status_code == 200 and r.content == data["small"], i
        got = out["got"]
        assert got < BIG and not out.get("done"), (
            "the %d cached GETs finished only after the uncached GET had %d of its %d bytes" % (SMALL_GETS, got, BIG))
        t.join(120)
    finally:
        thr.stop(pid)
        t.join(120)
    assert "error" not in out, out["error"]
    assert out["status"] == 200
    assert hashlib.sha256(out["body"]).digest() == hashlib.sha256(data["big"]).digest()


SLOW = 8 * KIB  # bytes/s of the small-object test's throttle: a 16 KiB read takes about 2 s


def throttled_bucket(pcluster, prefix, name, size, rate):
    """A new bucket holding a 16 KiB object "warm", read once (cached), and name (size random bytes), whose
    mountpath's disk is to be throttled to rate bytes/s; skips the test where throttling is impossible here.
    Returns (api, bucket, target URL, session, warm bytes, name's bytes, name's file, Throttle)."""
    a = Api(pcluster.url)
    b = prefix + uuid.uuid4().hex[:8]
    a.create_bucket(b)
    warm, data = os.urandom(16 * KIB), os.urandom(size)
    a.put(b, "warm", warm)
    a.put(b, name, data)
    url = target_url(pcluster)
    s = session("")
    assert s.get(url + "/v1/objects/%s/warm" % b, timeout=TIMEOUT).content == warm
    path = obj_file(pcluster, b, name)
    thr = Throttle(path, rate)
    if thr.why:
        a.destroy_bucket(b, expect=None)
        pytest.skip(thr.why)
    return a, b, url, s, warm, data, path, thr


def test_second_get_of_a_small_object_being_read_does_not_wait_on_the_loop(pcluster):
    """An evicted 16 KiB object is being read for a first GET (its pages are in the page cache, locked
    until the slow disk delivers them); a second GET of it arrives. cachestat(2) counts those pages, so
    sendfile(2) would wait for the disk on the only loop thread: GETs of a cached object on a third
    connection must all be served while both GETs of the evicted one still wait (ordering, not timing)."""
    a, b, url, s, warm, cold, path, thr = throttled_bucket(pcluster, "pcw-", "cold", 16 * KIB, SLOW)
    pid = pcluster.c.targets[0].pid
    evict(path)
    assert cached_pages(path) in (0, None)
    outs = [{"got": 0}, {"got": 0}]
    ths = [threading.Thread(target=_get_stream, args=(url, "/v1/objects/%s/cold" % b, o), daemon=True)
           for o in outs]
    thr.start(pid)
    try:
        ths[0].start()
        wait = threading.Event()
        for _ in range(500):  # the first GET's read is under way: its pages are in the cache, not yet read
            if cached_pages(path) or outs[0].get("done"):
                break
            wait.wait(0.01)
        assert cached_pages(path) and not outs[0].get("done"), (cached_pages(path), outs[0])
        ths[1].start()
        wait.wait(0.2)  # the second GET reaches the loop thread
        for i in range(SMALL_GETS):
            r = s.get(url + "/v1/objects/%s/warm" % b, timeout=TIMEOUT)
            assert r.status_code == 200 and r.content == warm, i
        done = [o.get("done", False) for o in outs]
        assert done == [False, False], (
            "the cached GETs were served only after the evicted object's read: done %r" % done)
        for t in ths:
            t.join(60)
    finally:
        thr.stop(pid)
        for t in ths:
            t.join(60)
    for o in outs:
        assert "error" not in o, o["error"]
        assert o["status"] == 200 and o["body"] == cold
    a.destroy_bucket(b, expect=None)


def _batch(url, bucket, names, out):
    """GetBatch of names (followed from the proxy to the target): out["status"], out["body"], then out["done"]."""
    try:
        r = session("").post(url + "/v1/batch", json={"in": [{"bucket": bucket, "objname": n} for n in names]},
                             timeout=120)
        out["status"], out["body"] = r.status_code, r.content
    except Exception as e:  # reported by the test
        out["error"] = repr(e)
    finally:
        out["done"] = True


def test_stream_sendfile_of_an_evicted_object_waits_on_a_worker(pcluster):
    """GetBatch sends a large item with the worker streams' sendfile: the worker makes the range resident
    (waiting for a disk throttled to 1 MiB/s, 4 s for the item) before the loop sends it, so the only
    loop thread serves GETs of a cached object on another connection meanwhile (ordering, not timing)."""
    a, b, url, s, warm, item, path, thr = throttled_bucket(pcluster, "pcb-", "item", 4 * MIB, MIB)
    pid = pcluster.c.targets[0].pid
    evict(path)
    out = {}
    t = threading.Thread(target=_batch, args=(pcluster.url, b, ["item"], out), daemon=True)
    thr.start(pid)
    try:
        t.start()
        wait = threading.Event()
        for _ in range(500):  # the item's read is under way
            if cached_pages(path) or out.get("done"):
                break
            wait.wait(0.01)
        assert cached_pages(path) and not out.get("done"), (cached_pages(path), out)
        for i in range(SMALL_GETS):
            r = s.get(url + "/v1/objects/%s/warm" % b, timeout=TIMEOUT)
            assert r.status_code == 200 and r.content == warm, i
        assert not out.get("done"), "the cached GETs were served only after the batch's item was read"
        t.join(120)
    finally:
        thr.stop(pid)
        t.join(120)
    assert "error" not in out, out["error"]
    assert out["status"] == 200
    with tarfile.open(fileobj=io.BytesIO(out["body"])) as tf:
        assert tf.extractfile(tf.getmember("%s/item" % b)).read() == item
    a.destroy_bucket(b, expect=None)


RANGES = [(0, 1), (0, 4096), (4095, 2), (1 * MIB - 1, 2), (1 * MIB, 1 * MIB), (123, 2 * MIB + 5000),
          (3 * MIB, 4097), (3 * MIB + 4096, 1)]


@pytest.mark.parametrize("first,n", RANGES)
def test_range_of_an_evicted_object(pcluster, objs, first, n):
    b, data = objs
    evict(obj_file(pcluster, b, "mid"))
    r = session("").get(target_url(pcluster) + "/v1/objects/%s/mid" % b,
                        headers={"Range": "bytes=%d-%d" % (first, first + n - 1)}, timeout=TIMEOUT)
    assert r.status_code == 206
    assert r.content == data["mid"][first:first + n]


def test_whole_evicted_objects_and_a_partly_cached_one(pcluster, objs):
    b, data = objs
    s = session("")
    for name in ("mid", "small", "big"):
        evict(obj_file(pcluster, b, name))
        r = s.get(target_url(pcluster) + "/v1/objects/%s/%s" % (b, name), timeout=60)
        assert r.status_code == 200 and r.content == data[name], name
    # pages cached here and there: the first and a middle MiB read, the rest not
    path = obj_file(pcluster, b, "big")
    evict(path)
    with open(path, "rb") as f:
        f.read(MIB)
        f.seek(9 * MIB + 100)
        f.read(MIB)
    r = s.get(target_url(pcluster) + "/v1/objects/%s/big" % b, timeout=60)
    assert r.status_code == 200 and r.content == data["big"]


def _paused_get(url, path):
    """A GET whose client reads only the head and a little of the body; returns (conn, Content-Length, body so far)."""
    c = RawConn(url, timeout=30)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * KIB)
    c.send(raw_request("GET", path, "%s:%d" % (c.host, c.port)))
    head = c._read_until(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    clen = int([ln.split(b":", 1)[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")][0])
    return c, clen, c._read_exact(1000)


def test_truncated_while_sending_cuts_the_connection(pcluster):
    """The object file shrinks in the middle of an uncached GET: the client gets only true bytes and a
    closed connection, never a body that looks whole."""
    a = Api(pcluster.url)
    b = "pct-" + uuid.uuid4().hex[:8]
    a.create_bucket(b)
    data = os.urandom(BIG)
    a.put(b, "t", data)
    path = obj_file(pcluster, b, "t")
    evict(path)
    c, clen, got = _paused_get(target_url(pcluster), "/v1/objects/%s/t" % b)
    try:
        assert clen == BIG
        cut = BIG // 2
        os.truncate(path, cut)  # the object's own file, as damage would do it
        rest = c.read_to_close()
        body = got + rest
        assert len(body) < clen, "a truncated file was served as a whole body"
        assert body == data[:len(body)], "bytes that are not the object's"
        assert len(body) <= cut  # nothing past the new end of the file
    finally:
        c.close()
    a.destroy_bucket(b, expect=None)


def test_replaced_while_sending_serves_the_old_object_whole(pcluster):
    """A PUT that replaces the object during an uncached GET: that GET sends the old bytes, all of them."""
    a = Api(pcluster.url)
    b = "pcr-" + uuid.uuid4().hex[:8]
    a.create_bucket(b)
    old, new = os.urandom(BIG), os.urandom(BIG)
    a.put(b, "r", old)
    evict(obj_file(pcluster, b, "r"))
    c, clen, got = _paused_get(target_url(pcluster), "/v1/objects/%s/r" % b)
    try:
        a.put(b, "r", new)
        body = got + c._read_exact(clen - len(got))
        assert hashlib.sha256(body).digest() == hashlib.sha256(old).digest()
    finally:
        c.close()
    r = session("").get(target_url(pcluster) + "/v1/objects/%s/r" % b, timeout=60)
    assert r.content == new
    a.destroy_bucket(b, expect=None)


def _server_sndbuf(port, client_port):
    """The send buffer (ss's skmem tb, the socket's sk_sndbuf) of the target's end of a connection."""
    out = subprocess.run(["ss", "-tmnH", "state", "established",
                          "( sport = :%d and dport = :%d )" % (port, client_port)],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"\btb(\d+)", out)
    assert m, "no socket of the target for port %d in: %r" % (client_port, out)
    return int(m.group(1))


def _wait_sndbuf(port, client_port, want):
    seen = None
    for _ in range(100):
        seen = _server_sndbuf(port, client_port)
        if seen == want:
            return
        time.sleep(0.05)
    raise AssertionError("send buffer %s, expected %d" % (seen, want))


def _sysctl(name, field=0):
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return int(f.read().split()[field])


def test_send_buffer_is_small_while_a_body_comes_from_disk_then_given_back(pcluster, objs):
    """The send buffer of a connection is held small while its body goes through the pipe, and set to
    tcp_wmem's maximum at the end of that request; the bytes are whole and the connection serves on.
    Where net.core.wmem_max cannot give that maximum back, the buffer is never held small."""
    b, data = objs
    evict(obj_file(pcluster, b, "big"))
    wmem_max, tcp_max = _sysctl("net.core.wmem_max"), _sysctl("net.ipv4.tcp_wmem", 2)
    held = 2 * wmem_max >= tcp_max
    small = 2 * min(256 * KIB, wmem_max)  # the kernel doubles SO_SNDBUF and caps it at wmem_max
    c, clen, got = _paused_get(target_url(pcluster), "/v1/objects/%s/big" % b)
    try:
        cport = c.sock.getsockname()[1]
        if held:
            _wait_sndbuf(c.port, cport, small)
        else:
            time.sleep(0.5)
            assert _server_sndbuf(c.port, cport) != small, "held small where it cannot be given back"
        body = got + c._read_exact(clen - len(got))
        assert body == data["big"]
        if held:
            _wait_sndbuf(c.port, cport, 2 * min(tcp_max // 2, wmem_max))
        c.send(raw_request("GET", "/v1/objects/%s/small" % b, "%s:%d" % (c.host, c.port)))
        head = c._read_until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert c._read_exact(len(data["small"])) == data["small"]
    finally:
        c.close()


def test_tls_get_and_range_of_an_evicted_object(tcluster):
    """Over TLS (kernel TLS or OpenSSL's own records) the bytes of an evicted object are read in the same way."""
    s = session("")
    s.verify = tcluster.c.ca_file
    b = "pcs-" + uuid.uuid4().hex[:8]
    r = s.post(tcluster.url + "/v1/buckets/" + b, json={"action": "create-bck"}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    data = os.urandom(5 * MIB + 333)
    loc = s.put(tcluster.url + "/v1/objects/%s/o" % b, data=b"", allow_redirects=False, timeout=TIMEOUT)
    assert loc.status_code == 307
    assert s.put(loc.headers["Location"], data=data, timeout=TIMEOUT).status_code == 200
    path = obj_file(tcluster, b, "o")
    url = target_url(tcluster) + "/v1/objects/%s/o" % b
    evict(path)
    r = s.get(url, timeout=60)
    assert r.status_code == 200 and r.content == data
    evict(path)
    r = s.get(url, headers={"Range": "bytes=%d-%d" % (MIB - 10, 4 * MIB + 10)}, timeout=60)
    assert r.status_code == 206 and r.content == data[MIB - 10:4 * MIB + 11]
