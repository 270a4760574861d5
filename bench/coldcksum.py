# SPDX-License-Identifier: Apache-2.0
# The cold GET row's target CPU per GiB for each bucket checksum type (`bench/run.py --only coldcksum`).
"""
Each round runs one cold pass per type (each round starting with the next type, so drift from other
load hits the types alike): the ht:// bucket of the cold row is destroyed and re-created with the
type, then ft-loader reads every object once through the owning target, which fetches it from the
nginx origin, hashes it with the type and stores it. The target's CPU over the pass is taken twice:
`perf record -e task-clock -c 100000 -p <target>` (a sample per 0.1 ms of its CPU, when perf runs
here) and /proc/<pid>/stat; both are divided by the GiB delivered. perf's samples are also split by
library: those in the type's hashing library (libxxhash for xxhash and xxh3, libisal for crc32c,
libcrypto for md5 and sha256) give the hashing's own CPU per GiB, a figure other load on the machine
disturbs far less than the total. The table gives per type the medians over rounds and the median of
the per-round ratio of the total to the first type's (the same round's pass), with its range.
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import sysprobe

PERF = "/usr/bin/perf"
PERIOD_NS = 100000  # perf record: one sample per 0.1 ms of the target's CPU
HASH_DSO = {"xxhash": "libxxhash", "xxh3": "libxxhash", "crc32c": "libisal", "md5": "libcrypto", "sha256": "libcrypto"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def task_clock_during(run, pid, dso):
    """(run()'s result, (task-clock seconds of pid over it, of them in the library dso) or None): perf record of
    task-clock on pid, stopped by SIGINT, read back by library."""
    if not os.access(PERF, os.X_OK):
        return run(), None
    fd, path = tempfile.mkstemp(prefix="perf-task-clock.", suffix=".data")
    os.close(fd)
    perf = subprocess.Popen([PERF, "record", "-q", "-e", "task-clock", "-c", str(PERIOD_NS), "-p", str(pid),
                             "-o", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # attached before the load starts
    try:
        r = run()
    finally:
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
    total = inside = 0
    try:
        rep = subprocess.run([PERF, "report", "-i", path, "--stdio", "--no-children", "--sort", "dso", "-F",
                              "sample,dso"], capture_output=True, text=True, timeout=120).stdout
        for line in rep.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0].isdigit():
                total += int(parts[0])
                if dso in parts[1]:
                    inside += int(parts[0])
    except (OSError, subprocess.SubprocessError):
        total = 0
    finally:
        os.unlink(path)
    return r, ((total * PERIOD_NS / 1e9, inside * PERIOD_NS / 1e9) if total else None)


def one_pass(h, s, names, cksum):
    """A cold pass into a bucket of type cksum: (GiB/s, perf s/GiB or None, /proc s/GiB, hashing s/GiB or None),
    or None when it failed."""
    left = h.cold_recreate(cksum)
    if left:
        log("coldcksum: %d cached object files left after re-creating the bucket (%s): pass dropped" % (left, cksum))
        return None
    pid = h.target.pid
    c0 = sysprobe.proc_cpu_seconds([pid])
    r, perf_secs = task_clock_during(lambda: h.loader.run_once_direct(
        h.cluster.port, h.cold_bucket_name(), names, s.size, h.cold_workers(), provider="ht", log=h.runlog), pid,
        HASH_DSO.get(cksum, "?"))
    c1 = sysprobe.proc_cpu_seconds([pid])
    if not r.requests or r.errors:
        log("coldcksum: %s pass failed: %s" % (cksum, r.detail))
        return None
    gib = r.requests * r.object_size / float(1 << 30)
    if perf_secs is None:
        return (gib / r.seconds, None, (c1 - c0) / gib, None)
    return (gib / r.seconds, perf_secs[0] / gib, (c1 - c0) / gib, perf_secs[1] / gib)


def bench_cold_cksum(h, types):
    """Prints the table; returns 0, or 1 when a type has no completed pass."""
    s = next(x for x in h.sets if x.label == "8 MiB")
    why = h.skip_reason("ft-loader") if h.loader is None else h.cold_setup(s)
    if why:
        log("skip: cold GET per checksum type: %s" % why)
        return 1
    names = h.cold_files[0]
    got = {t: [] for t in types}   # per round: (GiB/s, perf s/GiB, /proc s/GiB) or None
    load0 = sysprobe.loadavg()
    for rnd in range(h.args.rounds):
        order = [types[(i + rnd) % len(types)] for i in range(len(types))]
        for t in order:
            p = one_pass(h, s, names, t)
            got[t].append(p)
            if p is not None:
                log("[%s] cold GET round %d %-7s %.2f GiB/s, target CPU %s s/GiB (perf task-clock; hashing %s), "
                    "%.3f (/proc), load %s" % (h.elapsed(), rnd + 1, t, p[0], "%.3f" % p[1] if p[1] is not None else "-",
                                               "%.3f" % p[3] if p[3] is not None else "-", p[2], sysprobe.loadavg()))
    h.cold_recreate(None)
    h.cold_destroy()
    load1 = sysprobe.loadavg()
    base = types[0]
    print("\nCold GET 8 MiB through an ht:// bucket, target CPU per GiB by bucket checksum type "
          "(%d rounds, load %s -> %s)" % (h.args.rounds, load0, load1))
    print("%-8s %9s %12s %22s %14s %26s" % ("type", "GiB/s", "perf s/GiB", "hashing s/GiB (range)", "/proc s/GiB",
                                           "CPU vs %s (range)" % base))
    rc = 0
    for t in types:
        ok = [p for p in got[t] if p is not None]
        if not ok:
            print("%-8s no completed pass" % t)
            rc = 1
            continue
        key = 1 if all(p[1] is not None for p in ok) else 2
        ratios = [a[key] / b[key] for a, b in zip(got[t], got[base]) if a is not None and b is not None]
        print("%-8s %9.2f %12s %22s %14.3f %26s" % (
            t, statistics.median(p[0] for p in ok),
            "%.3f" % statistics.median(p[1] for p in ok) if key == 1 else "-",
            "%.3f (%.3f-%.3f)" % (statistics.median(p[3] for p in ok), min(p[3] for p in ok), max(p[3] for p in ok))
            if key == 1 else "-",
            statistics.median(p[2] for p in ok),
            "%.3f (%.3f-%.3f)" % (statistics.median(ratios), min(ratios), max(ratios)) if ratios else "-"))
    return rc
