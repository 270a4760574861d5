# SPDX-License-Identifier: Apache-2.0
# `make bench` rows of shards: archpath GETs vs object GETs; GetBatch vs single GETs; a torch DataLoader on shards vs files.
"""
DESIGN
On the main bench cluster (one target), one TAR of SHARD_BYTES (1 GiB; 64 MiB with --quick) made of
16 KiB members is written to a temporary file and PUT through the proxy, streamed from that file.
One archpath GET builds the member index (header reads only) before the runs. Each round then runs
wrk against the target directly: A rotates over MEMBERS member paths ("...?archpath=m/NNNNNN")
spread evenly over the whole shard, B over the 16 KiB objects of the warm GET rows (the same
count and size), so the row compares what reading a member costs with what reading an object
costs. Target ratio 0.9 (docs/shards.md: a member read is one sendfile of a byte range).

GetBatch row: both sides are ft-loader runs over the 1,000 16 KiB objects of the warm GET rows, every
object once per pass, BATCH_PASSES passes (-epochs 5 -uniquegets), straight to the target (-direct),
objects per second of the run's time; target ratio 2.0. A: -get-batchsize 1000, one worker: one POST
/v1/batch a pass, its TAR read and walked (every member's header checked, all 1,000 in order). B: single
GETs with 32 in flight. Five passes a run, so that the loader's start (its threads and tables, ~5 ms on
this machine, a third of one batch) weighs on neither side. One client on both sides, so the row compares
the two ways of asking and not two clients (it read the batch with curl -L
through the proxy until 2026-11-30: curl reads 16 MiB answers in 100 KiB pieces, 16.6 ms for the 16 MiB
object below where a reader of 4 MiB pieces took 9.4 ms, medians of 15; with Python's http.client before that, ~31 ms).
Before the rounds, one batch is also read by Python's tarfile and checked (every object, in order). After
each pair, ft-loader also reads one object of the batch's size (FLOOR_BUCKET, -direct, one worker): a
batch is one TCP stream, so that GET is its floor, and the row's notes give the best ratio it allows on
this machine, and the target's CPU an item of a batch and a single GET (CPU_RUNS more of each after the
rounds).

PyTorch DataLoader row: DL_SAMPLES samples of 16 KiB (DL_QUICK with --quick) in DL_SHARDS TARs of one member
per sample, PUT through the proxy, and the same samples as files in DL_SHARDS directories of the work directory
(both warm: on the target's disk and in the page cache). A is fasttier.ShardDataset over the proxy (every worker
streams whole shards: one GET each, 307 followed), B an IterableDataset reading the files, each worker taking the
same directories as A's worker takes shards; both through torch's DataLoader with DL_WORKERS workers and
batch_size=None, one epoch per run, samples per second of wall time (worker start included on both sides),
every sample's size checked. Target ratio 0.8.
"""
import http.client
import io
import json
import os
import statistics
import tarfile
import time
import urllib.parse
import warnings

import loadgen
import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MEMBER = 16 * 1024
SHARD_BYTES, QUICK_BYTES = 1 << 30, 64 << 20
BUCKET, SHARD = "bench-shards", "big.tar"
TITLE = "Shard member GET 16 KiB"
BATCH_TITLE = "GetBatch 1,000 x 16 KiB"
BATCH_INFLIGHT = 32
BATCH_PASSES = 5
FLOOR_BUCKET, FLOOR_OBJ = "bench-batch-floor", "one-batch-size.bin"
CPU_RUNS = 20
DL_TITLE = "PyTorch DataLoader 16 KiB samples"
DL_BUCKET, DL_SAMPLES, DL_QUICK, DL_SHARDS, DL_WORKERS = "bench-dl", 20000, 8000, 32, 4


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


def _floor_put(b, size):
    """One object of size bytes (the batch's TAR) in FLOOR_BUCKET, PUT through the proxy."""
    st, _, body = _request(b.cluster.url, "POST", "/v1/buckets/" + FLOOR_BUCKET, '{"action":"create-bck"}')
    if st != 200:
        raise b.Error("create bucket %s: %d %r" % (FLOOR_BUCKET, st, body[:200]))
    st, loc, body = _request(b.cluster.url, "PUT", "/v1/objects/%s/%s" % (FLOOR_BUCKET, FLOOR_OBJ), b"", 0)
    if st != 307 or not loc:
        raise b.Error("PUT %s at the proxy: %d %r" % (FLOOR_OBJ, st, body[:200]))
    u = urllib.parse.urlsplit(loc)
    st, _, body = _request("%s://%s" % (u.scheme, u.netloc), "PUT", u.path + "?" + u.query, os.urandom(size), size)
    if st != 200:
        raise b.Error("PUT %s: %d %r" % (FLOOR_OBJ, st, body[:200]))


def _floor_get(b, names_file, size):
    """Seconds of one GET of FLOOR_OBJ by ft-loader (-direct, one worker, BATCH_PASSES of them in a run, as
    the batches are read)."""
    res = b.loader.run_once_direct(b.cluster.port, FLOOR_BUCKET, names_file, size, 1, log=b.runlog,
                                   epochs=BATCH_PASSES)
    if res.errors or res.requests != BATCH_PASSES:
        raise b.Error("GET of %s with ft-loader: %d requests, %d errors" % (FLOOR_OBJ, res.requests, res.errors))
    return res.seconds / BATCH_PASSES


def _floor_note(pairs, floor, size):
    """What one TCP stream allows the row here: the medians of the batch, the single GETs and one
    object of the batch's size, each read whole."""
    good = [(a, bb) for a, bb in pairs if a is not None and bb is not None]
    if not good or not floor:
        return None
    ms = lambda xs: 1e3 * statistics.median(xs)
    tb, tg = ms([a.seconds / BATCH_PASSES for a, _ in good]), ms([bb.seconds / BATCH_PASSES for _, bb in good])
    tf = ms(floor)
    return ("One stream's floor (medians of %d rounds, per pass): the batch took %.1f ms, the %d single GETs "
            "%.1f ms, and one GET "
            "of a single %.1f MiB object (the batch's size, ft-loader -direct like the batch, sendfile on the "
            "target) %.1f ms (%.1f-%.1f). A batch is one TCP stream: it cannot take less than that GET, so on this "
            "machine GetBatch can be at most %.2fx the single GETs (the row's goal is 2x); see bench/datapath.md, "
            "\"GetBatch: one stream's floor\"." % (len(good), tb, good[0][1].requests // BATCH_PASSES, tg,
                                                    size / 1048576, tf,
                                                    1e3 * min(floor), 1e3 * max(floor), tg / tf))


def _batch_check(b, plain, body):
    """The TAR of one GetBatch (Python client, untimed) holds every object in order."""
    st, loc, data = _request(b.cluster.url, "POST", "/v1/batch", body, len(body))
    if st == 307 and loc:
        u = urllib.parse.urlsplit(loc)
        st, _, data = _request("%s://%s" % (u.scheme, u.netloc), "POST", u.path, body, len(body))
    if st != 200:
        raise b.Error("GetBatch: %d %r" % (st, data[:200]))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        got = [(m.name, m.size) for m in t.getmembers()]
    if got != [("%s/%s" % (plain.bucket, n), plain.size) for n in plain.names]:
        raise b.Error("GetBatch: the TAR does not hold the %d objects in order" % len(plain.names))
    return len(data)


def _batch_once(b, plain):
    """One ft-loader run reading every 16 KiB object through one GetBatch (-direct): a loadgen.Result of
    the objects delivered (none when the batch failed: ft-loader checks every member, in order)."""
    return b.loader.run_once_batch(b.cluster.port, plain.bucket, plain.ft_names, plain.size, len(plain.names), 1,
                                   direct=True, log=b.runlog, epochs=BATCH_PASSES)


def _batch_cpu_note(b, plain):
    """The target's CPU an item: CPU_RUNS more batches, then CPU_RUNS more ft-loader runs of the row's
    single GETs (enough of each for /proc's 10 ms ticks), untimed."""
    cpu = {"A": [], "B": []}
    for _ in range(CPU_RUNS):
        b.cpu_per_request(cpu["A"], [b.target.pid], lambda: _batch_once(b, plain))
    for _ in range(CPU_RUNS):
        b.cpu_per_request(cpu["B"], [b.target.pid], lambda: b.loader.run_once_direct(
            b.cluster.port, plain.bucket, plain.ft_names, plain.size, BATCH_INFLIGHT, log=b.runlog))
    if len(cpu["A"]) < CPU_RUNS // 2 or len(cpu["B"]) < CPU_RUNS // 2:
        return None
    a, g = sum(cpu["A"]) / len(cpu["A"]), sum(cpu["B"]) / len(cpu["B"])
    return ("The target's CPU (/proc/<pid>/stat over %d more of each): %.1f us an item of a batch (%.1f ms a batch), "
            "%.1f us a single GET." % (CPU_RUNS, a, a * len(plain.names) / 1e3, g))


def bench_batch(b):
    """Appends the GetBatch row to b.rows."""
    a = b.args
    plain = next((s for s in b.sets if s.label == "16 KiB"), None)
    desc = ("ft-loader -epochs %d -uniquegets -direct: -get-batchsize 1000 -numworkers 1, one POST /v1/batch a "
            "pass (A) vs -numworkers %d, single GETs (B)" % (BATCH_PASSES, BATCH_INFLIGHT))
    if plain is None or b.loader is None:
        b.rows.append(report.Row(BATCH_TITLE, desc, "GetBatch", "single GETs", "rps", 2.0,
                                 skipped="ft-loader not built" if plain else "the 16 KiB object set is not there"))
        return
    body = json.dumps({"in": [{"bucket": plain.bucket, "objname": n} for n in plain.names]}).encode()
    want = _batch_check(b, plain, body)
    _floor_put(b, want)
    floor_names = os.path.join(b.workdir, "floor-names.txt")
    with open(floor_names, "w") as f:
        f.write(FLOOR_OBJ + "\n")
    _floor_get(b, floor_names, want)  # its first read, untimed: from the page cache after
    pairs, floor = [], []
    for rnd in range(a.rounds):
        pairs.append(b.pair("GetBatch", "16 KiB", "ft-loader", rnd, lambda: _batch_once(b, plain),
                            lambda: b.loader.run_once_direct(b.cluster.port, plain.bucket, plain.ft_names,
                                                             plain.size, BATCH_INFLIGHT, log=b.runlog,
                                                             epochs=BATCH_PASSES), "rps"))
        floor.append(_floor_get(b, floor_names, want))
    row = report.Row(BATCH_TITLE, desc, "GetBatch", "single GETs", "rps", 2.0, pairs=pairs)
    notes = [_floor_note(pairs, floor, want), _batch_cpu_note(b, plain)]
    row.notes = " ".join(n for n in notes if n) or None
    b.rows.append(row)


# ---- a torch DataLoader on shards vs on local files ----

def _dl_shard_bytes(shard, per):
    buf = io.BytesIO()
    payload = bytearray(os.urandom(MEMBER))
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(per):
            payload[:8] = (shard * per + i).to_bytes(8, "little")
            ti = tarfile.TarInfo("s%02d/%06d.jpg" % (shard, shard * per + i))
            ti.size = MEMBER
            t.addfile(ti, io.BytesIO(bytes(payload)))
    return buf.getvalue()


def _dl_load(b, total):
    """The shards PUT through the proxy and the same samples as files; (shard names, files dir)."""
    st, _, body = _request(b.cluster.url, "POST", "/v1/buckets/" + DL_BUCKET, '{"action":"create-bck"}')
    if st != 200:
        raise b.Error("create bucket %s: %d %r" % (DL_BUCKET, st, body[:200]))
    per = total // DL_SHARDS
    local = os.path.join(b.workdir, "dl-files")
    names = []
    for s in range(DL_SHARDS):
        data = _dl_shard_bytes(s, per)
        name = "train-%04d.tar" % s
        st, loc, body = _request(b.cluster.url, "PUT", "/v1/objects/%s/%s" % (DL_BUCKET, name), b"", 0)
        if st == 307 and loc:
            u = urllib.parse.urlsplit(loc)
            st, _, body = _request("%s://%s" % (u.scheme, u.netloc), "PUT", u.path + "?" + u.query, data, len(data))
        if st != 200:
            raise b.Error("PUT %s: %d %r" % (name, st, body[:200]))
        names.append(name)
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            for m in t.getmembers():
                path = os.path.join(local, m.name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(t.extractfile(m).read())
    return names, local, per * DL_SHARDS


def _dl_epoch(torch_data, ds, want, what):
    n = bad = 0
    with warnings.catch_warnings():  # "4 workers on 2 CPUs": the row's setting, said in its title
        warnings.simplefilter("ignore", UserWarning)
        loader = torch_data.DataLoader(ds, batch_size=None, num_workers=DL_WORKERS)
        t0 = time.monotonic()
        for s in loader:
            n += 1
            bad += len(s["jpg"]) != MEMBER
        seconds = time.monotonic() - t0
    return loadgen.Result(what, n, seconds, bad + abs(want - n), MEMBER,
                          detail="%d samples of %d, %d of a wrong size" % (n, want, bad))


def _dl_files_dataset(torch_data, local):
    class Files(torch_data.IterableDataset):
        """The samples as files, one directory per shard, dealt over the workers as the shards are."""

        def __iter__(self):
            info = torch_data.get_worker_info()
            wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
            for d in sorted(os.listdir(local))[wid::nw]:
                for f in sorted(os.listdir(os.path.join(local, d))):
                    with open(os.path.join(local, d, f), "rb") as fh:
                        yield {"__key__": d + "/" + f.split(".")[0], "jpg": fh.read()}

    return Files()


def bench_dataloader(b):
    """Appends the DataLoader row to b.rows."""
    a = b.args
    desc = ("torch DataLoader, %d workers, batch_size=None, 1 epoch: fasttier.ShardDataset over %d TARs via the "
            "proxy (A) vs the same samples as local files (B)" % (DL_WORKERS, DL_SHARDS))
    try:
        import sys
        import torch.utils.data as torch_data
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import fasttier
    except ImportError as e:
        b.rows.append(report.Row(DL_TITLE, desc, "ShardDataset", "local files", "rps", 0.8,
                                 skipped="torch or fasttier cannot be imported: %s" % e))
        return
    names, local, total = _dl_load(b, DL_QUICK if a.quick else DL_SAMPLES)
    shard_ds = fasttier.ShardDataset(fasttier.Client(b.cluster.url, token=""), DL_BUCKET, shards=names)
    files_ds = _dl_files_dataset(torch_data, local)
    for ds, what in ((shard_ds, "ShardDataset"), (files_ds, "files")):  # warm-up, and a check of both
        r = _dl_epoch(torch_data, ds, total, what)
        if r.errors:
            raise b.Error("DataLoader warm-up (%s): %s" % (what, r.detail))
    pairs = []
    for rnd in range(a.rounds):
        pairs.append(b.pair("DataLoader", "16 KiB", "torch", rnd,
                            lambda: _dl_epoch(torch_data, shard_ds, total, "ShardDataset"),
                            lambda: _dl_epoch(torch_data, files_ds, total, "files"), "rps"))
    b.rows.append(report.Row(DL_TITLE, desc + ", %d samples" % total, "ShardDataset", "local files", "rps", 0.8,
                             pairs=pairs))
