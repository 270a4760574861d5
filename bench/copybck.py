# SPDX-License-Identifier: Apache-2.0
# `make bench` row of the copy job: copy-bck of a bucket on a 3-target cluster vs `cp -r` of the same files on the same disk.
"""
DESIGN
Issue 14 asks for copy-bck of 2 GiB in 1 MiB objects on a 3-target cluster against `cp -r` of the same
files on the same disk. The row runs on a cluster of its own: 1 proxy + TARGETS targets x 1 mountpath
(the other rows use one target), whose mountpaths are directories of the build tree, so every file of
both sides lives on one filesystem. COUNT objects of SIZE bytes (2 GiB; 256 MiB with --quick) are PUT
through the proxy (307 to the owner) into SRC; HRW spreads them over the targets. Both sides then read
the same files, warm in the page cache (they were just written):

A: one copy-bck job SRC -> a fresh destination bucket (created by the job with the source's
   properties), from the POST to the job's end (GET /v1/jobs/ID polled every 20 ms). Every target
   reads the objects it holds and PUTs each to the destination's owner (target/xact/copy.c): a HEAD,
   a PUT over loopback, a checksum, a write into a work file and a rename per object.
B: `cp -r <mountpath>/ais/SRC <dir>` once per target mountpath, one after the other in one shell: the
   very files the job copies (same inodes, same page cache), to a directory beside the mountpath. The
   plain single-threaded copy a user would run; it copies no metadata (xattrs), checks nothing and
   does not go through a network stack.

One pair of runs before the rounds is a warm-up and not counted (the first cp of a run was up to 3x
faster than the later ones). After each run, untimed: the job's output is checked (objects == COUNT, bytes == COUNT x SIZE, no
errors, nothing skipped) and so is cp's (file count and bytes); then the destination is removed (bucket
destroyed and the harness waits until every target has deleted its retired tree, or rm -rf), and
`sync -f` writes back the dirty pages, so neither side starts with the other's writeback pending.
Both report objects/s and MiB/s of wall time (Result: requests = objects). No target ratio (the
issue asks for the ratio, with no goal). The row's notes give the CPU seconds per GiB copied: the
targets' (/proc/<pid>/stat) against cp's (rusage of the shell's children).

The module is copybck, not copy: bench/ comes first on sys.path, where "copy" would hide the standard
module of that name.

OWNERSHIP
bench_copy owns its cluster (under <workdir>/copy) and the cp output directories: both are removed or
stopped before it returns, whatever happens.
"""
import concurrent.futures
import http.client
import json
import os
import shutil
import statistics
import subprocess
import time
import urllib.parse

import loadgen
import report
import sysprobe

TITLE = "Copy bucket (copy-bck) 1 MiB"
SRC = "bench-copy-src"
SIZE = 1 << 20
COUNT, QUICK_COUNT = 2048, 256
TARGETS = 3
PUT_THREADS = 4
SETTLE_LIMIT = 120.0
A_NAME, B_NAME = "copy-bck job", "cp -r"


class CopyError(Exception):
    """The copy cluster cannot be driven; the message says why."""


def _log(msg):
    print(msg, flush=True)


def _request(url, method, path, body=None, conn=None):
    """One request; returns (status, Location, body bytes). conn: a keep-alive HTTPConnection to url
    to use (else one is opened and closed)."""
    u = urllib.parse.urlsplit(url)
    c = conn or http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    try:
        if isinstance(body, str):
            body = body.encode()
        c.request(method, path, body=body, headers={"Content-Length": str(len(body or b""))})
        r = c.getresponse()
        return r.status, r.getheader("Location"), r.read()
    finally:
        if conn is None:
            c.close()


def _put_range(proxy, bucket, names, indexes, size):
    """PUTs names[i] for i in indexes into bucket through the proxy, following its 307 (keep-alive
    connections to the targets); the first 8 bytes of each body are i, the rest random."""
    payload = bytearray(os.urandom(size))
    conns = {}
    try:
        for i in indexes:
            payload[:8] = i.to_bytes(8, "little")
            path = "/v1/objects/%s/%s" % (bucket, names[i])
            st, loc, body = _request(proxy, "PUT", path, b"")
            if st == 307 and loc:
                u = urllib.parse.urlsplit(loc)
                c = conns.get(u.netloc)
                if c is None:
                    c = conns[u.netloc] = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
                st, _, body = _request("http://" + u.netloc, "PUT", u.path + ("?" + u.query if u.query else ""),
                                       bytes(payload), conn=c)
            if st != 200:
                raise CopyError("PUT %s: %d %r" % (path, st, body[:200]))
    finally:
        for c in conns.values():
            c.close()


def put_objects(proxy, bucket, names, size, threads=PUT_THREADS):
    """Creates bucket and PUTs len(names) objects of size bytes into it (threads in parallel); object i
    starts with i as 8 little-endian bytes. Raises CopyError."""
    st, _, body = _request(proxy, "POST", "/v1/buckets/" + bucket, '{"action":"create-bck"}')
    if st != 200:
        raise CopyError("create bucket %s: %d %r" % (bucket, st, body[:200]))
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        for f in [ex.submit(_put_range, proxy, bucket, names, range(k, len(names), threads), size)
                  for k in range(threads)]:
            f.result()


def _src_dirs(cl):
    """The source bucket's directory on every mountpath holding part of it, and its file count."""
    dirs, n = [], 0
    for t in cl.targets:
        for mp in t.mountpaths:
            d = os.path.join(mp, "ais", SRC)
            if os.path.isdir(d):
                dirs.append(d)
                n += sum(len(f) for _, _, f in os.walk(d))
    return dirs, n


def _settle(cl):
    """Waits until no target deletes a retired bucket tree ("rm.*" in <mountpath>/.work)."""
    deadline = time.monotonic() + SETTLE_LIMIT
    while True:
        busy = []
        for t in cl.targets:
            for mp in t.mountpaths:
                try:
                    if any(n.startswith("rm.") for n in os.listdir(os.path.join(mp, ".work"))):
                        busy.append(mp)
                except OSError:
                    pass
        if not busy:
            return
        if time.monotonic() >= deadline:
            raise CopyError("after %.0f s, retired trees still being deleted on %s" % (SETTLE_LIMIT, busy))
        time.sleep(0.05)


def _sync(path):
    subprocess.run(["sync", "-f", path], check=False)


def _job_once(cl, rnd, count, cpu):
    """One copy-bck of SRC into a fresh bucket: a loadgen.Result (objects/s of wall time)."""
    dst = "bench-copy-dst-%d" % rnd
    value = {"to": {"name": dst, "provider": "ais"}}
    pids = [t.pid for t in cl.targets]
    c0 = sysprobe.proc_cpu_seconds(pids)
    t0 = time.monotonic()
    st, _, body = _request(cl.url, "POST", "/v1/buckets/" + SRC, json.dumps({"action": "copy-bck", "value": value}))
    if st != 200:
        raise loadgen.LoadError("copy-bck: %d %r" % (st, body[:300]))
    jid = json.loads(body)["job_id"]
    doc = {}
    while True:
        st, _, body = _request(cl.url, "GET", "/v1/jobs/" + jid)
        doc = json.loads(body) if st == 200 else {}
        if st != 200 or doc.get("state", "running") not in ("running", "idle", "pending"):
            break
        time.sleep(0.02)
    seconds = time.monotonic() - t0
    cpu.append(sysprobe.proc_cpu_seconds(pids) - c0)
    bad = doc.get("state") != "finished" or doc.get("objects") != count or doc.get("bytes") != count * SIZE \
        or doc.get("errors") or doc.get("skipped")
    st2, _, body2 = _request(cl.url, "DELETE", "/v1/buckets/" + dst)
    if st2 not in (200, 404):
        raise CopyError("destroy %s: %d %r" % (dst, st2, body2[:200]))
    _settle(cl)
    _sync(cl.dir)
    if bad:
        raise loadgen.LoadError("copy-bck job %s (GET %d): %s" % (jid, st, json.dumps(doc)[:400]))
    return loadgen.Result(A_NAME, count, seconds, 0, SIZE)


def _cp_once(dirs, out, count, cpu):
    """cp -r of every source directory into out/<k>, one after the other: a loadgen.Result."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    script = " && ".join("cp -r %s %s/%d" % (d, out, k) for k, d in enumerate(dirs))
    c0 = sysprobe.children_cpu_seconds()
    t0 = time.monotonic()
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    seconds = time.monotonic() - t0
    cpu.append(sysprobe.children_cpu_seconds() - c0)
    files = nbytes = 0
    for root, _, names in os.walk(out):
        for n in names:
            files += 1
            nbytes += os.path.getsize(os.path.join(root, n))
    shutil.rmtree(out, ignore_errors=True)
    _sync(os.path.dirname(out))
    if p.returncode != 0 or files != count or nbytes != count * SIZE:
        raise loadgen.LoadError("cp -r: exit %d, %d files, %d bytes: %s" % (p.returncode, files, nbytes,
                                                                           p.stderr[-300:]))
    return loadgen.Result(B_NAME, count, seconds, 0, SIZE)


def _cpu_note(cpu, count):
    if not cpu["A"] or not cpu["B"]:
        return None
    gib = count * SIZE / float(1 << 30)
    a, b = statistics.median(cpu["A"]) / gib, statistics.median(cpu["B"]) / gib
    return ("CPU seconds per GiB copied (medians of %d/%d runs): the %d targets %.2f (/proc/<pid>/stat), "
            "cp %.2f (rusage); %.1fx" % (len(cpu["A"]), len(cpu["B"]), TARGETS, a, b, a / b if b else 0))


def bench_copy(b, ftcluster):
    """Appends the copy row (A = a copy-bck job, B = cp -r of the same files) to b.rows."""
    a = b.args
    count = QUICK_COUNT if a.quick else COUNT
    desc = ("1 copy-bck job (A) vs cp -r of the same files on the same disk (B): %d x 1 MiB (%d MiB), 1 proxy + "
            "%d targets x 1 mountpath, page cache warm, sync -f between runs" % (count, count * SIZE >> 20, TARGETS))
    if shutil.which("cp") is None:
        b.rows.append(report.Row(TITLE, desc, A_NAME, B_NAME, "bps", None, skipped="no cp"))
        return
    cl, why = None, None
    pairs, cpu = [], {"A": [], "B": []}
    out = os.path.join(b.workdir, "copy", "cp-out")
    try:
        base = b.pick_ports(2 + 2 * TARGETS)
        cl = ftcluster.Cluster(os.path.join(b.workdir, "copy"), base, targets=TARGETS, mountpaths=1,
                               bindir=b.bindir)
        cl.start()
        t0 = time.monotonic()
        put_objects(cl.url, SRC, ["c/%05d" % i for i in range(count)], SIZE)
        dirs, n = _src_dirs(cl)
        if n != count:
            raise CopyError("%d object files of %s on the mountpaths, want %d" % (n, SRC, count))
        _sync(cl.dir)
        _log("[%s] copy: cluster up (%s, %d targets), %d objects PUT in %.1f s, on %d mountpaths"
             % (b.elapsed(), cl.url, TARGETS, count, time.monotonic() - t0, len(dirs)))
        warm = [_job_once(cl, a.rounds, count, []), _cp_once(dirs, out, count, [])]  # untimed: first-run effects
        _log("[%s] copy: warm-up pair (not counted): %.0f MiB/s, %.0f MiB/s" % (b.elapsed(), warm[0].bps / (1 << 20),
                                                                             warm[1].bps / (1 << 20)))
        for rnd in range(a.rounds):
            pairs.append(b.pair("copy", "1 MiB", "job/cp", rnd, lambda: _job_once(cl, rnd, count, cpu["A"]),
                                lambda: _cp_once(dirs, out, count, cpu["B"]), "bps"))
    except (OSError, ValueError, http.client.HTTPException, CopyError, loadgen.LoadError, ftcluster.ClusterError,
            b.Error) as e:
        why = "the %d-target cluster failed: %s" % (TARGETS, str(e).splitlines()[0])
        _log("bench: copy: %s" % why)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        if cl is not None:
            bad = {k: v for k, v in cl.stop().items() if v != 0}
            if bad:
                _log("bench: copy: unclean exits of cluster nodes: %s (logs in %s/logs)" % (bad, cl.dir))
    row = report.Row(TITLE, desc, A_NAME, B_NAME, "bps", None, pairs=pairs)
    if why and not row.good_pairs():
        row.skipped = why
    elif why:
        row.failed = "stopped after %d of %d rounds: %s" % (len(pairs), a.rounds, why)
    row.notes = _cpu_note(cpu, count)
    b.rows.append(row)
