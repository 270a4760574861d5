# SPDX-License-Identifier: Apache-2.0
# `make bench` row of page-cache misses: p99 of cached 16 KiB GETs while 8 clients read uncached 8 MiB objects.
"""
DESIGN
Runs on the cluster and nginx of bench/run.py (one target, nginx serving the target's own files). Each
round, for FastTier (the target's public port) and then nginx (the same files):
  - quiet: wrk -t1 -c4 over the 16 KiB objects (all cached: they were just written and read);
  - busy: the same wrk run while a background thread keeps 8 clients (ft-loader -epochs 1 -uniquegets
    -numworkers 8 -sched other) reading every 8 MiB object once, pass after pass, evicting the 8 MiB files from the
    page cache (POSIX_FADV_DONTNEED) before each pass, so every one of their reads comes from the disk.
wrk's p99 latency of both runs is the figure (4 connections, so it is the service time of a request,
not the queueing of a saturated server). The row's ratio is FastTier's busy p99 over its quiet p99
(goal <= 2x); nginx's two figures are shown beside it: with `sendfile on` and no thread pool, an nginx
worker waits in sendfile(2) for the disk while its other connections wait for it.
The background passes' read rate is logged per run, as evidence that the 8 MiB reads came from disk.

"Cached" is kept true: the 16 KiB object files are mapped and mlock(2)ed by the bench for the row
(sysprobe.PinnedFiles). Without that, a proactive reclaim (this machine runs DAMON's pageout of memory
regions it samples as cold, which takes hot pages sharing a region with cold ones) evicts some of
them during the runs; a GET of an evicted one reads the disk, queued behind the 8 MiB reads at the
throttled disk (100-300 ms), and those GETs alone set the p99 of either server. The row measures
whether the other GETs wait, so it pins them; the servers' reads are unchanged (the mapping is the
bench's). Where mlock is refused the row runs without and says so.

The disk: this machine's virtual disk reads at GB/s, so 8 readers saturate its 2 CPUs instead, and the
p99 would measure CPU contention rather than waits for the disk. So for this row both servers (the
target, nginx's master and workers) are put in a block I/O cgroup that limits their disk reads to
DISK_RATE (cgroup v1 blkio.throttle.read_bps_device or v2 io.max, on the disk holding the mountpath),
as a disk shared by many readers would: the readers then wait for the disk, not for the CPU. Without
root or that controller the row runs on the bare disk and says so.
"""
import os
import statistics
import threading
import time

import loadgen
import report
import sysprobe

FG_CONNS = 4       # wrk connections of the cached GETs
BG_WORKERS = 8     # clients reading uncached 8 MiB objects
# The background readers keep Linux's default policy (ft-loader's default is SCHED_BATCH since
# 2026-11-29): a batch reader would yield to wrk and the server on every wakeup, and the busy p99
# would then move with the client's policy rather than with the server.
BG_SCHED = "other"
GOAL = 2.0         # busy p99 <= GOAL x quiet p99
DISK_RATE = 200 * 1024 * 1024  # bytes/s both servers may read from the disk during the row
TITLE = "Cached GET 16 KiB p99 during uncached 8 MiB reads"


class LatencyRow(report.Row):
    """Per round: ((quiet p99, busy p99) of FastTier, (quiet p99, busy p99) of nginx), in microseconds."""

    def ratios(self):
        return [a[1] / a[0] for a, _ in self.good_pairs()]

    def good_pairs(self):
        return [(a, b) for a, b in self.pairs if a is not None and b is not None and a[0] > 0 and b[0] > 0]

    def met(self):
        if self.status() is not None:
            return "-"
        r = self.ratios()
        med = statistics.median(r)
        above = sum(1 for x in r if x > self.target)
        if med <= self.target:
            return "yes" + (" (%d of %d rounds above)" % (above, len(r)) if above else "")
        return "NO" + (" (%d of %d rounds below)" % (len(r) - above, len(r)) if above < len(r) else "")

    def target_text(self):
        return "busy/quiet <= %.2fx" % self.target

    def cells(self, short=False):
        st = self.status()
        client = self.client.split(",")[0] if short else self.client
        if st is not None:
            return [self.title, client, st.split(":")[0] if short else st, "-", "-", "-", self.target_text(), "-"]
        good = self.good_pairs()
        r = self.ratios()

        def side(i, name):
            q = statistics.median(p[i][0] for p in good)
            b = statistics.median(p[i][1] for p in good)
            ratio = statistics.median(p[i][1] / p[i][0] for p in good)
            return "%sp99 %.0f us quiet, %.0f us busy (%.2fx)" % ("" if short else name + ": ", q, b, ratio)

        return [self.title, client, side(0, self.a_name), side(1, self.b_name), "%.3fx" % statistics.median(r),
                "%.2f-%.2f (%d rounds)" % (min(r), max(r), len(r)), self.target_text(), self.met()]


class Background:
    """Passes of BG_WORKERS clients over the 8 MiB objects, each pass after evicting their files."""

    def __init__(self, run_pass, files):
        self.run_pass, self.files = run_pass, files
        self.stop_ev = threading.Event()
        self.started = threading.Event()
        self.passes, self.bytes, self.errors, self.kept = 0, 0, [], 0
        self.t0 = self.t1 = None
        self.th = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        self.t0 = time.monotonic()
        while not self.stop_ev.is_set():
            self.kept = max(self.kept, sysprobe.evict_files(self.files))
            self.started.set()
            try:
                r = self.run_pass()
            except loadgen.LoadError as e:
                self.errors.append(str(e).splitlines()[0])
                break
            if r.errors:
                self.errors.append("%d errors (%s)" % (r.errors, r.detail))
            self.passes += 1
            self.bytes += r.requests * r.object_size
        self.t1 = time.monotonic()
        self.started.set()

    def __enter__(self):
        self.th.start()
        self.started.wait()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.th.join()

    def rate(self):
        return self.bytes / (self.t1 - self.t0) if self.t1 and self.t1 > self.t0 else 0.0


class DiskLimit:
    """A block I/O cgroup limiting the disk reads of the processes put in it; why is set when there is none."""

    def __init__(self, path, rate):
        self.dir = self.root = self.why = None
        st = os.stat(path)
        dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
        sysdir = "/sys/dev/block/" + dev
        if os.path.exists(os.path.join(sysdir, "partition")):
            with open(os.path.join(sysdir, "..", "dev")) as f:
                dev = f.read().strip()  # a throttle is set on the whole disk
        if os.geteuid() != 0:
            self.why = "not root: no block I/O throttle"
        elif not os.path.isdir(sysdir):
            self.why = "the mountpath is on no block device (%s)" % dev
        elif os.path.isfile("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device"):
            self.root, self.file, self.line = "/sys/fs/cgroup/blkio", "blkio.throttle.read_bps_device", \
                "%s %d" % (dev, rate)
        elif os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
            self.root, self.file, self.line = "/sys/fs/cgroup", "io.max", "%s rbps=%d" % (dev, rate)
        else:
            self.why = "no block I/O cgroup controller"

    def add(self, pids):
        if self.dir is None:
            self.dir = os.path.join(self.root, "ft-bench-pagecache-%d" % os.getpid())
            os.makedirs(self.dir, exist_ok=True)
            with open(os.path.join(self.dir, self.file), "w") as f:
                f.write(self.line)
        for pid in pids:
            with open(os.path.join(self.dir, "cgroup.procs"), "w") as f:
                f.write(str(pid))

    def remove(self, pids):
        if self.dir is None:
            return
        for pid in pids:
            try:
                with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            except OSError:
                pass  # gone
        os.rmdir(self.dir)
        self.dir = None


def _log(msg):
    print(msg, flush=True)


def _p99(b, base_url, paths, size, seconds):
    """wrk's p99 latency (us) of the cached GETs, or None with the reason logged."""
    try:
        r = loadgen.run_wrk(base_url, paths, size, seconds, FG_CONNS, 1, log=b.runlog)
    except loadgen.LoadError as e:
        b.skips.append(("pagecache", str(e).splitlines()[0]))
        return None
    if r.errors or r.requests == 0:
        return None
    return r.p99_us


def _side(b, name, base_url, small, paths, run_pass, files, seconds):
    quiet = _p99(b, base_url, paths, small.size, seconds)
    with Background(run_pass, files) as bg:
        busy = _p99(b, base_url, paths, small.size, seconds)
    if bg.errors or bg.passes == 0:
        _log("pagecache %s: background readers failed: %s" % (name, "; ".join(bg.errors) or "no pass"))
        return None
    _log("pagecache %s: p99 quiet %s us, busy %s us; background %d passes at %.0f MiB/s%s" % (
        name, quiet, busy, bg.passes, bg.rate() / (1 << 20),
        "; %d files kept pages at some eviction" % bg.kept if bg.kept else ""))
    if quiet is None or busy is None:
        return None
    return (quiet, busy)


def bench_pagecache(b):
    """Appends the row to b.rows (b: the bench harness of bench/run.py, with the 16 KiB and 8 MiB sets)."""
    a = b.args
    small = next(s for s in b.sets if s.label == "16 KiB")
    big = next(s for s in b.sets if s.label == "8 MiB")
    desc = ("wrk -t1 -c%d over the cached 16 KiB objects, alone (quiet) and while ft-loader -numworkers %d "
            "-sched %s reads every 8 MiB object once per pass, files evicted before each pass (busy); -direct "
            "(FastTier), -url-list (nginx)" % (FG_CONNS, BG_WORKERS, BG_SCHED))
    if b.loader is None:
        b.rows.append(LatencyRow(TITLE, desc, "FastTier target", "nginx sendfile", "rps", GOAL,
                                 skipped=b.skip_reason("ft-loader")))
        return
    sysprobe.warm_files(b.object_files(small))
    files = b.object_files(big)
    seconds = max(a.seconds, 3)
    limit = DiskLimit(files[0], DISK_RATE)
    pids = [b.target.pid] + b.nginx.pids()
    if limit.why:
        _log("pagecache: the row runs on the bare disk: %s" % limit.why)
        desc += "; bare disk (%s)" % limit.why
    else:
        limit.add(pids)
        desc += "; disk reads of both servers limited to %d MiB/s (block I/O cgroup)" % (DISK_RATE >> 20)
    pin = sysprobe.PinnedFiles(b.object_files(small))
    try:
        with pin:
            if pin.why:
                _log("pagecache: the 16 KiB objects are not pinned in the page cache: %s" % pin.why)
            pairs = _rounds(b, a.rounds, small, big, files, seconds)
    finally:
        limit.remove(pids)
    desc += ("; 16 KiB object files pinned in the page cache (mlock)" if not pin.why
             else "; 16 KiB object files not pinned (%s)" % pin.why)
    sysprobe.warm_files(files)  # the runs after this one are page-cache runs again
    b.rows.append(LatencyRow(TITLE, desc, "FastTier target", "nginx sendfile", "rps", GOAL, pairs=pairs))


def _rounds(b, rounds, small, big, files, seconds):
    ft_url, ng_url = b.target.public_url, "http://127.0.0.1:%d" % b.nginx.get_port
    pairs = []
    for rnd in range(rounds):
        ft = _side(b, "FastTier", ft_url, small, small.ft_paths,
                   lambda: b.loader.run_once_direct(b.cluster.port, big.bucket, big.ft_names, big.size, BG_WORKERS,
                                                    log=b.runlog, sched=BG_SCHED), files, seconds)
        ng = _side(b, "nginx", ng_url, small, small.nginx_paths,
                   lambda: b.loader.run_once_url_list(big.nginx_urls, big.size, BG_WORKERS, log=b.runlog,
                                                      sched=BG_SCHED),
                   files, seconds)
        _log("pagecache round %d: FastTier %s, nginx %s" % (rnd + 1, ft, ng))
        pairs.append((ft, ng))
    return pairs
