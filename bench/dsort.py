# SPDX-License-Identifier: Apache-2.0
# `make bench` row of dsort: resharding TAR shards on the cluster vs GNU tar + sort on the same files locally.
"""
DESIGN
Input: N_SHARDS TAR shards of SAMPLE pairs (a MEMBER-byte ".jpg" and a 16-byte ".cls" per sample key),
DATA_BYTES in all: 64 MiB by default (about a minute for the whole row with its rounds), 2 GiB with
--dsort-full (the size the row is meant for). They are written once to the bench work directory and
PUT through the proxy into BUCKET.

A: one dsort job (alphanumeric order, 16 MiB output shards of TAR) from POST to the job's end,
   into a fresh output bucket each round.
B: the local reference on the same disk: `tar -xf` of every input shard into a directory, the
   member list sorted by name (`find | sort`), and `tar -cf` of the outputs from lists cut at the
   same 16 MiB (one `tar -T list` per output shard).
Both report the input's bytes per second of wall time (Result: requests = members, object_size = the
mean member size). No target ratio: the row shows what a reshard through the cluster costs next to
a single-machine pipeline that shares no network and publishes nothing.
"""
import http.client
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
import urllib.parse

import loadgen
import report

TITLE = "dsort TAR reshard"
BUCKET = "bench-dsort-in"
MEMBER = 64 * 1024
LABEL_BYTES = 16
OUT_SHARD = 16 << 20
DEFAULT_BYTES, FULL_BYTES = 64 << 20, 2 << 30
N_SHARDS = 16


def _request(url, method, path, body=None):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    try:
        if isinstance(body, str):
            body = body.encode()
        c.request(method, path, body=body, headers={"Content-Length": str(len(body or b""))})
        r = c.getresponse()
        return r.status, r.getheader("Location"), r.read()
    finally:
        c.close()


def _put(b, bucket, name, data):
    st, loc, body = _request(b.cluster.url, "PUT", "/v1/objects/%s/%s" % (bucket, name), data)
    if st == 307 and loc:
        u = urllib.parse.urlsplit(loc)
        st, _, body = _request("%s://%s" % (u.scheme, u.netloc), "PUT", u.path + "?" + u.query, data)
    if st != 200:
        raise b.Error("PUT %s/%s: %d %r" % (bucket, name, st, body[:200]))


def _make_inputs(b, indir, total):
    """The input shards, on disk (for B) and in BUCKET (for A); the number of members."""
    os.makedirs(indir, exist_ok=True)
    per_shard = max(1, total // N_SHARDS // (MEMBER + LABEL_BYTES))
    payload = bytearray(os.urandom(MEMBER))
    members = 0
    for s in range(N_SHARDS):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for k in range(per_shard):
                key = "%08d" % ((k * N_SHARDS + s) * 7919 % 100000000)  # keys interleaved across shards
                payload[:8] = (s * per_shard + k).to_bytes(8, "little")
                for ext, data in (("jpg", payload), ("cls", key[:LABEL_BYTES].encode().ljust(LABEL_BYTES))):
                    ti = tarfile.TarInfo("%s.%s" % (key, ext))
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(bytes(data)))
                members += 2
        name = "in-%03d.tar" % s
        with open(os.path.join(indir, name), "wb") as f:
            f.write(buf.getvalue())
        _put(b, BUCKET, name, buf.getvalue())
    return members, per_shard * N_SHARDS * (MEMBER + LABEL_BYTES)


def _dsort_once(b, rnd, members, nbytes):
    out = "bench-dsort-out-%d" % rnd
    st, _, body = _request(b.cluster.url, "POST", "/v1/buckets/" + out, '{"action":"create-bck"}')
    if st != 200:
        raise b.Error("create %s: %d %r" % (out, st, body[:200]))
    value = {"template": "in-{000..%03d}.tar" % (N_SHARDS - 1), "to": {"name": out},
             "output_template": "out-{00000..99999}.tar", "shard_size": OUT_SHARD}
    t0 = time.monotonic()
    st, _, body = _request(b.cluster.url, "POST", "/v1/buckets/" + BUCKET,
                           json.dumps({"action": "dsort", "value": value}))
    if st != 200:
        raise b.Error("dsort: %d %r" % (st, body[:300]))
    jid = json.loads(body)["job_id"]
    while True:
        st, _, body = _request(b.cluster.url, "GET", "/v1/jobs/" + jid)
        doc = json.loads(body) if st == 200 else {}
        if doc.get("state", "running") != "running":
            break
        time.sleep(0.05)
    seconds = time.monotonic() - t0
    _request(b.cluster.url, "DELETE", "/v1/buckets/" + out)
    if doc.get("state") != "finished" or doc.get("errors") or doc.get("bytes") != nbytes:
        raise b.Error("dsort job %s: %s" % (jid, json.dumps(doc)[:400]))
    return loadgen.Result("dsort", members, seconds, 0, nbytes / members)


def _local_once(indir, work, members, nbytes):
    """tar -xf every shard, find | sort, tar -cf per output cut at OUT_SHARD."""
    ex, outdir = os.path.join(work, "x"), os.path.join(work, "out")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(ex)
    os.makedirs(outdir)
    t0 = time.monotonic()
    for name in sorted(os.listdir(indir)):
        subprocess.run(["tar", "-xf", os.path.join(indir, name), "-C", ex], check=True)
    names = subprocess.run("cd %s && find . -type f | sort" % ex, shell=True, check=True,
                           capture_output=True, text=True).stdout.split()
    lists, cur, size = [], [], 0
    for n in names:
        cur.append(n)
        size += os.path.getsize(os.path.join(ex, n))
        if size >= OUT_SHARD and n.endswith(".jpg"):  # a sample is .cls then .jpg
            lists.append(cur)
            cur, size = [], 0
    if cur:
        lists.append(cur)
    for i, lst in enumerate(lists):
        path = os.path.join(work, "list-%d" % i)
        with open(path, "w") as f:
            f.write("\n".join(lst) + "\n")
        subprocess.run(["tar", "-cf", os.path.join(outdir, "out-%05d.tar" % i), "-C", ex, "-T", path], check=True)
    subprocess.run(["sync", "-f", outdir], check=False)
    seconds = time.monotonic() - t0
    shutil.rmtree(work, ignore_errors=True)
    return loadgen.Result("tar+sort", members, seconds, 0, nbytes / members)


def bench_dsort(b):
    """Appends the row to b.rows (b: the run.py Bench, set up)."""
    a = b.args
    total = FULL_BYTES if getattr(a, "dsort_full", False) else DEFAULT_BYTES
    desc = "%d TAR shards, %d MiB of 64 KiB + 16 B samples into 16 MiB TARs: 1 dsort job (A) vs tar -xf, " \
           "find | sort, tar -cf -T (B), same disk" % (N_SHARDS, total >> 20)
    if shutil.which("tar") is None:
        b.rows.append(report.Row(TITLE, desc, "dsort", "tar+sort", "bps", None, skipped="no tar"))
        return
    st, _, body = _request(b.cluster.url, "POST", "/v1/buckets/" + BUCKET, '{"action":"create-bck"}')
    if st != 200:
        raise b.Error("create bucket %s: %d %r" % (BUCKET, st, body[:200]))
    indir, work = os.path.join(b.workdir, "dsort-in"), os.path.join(b.workdir, "dsort-local")
    members, nbytes = _make_inputs(b, indir, total)
    pairs = []
    try:
        for rnd in range(a.rounds):
            pairs.append(b.pair("dsort", "%d MiB" % (total >> 20), "job", rnd,
                                lambda: _dsort_once(b, rnd, members, nbytes),
                                lambda: _local_once(indir, work, members, nbytes), "bps"))
    finally:
        shutil.rmtree(indir, ignore_errors=True)
        _request(b.cluster.url, "DELETE", "/v1/buckets/" + BUCKET)
    b.rows.append(report.Row(TITLE, desc, "dsort", "tar+sort", "bps", None, pairs=pairs))
