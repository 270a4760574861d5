# SPDX-License-Identifier: Apache-2.0
# `make bench` rows of TLS: warm GETs over HTTPS from a TLS target against nginx over HTTPS with the same certificate.
"""
DESIGN
A cluster of its own (1 proxy + 1 target, 1 mountpath, `ft-cluster start --tls`: a self-signed CA
and one server certificate in its DIR/tls/) holds OBJECTS[size] objects per size, PUT through the
proxy over HTTPS (following its 307 to the target's HTTPS port). An nginx (bench/nginx-tls.conf.in)
serves the target's own files ("<mountpath>/ais") over HTTPS with the same certificate and key,
with `sendfile on` and `ssl_conf_command Options KTLS`, so either side uses kernel TLS exactly when
the kernel offers it. Each round runs wrk over https (the same Lua rotation over all objects of a
size) against the target directly (A), then nginx (B). Target ratio 0.9 for both sizes.
"""
import hashlib
import http.client
import json
import os
import ssl
import urllib.parse

import loadgen
import peers
import report

KIB, MIB = 1024, 1024 * 1024
# (label, object size, object count, target ratio, metric, connections: None = --conns)
SIZES = [
    ("8 MiB", 8 * MIB, 32, 0.9, "bps", 8),
    ("128 KiB", 128 * KIB, 200, 0.9, "rps", None),
]
# Encryption makes an 8 MiB GET take a while: with --conns (32) of them at once, a 2 s run may see none
# complete; so that row runs 8 connections, and every run lasts at least MIN_SECONDS.
MIN_SECONDS = 4
TITLE = "Warm GET %s over TLS"


class NginxTLS(peers.Nginx):
    """nginx serving root over HTTPS on one port with cert and key (bench/nginx-tls.conf.in)."""

    def __init__(self, directory, root, port, cert, key, workers):
        super().__init__(directory, root, os.path.join(directory, "unused"), os.path.join(directory, "unused"),
                         (port, port, port), workers)
        self.cert, self.key = cert, key

    def render(self):
        with open(os.path.join(peers.HERE, "nginx-tls.conf.in")) as f:
            text = f.read()
        values = {"DIR": self.dir, "WORKERS": str(self.workers),
                  "USER_LINE": "user root;" if os.geteuid() == 0 else "",
                  "PORT": str(self.get_port), "ROOT": self.get_root, "CERT": self.cert, "KEY": self.key}
        for key, val in values.items():
            text = text.replace("@%s@" % key, val)
        if "@" in "".join(line.split("#")[0] for line in text.splitlines()):
            raise peers.PeerError("nginx-tls.conf.in has a placeholder the harness does not fill")
        for d in ("conf", "tmp", "logs"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        with open(self.conf_path, "w") as f:
            f.write(text)


def log(msg):
    print(msg, flush=True)


def _request(ctx, url, method="GET", body=None, headers=None):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPSConnection(u.hostname, u.port, timeout=60, context=ctx)
    try:
        c.request(method, u.path + ("?" + u.query if u.query else ""), body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.getheader("Location"), r.read()
    finally:
        c.close()


def _fill(b, ctx, cl, label, size, count):
    """Creates the size's bucket and objects through the proxy; writes the paths files; returns them."""
    bucket = "bench-tls-%s" % label.replace(" ", "").lower()
    st, _, body = _request(ctx, cl.url + "/v1/buckets/" + bucket, "POST",
                           json.dumps({"action": "create-bck"}).encode(), {"Content-Type": "application/json"})
    if st != 200:
        raise b.Error("create bucket %s: %d %r" % (bucket, st, body[:200]))
    payload = bytearray(os.urandom(size))
    ft_paths = os.path.join(b.workdir, "paths-tls-ft-%s.txt" % bucket)
    ng_paths = os.path.join(b.workdir, "paths-tls-nginx-%s.txt" % bucket)
    with open(ft_paths, "w") as fp, open(ng_paths, "w") as fn:
        for i in range(count):
            payload[:8] = i.to_bytes(8, "little")
            path = "/v1/objects/%s/o/%05d" % (bucket, i)
            st, loc, body = _request(ctx, cl.url + path, "PUT", b"")
            if st != 307 or not loc or not loc.startswith("https://"):
                raise b.Error("PUT %s at the proxy: want a 307 to https, got %d %s" % (path, st, loc))
            st, _, body = _request(ctx, loc, "PUT", bytes(payload))
            if st != 200:
                raise b.Error("PUT %s at %s: %d %r" % (path, loc, st, body[:200]))
            fp.write(path + "\n")
            fn.write("/%s/o/%05d\n" % (bucket, i))
    return bucket, ft_paths, ng_paths


def bench_tls(b, ftcluster):
    """Appends the TLS rows to b.rows (b: the bench harness of bench/run.py)."""
    a = b.args
    base = b.pick_ports(8)
    cl = ftcluster.Cluster(os.path.join(b.workdir, "tls-cluster"), base, targets=1, mountpaths=1,
                           bindir=b.bindir, tls=True)
    nginx = None
    try:
        cl.start()
        target = cl.targets[0]
        ctx = ssl.create_default_context(cafile=cl.ca_file)
        sets = [(label, size, metric, want, conns or a.conns) + _fill(b, ctx, cl, label, size, count)
                for label, size, count, want, metric, conns in SIZES]
        seconds = max(a.seconds, MIN_SECONDS)
        taken = {base + i for i in range(4)}
        port = ftcluster.next_free_port("127.0.0.1", base + 4, taken)
        tlsdir = os.path.join(cl.dir, "tls")
        nginx = NginxTLS(os.path.join(b.workdir, "nginx-tls"), os.path.join(target.mountpaths[0], "ais"), port,
                         os.path.join(tlsdir, "server.pem"), os.path.join(tlsdir, "server.key"),
                         os.cpu_count() or 1)
        nginx.start()
        ng_url = "https://127.0.0.1:%d" % port
        print("bench: TLS cluster up (target %s), nginx over TLS on %s" % (target.public_url, ng_url), flush=True)
        for label, size, metric, want, conns, bucket, ft_paths, ng_paths in sets:  # same bytes on both sides
            _, _, x = _request(ctx, target.public_url + "/v1/objects/%s/o/00000" % bucket)
            _, _, y = _request(ctx, ng_url + "/%s/o/00000" % bucket)
            if len(x) != size or hashlib.sha256(x).digest() != hashlib.sha256(y).digest():
                raise b.Error("TLS %s: target and nginx do not serve the same bytes" % label)
        for label, size, metric, want, conns, bucket, ft_paths, ng_paths in sets:  # warm-up
            for url, paths in ((target.public_url, ft_paths), (ng_url, ng_paths)):
                b.measured(lambda: loadgen.run_wrk(url, paths, size, 1, conns, a.threads, log=b.runlog))
        pairs = {}
        for rnd in range(a.rounds):
            for label, size, metric, want, conns, bucket, ft_paths, ng_paths in sets:
                ra, rb = b.pair("TLS GET", label, "wrk", rnd,
                                lambda: loadgen.run_wrk(target.public_url, ft_paths, size, seconds, conns,
                                                        a.threads, log=b.runlog),
                                lambda: loadgen.run_wrk(ng_url, ng_paths, size, seconds, conns, a.threads,
                                                        log=b.runlog),
                                metric)
                pairs.setdefault(label, []).append((ra, rb))
        for label, size, metric, want, conns, bucket, ft_paths, ng_paths in sets:
            client = "wrk -t%d -c%d -d%ds over https, Lua rotating over all objects (both sides)" % (
                a.threads, conns, seconds)
            row = report.Row(TITLE % label, client, "FastTier target (TLS)", "nginx sendfile + TLS", metric, want,
                             pairs=pairs[label])
            row.notes = ktls_note(cl)
            b.rows.append(row)
    finally:
        if nginx is not None:
            nginx.stop()
        status = cl.stop()
        bad = {k: v for k, v in status.items() if v != 0}
        if bad:
            log("bench: unclean exits of TLS cluster nodes: %s (logs in %s/logs)" % (bad, cl.dir))


def ktls_note(cl):
    """What the target said about kernel TLS (its log), for the report."""
    for n in cl.targets:
        try:
            with open(n.log, errors="replace") as f:
                for line in f:
                    if "kernel TLS" in line:
                        return line.split("http: tls: ", 1)[-1].strip()
        except OSError:
            pass
    return None
