# SPDX-License-Identifier: Apache-2.0
# EC 2+1 PUTs in a TLS cluster: slices over the holders' Unix sockets against the control port (--public_unix off).
"""Not a `make bench` row: a side-by-side run of two TLS clusters of the same binaries (4 targets x 2 mountpaths),
one whose targets have their Unix sockets (slices go there, plain HTTP) and one with --public_unix off (slices go
to the control port), an EC 2+1 bucket in each; ft-loader -https PUTs 1 MiB objects into each in turn and the
targets' CPU (utime + stime from /proc) is read around every run.

    python3 bench/ec_tls.py --build build/bin --rounds 6 --dir /tmp/ec-tls
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import ftcluster  # noqa: E402
import loadgen  # noqa: E402

SIZE = 1 << 20


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def start(workdir, mode, port, bindir, args):
    c = ftcluster.Cluster(os.path.join(workdir, mode), port, targets=4, mountpaths=2, bindir=bindir, tls=True,
                          target_args=args)
    c.start()
    ftcluster.http_json("POST", c.url + "/v1/buckets/ec", {"action": "create-bck"})
    st, _ = ftcluster.http_json("POST", c.url + "/v1/buckets/ec", {"action": "set-bprops", "value": {
        "ec": {"data_slices": 2, "parity_slices": 1, "objsize_limit": 0}}})
    if st != 200:
        raise SystemExit("set-bprops ec on the %s cluster: %d" % (mode, st))
    return c


def run(c, bindir, seconds, workers):
    argv = [os.path.join(bindir, "ft-loader"), "-https", "-cacert", c.ca_file, "-ip", "127.0.0.1", "-port",
            str(c.port), "-bucket", "ec", "-duration", "%ds" % seconds, "-numworkers", str(workers),
            "-statsinterval", "0", "-quiet", "-json", "-pctput", "100", "-minsize", "1MiB", "-maxsize", "1MiB"]
    pids = [t.pid for t in c.targets]
    before = cpu_seconds(pids)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
    r = loadgen.parse_loader_json(p.stdout, "PUT", SIZE, argv)
    return r, (cpu_seconds(pids) - before) * 1000 / max(r.requests, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--dir", default="/tmp/ec-tls")
    ap.add_argument("--port", type=int, default=23100, help="first of two port ranges (port, port + 100)")
    a = ap.parse_args()
    bindir = os.path.abspath(a.build)
    clusters = []
    try:
        for mode, port, args in (("unix", a.port, ()), ("control", a.port + 100, ("--public_unix", "off"))):
            clusters.append((mode, start(a.dir, mode, port, bindir, args)))
        for rnd in range(a.rounds):
            for mode, c in clusters:
                r, ms = run(c, bindir, a.seconds, a.workers)
                with open("/proc/loadavg") as f:
                    load = f.read().split()[0]
                print("round %d %-7s PUTs %5d errors %d targets' CPU %.2f ms a PUT (load %s)"
                      % (rnd, mode, r.requests, r.errors, ms, load), flush=True)
    finally:
        for _, c in clusters:
            c.stop()


if __name__ == "__main__":
    main()
