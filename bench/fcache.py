# SPDX-License-Identifier: Apache-2.0
# `bench/run.py --only fcache`: warm 16 KiB GETs with the target's open-file cache on against off: rate and CPU per GET.
"""
DESIGN
Two clusters of their own (1 proxy + 1 target, 1 mountpath each), from the same binaries: A with the
open-file cache at its default (target/core/fcache.h), B with --open_file_cache 0 (every GET opens,
reads the metadata xattr and closes, as before the cache); --fcache-before DIR makes B the binaries
of DIR instead (a build without the cache). Each holds OBJECTS objects of 16 KiB in a
bucket, PUT through its proxy. Each round runs wrk (the Lua rotation over all objects) straight at A's
target, then at B's, for --seconds (at least MIN_SECONDS); the target's CPU per GET comes from
/proc/<pid>/stat around each run. With --fcache-syscalls, one more run per side under
`perf stat` of the syscall tracepoints gives the system calls per GET.
The row is the ratio of A's GET rate to B's (target 1.0: the cache must not cost); the notes carry
both targets' CPU per GET and the system calls per GET.
"""
import http.client
import json
import os
import signal
import shutil
import statistics
import subprocess
import time
import urllib.parse

import loadgen
import report
import sysprobe

SIZE = 16 * 1024
OBJECTS = 1000
MIN_SECONDS = 4
TITLE = "Warm GET 16 KiB, open-file cache on / off"


def _request(url, method="GET", body=None, headers=None):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        c.request(method, u.path + ("?" + u.query if u.query else ""), body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.getheader("Location"), r.read()
    finally:
        c.close()


def _fill(b, cl, tag):
    """The bucket and OBJECTS objects through cl's proxy; returns the paths file for wrk."""
    bucket = "bench-fcache"
    st, _, body = _request(cl.url + "/v1/buckets/" + bucket, "POST",
                           json.dumps({"action": "create-bck"}).encode(), {"Content-Type": "application/json"})
    if st != 200:
        raise b.Error("create bucket %s: %d %r" % (bucket, st, body[:200]))
    payload = bytearray(os.urandom(SIZE))
    paths = os.path.join(b.workdir, "paths-fcache-%s.txt" % tag)
    with open(paths, "w") as f:
        for i in range(OBJECTS):
            payload[:8] = i.to_bytes(8, "little")
            path = "/v1/objects/%s/o/%05d" % (bucket, i)
            st, loc, body = _request(cl.url + path, "PUT", b"")
            if st != 307 or not loc:
                raise b.Error("PUT %s at the proxy: want a 307, got %d" % (path, st))
            st, _, body = _request(loc, "PUT", bytes(payload))
            if st != 200:
                raise b.Error("PUT %s at %s: %d %r" % (path, loc, st, body[:200]))
            f.write(path + "\n")
    return paths


SYSCALLS = ["openat", "newfstatat", "fgetxattr", "close", "cachestat", "sendfile64", "sendto", "io_uring_enter"]


def _syscalls_per_get(b, target, paths, seconds):
    """System calls of the target per GET during a wrk run ({name: per GET}, "all" for every one), counted by
    perf stat on the syscall tracepoints (no slow-down of the target); None where perf cannot."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    out = os.path.join(b.workdir, "perf-syscalls-%d.txt" % target.pid)
    events = ["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + n for n in SYSCALLS]
    b.measured(lambda: loadgen.run_wrk(target.public_url, paths, SIZE, 1, b.args.conns, b.args.threads,
                                       log=b.runlog))  # warm: every loop has kept every file
    p = subprocess.Popen([perf, "stat", "-x", ",", "-o", out, "-e", ",".join(events), "-p", str(target.pid)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        r = loadgen.run_wrk(target.public_url, paths, SIZE, seconds, b.args.conns, b.args.threads, log=b.runlog)
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(30)
    calls = {}
    with open(out) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) > 2 and parts[0].isdigit():
                name = parts[2].split(":")[1].replace("sys_enter_", "")
                calls["all" if name == "sys_enter" else name] = int(parts[0]) / max(r.requests, 1)
    return calls or None


def _vm_rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None


def bench_fcache(b, ftcluster):
    """Appends the open-file cache row to b.rows (b: the bench harness of bench/run.py)."""
    a = b.args
    seconds = max(a.seconds, MIN_SECONDS)
    clusters = []
    try:
        entries = getattr(a, "fcache_entries", None)
        before = getattr(a, "fcache_before", None)  # B: binaries without the cache, instead of the cache off
        on = ["--open_file_cache", str(entries)] if entries else []
        off = [] if before else ["--open_file_cache", "0"]
        for tag, extra, bindir in (("on", on, b.bindir), ("off", off, before or b.bindir)):
            cl = ftcluster.Cluster(os.path.join(b.workdir, "fcache-" + tag), b.pick_ports(8), targets=1,
                                   mountpaths=1, bindir=bindir, target_args=extra)
            clusters.append(cl)
            cl.start()
        paths = [_fill(b, cl, tag) for cl, tag in zip(clusters, ("on", "off"))]
        targets = [cl.targets[0] for cl in clusters]
        for t, p in zip(targets, paths):  # warm-up: page cache, and the cache's entries
            b.measured(lambda: loadgen.run_wrk(t.public_url, p, SIZE, 1, a.conns, a.threads, log=b.runlog))
        cpu = {"A": [], "B": []}
        pairs = []
        for rnd in range(a.rounds):
            ra, rb = b.pair("fcache", "16 KiB", "wrk", rnd,
                            lambda: b.cpu_per_request(cpu["A"], [targets[0].pid], lambda: loadgen.run_wrk(
                                targets[0].public_url, paths[0], SIZE, seconds, a.conns, a.threads,
                                log=b.runlog)),
                            lambda: b.cpu_per_request(cpu["B"], [targets[1].pid], lambda: loadgen.run_wrk(
                                targets[1].public_url, paths[1], SIZE, seconds, a.conns, a.threads,
                                log=b.runlog)),
                            "rps")
            pairs.append((ra, rb))
        row = report.Row(TITLE, "wrk -t%d -c%d -d%ds straight to the target, Lua rotating over %d objects" % (
            a.threads, a.conns, seconds, OBJECTS),
            "cache on" + (" (%d entries a loop)" % entries if entries else ""),
            "binaries of %s" % before if before else "cache off (--open_file_cache 0)", "rps", 1.0,
            pairs=pairs)
        notes = []
        if cpu["A"] and cpu["B"]:
            notes.append("Target CPU per GET (medians of %d/%d runs, /proc/<pid>/stat): A %.2f us, B %.2f us "
                         "(%.2fx); per round: A %s, B %s." % (
                             len(cpu["A"]), len(cpu["B"]), statistics.median(cpu["A"]),
                             statistics.median(cpu["B"]),
                             statistics.median(cpu["A"]) / statistics.median(cpu["B"]),
                             " ".join("%.2f" % x for x in cpu["A"]), " ".join("%.2f" % x for x in cpu["B"])))
        rss = [_vm_rss_kib(t.pid) for t in targets]
        if None not in rss:
            notes.append("Target VmRSS after the rounds: A %.1f MiB, B %.1f MiB." % (rss[0] / 1024, rss[1] / 1024))
        if getattr(a, "fcache_syscalls", False):
            for side, t, p in (("on", targets[0], paths[0]), ("before" if before else "off", targets[1], paths[1])):
                calls = _syscalls_per_get(b, t, p, seconds)
                if calls is None:
                    notes.append("System calls: not counted (perf stat of the syscall tracepoints failed).")
                    break
                notes.append("System calls per GET, %s (perf stat, syscall tracepoints, %d s): %.2f in all; %s." % (
                    side, seconds, calls.pop("all", 0), ", ".join("%s %.2f" % (n, calls.get(n, 0)) for n in SYSCALLS)))
        row.notes = " ".join(notes) or None
        print("bench: %s" % (row.notes or "no CPU figures"), flush=True)
        b.rows.append(row)
    finally:
        for cl in clusters:
            status = cl.stop()
            bad = {k: v for k, v in status.items() if v != 0}
            if bad:
                print("bench: unclean exits of open-file cache cluster nodes: %s (logs in %s/logs)"
                      % (bad, cl.dir), flush=True)
    return sysprobe.loadavg()
