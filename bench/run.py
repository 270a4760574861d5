#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `make bench`: FastTier against nginx (and ft-loader against wrk) on loopback, in alternating runs; prints and writes the report.
"""
USAGE
  make bench                       the full run (about 5 minutes), writes docs/benchmarks.md
  bench/run.py --quick --out F     1 round of 2 s, no perf: for trying the harness
  bench/run.py --hold              start the cluster and nginx with the objects, print where they
                                   are (<build>/bench-run/hold.json) and wait: for perf by hand
  bench/run.py --only cold         only the cold GET row (8 MiB objects only): prints its table and
                                   the load, writes no report; with --hold, the ht:// bucket and
                                   its names/URL files are set up and listed in hold.json too
  bench/run.py --only protect      only the data protection rows (bench/protect.py: PUTs with mirror 2
                                   and EC 2+1 against none, on a 4-target cluster of their own):
                                   prints their table and the load, writes no report
  bench/run.py --only shards       only the shard rows (bench/shards.py: archpath GETs of 16 KiB members
                                   of a 1 GiB TAR against GETs of 16 KiB objects; GetBatch of 1,000 x
                                   16 KiB against 1,000 GETs with 32 in flight; a torch DataLoader, 4
                                   workers, over shards through FastTier against the same samples as
                                   local files)
  bench/run.py --only dsort        only the dsort row (bench/dsort.py: a reshard of 64 MiB of TAR shards,
                                   2 GiB with --dsort-full, against tar -xf, find | sort, tar -cf -T)
  bench/run.py --only copy         only the copy row (bench/copybck.py: one copy-bck job of 2,048 x 1 MiB
                                   on a 3-target cluster of its own against cp -r of the same files on
                                   the same disk): prints its table and the load, writes no report
  bench/run.py --only dataloader   only the DataLoader S3 rows (bench/dataloader.py: a torch DataLoader,
                                   4 workers, boto3 GETs of 10,000 x 16 KiB and 2,000 x 128 KiB samples
                                   through the proxy's /s3 against the same files read locally, on a
                                   1-target cluster of its own): prints their table, writes no report
  bench/run.py --only loader       only ft-loader against wrk on nginx at 16 KiB, back to back, with
                                   each client's CPU per request (bench/loadercmp.py)
  bench/run.py --only coldcksum    the cold GET passes of the cold row into buckets of each checksum type of
                                   --cold-cksum (default xxhash,xxh3,crc32c), alternating, with the
                                   target's CPU per GiB (perf stat -e task-clock and /proc/<pid>/stat;
                                   bench/coldcksum.py): prints its table and the load
  bench/run.py --only coldnet      only the cold GET row with a network-bound origin (bench/coldnet.py: the
                                   origin nginx in a network namespace behind a veth pair shaped to 2 Gbit/s,
                                   cold GETs through the cluster against the client reading it directly)
  bench/run.py --only batch        only the GetBatch row (the 16 KiB objects only, no 1 GiB TAR)
  bench/run.py --only s3relay      only the S3 relay rows (bench/s3relay.py: presigned S3 GETs of 16 KiB,
                                   128 KiB and 8 MiB through the proxy, and nginx proxy_pass with upstream
                                   keep-alive, against nginx serving the same files)
  bench/run.py --only hints        only the epoch hints rows (bench/hints.py: 3 epochs of a seeded
                                   random order over a remote bucket 1.5x the cache, with order hints
                                   against plain LRU, origin rate-limited in a network namespace):
                                   prints their table and the load, writes no report
  bench/run.py --only pagecache    only the GET from disk rows and the page-cache miss row (bench/pagecache.py:
                                   p99 of cached 16 KiB GETs, alone and while 8 clients read uncached 8 MiB
                                   objects, FastTier and nginx): prints their table, writes no report
  bench/run.py --only fcache       only the open-file cache row (bench/fcache.py: warm 16 KiB GETs straight to
                                   a target with the cache on against one with it off, CPU per GET from
                                   /proc/<pid>/stat; --fcache-syscalls adds system calls per GET)
  bench/run.py --only tls          only the TLS rows (bench/tls.py: warm GETs of 8 MiB and 128 KiB over
                                   HTTPS from a TLS target of a cluster of its own against nginx over
                                   HTTPS with the same certificate): prints their table, writes no report

DESIGN
Everything runs on this machine, on free loopback ports, under <build>/bench-run (wiped at start;
removed at the end unless --keep):
  - a cluster of 1 proxy + 1 target with 1 mountpath (scripts/ftcluster.py, as the tests start it);
    one target, because the unit compared is one target against one nginx on the same cores;
  - objects PUT through the proxy (which redirects to the target) into one bucket per size;
  - for the data protection rows only, a second cluster of 1 proxy + 4 targets x 2 mountpaths
    (bench/protect.py), started after the other rows and stopped before the report;
  - nginx (bench/nginx.conf.in): its GET server's root is the target's "<mountpath>/ais", so nginx
    serves the very files the target wrote (same inodes, same page cache); a WebDAV server for PUT;
    an origin server for cold GETs.
Each comparison runs its pair A, B, A, B... (FastTier first, peer second, within each round; every
size and client takes its turn inside a round, so slow drift from other load on the machine hits
all rows alike). A row reports the median over rounds of the per-round ratio A/B, the per-round
range of that ratio (the noise), and the median absolute figures of both sides.

Clients: wrk (Debian) with bench/wrk-urls.lua, which rotates over every object of the size set, on
both sides; and ft-loader when build/bin/ft-loader exists: `-direct` over the bucket (straight to
the owning target) against FastTier, `-url-list` over the same files against nginx. A missing
capability (ft-loader not built, remote backends or /s3 not there, perf not usable) prints a
"skip:" line with the reason, and its row says "not measured: <reason>": no figure is ever made up.
"""

import argparse
import hashlib
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import ftcluster  # noqa: E402
import loadgen  # noqa: E402
import peers  # noqa: E402
import hints  # noqa: E402
import protect  # noqa: E402
import shards  # noqa: E402
import dsort  # noqa: E402
import copybck  # noqa: E402
import dataloader  # noqa: E402
import loadercmp  # noqa: E402
import tls  # noqa: E402
import fcache  # noqa: E402
import coldnet  # noqa: E402
import coldcksum  # noqa: E402
import s3relay  # noqa: E402
import pagecache  # noqa: E402
import report  # noqa: E402
import sysprobe  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
# (label, object size, object count, target ratio vs nginx or None, metric the target is about)
GET_SIZES = [
    ("16 KiB", 16 * KIB, 1000, 0.85, "rps"),
    ("128 KiB", 128 * KIB, 400, 0.85, "rps"),
    ("1 MiB", 1 * MIB, 64, None, "bps"),
    ("8 MiB", 8 * MIB, 64, 0.95, "bps"),
]
PUT_SIZE, PUT_NAMES = 1 * MIB, 16
RSS_CONNS, RSS_LIMIT = 256, 64 * MIB
DISK_WORKERS = 8     # in flight for the from-disk GETs (each object is read once per run)
COLD_WORKERS = 8     # in flight for the cold GETs (each object is read once per run)
COLD_BUCKET = "bench-cold"   # the ht:// bucket, and its directory on the origin
COLD_COPIES = 4      # names per 8 MiB file on the origin (hard links): 256 cold objects, 2 GiB per run
PORT_LO, PORT_HI = 20000, 32000   # below the kernel's ephemeral range: client sockets never take them


class BenchError(Exception):
    """The bench cannot go on; the message says why."""


class ColdUnsupported(BenchError):
    """The cluster has no remote (ht://) buckets."""


def log(msg):
    print(msg, flush=True)


def skip(what, why):
    log("skip: %s: %s" % (what, why))


# ---------------------------------------------------------------- HTTP helpers

def http_exchange(conns, url, method="GET", body=None, headers=None):
    """One request over a keep-alive connection from conns (a dict host:port -> HTTPConnection).
    Returns (status, headers dict, body)."""
    u = urllib.parse.urlsplit(url)
    key = u.netloc
    for attempt in (0, 1):
        c = conns.get(key)
        if c is None:
            c = conns[key] = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            c.request(method, u.path + ("?" + u.query if u.query else ""), body=body,
                      headers=headers or {})
            r = c.getresponse()
            data = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
            if hdrs.get("connection", "").lower() == "close":
                c.close()
                del conns[key]
            return r.status, hdrs, data
        except (OSError, http.client.HTTPException):
            c.close()
            del conns[key]
            if attempt == 1:
                raise
    raise AssertionError("unreachable")


def put_via_proxy(conns, proxy_url, path, body):
    """PUT through the proxy's redirect to the owner, as clients do. Returns the owner's base URL."""
    # An empty PUT is enough to learn the owner: the proxy redirects without reading a body.
    status, hdrs, data = http_exchange(conns, proxy_url + path, "PUT", b"")
    if status != 307:
        raise BenchError("PUT %s at the proxy: want 307, got %d %r" % (path, status, data[:200]))
    loc = hdrs.get("location", "")
    status, _, data = http_exchange(conns, loc, "PUT", body)
    if status != 200:
        raise BenchError("PUT %s at %s: %d %r" % (path, loc, status, data[:200]))
    u = urllib.parse.urlsplit(loc)
    return "%s://%s" % (u.scheme, u.netloc)


# ---------------------------------------------------------------- the bench

class ObjectSet:
    """One size: its bucket, object names, and the paths files the clients rotate over."""

    def __init__(self, label, size, count, target, metric, workdir):
        self.label, self.size, self.count = label, size, count
        self.target, self.metric = target, metric
        self.bucket = "bench-%s" % label.replace(" ", "").lower()
        self.names = ["o/%05d" % i for i in range(count)]
        tag = self.bucket
        self.ft_paths = os.path.join(workdir, "paths-ft-%s.txt" % tag)        # target paths
        self.nginx_paths = os.path.join(workdir, "paths-nginx-%s.txt" % tag)  # nginx paths
        self.nginx_urls = os.path.join(workdir, "urls-nginx-%s.txt" % tag)    # for -url-list
        self.ft_names = os.path.join(workdir, "names-%s.txt" % tag)           # for -filelist


class Bench:
    Error = BenchError   # what the harness raises (for the row modules: bench/protect.py)

    def __init__(self, args):
        self.args = args
        self.build = args.build if os.path.isabs(args.build) else os.path.join(ROOT, args.build)
        self.bindir = os.path.join(self.build, "bin")
        self.workdir = os.path.join(self.build, "bench-run")
        self.cluster = None
        self.nginx = None
        self.target = None
        self.sets = []
        self.put_paths = {}
        self.loader = None
        self.rows = []
        self.raw = []          # every run: what the report's raw section and results.json show
        self.perf = None       # perf stat per request, when collected
        self.skips = []
        self.t0 = time.monotonic()
        self.runlog = None
        self.cold_files = None     # (names file, origin URLs file) of the cold GETs
        self.cold_endpoint = None  # the ht:// bucket's origin URL

    # ---- setup ----
    def pick_ports(self, n=10):
        """The first of n consecutive free loopback ports (a cluster of T targets needs 2 + 2T)."""
        rnd = random.Random()
        lo, hi = (int(x) for x in self.args.ports.split("-")) if self.args.ports else (PORT_LO, PORT_HI - 100)
        for _ in range(50):
            base = rnd.randrange(lo, max(lo + 1, hi - n + 1))
            if all(ftcluster.port_free("127.0.0.1", p) for p in range(base, base + n)):
                return base
        raise BenchError("no block of %d free loopback ports in %d-%d" % (n, lo, hi))

    def setup_own_cluster_only(self):
        """--only protect|hints: the work directory, the client log and ft-loader; no cluster, no
        nginx (those rows start their own cluster)."""
        for exe in ("ft-proxy", "ft-target"):
            if not os.access(os.path.join(self.bindir, exe), os.X_OK):
                raise BenchError("%s/%s not built (run make)" % (self.bindir, exe))
        shutil.rmtree(self.workdir, ignore_errors=True)
        os.makedirs(self.workdir)
        self.runlog = open(os.path.join(self.workdir, "clients.log"), "w")
        log("bench: state in %s" % self.workdir)
        self.loader = self.find_loader()

    def setup(self):
        a = self.args
        for exe in ("ft-proxy", "ft-target"):
            if not os.access(os.path.join(self.bindir, exe), os.X_OK):
                raise BenchError("%s/%s not built (run make)" % (self.bindir, exe))
        for tool in (peers.NGINX, loadgen.WRK):
            if not os.access(tool, os.X_OK):
                raise BenchError("%s missing (scripts/bench-deps.sh installs it)" % tool)
        shutil.rmtree(self.workdir, ignore_errors=True)
        os.makedirs(self.workdir)
        self.runlog = open(os.path.join(self.workdir, "clients.log"), "w")
        base = self.pick_ports()
        log("bench: state in %s" % self.workdir)
        self.cluster = ftcluster.Cluster(os.path.join(self.workdir, "cluster"), base, targets=1,
                                         mountpaths=1, bindir=self.bindir)
        self.cluster.start()
        self.target = self.cluster.targets[0]
        log("bench: cluster up: proxy %s, target %s (pid %d)" % (self.cluster.url,
                                                                self.target.public_url,
                                                                self.target.pid))
        keep = {"cold": ["8 MiB"], "coldcksum": ["8 MiB"], "coldnet": ["8 MiB"], "batch": ["16 KiB"],
                "loader": ["16 KiB"], "pagecache": ["16 KiB", "128 KiB", "8 MiB"]}.get(a.only)
        self.sets = [ObjectSet(*s, workdir=self.workdir) for s in GET_SIZES if keep is None or s[0] in keep]
        self.create_objects()
        taken = {self.cluster.port, self.cluster.port + 1} | {
            p for t in self.cluster.targets for p in (t.public_port, t.control_port)}
        nports = []
        nxt = base + 4
        for _ in range(3):
            p = ftcluster.next_free_port("127.0.0.1", nxt, taken)
            taken.add(p)
            nports.append(p)
            nxt = p + 1
        self.nginx = peers.Nginx(os.path.join(self.workdir, "nginx"),
                                 os.path.join(self.target.mountpaths[0], "ais"),
                                 os.path.join(self.workdir, "dav"),
                                 os.path.join(self.workdir, "origin"), nports,
                                 workers=os.cpu_count() or 1)
        self.nginx.start()
        log("bench: nginx up: GET :%d (root %s), WebDAV :%d, origin :%d; %d workers"
            % (nports[0], self.nginx.get_root, nports[1], nports[2], self.nginx.workers))
        self.verify_same_bytes()
        self.loader = self.find_loader()

    def create_objects(self):
        proxy = self.cluster.url
        conns = {}
        t = time.monotonic()
        total = 0
        for s in self.sets + [None]:
            bucket = s.bucket if s else "bench-put"
            st, _, body = http_exchange(conns, proxy + "/v1/buckets/" + bucket, "POST",
                                        json.dumps({"action": "create-bck"}).encode(),
                                        {"Content-Type": "application/json"})
            if st != 200:
                raise BenchError("create bucket %s: %d %r" % (bucket, st, body[:200]))
            if s is None:
                break
            payload = bytearray(os.urandom(s.size))
            owners = set()
            with open(s.ft_paths, "w") as fp, open(s.nginx_paths, "w") as fn, \
                    open(s.nginx_urls, "w") as fu, open(s.ft_names, "w") as fl:
                for i, name in enumerate(s.names):
                    payload[:8] = i.to_bytes(8, "little")  # distinct objects, same size
                    owners.add(put_via_proxy(conns, proxy, "/v1/objects/%s/%s" % (s.bucket, name),
                                             bytes(payload)))
                    fp.write("/v1/objects/%s/%s\n" % (s.bucket, name))
                    fn.write("/%s/%s\n" % (s.bucket, name))
                    fu.write("%s/%s/%s\n" % (self.nginx_base_placeholder(), s.bucket, name))
                    fl.write(name + "\n")
                    total += s.size
            if owners != {self.target.public_url}:
                raise BenchError("objects of %s landed on %s, expected only %s"
                                 % (s.bucket, sorted(owners), self.target.public_url))
        self.put_paths = {"ft": os.path.join(self.workdir, "paths-ft-put.txt"),
                          "nginx": os.path.join(self.workdir, "paths-nginx-put.txt"),
                          "ft_urls": os.path.join(self.workdir, "urls-ft-put.txt"),
                          "nginx_urls": os.path.join(self.workdir, "urls-nginx-put.txt")}
        with open(self.put_paths["ft"], "w") as fp, open(self.put_paths["nginx"], "w") as fn:
            for i in range(PUT_NAMES):
                fp.write("/v1/objects/bench-put/p/%03d\n" % i)
                fn.write("/bench-put/p/%03d\n" % i)
        for c in conns.values():
            c.close()
        log("bench: %d objects, %.0f MiB, PUT through the proxy in %.1f s"
            % (sum(s.count for s in self.sets), total / MIB, time.monotonic() - t))

    @staticmethod
    def nginx_base_placeholder():
        return "@NGINX@"

    def finish_url_lists(self):
        """ft-loader's -url-list files need nginx's ports, known only once nginx runs."""
        base = "http://127.0.0.1:%d" % self.nginx.get_port
        for s in self.sets:
            with open(s.nginx_urls) as f:
                text = f.read().replace(self.nginx_base_placeholder(), base)
            with open(s.nginx_urls, "w") as f:
                f.write(text)
        for key, paths, base in (
                ("ft_urls", "ft", self.target.public_url),
                ("nginx_urls", "nginx", "http://127.0.0.1:%d" % self.nginx.dav_port)):
            with open(self.put_paths[paths]) as f, open(self.put_paths[key], "w") as out:
                for line in f:
                    out.write(base + line)

    def verify_same_bytes(self):
        """The first object of every size reads back identical from the target and from nginx."""
        self.finish_url_lists()
        conns = {}
        for s in self.sets:
            st1, _, b1 = http_exchange(conns, self.target.public_url + "/v1/objects/%s/%s"
                                       % (s.bucket, s.names[0]))
            st2, _, b2 = http_exchange(conns, "http://127.0.0.1:%d/%s/%s"
                                       % (self.nginx.get_port, s.bucket, s.names[0]))
            if st1 != 200 or st2 != 200 or len(b1) != s.size or \
                    hashlib.sha256(b1).digest() != hashlib.sha256(b2).digest():
                raise BenchError("%s: target (%d, %d bytes) and nginx (%d, %d bytes) do not serve "
                                 "the same bytes" % (s.bucket, st1, len(b1), st2, len(b2)))
        for c in conns.values():
            c.close()

    # ---- running clients ----
    def elapsed(self):
        return "%4.0fs" % (time.monotonic() - self.t0)

    def run_get(self, client, side, s, seconds=None, conns=None):
        a = self.args
        seconds = seconds or a.seconds
        conns = conns or a.conns
        if client == "wrk":
            if side == "fasttier":
                return loadgen.run_wrk(self.target.public_url, s.ft_paths, s.size, seconds, conns,
                                       a.threads, log=self.runlog)
            return loadgen.run_wrk("http://127.0.0.1:%d" % self.nginx.get_port, s.nginx_paths,
                                   s.size, seconds, conns, a.threads, log=self.runlog)
        if side == "fasttier":
            return self.loader.run_direct(self.cluster.port, s.bucket, s.ft_names, s.size, seconds,
                                          conns, log=self.runlog)
        return self.loader.run_url_list(s.nginx_urls, s.size, seconds, conns, log=self.runlog)

    def find_loader(self):
        """ft-loader of the build when it is there and answers -help; else None with a skip line."""
        loader = loadgen.find_loader(self.bindir)
        why = None
        if loader is None:
            why = "%s/ft-loader not built (make builds it once loader/ is in the tree)" % self.bindir
        else:
            p = subprocess.run([loader.path, "-help"], capture_output=True, text=True)
            if p.returncode != 0 or "-url-list" not in p.stdout + p.stderr:
                why = "%s -help failed (exit %d)" % (loader.path, p.returncode)
                loader = None
        if why:
            skip("ft-loader rows", why)
            self.skips.append(("ft-loader", why))
        return loader

    def measured(self, fn):
        """Runs fn(); a client failure or a run with errors becomes (None, why)."""
        try:
            r = fn()
        except loadgen.LoadError as e:
            return None, str(e).splitlines()[0]
        if r.errors:
            return None, "%d errors (%s)" % (r.errors, r.detail)
        if r.requests == 0:
            return None, "no request completed"
        return r, None

    def record(self, group, label, client, rnd, side, r, why):
        entry = {"group": group, "label": label, "client": client, "round": rnd, "side": side}
        entry.update(r.to_json() if r else {"failed": why})
        self.raw.append(entry)

    def pair(self, group, label, client, rnd, fa, fb, unit):
        ra, wa = self.measured(fa)
        self.record(group, label, client, rnd, "A", ra, wa)
        rb, wb = self.measured(fb)
        self.record(group, label, client, rnd, "B", rb, wb)
        log("[%s] %-9s %-8s %-9s round %d: A %s | B %s%s" % (
            self.elapsed(), group, label, client, rnd + 1,
            report.fmt_rate(ra, unit) if ra else "FAILED: " + wa,
            report.fmt_rate(rb, unit) if rb else "FAILED: " + wb,
            " | ratio %.3f" % (ra.rps / rb.rps) if ra and rb and rb.rps > 0 else ""))
        return ra, rb

    def clients(self):
        return ["wrk"] + (["ft-loader"] if self.loader else [])

    def warm_up(self):
        for s in self.sets:
            for side in ("fasttier", "nginx"):
                self.measured(lambda: self.run_get("wrk", side, s, seconds=1))
        log("[%s] warm-up done (1 s of wrk per size and server)" % self.elapsed())

    @staticmethod
    def cpu_per_request(into, pids, run):
        """run() (one client run); appends the server's CPU microseconds per request (pids, from
        /proc/<pid>/stat) to into when the run completed requests without errors. Returns run()'s result."""
        c0 = sysprobe.proc_cpu_seconds(pids)
        r = run()
        c1 = sysprobe.proc_cpu_seconds(pids)
        if r.requests and not r.errors:
            into.append((c1 - c0) * 1e6 / r.requests)
        return r

    @staticmethod
    def server_cpu_note(cpu, target):
        """The warm rows' server CPU per request (medians) and what it says against the row's target
        ratio, or None without figures for both sides."""
        if not cpu["A"] or not cpu["B"] or statistics.median(cpu["B"]) <= 0:
            return None
        a, b = statistics.median(cpu["A"]), statistics.median(cpu["B"])
        note = ("Server CPU per request (medians of %d/%d runs, /proc/<pid>/stat): target %.1f us, nginx's "
                "workers %.1f us (%.2fx); per round: target %s, nginx %s."
                % (len(cpu["A"]), len(cpu["B"]), a, b, a / b, " ".join("%.1f" % x for x in cpu["A"]),
                   " ".join("%.1f" % x for x in cpu["B"])))
        if target:
            note += (" Within the %.2fx this target allows: a miss is scheduling on the shared cores, not the "
                     "server's cost." % (1.0 / target) if a / b <= 1.0 / target else
                     " More than the %.2fx this target allows: the server's own cost explains a miss." %
                     (1.0 / target))
        return note

    def bench_get(self):
        a = self.args
        pairs = {}   # (label, client) -> [(A, B)]
        cpu = {}     # (label, client) -> {"A": [us per request], "B": [...]}
        for rnd in range(a.rounds):
            for s in self.sets:
                for client in self.clients():
                    c = cpu.setdefault((s.label, client), {"A": [], "B": []})
                    ra, rb = self.pair("warm GET", s.label, client, rnd,
                                       lambda: self.cpu_per_request(c["A"], [self.target.pid],
                                                                    lambda: self.run_get(client, "fasttier", s)),
                                       lambda: self.cpu_per_request(c["B"], self.nginx.worker_pids(),
                                                                    lambda: self.run_get(client, "nginx", s)),
                                       "rps" if s.metric == "rps" else "bps")
                    pairs.setdefault((s.label, client), []).append((ra, rb))
        for s in self.sets:
            for client in ["wrk", "ft-loader"]:
                title = "Warm GET %s" % s.label
                if client not in self.clients():
                    self.rows.append(report.Row(title, client, "FastTier target", "nginx sendfile",
                                                s.metric, s.target, skipped=self.skip_reason("ft-loader")))
                    continue
                self.rows.append(report.Row(title, self.client_desc(client, "get"),
                                            "FastTier target", "nginx sendfile", s.metric,
                                            s.target, pairs=pairs[(s.label, client)]))
                self.rows[-1].notes = self.server_cpu_note(cpu[(s.label, client)], s.target)
        return pairs

    def client_desc(self, client, what):
        a = self.args
        if client == "wrk":
            return "wrk -t%d -c%d, Lua rotating over all objects (both sides)" % (a.threads, a.conns)
        if what == "get":
            return ("ft-loader -numworkers %d: -direct over the bucket (FastTier), -url-list "
                    "(nginx)" % a.conns)
        return client

    def skip_reason(self, what):
        for k, why in self.skips:
            if k == what:
                return why
        return "not run"

    def bench_loader_vs_wrk(self, pairs):
        """ft-loader against wrk, both against nginx, from the same rounds of the warm GET runs."""
        for label, metric, target in (("16 KiB", "rps", 0.9), ("8 MiB", "bps", 0.95)):
            title = "ft-loader vs wrk, nginx %s" % label
            if self.loader is None:
                self.rows.append(report.Row(title, "ft-loader -url-list vs wrk (same nginx)",
                                            "ft-loader", "wrk", metric, target,
                                            skipped=self.skip_reason("ft-loader")))
                continue
            lp = pairs[(label, "ft-loader")]
            wp = pairs[(label, "wrk")]
            self.rows.append(report.Row(title, "ft-loader -url-list vs wrk, -c%d (same nginx, same "
                                        "round)" % self.args.conns, "ft-loader", "wrk", metric,
                                        target, pairs=[(l[1], w[1]) for l, w in zip(lp, wp)]))

    def object_files(self, s):
        root = os.path.join(self.target.mountpaths[0], "ais", s.bucket)
        return [os.path.join(root, n) for n in s.names]

    def bench_disk(self):
        """GETs that read from the disk: every object once, right after evicting the object files
        from the page cache (both servers read the same files, so each side gets a fresh eviction)."""
        a = self.args
        for label in ("8 MiB", "128 KiB"):
            s = next(x for x in self.sets if x.label == label)
            title = "GET from disk %s" % label
            desc = ("ft-loader -epochs 1 -uniquegets -numworkers %d: every object once, page cache "
                    "evicted before each run; -direct (FastTier), -url-list (nginx)" % DISK_WORKERS)
            if self.loader is None:
                self.rows.append(report.Row(title, "ft-loader", "FastTier target", "nginx sendfile",
                                            "bps", None, skipped=self.skip_reason("ft-loader")))
                continue
            files = self.object_files(s)
            pairs = []
            still = kept = 0

            def evicted(fn):
                nonlocal still, kept
                n = sysprobe.evict_files(files)
                still, kept = max(still, n), max(kept, sysprobe.resident_bytes(files) if n else 0)
                return fn()

            for rnd in range(a.rounds):
                pairs.append(self.pair(
                    "disk GET", s.label, "ft-loader", rnd,
                    lambda: evicted(lambda: self.loader.run_once_direct(
                        self.cluster.port, s.bucket, s.ft_names, s.size, DISK_WORKERS,
                        log=self.runlog)),
                    lambda: evicted(lambda: self.loader.run_once_url_list(
                        s.nginx_urls, s.size, DISK_WORKERS, log=self.runlog)), "bps"))
            sysprobe.warm_files(files)  # the runs after this one are page-cache runs again
            total = s.size * len(files)
            if still:
                desc += ("; at most %d of %d files kept pages in the page cache at an eviction "
                         "(%d KiB of %d MiB)" % (still, len(files), kept >> 10, total >> 20))
            row = report.Row(title, desc, "FastTier target", "nginx sendfile", "bps", None,
                             pairs=pairs)
            # a few pages a run (one file's last pages under writeback) do not change what the
            # runs measure; 1% of the bytes read from the page cache would
            if kept * 100 > total:
                row.failed = ("%d KiB of the %d MiB of object files stayed in the page cache after "
                              "an eviction: the runs did not read from the disk" % (kept >> 10, total >> 20))
            self.rows.append(row)

    def bench_cold(self):
        """Cold GETs through an ht:// bucket whose origin is nginx, against the same GETs straight
        from that origin. Each A run first destroys and re-creates the bucket (dropping every cached
        copy), then reads every object once through the owning target, which fetches it from the
        origin while streaming it; each B run reads the same files once from the origin itself."""
        a = self.args
        title = "Cold GET 8 MiB"
        ft_side, peer_side = "FastTier (ht:// bucket, cold)", "nginx origin direct"
        s = next(x for x in self.sets if x.label == "8 MiB")
        # The probe is the bucket's creation itself (listing a remote bucket answers 501 even
        # where remote backends work).
        why = self.skip_reason("ft-loader") if self.loader is None else self.cold_setup(s)
        if why:
            skip("cold GET via cluster vs direct from the origin", why)
            self.rows.append(report.Row(title, "-", ft_side, peer_side, "bps", 0.9, skipped=why))
            return
        names, urls = self.cold_files
        pairs = []
        left = []    # cached object files found right after a re-create (must be none)
        cached = []  # and right after an A run (all of them: shows the count finds the cache)
        cpu = {"A": [], "B": []}  # CPU seconds per GiB of each run: (target, origin nginx, client)
        for rnd in range(a.rounds):
            def cold_a():
                try:
                    left.append(self.cold_recreate())
                except (BenchError, OSError, http.client.HTTPException) as e:
                    raise loadgen.LoadError("re-creating the ht:// bucket: %s" % e) from None
                r = self.cpu_of(cpu["A"], lambda: self.loader.run_once_direct(
                    self.cluster.port, COLD_BUCKET, names, s.size, COLD_WORKERS, provider="ht",
                    log=self.runlog))
                cached.append(self.cold_cached())
                return r
            pairs.append(self.pair("cold GET", s.label, "ft-loader", rnd, cold_a,
                                   lambda: self.cpu_of(cpu["B"], lambda: self.loader.run_once_url_list(
                                       urls, s.size, COLD_WORKERS, log=self.runlog)), "bps"))
        try:
            self.cold_destroy()   # frees the mountpath for the rows after this one
        except (BenchError, OSError, http.client.HTTPException) as e:
            log("bench: destroying the ht:// bucket after the cold GETs: %s" % e)
        log("[%s] cold GET: cached object files after each re-create %s, after each A run %s"
            % (self.elapsed(), left, cached))
        desc = ("ft-loader -epochs 1 -uniquegets -numworkers %d: each of %d objects (%d MiB) once "
                "per run; -provider ht -direct, bucket destroyed and re-created before each run "
                "(FastTier), -url-list of the origin (nginx)"
                % (COLD_WORKERS, s.count * COLD_COPIES, s.count * COLD_COPIES * s.size // MIB))
        row = report.Row(title, desc, ft_side, peer_side, "bps", 0.9, pairs=pairs)
        row.notes = self.cold_cpu_note(cpu)
        if any(left):
            row.failed = ("%d cached object files were still on the mountpath after re-creating "
                          "the bucket: the runs were not all cold" % max(left))
        elif cached and min(cached) < s.count * COLD_COPIES:
            row.failed = ("only %d of %d objects were found cached on the mountpath after an A run: "
                          "coldness could not be checked" % (min(cached), s.count * COLD_COPIES))
        self.rows.append(row)

    def cpu_of(self, into, run):
        """run() (one client run); appends its CPU seconds per GiB moved to into: (target, origin
        nginx, client), from /proc/<pid>/stat and the client's rusage. Returns run()'s result."""
        pids = self.nginx.worker_pids()
        t0, n0 = sysprobe.proc_cpu_seconds([self.target.pid]), sysprobe.proc_cpu_seconds(pids)
        c0 = sysprobe.children_cpu_seconds()
        r = run()
        t1, n1 = sysprobe.proc_cpu_seconds([self.target.pid]), sysprobe.proc_cpu_seconds(pids)
        c1 = sysprobe.children_cpu_seconds()
        gib = r.requests * r.object_size / float(1 << 30)
        if r.requests and not r.errors:
            into.append(((t1 - t0) / gib, (n1 - n0) / gib, (c1 - c0) / gib))
        return r

    @staticmethod
    def cold_cpu_note(cpu):
        """The cold row's CPU split (medians over its runs), or None without figures for both sides."""
        if not cpu["A"] or not cpu["B"]:
            return None
        med = [[statistics.median(x[i] for x in cpu[side]) for i in range(3)] for side in ("A", "B")]
        a, b = med
        return ("CPU seconds per GiB delivered (medians of %d/%d runs; /proc/<pid>/stat of the target and of "
                "nginx's workers, the client's rusage): through the cluster target %.2f + origin nginx %.2f "
                "+ ft-loader %.2f = %.2f; straight from the origin nginx %.2f + ft-loader %.2f = %.2f. "
                "Where origin, target and client share the cores and keep them busy (as on 2 cores), the "
                "throughput ratio is bounded by about %.2f/%.2f = %.2fx: the cluster path does the direct "
                "path's work plus the target's receive, store and send of every byte (see the data path "
                "section)."
                % (len(cpu["A"]), len(cpu["B"]), a[0], a[1], a[2], sum(a), b[1], b[2], b[1] + b[2],
                   b[1] + b[2], sum(a), (b[1] + b[2]) / sum(a)))

    def cold_setup(self, s):
        """Serves the 8 MiB objects from the nginx origin under /<COLD_BUCKET>/ (hard links to the
        target's files, else copies) and writes the names and origin URL files. None, or why not."""
        src = os.path.join(self.target.mountpaths[0], "ais", s.bucket)
        dst = os.path.join(self.nginx.origin_root, COLD_BUCKET)
        base = "http://127.0.0.1:%d/%s" % (self.nginx.origin_port, COLD_BUCKET)
        names = os.path.join(self.workdir, "names-cold.txt")
        urls = os.path.join(self.workdir, "urls-origin-cold.txt")
        try:
            with open(names, "w") as fn, open(urls, "w") as fu:
                for copy in range(COLD_COPIES):
                    for name in s.names:
                        cname = "c%d/%s" % (copy, name)
                        path = os.path.join(dst, cname)
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        try:
                            os.link(os.path.join(src, name), path)
                        except OSError:
                            shutil.copyfile(os.path.join(src, name), path)
                        fn.write(cname + "\n")
                        fu.write("%s/%s\n" % (base, cname))
        except OSError as e:
            return "could not lay out the origin's files: %s" % e
        self.cold_files = (names, urls)
        self.cold_endpoint = base
        conns = {}
        try:
            self.cold_recreate()
            st, _, b1 = http_exchange(conns, self.target.public_url + "/v1/objects/%s/c0/%s"
                                      "?provider=ht" % (COLD_BUCKET, s.names[0]))
            st2, _, b2 = http_exchange(conns, "%s/c0/%s" % (base, s.names[0]))
        except ColdUnsupported as e:
            return "remote backends not built yet (%s)" % e
        except (OSError, http.client.HTTPException, BenchError) as e:
            return "the ht:// bucket does not work: %s" % e
        finally:
            for c in conns.values():
                c.close()
        if st != 200 or st2 != 200 or len(b1) != s.size or b1 != b2:
            return ("a cold GET through the ht:// bucket (%d, %d bytes) does not return the origin's "
                    "bytes (%d, %d bytes)" % (st, len(b1), st2, len(b2)))
        return None

    @staticmethod
    def cold_bucket_name():
        return COLD_BUCKET

    @staticmethod
    def cold_workers():
        return COLD_WORKERS

    def cold_destroy(self):
        conns = {}
        try:
            st, _, body = http_exchange(conns, self.cluster.url + "/v1/buckets/%s?provider=ht"
                                        % COLD_BUCKET, "DELETE")
        finally:
            for c in conns.values():
                c.close()
        if st == 501:
            raise ColdUnsupported("the proxy answers 501 to destroying a provider=ht bucket")
        if st not in (200, 404):
            raise BenchError("destroy bucket %s: %d %r" % (COLD_BUCKET, st, body[:200]))

    def cold_recreate(self, cksum=None):
        """Destroys (dropping the cached copies) and re-creates the ht:// bucket, with checksum type
        cksum (None: --cold-cksum's first, the bucket default when not given); returns how many
        object files of it are still on the target's mountpath (0 when every object is cold)."""
        self.cold_destroy()
        value = {"backend": {"provider": "ht", "endpoint": self.cold_endpoint}}
        cksum = cksum or (self.args.cold_cksum.split(",")[0] if self.args.cold_cksum else None)
        if cksum:
            value["checksum"] = {"type": cksum}
        conns = {}
        try:
            st, _, body = http_exchange(conns, self.cluster.url + "/v1/buckets/%s?provider=ht"
                                        % COLD_BUCKET, "POST",
                                        json.dumps({"action": "create-bck", "value": value}).encode(),
                                        {"Content-Type": "application/json"})
        finally:
            for c in conns.values():
                c.close()
        if st == 501:
            raise ColdUnsupported("the proxy answers 501 to create-bck with provider=ht")
        if st != 200:
            raise BenchError("create ht:// bucket %s: %d %r" % (COLD_BUCKET, st, body[:200]))
        self.wait_retired_trees()
        return self.cold_cached()

    def wait_retired_trees(self, limit=60.0):
        """Waits (at most limit seconds) until the target has deleted the retired bucket trees
        ("rm.*" in <mountpath>/.work) of the previous run: that deletion is the harness's way to
        make the objects cold, not part of a cold GET, and must not share the cores with one."""
        work = os.path.join(self.target.mountpaths[0], ".work")
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                if not any(n.startswith("rm.") for n in os.listdir(work)):
                    return
            except OSError:
                return
            time.sleep(0.05)
        log("bench: retired bucket trees still in %s after %.0f s" % (work, limit))

    def cold_cached(self):
        """Object files of the ht:// bucket on the target's mountpath (any directory named after
        the bucket, whatever the provider's place in the layout)."""
        n = 0
        for root, _dirs, files in os.walk(self.target.mountpaths[0]):
            if COLD_BUCKET in root.split(os.sep):
                n += len(files)
        return n

    def bench_s3(self):
        title = "S3 GET vs native GET 128 KiB"
        conns = {}
        try:
            st, hdrs, body = http_exchange(conns, self.cluster.url + "/s3")
        except (OSError, http.client.HTTPException) as e:
            st, hdrs, body = None, {}, str(e).encode()
        for c in conns.values():
            c.close()
        s3 = st is not None and ("xml" in hdrs.get("content-type", "")
                                 or body.lstrip().startswith(b"<"))
        keys = self.s3_keys() if s3 else None
        if not s3:
            why = ("the proxy has no S3 API yet (GET /s3 answers %s, not S3 XML)"
                   % (st if st is not None else "nothing"))
        elif self.loader is None:
            why = "/s3 answers, but ft-loader (the S3 client of this row) is not built"
        elif keys is None:
            why = ("/s3 answers, but the cluster has no S3 key pair (scripts/ftcluster.py writes "
                   "<dir>/s3keys.json and passes --s3_keys to the proxy)")
        else:
            why = None
        if why:
            skip("S3 GET vs native GET", why)
            self.rows.append(report.Row(title, "ft-loader -s3endpoint vs ft-loader (proxy)",
                                        "S3 API", "native API", "rps", None, skipped=why))
            return
        s = next(x for x in self.sets if x.label == "128 KiB")
        pairs = []
        for rnd in range(self.args.rounds):
            pairs.append(self.pair("S3 GET", s.label, "ft-loader", rnd,
                                   lambda: self.loader.run_s3(self.cluster.url + "/s3", keys,
                                                              s.bucket, s.ft_names, s.size,
                                                              self.args.seconds, self.args.conns,
                                                              log=self.runlog),
                                   lambda: self.loader.run_native(self.cluster.port, s.bucket,
                                                                  s.ft_names, s.size,
                                                                  self.args.seconds,
                                                                  self.args.conns, log=self.runlog),
                                   "rps"))
        self.rows.append(report.Row(title, "ft-loader -numworkers %d: -s3endpoint <proxy>/s3 "
                                    "(relayed by the proxy) vs native API (307 to the target)"
                                    % self.args.conns, "S3 API", "native API", "rps", None,
                                    pairs=pairs))

    def run_put(self, client, side):
        a = self.args
        if client == "wrk":
            if side == "fasttier":
                return loadgen.run_wrk(self.target.public_url, self.put_paths["ft"], PUT_SIZE,
                                       a.seconds, a.conns, a.threads, method="PUT", log=self.runlog)
            return loadgen.run_wrk("http://127.0.0.1:%d" % self.nginx.dav_port,
                                   self.put_paths["nginx"], PUT_SIZE, a.seconds, a.conns,
                                   a.threads, method="PUT", log=self.runlog)
        urls = self.put_paths["ft_urls" if side == "fasttier" else "nginx_urls"]
        return self.loader.run_url_list(urls, PUT_SIZE, a.seconds, a.conns, op="PUT",
                                        log=self.runlog)

    def s3_keys(self):
        """(access key, secret) the proxy accepts, from the launcher, or None."""
        get = getattr(self.cluster, "s3_keys", None)
        if get is None:
            return None
        try:
            return get()
        except (OSError, ValueError, ftcluster.ClusterError):
            return None

    def bench_put(self):
        a = self.args
        pairs = {}
        for rnd in range(a.rounds):
            for client in self.clients():
                pairs.setdefault(client, []).append(self.pair(
                    "PUT", "1 MiB", client, rnd, lambda: self.run_put(client, "fasttier"),
                    lambda: self.run_put(client, "nginx"), "rps"))
        for client in ["wrk", "ft-loader"]:
            if client == "wrk":
                desc = ("wrk -t%d -c%d, Lua PUTs rotating over %d names (both sides)"
                        % (a.threads, a.conns, PUT_NAMES))
            else:
                desc = ("ft-loader -url-list -pctput 100 -numworkers %d over %d names (both sides)"
                        % (a.conns, PUT_NAMES))
            if client not in pairs:
                self.rows.append(report.Row("PUT 1 MiB", client, "FastTier target", "nginx WebDAV",
                                            "rps", 0.8, skipped=self.skip_reason("ft-loader")))
                continue
            self.rows.append(report.Row("PUT 1 MiB", desc, "FastTier target", "nginx WebDAV", "rps",
                                        0.8, pairs=pairs[client]))

    def bench_rss(self):
        """VmRSS of the target (and of nginx, master + workers) while wrk holds 256 connections."""
        a = self.args
        s = next(x for x in self.sets if x.label == "128 KiB")
        cases = [
            ("GET 128 KiB", lambda base, paths: loadgen.run_wrk(
                base, paths, s.size, a.rss_seconds, RSS_CONNS, a.threads, log=self.runlog),
             s.ft_paths, s.nginx_paths, self.nginx.get_port),
            ("PUT 1 MiB", lambda base, paths: loadgen.run_wrk(
                base, paths, PUT_SIZE, a.rss_seconds, RSS_CONNS, a.threads, method="PUT",
                log=self.runlog),
             self.put_paths["ft"], self.put_paths["nginx"], self.nginx.dav_port),
        ]
        for what, fn, ft_paths, ng_paths, ng_port in cases:
            idle = sysprobe.rss_bytes([self.target.pid])
            ft = sysprobe.sample_during(lambda: fn(self.target.public_url, ft_paths),
                                        [self.target.pid], self.target.public_port)
            ng = sysprobe.sample_during(lambda: fn("http://127.0.0.1:%d" % ng_port, ng_paths),
                                        self.nginx.pids(), ng_port)
            log("[%s] RSS %-11s target %.1f MiB (idle %.1f MiB, %d conns seen) | nginx %.1f MiB "
                "(%d conns seen)" % (self.elapsed(), what, ft.max_rss / MIB, idle / MIB,
                                     ft.max_conns, ng.max_rss / MIB, ng.max_conns))
            self.raw.append({"group": "RSS", "label": what, "client": "wrk -c%d" % RSS_CONNS,
                             "target_rss_max": ft.max_rss, "target_rss_idle": idle,
                             "target_conns": ft.max_conns, "nginx_rss_max": ng.max_rss,
                             "nginx_conns": ng.max_conns,
                             "target_run": ft.result.to_json() if ft.result else ft.error,
                             "nginx_run": ng.result.to_json() if ng.result else ng.error})
            row = report.Row("Target RSS, 256 conns, %s" % what,
                             "wrk -t%d -c%d, %d s" % (a.threads, RSS_CONNS, a.rss_seconds),
                             "FastTier target", "nginx master+workers", "rss", RSS_LIMIT,
                             rss=(ft, ng, idle))
            if ft.error or ft.max_conns < RSS_CONNS:
                row.failed = ft.error or ("only %d of %d connections were established"
                                          % (ft.max_conns, RSS_CONNS))
            self.rows.append(row)

    def bench_perf(self):
        if self.args.no_perf:
            skip("perf counters", "--no-perf given")
            return
        ok, why = sysprobe.perf_usable()
        if not ok:
            skip("perf counters", why)
            self.skips.append(("perf", why))
            return
        a = self.args
        self.perf = []
        csv = os.path.join(self.workdir, "perf-stat.csv")
        cases = []
        for s in self.sets:
            if s.label != "1 MiB":
                cases.append((s.label, "fasttier", [self.target.pid],
                              lambda s=s: self.run_get("wrk", "fasttier", s)))
                cases.append((s.label, "nginx", self.nginx.worker_pids(),
                              lambda s=s: self.run_get("wrk", "nginx", s)))
        cases.append(("PUT 1 MiB", "fasttier", [self.target.pid],
                      lambda: self.run_put("wrk", "fasttier")))
        cases.append(("PUT 1 MiB", "nginx", self.nginx.worker_pids(),
                      lambda: self.run_put("wrk", "nginx")))
        for label, side, pids, fn in cases:
            hw = sysprobe.perf_during(fn, pids, a.seconds, csv, sysprobe.PERF_HW)
            tp = sysprobe.perf_during(fn, pids, a.seconds, csv, sysprobe.PERF_TRACE)
            if hw.error or tp.error:
                log("[%s] perf %s %s: %s" % (self.elapsed(), label, side, hw.error or tp.error))
                continue
            self.perf.append({"label": label, "side": side, "hw": hw.counters,
                              "hw_requests": hw.result.requests, "rps": hw.result.rps,
                              "trace": tp.counters, "trace_requests": tp.result.requests})
            log("[%s] perf %-9s %-8s %s" % (self.elapsed(), label, side,
                                            report.perf_summary(self.perf[-1])))

    def hold(self):
        """--hold: keep the cluster and nginx up for measuring by hand, until SIGINT or SIGTERM."""
        info = {"proxy": self.cluster.url, "target": self.target.public_url,
                "target_pid": self.target.pid, "nginx_get": "http://127.0.0.1:%d" % self.nginx.get_port,
                "nginx_dav": "http://127.0.0.1:%d" % self.nginx.dav_port,
                "nginx_worker_pids": self.nginx.worker_pids(),
                "paths": {s.label: {"target": s.ft_paths, "nginx": s.nginx_paths,
                                    "nginx_urls": s.nginx_urls, "names": s.ft_names,
                                    "bucket": s.bucket} for s in self.sets},
                "put_paths": self.put_paths}
        if self.args.only == "cold":
            s = next(x for x in self.sets if x.label == "8 MiB")
            why = self.skip_reason("ft-loader") if self.loader is None else self.cold_setup(s)
            if why:
                raise BenchError("cold GET setup: %s" % why)
            info["cold"] = {"bucket": COLD_BUCKET, "provider": "ht", "endpoint": self.cold_endpoint,
                            "checksum": (self.args.cold_cksum or "xxhash").split(",")[0],
                            "names": self.cold_files[0], "origin_urls": self.cold_files[1],
                            "loader": self.loader.path, "workers": COLD_WORKERS, "size": s.size}
        if self.args.only == "s3relay":
            info["s3relay"] = s3relay.hold_info(self)
        with open(os.path.join(self.workdir, "hold.json"), "w") as f:
            json.dump(info, f, indent=1)
        log("bench: holding (Ctrl-C or SIGTERM stops): %s/hold.json\n%s"
            % (self.workdir, json.dumps(info, indent=1)))
        try:
            while self.target.alive():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        return 0

    def run_only(self, bench):
        """--only cold|protect: those rows alone (bench()), printed with the load before and after;
        no report."""
        load0 = sysprobe.loadavg()
        bench()
        print()
        print(report.table_text(self.rows))
        for row in self.rows:
            log("bench: %s per-round ratios %s" % (row.title, " ".join("%.3f" % x for x in row.ratios())))
            if row.notes:
                log("bench: %s: %s" % (row.title, row.notes))
        log("bench: load average before %s, after %s" % (load0, sysprobe.loadavg()))
        return 0 if all(not r.failed and not r.skipped for r in self.rows) else 1

    # ---- teardown ----
    def teardown(self):
        if self.nginx is not None:
            self.nginx.stop()
        if self.cluster is not None:
            status = self.cluster.stop()
            bad = {k: v for k, v in status.items() if v != 0}
            if bad:
                log("bench: unclean exits of cluster nodes: %s (logs in %s/logs)"
                    % (bad, self.cluster.dir))
        if self.runlog is not None:
            self.runlog.close()
        if not self.args.keep and os.path.isdir(self.workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def run(self):
        a = self.args
        machine = sysprobe.machine_info()
        log("bench: %s, %d CPUs, kernel %s, load %s" % (machine["date"], machine["nproc"],
                                                        machine["kernel"], machine["loadavg"]))
        try:
            if a.only == "protect":
                self.setup_own_cluster_only()
                return self.run_only(lambda: protect.bench_protect(self, ftcluster))
            if a.only == "fcache":
                self.setup_own_cluster_only()
                return self.run_only(lambda: fcache.bench_fcache(self, ftcluster))
            if a.only == "tls":
                self.setup_own_cluster_only()
                return self.run_only(lambda: tls.bench_tls(self, ftcluster))
            if a.only == "copy":
                self.setup_own_cluster_only()
                return self.run_only(lambda: copybck.bench_copy(self, ftcluster))
            if a.only == "dataloader":
                self.setup_own_cluster_only()
                return self.run_only(lambda: dataloader.bench_dataloader(self, ftcluster))
            if a.only == "hints":
                self.setup_own_cluster_only()
                return self.run_only(lambda: hints.bench_hints(self, a.hints_rate, a.hints_rounds))
            self.setup()
            if a.hold:
                return self.hold()
            if a.only == "cold":
                return self.run_only(self.bench_cold)
            if a.only == "coldnet":
                return self.run_only(lambda: coldnet.bench_coldnet(self, a.coldnet_rate))
            if a.only == "coldcksum":
                return coldcksum.bench_cold_cksum(self, (a.cold_cksum or "xxhash,xxh3,crc32c").split(","))
            if a.only == "shards":
                return self.run_only(lambda: (shards.bench_shards(self), shards.bench_batch(self),
                                              shards.bench_dataloader(self)))
            if a.only == "dsort":
                return self.run_only(lambda: dsort.bench_dsort(self))
            if a.only == "batch":
                return self.run_only(lambda: shards.bench_batch(self))
            if a.only == "loader":
                return self.run_only(lambda: loadercmp.bench_loader_vs_wrk(self))
            if a.only == "s3relay":
                return self.run_only(lambda: s3relay.bench_s3relay(self))
            if a.only == "pagecache":
                return self.run_only(lambda: (self.bench_disk(), pagecache.bench_pagecache(self)))
            self.warm_up()
            pairs = self.bench_get()
            self.bench_loader_vs_wrk(pairs)
            loadercmp.bench_loader_vs_wrk(self)
            self.bench_disk()
            pagecache.bench_pagecache(self)
            self.bench_cold()
            coldnet.bench_coldnet(self, a.coldnet_rate)
            self.bench_put()
            self.bench_s3()
            s3relay.bench_s3relay(self)
            self.bench_rss()
            self.bench_perf()
            shards.bench_shards(self)
            shards.bench_batch(self)
            shards.bench_dataloader(self)
            dsort.bench_dsort(self)
            copybck.bench_copy(self, ftcluster)
            dataloader.bench_dataloader(self, ftcluster)
            tls.bench_tls(self, ftcluster)
            protect.bench_protect(self, ftcluster)
            hints.bench_hints(self, a.hints_rate, a.hints_rounds)
            machine["loadavg_end"] = sysprobe.loadavg()
            machine["seconds"] = time.monotonic() - self.t0
            machine["versions"] = sysprobe.versions(self.bindir)
            setup = {"rounds": a.rounds, "seconds": a.seconds, "conns": a.conns,
                     "threads": a.threads, "nginx_workers": self.nginx.workers,
                     "target_threads": "loop threads = CPUs (default)",
                     "sizes": [(s.label, s.size, s.count) for s in self.sets],
                     "loader": self.loader.path if self.loader else None,
                     "command": "make bench" if os.environ.get("MAKELEVEL") else " ".join(sys.argv)}
            order = ["Warm GET 8 MiB", "Warm GET 1 MiB", "Warm GET 128 KiB", "Warm GET 16 KiB",
                     "Shard member GET", "GetBatch", "PyTorch DataLoader", "dsort", "Copy bucket", "GET from disk", "Cached GET 16 KiB p99", "Cold GET 8 MiB", "PUT 1 MiB", "Data protection", "Epoch hints", "S3 GET", "S3 relay GET", "nginx proxy_pass GET", "ft-loader vs wrk", "Target RSS"]
            self.rows.sort(key=lambda r: next((i for i, o in enumerate(order)
                                               if r.title.startswith(o)), len(order)))
            text = report.table_text(self.rows)
            print()
            print(text)
            out = a.out if os.path.isabs(a.out) else os.path.join(ROOT, a.out)
            png = os.path.join(os.path.dirname(out), "benchmarks-throughput.png")
            plot_ok = report.plot(self.rows, os.path.join(self.workdir, "throughput.dat"), png)
            report.write_markdown(out, self.rows, machine, setup, self.raw, self.perf,
                                  os.path.basename(png) if plot_ok is True else None, plot_ok,
                                  os.path.join(HERE, "datapath.md"))
            with open(os.path.join(self.build, "bench-results.json"), "w") as f:
                json.dump({"machine": machine, "setup": setup, "runs": self.raw,
                           "perf": self.perf}, f, indent=1)
            log("bench: wrote %s, %s and %s/bench-results.json in %.0f s"
                % (os.path.relpath(out, ROOT), os.path.relpath(png, ROOT),
                   os.path.relpath(self.build, ROOT), time.monotonic() - self.t0))
            return 0
        finally:
            self.teardown()


def parse_args(argv):
    p = argparse.ArgumentParser(description="FastTier vs nginx (and ft-loader vs wrk), alternating runs on loopback.")
    p.add_argument("--build", default="build", help="build tree with bin/ft-proxy, bin/ft-target (and bin/ft-loader)")
    p.add_argument("--rounds", type=int, default=5, help="A/B rounds per comparison (default 5)")
    p.add_argument("--seconds", type=int, default=2, help="seconds per run (default 2)")
    p.add_argument("--rss-seconds", type=int, default=4, help="seconds of the 256-connection runs")
    p.add_argument("--conns", type=int, default=32, help="client connections (wrk -c, ft-loader -numworkers)")
    p.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    p.add_argument("--no-perf", action="store_true", help="skip the perf stat counters")
    p.add_argument("--quick", action="store_true", help="1 round of 2 s, no perf (for trying the harness)")
    p.add_argument("--keep", action="store_true", help="keep <build>/bench-run (cluster, nginx, logs)")
    p.add_argument("--hold", action="store_true",
                   help="start the cluster and nginx, write <build>/bench-run/hold.json, wait for Ctrl-C")
    p.add_argument("--dsort-full", action="store_true",
                   help="the dsort row over 2 GiB of shards (default 64 MiB, about a minute)")
    p.add_argument("--only", choices=["cold", "coldcksum", "coldnet", "protect", "hints", "shards", "dsort", "tls", "batch",
                                      "copy", "dataloader", "loader", "s3relay", "pagecache", "fcache"],
                   help="run some rows only and print them (no report written): cold = the cold GET "
                   "row, protect = the data protection rows (PUT with mirror 2 and EC 2+1 vs none), "
                   "hints = the epoch hints rows (order hints vs LRU over a rate-limited origin), shards = the "
                   "shard rows (archpath GETs of 16 KiB members of a 1 GiB TAR vs 16 KiB objects; GetBatch of "
                   "1,000 x 16 KiB vs single GETs), dsort = the dsort row (bench/dsort.py), tls = the TLS rows (warm "
                   "GET 8 MiB and 128 KiB over HTTPS vs nginx over HTTPS, same certificate), batch = the GetBatch "
                   "row alone, copy = the copy-bck row (bench/copybck.py), dataloader = the DataLoader rows over "
                   "S3 (bench/dataloader.py), loader = ft-loader vs wrk on nginx at 16 KiB, back to back, with "
                   "client CPU per request (bench/loadercmp.py), coldnet = the cold GET row with the origin in a "
                   "network namespace behind a rate-limited veth pair (bench/coldnet.py), s3relay = the S3 relay "
                   "rows (bench/s3relay.py: presigned S3 GETs through the proxy and nginx proxy_pass vs nginx "
                   "direct), pagecache = the GET from disk rows and the p99 of cached 16 KiB GETs during "
                   "uncached 8 MiB reads (bench/pagecache.py), fcache = warm 16 KiB GETs with the target's open-file "
                   "cache on vs off (bench/fcache.py)")
    p.add_argument("--fcache-entries", type=int, default=None,
                   help="--only fcache: --open_file_cache of the cache-on target (default: its default)")
    p.add_argument("--fcache-before", default=None,
                   help="--only fcache: bin directory of a build without the cache for side B (default: this "
                   "build with --open_file_cache 0)")
    p.add_argument("--fcache-syscalls", action="store_true",
                   help="--only fcache: also count the target's system calls per GET (perf stat of the syscall "
                   "tracepoints, one more run a side)")
    p.add_argument("--ports", default=None,
                   help="LO-HI: the loopback ports of the main cluster and nginx come from this range (default "
                   "%d-%d)" % (PORT_LO, PORT_HI - 100))
    p.add_argument("--cold-cksum", default=None,
                   help="checksum type of the cold row's ht:// bucket (default: the bucket default, xxhash); with "
                   "--only coldcksum the comma-separated types to compare, the first one the base (default "
                   "xxhash,xxh3,crc32c)")
    p.add_argument("--coldnet-rate", default=coldnet.RATE,
                   help="bandwidth of the coldnet row's link to the origin (tc htb rate, default %s)" % coldnet.RATE)
    p.add_argument("--hints-rate", default=hints.RATE,
                   help="bandwidth of the epoch hints rows' origin (tc htb rate, default %s)" % hints.RATE)
    p.add_argument("--hints-rounds", type=int, default=hints.ROUNDS,
                   help="rounds of the epoch hints rows, each running every variant (default %d)" % hints.ROUNDS)
    p.add_argument("--out", default="docs/benchmarks.md", help="report path (the PNG goes beside it)")
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.seconds, a.no_perf, a.rss_seconds = 1, 2, True, 2
    if a.rounds < 1 or a.seconds < 1 or a.hints_rounds < 1:
        p.error("--rounds, --seconds and --hints-rounds must be >= 1")
    if a.hold and a.only in ("protect", "hints", "tls", "copy", "dataloader", "coldnet"):
        p.error("--hold is not supported with --only %s (its cluster lives only for its runs)" % a.only)
    return a


def on_term(signum, _frame):
    # SystemExit unwinds through Bench.run's finally: the cluster and nginx are always stopped.
    raise SystemExit(128 + signum)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, on_term)
    try:
        return Bench(args).run()
    except (BenchError, ftcluster.ClusterError, peers.PeerError) as e:
        print("bench: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
