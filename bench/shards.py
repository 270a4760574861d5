# SPDX-License-Identifier: Apache-2.0
# `make bench` rows of shards: archpath GETs of members of a 1 GiB TAR vs GETs of objects; GetBatch vs single GETs.
"""
DESIGN
On the main bench cluster (one target), one TAR of SHARD_BYTES (1 GiB; 64 MiB with --quick) made of
16 KiB members is written to a temporary file and PUT through the proxy, streamed from that file.
One archpath GET builds the member index (header reads only) before the runs. Each round then runs
wrk against the target directly: A rotates over MEMBERS member paths ("...?archpath=m/NNNNNN")
spread evenly over the whole shard, B over the 16 KiB objects of the warm GET rows (the same
count and size), so the row compares what reading a member costs with what reading an object
costs. Target ratio 0.9 (docs/shards.md: a member read is one sendfile of a byte range).

GetBatch row: A is one POST /v1/batch of the 1,000 16 KiB objects of the warm GET rows (through the
proxy, following its 307, the whole TAR read), B is ft-loader reading the same 1,000 objects once
each with 32 requests in flight straight to the target (-epochs 1 -uniquegets). Both report
objects per second of wall time; target ratio 2.0.
"""
import http.client
import io
import json
import os
import tarfile
import time
import urllib.parse

import loadgen
import report

MEMBER = 16 * 1024
SHARD_BYTES, QUICK_BYTES = 1 << 30, 64 << 20
BUCKET, SHARD = "bench-shards", "big.tar"
TITLE = "Shard member GET 16 KiB"
BATCH_TITLE = "GetBatch 1,000 x 16 KiB"
BATCH_INFLIGHT = 32


def _request(url, method, path, body=None, length=None):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    try:
        headers = {"Content-Length": str(length)} if length is not None else {}
        if body is not None and not isinstance(body, (bytes, io.IOBase)):
            body = body.encode()
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.getheader("Location"), r.read()
    finally:
        c.close()


def _make_shard(path, count):
    payload = bytearray(os.urandom(MEMBER))
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(count):
            payload[:8] = i.to_bytes(8, "little")
            ti = tarfile.TarInfo("m/%06d" % i)
            ti.size = MEMBER
            t.addfile(ti, io.BytesIO(payload))


def _put_shard(b, path):
    st, _, body = _request(b.cluster.url, "POST", "/v1/buckets/" + BUCKET, '{"action":"create-bck"}')
    if st != 200:
        raise b.Error("create bucket %s: %d %r" % (BUCKET, st, body[:200]))
    size = os.path.getsize(path)
    st, loc, body = _request(b.cluster.url, "PUT", "/v1/objects/%s/%s" % (BUCKET, SHARD), b"", 0)
    if st != 307 or not loc:
        raise b.Error("PUT %s at the proxy: %d %r" % (SHARD, st, body[:200]))
    u = urllib.parse.urlsplit(loc)
    with open(path, "rb") as f:
        st, _, body = _request("%s://%s" % (u.scheme, u.netloc), "PUT", u.path, f, size)
    if st != 200:
        raise b.Error("PUT %s: %d %r" % (SHARD, st, body[:200]))


def bench_shards(b):
    """Appends the row to b.rows (b: the run.py Bench, set up)."""
    a = b.args
    plain = next((s for s in b.sets if s.label == "16 KiB"), None)
    if plain is None:
        b.rows.append(report.Row(TITLE, "-", "archpath GET", "plain GET", "rps", 0.9,
                                 skipped="the 16 KiB object set is not there"))
        return
    count = (QUICK_BYTES if a.quick else SHARD_BYTES) // (MEMBER + 512)
    tmp = os.path.join(b.workdir, SHARD)
    _make_shard(tmp, count)
    try:
        _put_shard(b, tmp)
    finally:
        os.unlink(tmp)
    step = max(1, count // plain.count)
    paths = os.path.join(b.workdir, "paths-ft-shard-members.txt")
    with open(paths, "w") as f:
        for i in range(0, count, step)[: plain.count]:
            f.write("/v1/objects/%s/%s?archpath=m/%06d\n" % (BUCKET, SHARD, i))
    st, _, body = _request(b.target.public_url, "GET", "/v1/objects/%s/%s?archpath=m/%06d" % (
        BUCKET, SHARD, count - 1))
    if st != 200 or len(body) != MEMBER or int.from_bytes(body[:8], "little") != count - 1:
        raise b.Error("archpath GET of the last member: %d, %d bytes" % (st, len(body)))
    pairs = []
    for rnd in range(a.rounds):
        pairs.append(b.pair("shard GET", "16 KiB", "wrk", rnd,
                            lambda: loadgen.run_wrk(b.target.public_url, paths, MEMBER, a.seconds, a.conns,
                                                    a.threads, log=b.runlog),
                            lambda: loadgen.run_wrk(b.target.public_url, plain.ft_paths, MEMBER, a.seconds,
                                                    a.conns, a.threads, log=b.runlog), "rps"))
    b.rows.append(report.Row(TITLE, "wrk -t%d -c%d: %d members spread over a %d MiB TAR (A), %d objects (B), "
                             "target direct" % (a.threads, a.conns, plain.count, count * (MEMBER + 512) >> 20,
                                                plain.count),
                             "archpath GET", "plain GET", "rps", 0.9, pairs=pairs))


def _batch_once(b, plain, check):
    """One GetBatch of every 16 KiB object: a loadgen.Result (objects per second of wall time)."""
    body = json.dumps({"in": [{"bucket": plain.bucket, "objname": n} for n in plain.names]}).encode()
    t0 = time.monotonic()
    st, loc, data = _request(b.cluster.url, "POST", "/v1/batch", body, len(body))
    if st == 307 and loc:
        u = urllib.parse.urlsplit(loc)
        st, _, data = _request("%s://%s" % (u.scheme, u.netloc), "POST", u.path, body, len(body))
    seconds = time.monotonic() - t0
    if st != 200:
        raise b.Error("GetBatch: %d %r" % (st, data[:200]))
    if check:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
            got = [(m.name, m.size) for m in t.getmembers()]
        if got != [("%s/%s" % (plain.bucket, n), plain.size) for n in plain.names]:
            raise b.Error("GetBatch: the TAR does not hold the %d objects in order" % len(plain.names))
    return loadgen.Result("GetBatch", len(plain.names), seconds, 0, plain.size)


def bench_batch(b):
    """Appends the GetBatch row to b.rows."""
    a = b.args
    plain = next((s for s in b.sets if s.label == "16 KiB"), None)
    desc = "1 POST /v1/batch (A) vs ft-loader -epochs 1 -uniquegets -numworkers %d -direct (B)" % BATCH_INFLIGHT
    if plain is None or b.loader is None:
        b.rows.append(report.Row(BATCH_TITLE, desc, "GetBatch", "single GETs", "rps", 2.0,
                                 skipped="ft-loader not built" if plain else "the 16 KiB object set is not there"))
        return
    _batch_once(b, plain, True)
    pairs = []
    for rnd in range(a.rounds):
        pairs.append(b.pair("GetBatch", "16 KiB", "ft-loader", rnd, lambda: _batch_once(b, plain, False),
                            lambda: b.loader.run_once_direct(b.cluster.port, plain.bucket, plain.ft_names,
                                                             plain.size, BATCH_INFLIGHT, log=b.runlog), "rps"))
    b.rows.append(report.Row(BATCH_TITLE, desc, "GetBatch", "single GETs", "rps", 2.0, pairs=pairs))
