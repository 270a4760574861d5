# SPDX-License-Identifier: Apache-2.0
# `make bench` rows of the S3 GET relay: presigned S3 GETs through the proxy, and nginx's own reverse proxy, against nginx direct.
"""
DESIGN
The harness's cluster (1 proxy + 1 target) and GET nginx (bench/run.py) serve the same files. For
16 KiB, 128 KiB and 8 MiB, every object of the size gets a presigned S3 GET URL (botocore, SigV4
query form, path style under <proxy>/s3), so wrk (the same Lua rotation, bench/wrk-urls.lua) can
drive the S3 API: the proxy verifies each signature and relays the body from the owning target.
An nginx of its own (bench/nginx-proxy.conf.in, 1 worker) proxy_passes to the GET nginx with
upstream keep-alive: what a generic reverse proxy costs on the same path.

Each round runs, per size: FastTier S3 (A), nginx direct (B), nginx proxy_pass (C). Two rows per
size share the B runs: "S3 relay GET" = A/B with the issue's goal (0.45 at 16 KiB, 0.9 at 8 MiB),
and "nginx proxy_pass GET" = C/B, the reference the relay must also match. After the rounds, one
run per size and side under `perf stat -e task-clock` gives CPU per request: the proxy's, the
target's, the reverse-proxy nginx worker's and the direct nginx worker's (the relay's two servers
against the one that serves the file itself).
"""
import importlib.util
import os
import subprocess
import urllib.request

import loadgen
import peers
import report
import sysprobe

KIB, MIB = 1024, 1024 * 1024
# (label of the harness's object set, goal of S3 relay / nginx direct)
SIZES = [("16 KiB", 0.45), ("128 KiB", None), ("8 MiB", 0.9)]
TITLE = "S3 relay GET %s"
PEER_TITLE = "nginx proxy_pass GET %s"
REGION = "us-east-1"


def log(msg):
    print(msg, flush=True)


class NginxProxy(peers.Nginx):
    """nginx proxy_passing everything to 127.0.0.1:upstream_port, upstream keep-alive (bench/nginx-proxy.conf.in)."""

    def __init__(self, directory, port, upstream_port, workers=1):
        super().__init__(directory, "", os.path.join(directory, "unused"), os.path.join(directory, "unused"),
                         (port, port, port), workers)
        self.upstream_port = upstream_port

    def render(self):
        with open(os.path.join(peers.HERE, "nginx-proxy.conf.in")) as f:
            text = f.read()
        values = {"DIR": self.dir, "WORKERS": str(self.workers),
                  "USER_LINE": "user root;" if os.geteuid() == 0 else "",
                  "PORT": str(self.get_port), "UPSTREAM_PORT": str(self.upstream_port)}
        for key, val in values.items():
            text = text.replace("@%s@" % key, val)
        if "@" in "".join(line.split("#")[0] for line in text.splitlines()):
            raise peers.PeerError("nginx-proxy.conf.in has a placeholder the harness does not fill")
        for d in ("conf", "tmp", "logs"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        with open(self.conf_path, "w") as f:
            f.write(text)


def presign_paths(b, keys, s, path):
    """Writes one presigned GET (path and query, for wrk-urls.lua against the proxy) per object of s."""
    import boto3
    from botocore.config import Config

    c = boto3.session.Session().client("s3", endpoint_url=b.cluster.url + "/s3", aws_access_key_id=keys[0],
                                       aws_secret_access_key=keys[1], region_name=REGION,
                                       config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    prefix = b.cluster.url
    with open(path, "w") as f:
        for name in s.names:
            url = c.generate_presigned_url("get_object", Params={"Bucket": s.bucket, "Key": name},
                                           ExpiresIn=6 * 3600)
            if not url.startswith(prefix):
                raise b.Error("presigned URL %s is not under %s" % (url, prefix))
            f.write(url[len(prefix):] + "\n")


def hold_info(b):
    """--hold --only s3relay: presigned path files per size and the proxy's pid, for hold.json."""
    why = why_not(b)
    if why:
        return {"skipped": why}
    keys = b.s3_keys()
    info = {"proxy_pid": b.cluster.proxy.pid, "paths": {}}
    for label, _ in SIZES:
        s = next(x for x in b.sets if x.label == label)
        info["paths"][label] = os.path.join(b.workdir, "paths-s3-%s.txt" % s.bucket)
        presign_paths(b, keys, s, info["paths"][label])
    return info


def why_not(b):
    """Why the rows cannot run, or None."""
    if importlib.util.find_spec("boto3") is None:
        return "boto3 is not installed (Debian python3-boto3)"
    if b.s3_keys() is None:
        return "the cluster has no S3 key pair"
    return None


def task_clock_usable():
    """(True, None) when perf stat counts task-clock here (a software event: no PMU needed), else (False, why)."""
    if not os.access(sysprobe.PERF, os.X_OK):
        return False, "%s not installed (Debian linux-perf)" % sysprobe.PERF
    p = subprocess.run([sysprobe.PERF, "stat", "-x,", "-e", "task-clock", "true"], capture_output=True, text=True)
    if p.returncode != 0 or "<not supported>" in p.stderr:
        return False, "perf stat cannot count task-clock: %s" % (p.stderr.strip().splitlines() or ["?"])[-1]
    return True, None


def cpu_per_request(b, fn, pids, csv):
    """(task-clock ms per request of pids, the run) of one run of fn under perf stat, or (None, why)."""
    p = sysprobe.perf_during(fn, pids, b.args.seconds, csv, ["task-clock"])
    if p.error:
        return None, p.error
    ms = p.counters.get("task-clock")
    if ms is None or not p.result.requests:
        return None, "no task-clock figure"
    return ms / p.result.requests, p.result


def bench_s3relay(b):
    """The rows (appended to b.rows); b is the harness (bench/run.py Bench) after setup()."""
    a = b.args
    why = why_not(b)
    sets = [(next(x for x in b.sets if x.label == label), goal) for label, goal in SIZES]
    if why:
        for s, goal in sets:
            b.rows.append(report.Row(TITLE % s.label, "wrk", "FastTier S3", "nginx", s.metric, goal, skipped=why))
        return
    keys = b.s3_keys()
    paths = {}
    for s, _ in sets:
        paths[s.label] = os.path.join(b.workdir, "paths-s3-%s.txt" % s.bucket)
        presign_paths(b, keys, s, paths[s.label])
    port = b.pick_ports(1)
    rp = NginxProxy(os.path.join(b.workdir, "nginx-proxy"), port, b.nginx.get_port, workers=1)
    rp.start()
    proxy_url = b.cluster.url
    nginx_url = "http://127.0.0.1:%d" % b.nginx.get_port
    rp_url = "http://127.0.0.1:%d" % port

    def run(base, s, p, seconds=None):
        return loadgen.run_wrk(base, p, s.size, seconds or a.seconds, a.conns, a.threads, log=b.runlog)

    conns0 = target_conns(b.target)
    try:
        for s, _ in sets:  # warm-up: connections, page cache, the proxy's relay connections
            for base, p in ((proxy_url, paths[s.label]), (nginx_url, s.nginx_paths), (rp_url, s.nginx_paths)):
                b.measured(lambda: run(base, s, p, 1))
        pairs = {s.label: [] for s, _ in sets}
        peer_pairs = {s.label: [] for s, _ in sets}
        for rnd in range(a.rounds):
            for s, _ in sets:
                ra, rb = b.pair("S3 relay", s.label, "wrk", rnd, lambda: run(proxy_url, s, paths[s.label]),
                                lambda: run(nginx_url, s, s.nginx_paths), s.metric)
                rc, why = b.measured(lambda: run(rp_url, s, s.nginx_paths))
                b.record("nginx proxy_pass", s.label, "wrk", rnd, "A", rc, why)
                log("[%s] nginx proxy_pass %-8s round %d: %s%s" % (
                    b.elapsed(), s.label, rnd + 1, report.fmt_rate(rc, s.metric) if rc else "FAILED: " + why,
                    " | ratio vs nginx %.3f" % (rc.rps / rb.rps) if rc and rb and rb.rps > 0 else ""))
                pairs[s.label].append((ra, rb))
                peer_pairs[s.label].append((rc, rb))
        conns1 = target_conns(b.target)
        unix = conns1.get("unix", 0) - conns0.get("unix", 0)
        leg = "over its Unix socket" if unix > 0 else "over TCP"
        log("[%s] s3relay: the target accepted %d connections on its Unix socket, %d on TCP" % (
            b.elapsed(), unix, conns1.get("tcp", 0) - conns0.get("tcp", 0)))
        notes = cpu_notes(b, sets, paths, proxy_url, rp, rp_url, nginx_url, run)
        for s, goal in sets:
            client = "wrk -t%d -c%d, presigned S3 GETs rotating over %d objects" % (a.threads, a.conns, s.count)
            row = report.Row(TITLE % s.label, client + " (SigV4 checked, relayed from the target %s)" % leg,
                             "FastTier S3", "nginx", s.metric, goal, pairs=pairs[s.label])
            peer = report.Row(PEER_TITLE % s.label, "wrk -t%d -c%d, the same files through nginx proxy_pass "
                              "(1 worker, upstream keep-alive)" % (a.threads, a.conns), "nginx proxy",
                              "nginx", s.metric, None, pairs=peer_pairs[s.label])
            mine, theirs = row.median_ratio(), peer.median_ratio()
            text = notes.get(s.label, "")
            if mine is not None and theirs is not None:
                text = ("S3 relay %.3f vs nginx proxy_pass %.3f of nginx direct (%s). " %
                        (mine, theirs, "at least the reverse proxy" if mine >= theirs else "below the reverse proxy")
                        + text)
            row.notes = text or None
            b.rows.append(row)
            b.rows.append(peer)
    finally:
        rp.stop()


def target_conns(target):
    """{listener: connections the target accepted} from its ft_http_connections_total (tcp: the TCP port, unix:
    its public Unix socket, which a proxy on the same machine relays over)."""
    out = {}
    with urllib.request.urlopen(target.public_url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("ft_http_connections_total{"):
                listener = line.split('listener="', 1)[1].split('"', 1)[0]
                out[listener] = out.get(listener, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


def cpu_notes(b, sets, paths, proxy_url, rp, rp_url, nginx_url, run):
    """CPU per request (perf stat task-clock) of the proxy and target, of the reverse-proxy nginx and of nginx serving
    the files itself; by size label."""
    notes = {}
    ok, why = task_clock_usable()
    if b.args.no_perf or not ok:
        return {s.label: "CPU per request not measured: %s." % ("--no-perf given" if ok else why) for s, _ in sets}
    csv = os.path.join(b.workdir, "perf-s3relay.csv")
    for s, _ in sets:
        px, rx = cpu_per_request(b, lambda: run(proxy_url, s, paths[s.label]), [b.cluster.proxy.pid], csv)
        tg, tx = cpu_per_request(b, lambda: run(proxy_url, s, paths[s.label]), [b.target.pid], csv)
        ng, nx = cpu_per_request(b, lambda: run(rp_url, s, s.nginx_paths), rp.worker_pids(), csv)
        nd, dx = cpu_per_request(b, lambda: run(nginx_url, s, s.nginx_paths), b.nginx.worker_pids(), csv)
        parts = []
        for who, v, x in (("proxy", px, rx), ("target", tg, tx), ("nginx proxy_pass worker", ng, nx),
                          ("nginx direct worker", nd, dx)):
            parts.append("%s %s" % (who, "%.1f us" % (v * 1000) if v is not None else "n/a (%s)" % x))
        notes[s.label] = "CPU per request (perf stat -e task-clock): %s." % ", ".join(parts)
        if None not in (px, tg, nd):
            notes[s.label] += " The relay's two servers spend %.2fx what nginx spends serving the file itself%s." % (
                (px + tg) / nd, "; where the proxy's share goes: bench/datapath.md, \"S3 relay 8 MiB: where the "
                "proxy's CPU goes\"" if s.size >= (1 << 20) else "")
        log("[%s] perf s3relay %-8s %s" % (b.elapsed(), s.label, notes[s.label]))
    return notes
