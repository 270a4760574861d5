#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Presigned S3 GETs over HTTPS through two TLS clusters (two builds), alternating: GETs/s and proxy + target CPU per GET.
"""
DESIGN
For a change to the S3 relay under TLS, side by side: each build gets a cluster of its own (1 proxy + 1
target x 1 mountpath, `tls` on: scripts/ftcluster.py makes the CA and the certificate), a bucket with
objects of 16 KiB, 128 KiB and 8 MiB PUT through boto3, and a file of presigned GET URLs (path style,
relative to the proxy) per size. Each round, per size, wrk (bench/wrk-urls.lua, -t2 -c16, 4 s) reads
them over HTTPS from one cluster then the other (the order alternates by round); the proxy's and the
target's CPU time (/proc/<pid>/stat) around each run gives CPU microseconds per GET. Prints every run
and the medians. Both clusters stay up for the whole comparison and are stopped at the end, whatever
happens.

  scripts/tls-relay-compare.py --a OLD/bin --b build/bin [--rounds 3] [--port 22000]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "bench")]

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

import ftcluster  # noqa: E402
import sysprobe  # noqa: E402

SIZES = [("16 KiB", 16 << 10, 256), ("128 KiB", 128 << 10, 128), ("8 MiB", 8 << 20, 16)]
BUCKET = "tls-relay"
WRK = "/usr/bin/wrk"
WRK_LUA = os.path.join(HERE, "..", "bench", "wrk-urls.lua")


def setup(c, workdir):
    """Bucket, objects and one presigned-paths file per size on cluster c; {label: (base URL, file)}."""
    ak, sk = c.s3_keys()
    base = "https://127.0.0.1:%d" % c.port
    cli = boto3.session.Session().client(
        "s3", endpoint_url=base + "/s3", aws_access_key_id=ak, aws_secret_access_key=sk, region_name="us-east-1",
        verify=c.ca_file, config=Config(s3={"addressing_style": "path"}))
    cli.create_bucket(Bucket=BUCKET)
    out = {}
    for label, size, n in SIZES:
        body = os.urandom(size)
        path = os.path.join(workdir, "paths-%d.txt" % size)
        with open(path, "w") as f:
            for k in range(n):
                key = "%d/%04d" % (size, k)
                cli.put_object(Bucket=BUCKET, Key=key, Body=body)
                url = cli.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key},
                                                 ExpiresIn=24 * 3600)
                f.write(url[len(base):] + "\n")
        out[label] = (base, path)
    return out


def run(c, base, paths):
    """One wrk run; (GETs/s, proxy + target CPU us per GET)."""
    pids = [c.proxy.pid] + [t.pid for t in c.targets]
    c0 = sysprobe.proc_cpu_seconds(pids)
    p = subprocess.run([WRK, "-t2", "-c16", "-d4s", "-s", WRK_LUA, base, "--", paths],
                       capture_output=True, text=True, timeout=120)
    c1 = sysprobe.proc_cpu_seconds(pids)
    line = [x for x in p.stdout.splitlines() if x.startswith("WRK_JSON ")]
    if p.returncode != 0 or not line:
        raise SystemExit("wrk failed: %s%s" % (p.stdout[-1000:], p.stderr[-1000:]))
    j = json.loads(line[0][len("WRK_JSON "):])
    errors = j["connect"] + j["read"] + j["write"] + j["status"] + j["timeout"]
    if errors or not j["requests"]:
        raise SystemExit("wrk: %d errors in %d requests (%s)" % (errors, j["requests"], base))
    return j["requests"] / (j["duration_us"] / 1e6), (c1 - c0) / j["requests"] * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="bin directory of build A (e.g. the one before a change)")
    ap.add_argument("--b", required=True, help="bin directory of build B")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=22000, help="first port; the clusters take 100 each")
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="ft-tls-relay-")
    clusters, files, res = {}, {}, {}
    try:
        for i, (name, bindir) in enumerate((("A", a.a), ("B", a.b))):
            c = ftcluster.Cluster(os.path.join(top, name), a.port + 100 * i, targets=1, mountpaths=1,
                                  bindir=bindir, tls=True)
            clusters[name] = c
            c.start()
            files[name] = setup(c, c.dir)
        for rnd in range(a.rounds):
            for label, _, _ in SIZES:
                for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
                    rate, cpu = run(clusters[name], *files[name][label])
                    res.setdefault((label, name), []).append((rate, cpu))
                    print("round %d %-7s %s: %8.0f GET/s, proxy + target %8.1f us/GET"
                          % (rnd + 1, label, name, rate, cpu), flush=True)
        for label, _, _ in SIZES:
            med = {n: [statistics.median(x[k] for x in res[(label, n)]) for k in (0, 1)] for n in ("A", "B")}
            print("%-7s A %8.0f GET/s %8.1f us/GET | B %8.0f GET/s %8.1f us/GET | B/A rate %.2fx"
                  % (label, med["A"][0], med["A"][1], med["B"][0], med["B"][1], med["B"][0] / med["A"][0]))
    finally:
        for c in clusters.values():
            c.stop()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
