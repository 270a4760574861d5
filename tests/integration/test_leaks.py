# SPDX-License-Identifier: Apache-2.0
# Rounds of mixed traffic, failure paths included: the daemons' open fds and threads settle, no work file stays behind.
"""
Every round sends the same mix (native PUT/GET/HEAD/DELETE, ranges, 404s, PUTs cut mid-body, clients leaving
mid-GET, GetBatch with missing items and with clients leaving mid-stream, archpath reads, S3 through boto3 with an
aborted multipart upload, malformed and oversized request heads, cold GETs from an ht origin that is stopped while
they run, copy and prefetch jobs with one aborted). After each round the test waits for the nodes to settle and
samples each one's open fds, threads and RSS from /proc.

What may grow after the first (warm-up) round is bounded by design: the open-file cache keeps at most
--open_file_cache files per loop thread, and it only ever holds the round's fixed set of objects, which the warm-up
already opened; libcurl keeps a bounded pool of connections to the other nodes and the origin; job and worker
threads come and go. So after warm-up a node's fd count may move by at most FD_SLACK (a few pooled connections
still closing) and its thread count by at most THREAD_SLACK, whatever the number of rounds: a leak of one fd per
cut request, with dozens of them a round, shows up at once. Its address space (VmSize) may grow by VM_SLACK: an
exited thread nobody joins keeps its 8 MiB stack mapped, and a round runs jobs of several threads each. RSS is
reported, not asserted (allocator caching; finished jobs' records are kept for --job_expiry_s).
FT_LEAK_ROUNDS and FT_LEAK_SCALE make longer runs for a manual soak.
"""
import io
import json
import os
import socket
import ssl
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from botocore.exceptions import ClientError

import peers
import s3util
from conftest import module_cluster
from ftutil import TIMEOUT, Api, create_remote, hostport, obj_url, raw_request, session, unique, wait_job

ROUNDS = int(os.environ.get("FT_LEAK_ROUNDS", "4"))
SCALE = int(os.environ.get("FT_LEAK_SCALE", "1"))
FD_SLACK = 8
THREAD_SLACK = 4
VM_SLACK = 128 << 10  # KiB: two of glibc's 64 MiB malloc arenas, which threads may still add after warm-up
SMALL = 20 * SCALE  # small objects per round
BIG = 4 << 20  # the object clients leave in the middle of

lcluster = module_cluster("leaks", "it reads the daemons' /proc entries", targets=2, mountpaths=2,
                          target_args=("--open_file_cache", "64"))


def _tcp_table():
    """{socket inode: (local "ip:port", remote "ip:port")} of every TCP socket on the machine."""
    out = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    p = line.split()
                    out[p[9]] = (p[1], p[2])
        except OSError:
            pass
    return out


def sample(h):
    """{node name: {"fds", "pooled", "threads", "rss"}} of every node. pooled counts the sockets of libcurl's
    per-thread handles: connections between two nodes of the cluster (either end) and the handles' socketpairs
    (AF_UNIX); fds counts every other open fd (files, clients' and origins' connections, listeners, ...)."""
    links = {}
    for n in h.c.nodes:
        fd_dir = "/proc/%d/fd" % n.pid
        links[n.name] = []
        for fd in os.listdir(fd_dir):
            try:
                links[n.name].append(os.readlink(os.path.join(fd_dir, fd)))
            except OSError:
                pass
    tcp = _tcp_table()
    ends = set()  # local addresses of every node's TCP sockets
    for ls in links.values():
        for link in ls:
            if link.startswith("socket:[") and link[8:-1] in tcp:
                ends.add(tcp[link[8:-1]][0])
    out = {}
    for n in h.c.nodes:
        fds = pooled = cached = 0
        other = []
        for link in links[n.name]:
            ino = link[8:-1] if link.startswith("socket:[") else None
            if ino is None:
                if any(link.startswith(mp + "/") and "/.work" not in link for mp in n.mountpaths):
                    cached += 1  # an object file the open-file cache keeps
                else:
                    fds += 1
                    other.append(link)
            elif ino in tcp:
                if tcp[ino][1] in ends:
                    pooled += 1
                else:
                    fds += 1
                    other.append("tcp %s -> %s" % tcp[ino])
            else:
                pooled += 1  # AF_UNIX: a libcurl handle's wakeup socketpair
        st = {}
        with open("/proc/%d/status" % n.pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.split()
        out[n.name] = {"fds": fds, "pooled": pooled, "threads": int(st["Threads"][0]), "rss": int(st["VmRSS"][0]),
                       "vm": int(st["VmSize"][0]),
                       "cached": cached, "other": sorted(other)}
    return out


def settle(h, timeout=5.0):
    """A sample once two in a row 0.3 s apart agree on fds and threads (or the last one after timeout)."""
    deadline = time.monotonic() + timeout
    last = sample(h)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        cur = sample(h)
        if all((cur[k]["fds"], cur[k]["threads"]) == (last[k]["fds"], last[k]["threads"]) for k in cur):
            return cur
        last = cur
    return last


# ---- raw client faults ----
CA = []  # the CA file of a TLS cluster


def _connect(url):
    s = socket.create_connection(hostport(url), timeout=TIMEOUT)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if url.startswith("https:"):
        s = ssl.create_default_context(cafile=CA[0]).wrap_socket(s, server_hostname=hostport(url)[0])
    return s


def _path(url):
    return url.split("/", 3)[3] if url.count("/") >= 3 else ""


def cut_put(url, host, size=1 << 20, sent=100 * 1024):
    """A PUT announcing size bytes that sends only sent of them, then closes."""
    with _connect(url) as s:
        s.sendall(raw_request("PUT", "/" + _path(url), host, [("Content-Length", str(size))]))
        s.sendall(b"x" * sent)


def cut_get(url, host, method="GET", body=b"", headers=(), keep=64 * 1024):
    """A request whose answer is read for keep bytes, then the connection is reset (SO_LINGER 0)."""
    s = _connect(url)
    try:
        s.sendall(raw_request(method, "/" + _path(url), host, list(headers), body))
        got = 0
        while got < keep:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += len(chunk)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    finally:
        s.close()


def bad_heads(url, host):
    """Malformed request heads, an oversized one and one left unfinished."""
    for raw in (b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
                b"GARBAGE\r\n\r\n",
                b"GET /v1/objects/a/b HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                b"GET /v1/objects/a/b HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (256 * 1024) + b"\r\n\r\n",
                b"GET /v1/objects/a/b HTTP/1.1\r\nHost: x\r\nX-Half: y"):
        with _connect(url) as s:
            try:
                s.sendall(raw)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(5)
                while s.recv(65536):
                    pass
            except OSError:
                pass


# ---- an origin that fails mid-body ----
class Faulty(BaseHTTPRequestHandler):
    """Promises 1 MiB; "cut*" names send 64 KiB and close, "stall*" names send 64 KiB and go quiet for a while."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        name = self.path.rsplit("/", 1)[-1]
        self.send_response(200)
        self.send_header("Content-Length", str(1 << 20))
        self.end_headers()
        try:
            self.wfile.write(b"f" * (64 * 1024))
            self.wfile.flush()
            if name.startswith("stall"):
                time.sleep(FAULTY_STALL_MS / 1000 * 2)
        except OSError:
            pass
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    do_HEAD = do_GET


FAULTY_STALL_MS = 400


# ---- fixtures ----
@pytest.fixture(scope="module")
def env(lcluster):
    peers.ensure_installed()
    api = Api(lcluster.url, session())
    b = unique("lk")
    api.create_bucket(b)
    names = ["o%03d" % i for i in range(SMALL)]
    big = os.urandom(BIG)
    api.put(b, "big", big)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for i in range(8):
            data = os.urandom(1000 + i)
            ti = tarfile.TarInfo("m/%d.bin" % i)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    api.put(b, "shard.tar", buf.getvalue())
    wd = peers.scratch_dir("ft-leaks-")
    srv = ThreadingHTTPServer(("127.0.0.1", peers.free_port()), Faulty)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    fb = unique("lkf")
    create_remote(lcluster.url, fb, "ht", {"endpoint": "http://127.0.0.1:%d/x" % srv.server_address[1],
                                           "stall_timeout_ms": FAULTY_STALL_MS})
    s3 = s3util.client(lcluster)
    s3b = s3util.bucket_name("lk")
    s3.create_bucket(Bucket=s3b)
    yield {"api": api, "bucket": b, "names": names, "big": big, "dir": wd, "s3": s3, "s3b": s3b, "faulty": fb}
    requests.delete("%s/v1/buckets/%s?provider=ht" % (lcluster.url, fb), timeout=TIMEOUT)
    srv.shutdown()
    srv.server_close()


def owner_host(api, bucket, name):
    loc = api.owner(bucket, name)
    return loc, "%s:%d" % hostport(loc)


# ---- one round ----
def native(env, rnd):
    api, b, names = env["api"], env["bucket"], env["names"]
    for n in names:
        api.put(b, n, n.encode() * (50 + rnd))
    for n in names:
        assert api.get(b, n).status_code == 200
        assert api.head(b, n).status_code == 200
        r = api.get(b, n, headers={"Range": "bytes=2-9"})
        assert r.status_code == 206 and len(r.content) == 8
        assert api.get(b, n + "-nope").status_code == 404
        assert api.head(b, n + "-nope").status_code == 404
    for i in range(5 * SCALE):
        n = "tmp%d-%d" % (rnd, i)
        api.put(b, n, b"t" * 3000)
        assert api.delete(b, n).status_code == 200
    assert api.delete(b, "never-there").status_code == 404
    for n in names + names:  # warm GETs the open-file cache keeps
        assert api.get(b, n).status_code == 200


def faults(env, rnd, proxy_url):
    api, b = env["api"], env["bucket"]
    phost = "%s:%d" % hostport(proxy_url)
    for i in range(10 * SCALE):
        loc, host = owner_host(api, b, "cut%d" % i)
        cut_put(loc, host)
        cut_put(proxy_url + "/v1/objects/%s/cut%d" % (b, i), phost)
        loc, host = owner_host(api, b, "big")
        cut_get(loc, host)
        cut_get(loc, host, headers=[("Range", "bytes=1000-3000000")])
        loc, host = owner_host(api, b, "shard.tar")
        cut_get(loc + "?archpath=m/1.bin", host, keep=1)
        bad_heads(proxy_url, phost)
        bad_heads(loc, host)
    for i in range(8):
        assert api.get(b, "shard.tar", params={"archpath": "m/%d.bin" % i}).status_code == 200
    assert api.get(b, "shard.tar", params={"archpath": "m/none"}).status_code == 404


def batch(env, lcluster, proxy_url):
    b, names = env["bucket"], env["names"]
    items = [{"bucket": b, "objname": n} for n in names[:10]] + [{"bucket": b, "objname": "big"}]
    gone = [{"bucket": b, "objname": "gone%d" % i} for i in range(3)]
    body = {"in": items[:5] + gone + items[5:], "continue_on_error": True}
    for t in lcluster.c.targets:
        for strm in (False, True):
            r = requests.post(t.public_url + "/v1/batch", json=dict(body, strm=strm), timeout=TIMEOUT)
            assert r.status_code == 200, r.text[:300]
        r = requests.post(t.public_url + "/v1/batch", json={"in": items[:3] + gone}, timeout=TIMEOUT)
        assert r.status_code == 404
        raw = json.dumps({"in": [items[-1], items[0], items[-1]], "strm": True}).encode()
        host = "%s:%d" % hostport(t.public_url)
        for _ in range(2 * SCALE):
            cut_get(t.public_url + "/v1/batch", host, "POST", raw, [("Content-Type", "application/json")])
            cut_get(t.public_url + "/v1/batch", host, "POST", raw, [("Content-Type", "application/json")], keep=1)


def s3_traffic(env, rnd):
    s3, bk = env["s3"], env["s3b"]
    for i in range(10 * SCALE):
        s3.put_object(Bucket=bk, Key="k%d" % i, Body=b"s" * (100 + i))
        assert s3.get_object(Bucket=bk, Key="k%d" % i)["Body"].read() == b"s" * (100 + i)
        try:
            s3.get_object(Bucket=bk, Key="missing%d" % i)
        except ClientError:
            pass
    s3.list_objects_v2(Bucket=bk, MaxKeys=3)
    part = os.urandom(5 << 20)
    for abort in (False, True):
        u = s3.create_multipart_upload(Bucket=bk, Key="mp%d" % abort)["UploadId"]
        e1 = s3.upload_part(Bucket=bk, Key="mp%d" % abort, UploadId=u, PartNumber=1, Body=part)["ETag"]
        e2 = s3.upload_part(Bucket=bk, Key="mp%d" % abort, UploadId=u, PartNumber=2, Body=b"end")["ETag"]
        if abort:
            s3.abort_multipart_upload(Bucket=bk, Key="mp1", UploadId=u)
        else:
            s3.complete_multipart_upload(Bucket=bk, Key="mp0", UploadId=u, MultipartUpload={
                "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    # a client leaving in the middle of a large S3 GET relayed by the proxy
    s3.put_object(Bucket=bk, Key="bigs3", Body=env["big"])
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bk, "Key": "bigs3"})
    host = "%s:%d" % hostport(url)
    for _ in range(3 * SCALE):
        cut_get(url, host)
    # PUTs and a multipart part cut short, relayed by the proxy to the owner
    put = s3.generate_presigned_url("put_object", Params={"Bucket": bk, "Key": "cut"})
    u = s3.create_multipart_upload(Bucket=bk, Key="mpcut")["UploadId"]
    part = s3.generate_presigned_url("upload_part", Params={"Bucket": bk, "Key": "mpcut", "UploadId": u,
                                                            "PartNumber": 1})
    for _ in range(3 * SCALE):
        cut_put(put, host)
        cut_put(part, host, size=6 << 20, sent=1 << 20)
    s3.abort_multipart_upload(Bucket=bk, Key="mpcut", UploadId=u)


def remote(env, lcluster, rnd):
    """Cold GETs from an nginx origin stopped while they run; a copy job and an aborted prefetch."""
    origin = peers.start_nginx(env["dir"] / ("o%d" % rnd))
    hb = unique("lkh")
    n = 12 * SCALE
    for i in range(n):
        p = origin.root / ("f%d" % i)
        p.write_bytes(os.urandom(256 * 1024 if i % 2 else 1000))
        p.chmod(0o644)
    create_remote(lcluster.url, hb, "ht", {"endpoint": origin.url, "stall_timeout_ms": 1500})
    try:
        s = session()
        for i in range(n // 2):
            assert s.get(obj_url(lcluster.url, hb, "f%d" % i), timeout=TIMEOUT).status_code == 200
        # clients that leave a cold GET at its first bytes
        for i in range(3 * SCALE):
            p = origin.root / ("c%d" % i)
            p.write_bytes(os.urandom(2 << 20))
            p.chmod(0o644)
            r = s.get(obj_url(lcluster.url, hb, "c%d" % i), allow_redirects=False, timeout=TIMEOUT)
            assert r.status_code == 307, r.text
            cut_get(r.headers["Location"], "%s:%d" % hostport(r.headers["Location"]), keep=1)
        r = s.post("%s/v1/buckets/%s?provider=ht" % (lcluster.url, hb),
                   json={"action": "prefetch-listrange", "value": {"template": "f{0..%d}" % (n - 1)}}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        wait_job(lcluster, r.json()["job_id"])
        dst = unique("lkc")
        r = s.post("%s/v1/buckets/%s?provider=ht" % (lcluster.url, hb),
                   json={"action": "copy-listrange",
                         "value": {"to": {"name": dst}, "template": "f{0..%d}" % (n - 1)}}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        wait_job(lcluster, r.json()["job_id"])
        s.delete("%s/v1/buckets/%s" % (lcluster.url, dst), timeout=TIMEOUT)
        # the origin goes away while cold GETs (and a prefetch of names it never had) run
        r = s.post("%s/v1/buckets/%s?provider=ht" % (lcluster.url, hb),
                   json={"action": "prefetch-listrange", "value": {"template": "g{0..500}"}}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        jid = r.json()["job_id"]
        errs = []

        def cold(i):
            try:
                session().get(obj_url(lcluster.url, hb, "f%d" % i, extra="&latest=true"), timeout=TIMEOUT)
            except requests.RequestException as e:
                errs.append(e)

        def faulty(name):
            session().get(obj_url(lcluster.url, env["faulty"], name), timeout=TIMEOUT)

        ts = [threading.Thread(target=cold, args=(i,)) for i in range(n)]
        ts += [threading.Thread(target=faulty, args=("%s%d-%d" % (k, rnd, i),)) for k in ("cut", "stall")
               for i in range(4 * SCALE)]
        for t in ts:
            t.start()
        origin.stop()
        for t in ts:
            t.join()
        s.delete("%s/v1/jobs/%s" % (lcluster.url, jid), timeout=TIMEOUT)
        wait_job(lcluster, jid)
        for i in range(n, n + 16):  # every target asks the dead origin (and drops what it kept for it)
            assert s.get(obj_url(lcluster.url, hb, "f%d" % i), timeout=TIMEOUT).status_code >= 400
    finally:
        origin.stop()
        requests.delete("%s/v1/buckets/%s?provider=ht" % (lcluster.url, hb), timeout=TIMEOUT)


def one_round(env, lcluster, rnd):
    proxy_url = lcluster.c.proxy.public_url
    native(env, rnd)
    faults(env, rnd, proxy_url)
    batch(env, lcluster, proxy_url)
    s3_traffic(env, rnd)
    remote(env, lcluster, rnd)
    env["api"].s.close()
    env["api"] = Api(lcluster.url, session())


def check_rows(rows):
    """Asserts the bounds of the module's docstring on samples taken after each round (rows[0]: the warm-up)."""
    warm = rows[0]
    for name in warm:
        fds = [r[name]["fds"] for r in rows]
        threads = [r[name]["threads"] for r in rows]
        assert max(fds[1:]) - warm[name]["fds"] <= FD_SLACK, "%s: open fds per round %s; warm %s, now %s" % (
            name, fds, warm[name]["other"], rows[-1][name]["other"])
        assert max(threads[1:]) - warm[name]["threads"] <= THREAD_SLACK, "%s: threads per round %s" % (name, threads)
        vm = [r[name]["vm"] for r in rows]
        assert max(vm[1:]) - warm[name]["vm"] <= VM_SLACK, "%s: VmSize KiB per round %s" % (name, vm)
        for r in rows:
            # per thread at most two libcurl handles (node client, S3 relay), each a socketpair and 5 connections
            assert r[name]["pooled"] <= r[name]["threads"] * 2 * 7, (name, r[name])


def sampled(h, rows, rnd):
    rows.append(settle(h))
    print("round %d: %s" % (rnd, " ".join("%s fds %d cached %d pooled %d threads %d rss %d vm %d" % (
        k, v["fds"], v["cached"], v["pooled"], v["threads"], v["rss"], v["vm"]) for k, v in rows[-1].items())))


def test_fds_and_threads_settle(lcluster, env):
    rows = []
    for rnd in range(ROUNDS):
        one_round(env, lcluster, rnd)
        sampled(lcluster, rows, rnd)
    assert lcluster.work_files() == []
    parts = [os.path.join(d, f) for mp in lcluster.all_mountpaths() for d, _, fs in os.walk(os.path.join(mp, ".mpu"))
             for f in fs]
    assert parts == []  # every multipart upload was completed or aborted
    check_rows(rows)


tcluster = module_cluster("leakstls", "it reads the daemons' /proc entries", targets=2, mountpaths=1, tls=True)


def test_tls_fds_and_threads_settle(tcluster):
    """HTTPS public ports: requests, cut PUTs and GETs inside TLS, handshakes cut short or never started."""
    CA[:] = [tcluster.c.ca_file]
    b = unique("lkt")
    rows = []
    for rnd in range(ROUNDS):
        api = Api(tcluster.url, session())
        api.s.verify = tcluster.c.ca_file
        if rnd == 0:
            api.create_bucket(b)
            api.put(b, "big", os.urandom(BIG))
        for i in range(10 * SCALE):
            api.put(b, "o%d" % i, b"t" * 5000)
            assert api.get(b, "o%d" % i).status_code == 200
            assert api.get(b, "none%d" % i).status_code == 404
            loc, host = owner_host(api, b, "big")
            cut_get(loc, host)
            cut_put(loc.replace("/big", "/cut%d" % i), host)
            bad_heads(loc, host)
            for raw in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"):
                with socket.create_connection(hostport(loc), timeout=TIMEOUT) as s:
                    s.sendall(raw)
        api.s.close()
        sampled(tcluster, rows, rnd)
    assert tcluster.work_files() == []
    check_rows(rows)


def origin_sockets(h, port):
    """Sockets the nodes hold to 127.0.0.1:port (any state)."""
    want = "0100007F:%04X" % port
    n = 0
    tcp = _tcp_table()
    for node in h.c.nodes:
        fd_dir = "/proc/%d/fd" % node.pid
        for fd in os.listdir(fd_dir):
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link.startswith("socket:[") and tcp.get(link[8:-1], ("", ""))[1] == want:
                n += 1
    return n


def test_idle_origin_connections_of_a_stopped_origin_close(lcluster, env):
    """Connections a target keeps for an origin that then goes away are closed by its next backend request,
    whichever origin that one goes to; they used to stay open (socket and pipe) for good."""
    gone = peers.start_nginx(env["dir"] / "gone")
    other = peers.start_nginx(env["dir"] / "other")
    hb, hb2 = unique("lkg"), unique("lko")
    try:
        for o in (gone, other):
            for i in range(16):
                p = o.root / ("f%d" % i)
                p.write_bytes(os.urandom(512 * 1024))
                p.chmod(0o644)
        create_remote(lcluster.url, hb, "ht", {"endpoint": gone.url})
        create_remote(lcluster.url, hb2, "ht", {"endpoint": other.url})

        def cold(bucket, i):
            session().get(obj_url(lcluster.url, bucket, "f%d" % i), timeout=TIMEOUT)

        ts = [threading.Thread(target=cold, args=(hb, i)) for i in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert origin_sockets(lcluster, gone.port) > 0  # kept for reuse
        gone.stop()
        for i in range(16):
            cold(hb2, i)
        assert origin_sockets(lcluster, gone.port) == 0
    finally:
        gone.stop()
        other.stop()
        for b in (hb, hb2):
            requests.delete("%s/v1/buckets/%s?provider=ht" % (lcluster.url, b), timeout=TIMEOUT)
