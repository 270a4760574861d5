#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `make bench` rows "Epoch hints vs LRU": 3 epochs of a seeded random order over a remote bucket larger than the cache, with and without order hints.
"""
DESIGN
One remote `ht://` bucket of 768 objects of 128 KiB (96 MiB) whose origin is an nginx of its own,
and a cluster of 1 proxy + 1 target x 1 mountpath whose LRU quota (`lru_quota_bytes`) is 64 MiB:
the dataset is 1.5x the quota; the watermarks are 90% / 85%, so the cache holds 435 to 460 objects.
Every run reads 3 epochs, each a permutation of the objects from bench/hintsim.py's epoch_orders()
(seed 42), 8 GETs in flight straight to the target (a small reader here: ft-loader shuffles its
own order and cannot read a given one). Each round (2 by default) runs three variants, each on a
fresh cluster with an empty cache (the origin stays), in turn, the odd rounds in the reverse order
so that slow drift of the machine's load does not favour one:
  - LRU: no hint (the targets' eviction as without this feature);
  - hints: before each epoch the epoch's order is posted through the proxy (python/fasttier's
    Client.post_order_hint, as HintedSampler does), staging ahead on (hint_prefetch_inflight 4);
  - hints, staging off: the same with hint_prefetch_inflight 0 (eviction by next use alone).
Per epoch: the wall time of the reads, the origin's GETs (its access log) and, under a hint, the
target's counters of the hint (reads served from the cache or fetched, objects staged). The hit
rate is 1 - origin GETs / reads: the share of reads the cache saved the origin (an object staged
ahead still costs one origin GET), the figure bench/hintsim.py computes for LRU, the hinted policy
and Belady's MIN at the same cache size.

Rate-limited origin (docs PEERS: a network namespace per row): the harness creates a namespace,
brings its `lo` up and shapes only the origin's traffic on it (htb class at RATE, u32 filter on
the origin's source port); this file then runs itself under `ip netns exec` (the "child"), so the
cluster, nginx and the reader all live in the namespace, and the host's `lo` is untouched. Without
the privileges for that (ip netns add fails), the child runs on the host with an unshaped origin
and the rows say so. The namespace is deleted at the end whatever happens.

Rows: "Epoch hints vs LRU: read rate, epochs 2-3" (A/B of reads per second of each of epochs 2 and
3 of each round, the inverse of the wall-time ratio; the issue's goal is wall time <= 0.7x LRU's, i.e. >= 1.43x)
and "Epoch hints vs LRU: hit rate, epochs 2-3" (the ratio of the hit rates; goal >= 1.5x). No
assertion on time: the rows show ratios and whether the goals were met in this run.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import fasttier  # noqa: E402
import ftcluster  # noqa: E402
import hintsim  # noqa: E402
import loadgen  # noqa: E402
import peers  # noqa: E402
import report  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
OBJ_SIZE = 128 * KIB
QUOTA = 64 * MIB
OBJECTS = QUOTA * 3 // 2 // OBJ_SIZE      # 768: the dataset is 1.5x the quota
HIGH_PCT, LOW_PCT = 90, 85
EPOCHS = 3
SEED = 42
READERS = 8
ROUNDS = 2                                # each round runs every variant (run.py --hints-rounds)
RATE = "200mbit"                          # the origin's bandwidth in the namespace (run.py --hints-rate)
ORIGIN_PORT = 18080                       # in the namespace every port is free
BUCKET = "ht-hints"
JOB = "bench"
LRU_ARGS = ["--lru_quota_bytes", str(QUOTA), "--lru_high_pct", str(HIGH_PCT), "--lru_low_pct", str(LOW_PCT),
            "--lru_interval_ms", "200"]
# (key, label, hint posted, hint_prefetch_inflight)
VARIANTS = [("lru", "LRU", False, 4), ("hints", "hints", True, 4), ("nostage", "hints, staging off", True, 0)]
IP = "/usr/sbin/ip"
TC = "/usr/sbin/tc"
NGINX = "/usr/sbin/nginx"

NGINX_CONF = """worker_processes 2;
%(user)s
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log warn;
events { worker_connections 1024; }
http {
    access_log %(dir)s/access.log;
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 1000000000;
    client_body_temp_path %(dir)s/tmp/body;
    proxy_temp_path %(dir)s/tmp/proxy;
    fastcgi_temp_path %(dir)s/tmp/fastcgi;
    uwsgi_temp_path %(dir)s/tmp/uwsgi;
    scgi_temp_path %(dir)s/tmp/scgi;
    server {
        listen 127.0.0.1:%(port)d;
        root %(root)s;
        location / { }
    }
}
"""


class HintsError(Exception):
    """The row cannot be measured; the message says why."""


def log(msg):
    print(msg, flush=True)


def sim_capacity(pct):
    """Objects the cache holds at a watermark of pct percent."""
    return QUOTA * pct // 100 // OBJ_SIZE


def names():
    return ["s-%04d" % i for i in range(OBJECTS)]


# ---------------------------------------------------------------- the child: runs in the namespace

def call(url, method, path, body=None, timeout=60):
    host = url.split("//", 1)[1]
    c = http.client.HTTPConnection(host, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Origin:
    """nginx serving <dir>/www on port, with an access log (the origin's GETs are counted there)."""

    def __init__(self, directory, port):
        self.dir, self.port = directory, port
        self.root = os.path.join(directory, "www")
        self.proc = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self):
        for d in ("tmp", "www"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        os.chmod(self.dir, 0o755)
        os.chmod(self.root, 0o755)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF % {"dir": self.dir, "root": self.root, "port": self.port,
                                  "user": "user root;" if os.geteuid() == 0 else ""})
        errf = open(os.path.join(self.dir, "stderr.log"), "ab")
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-c", conf, "-e", os.path.join(self.dir, "error.log"),
                                      "-g", "daemon off;"], stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
                                     start_new_session=True)
        errf.close()
        if not wait_port(self.port, self.proc):
            self.stop()
            raise HintsError("the origin nginx did not answer on port %d (see %s)" % (self.port, self.dir))

    def put(self, name, data):
        path = os.path.join(self.root, BUCKET, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.chmod(os.path.dirname(path), 0o755)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)

    def gets(self):
        """GET requests in the access log so far (nginx writes a line once a response is sent)."""
        try:
            with open(os.path.join(self.dir, "access.log"), "rb") as f:
                return sum(1 for line in f if b'"GET ' in line)
        except OSError:
            return 0

    def settled_gets(self):
        """gets() once it has not moved for 200 ms (the last lines of a run are written a moment after the
        client has its bytes)."""
        last, since = self.gets(), time.monotonic()
        while time.monotonic() - since < 0.2:
            time.sleep(0.05)
            now = self.gets()
            if now != last:
                last, since = now, time.monotonic()
        return last

    def stop(self):
        peers.stop_master(self.proc)


def wait_port(port, proc, timeout=10.0):
    """Waits until 127.0.0.1:port accepts a connection; False on timeout or when proc exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def read_order(base_url, paths, readers=READERS):
    """GETs every path of paths in that order, readers in flight (each takes the next path when it is
    free). Returns (seconds, errors, first error)."""
    u = base_url.split("//", 1)[1]
    lock = threading.Lock()
    state = {"next": 0, "errors": 0, "first": None}

    def worker():
        conn = http.client.HTTPConnection(u, timeout=120)
        try:
            while True:
                with lock:
                    i = state["next"]
                    if i >= len(paths):
                        return
                    state["next"] = i + 1
                try:
                    conn.request("GET", paths[i])
                    r = conn.getresponse()
                    body = r.read()
                    ok = r.status == 200 and len(body) == OBJ_SIZE
                    why = "GET %s: %d, %d bytes" % (paths[i], r.status, len(body))
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    conn = http.client.HTTPConnection(u, timeout=120)
                    ok, why = False, "GET %s: %s" % (paths[i], e)
                if not ok:
                    with lock:
                        state["errors"] += 1
                        state["first"] = state["first"] or why
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(readers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t0, state["errors"], state["first"]


def origin_rate(origin, objs):
    """The origin's own throughput in MiB/s: every object once, READERS in flight, straight from it
    (shows whether the shaping took)."""
    secs, errors, first = read_order(origin.url, ["/%s/%s" % (BUCKET, n) for n in objs])
    if errors:
        raise HintsError("reading the origin directly: %d errors (%s)" % (errors, first))
    return len(objs) * OBJ_SIZE / MIB / secs


def run_variant(args, origin, key, label, hinted, inflight, orders, objs):
    """One variant on a fresh cluster: per epoch {"seconds", "reads", "origin_gets", "hint"}."""
    d = os.path.join(args.workdir, "cluster-" + key)
    shutil.rmtree(d, ignore_errors=True)
    base = 20000
    while not all(ftcluster.port_free("127.0.0.1", p) for p in range(base, base + 4)):
        base += 10
    cl = ftcluster.Cluster(d, base, targets=1, mountpaths=1, bindir=args.bindir,
                           target_args=LRU_ARGS + ["--hint_prefetch_inflight", str(inflight)])
    cl.start()
    try:
        value = {"backend": {"provider": "ht", "endpoint": "%s/%s" % (origin.url, BUCKET)}}
        st, body = call(cl.url, "POST", "/v1/buckets/%s?provider=ht" % BUCKET, {"action": "create-bck",
                                                                               "value": value})
        if st != 200:
            raise HintsError("create-bck ht://%s: %d %r" % (BUCKET, st, body[:200]))
        target = cl.targets[0]
        client = fasttier.Client(cl.url)
        epochs = []
        gets0 = origin.settled_gets()
        for e, order in enumerate(orders):
            order_names = [objs[i] for i in order]
            if hinted:
                client.post_order_hint(BUCKET, order_names, epoch=e, provider="ht", ttl_s=3600, job=JOB)
            paths = ["/v1/objects/%s/%s?provider=ht" % (BUCKET, n) for n in order_names]
            secs, errors, first = read_order(target.public_url, paths)
            if errors:
                raise HintsError("%s, epoch %d: %d of %d GETs failed (%s)" % (label, e + 1, errors, len(paths),
                                                                             first))
            gets1 = origin.settled_gets()
            hint = None
            if hinted:
                st, body = call(target.control_url, "GET", "/v1/hints")
                hs = [h for h in json.loads(body)["hints"] if h["bucket"] == BUCKET and h["job"] == JOB] \
                    if st == 200 else []
                if hs:
                    hint = {k: hs[0].get(k) for k in ("epoch", "names", "read", "skipped", "late", "hits", "misses",
                                                      "prefetched", "prefetch_failed")}
            epochs.append({"seconds": secs, "reads": len(paths), "origin_gets": gets1 - gets0, "hint": hint})
            gets0 = gets1
            log("hints: %-18s epoch %d: %.2f s, %d reads, %d origin GETs (hit rate %.3f)%s"
                % (label, e + 1, secs, len(paths), epochs[-1]["origin_gets"],
                   1 - epochs[-1]["origin_gets"] / len(paths),
                   "; hint: %d hits, %d misses, %d staged, %d skipped" % (hint["hits"], hint["misses"],
                                                                          hint["prefetched"], hint["skipped"])
                   if hint else ""))
        return epochs
    finally:
        bad = {k: v for k, v in cl.stop().items() if v != 0}
        if bad:
            log("hints: unclean exits of cluster nodes: %s (logs in %s)" % (bad, d))


def child(args):
    """Everything of the rows but the namespace; writes the figures to args.out as JSON."""
    os.makedirs(args.workdir, exist_ok=True)
    origin = Origin(os.path.join(args.workdir, "origin"), args.origin_port or free_port())
    objs = names()
    orders = hintsim.epoch_orders(OBJECTS, EPOCHS, SEED)
    out = {"objects": OBJECTS, "object_size": OBJ_SIZE, "quota": QUOTA, "high_pct": HIGH_PCT, "low_pct": LOW_PCT,
           "epochs": EPOCHS, "seed": SEED, "readers": READERS, "rounds": []}
    origin.start()
    try:
        payload = bytearray(os.urandom(OBJ_SIZE))
        for i, n in enumerate(objs):
            payload[:8] = i.to_bytes(8, "little")
            origin.put(n, bytes(payload))
        out["origin_mib_s"] = origin_rate(origin, objs)
        log("hints: origin direct: %.0f MiB/s (%d objects, %d in flight)" % (out["origin_mib_s"], OBJECTS, READERS))
        for rnd in range(args.rounds):
            log("hints: round %d of %d" % (rnd + 1, args.rounds))
            turn = VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]
            out["rounds"].append({key: {"label": label, "hinted": hinted, "prefetch_inflight": inflight,
                                        "epochs": run_variant(args, origin, key, label, hinted, inflight, orders,
                                                              objs)}
                                  for key, label, hinted, inflight in turn})
    finally:
        origin.stop()
    for pct in (LOW_PCT, HIGH_PCT):
        out["sim_%d" % pct] = {"capacity": sim_capacity(pct),
                               "result": hintsim.simulate(OBJECTS, EPOCHS, sim_capacity(pct), SEED)}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the parent: namespace and rows

def _run(argv):
    peers.run_checked(argv, HintsError)


def make_namespace(name, rate):
    """Creates namespace name with lo up and the origin's port shaped to rate; raises HintsError (after
    removing what it made) when that is not possible here."""
    for tool in (IP, TC):
        if not os.access(tool, os.X_OK):
            raise HintsError("%s is missing" % tool)
    _run([IP, "netns", "add", name])
    try:
        ns = [IP, "netns", "exec", name]
        _run(ns + [IP, "link", "set", "lo", "up"])
        _run(ns + [TC, "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"])
        _run(ns + [TC, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:1", "htb", "rate", rate])
        _run(ns + [TC, "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                   "match", "ip", "sport", str(ORIGIN_PORT), "0xffff", "flowid", "1:1"])
    except HintsError:
        delete_namespace(name)
        raise


def delete_namespace(name):
    subprocess.run([IP, "netns", "del", name], capture_output=True)


def run_child(b, rate, rounds):
    """Runs the child in a shaped namespace (or, failing that, on the host); returns (figures, shaping note)."""
    workdir = os.path.join(b.workdir, "hints")
    out = os.path.join(workdir, "figures.json")
    os.makedirs(workdir, exist_ok=True)
    argv = [sys.executable, os.path.abspath(__file__), "--child", "--bindir", b.bindir, "--workdir", workdir,
            "--out", out, "--rounds", str(rounds)]
    ns = "fthints%d" % os.getpid()
    try:
        make_namespace(ns, rate)
        shaped = "origin shaped to %s (htb on the lo of a network namespace of its own)" % rate
        argv = [IP, "netns", "exec", ns] + argv + ["--origin-port", str(ORIGIN_PORT)]
    except (HintsError, OSError) as e:
        ns = None
        shaped = "origin NOT rate-limited: a network namespace could not be made here (%s)" % e
        log("bench: hints: %s" % shaped)
    try:
        p = subprocess.Popen(argv)
        try:
            p.wait()
        except BaseException:
            # SIGTERM or Ctrl-C of the harness: the child stops its cluster and origin on SIGTERM.
            p.terminate()
            p.wait(60)
            raise
        if p.returncode != 0:
            raise HintsError("the hints run exited with status %d (state in %s)" % (p.returncode, workdir))
        with open(out) as f:
            return json.load(f), shaped
    finally:
        if ns:
            delete_namespace(ns)


def later(epochs):
    """Epochs 2..: the first one of an empty cache has no hit under any policy."""
    return epochs[1:]


def epochs_of(fig, key):
    """Epochs 2.. of variant key, every round's in turn."""
    return [e for r in fig["rounds"] for e in later(r[key]["epochs"])]


def hit_rate(epochs):
    reads = sum(e["reads"] for e in epochs)
    return 1 - sum(e["origin_gets"] for e in epochs) / reads if reads else None


class HitRateRow(report.Row):
    """A row of two hit rates (A, B) and their ratio; no rounds."""

    def __init__(self, title, client, a_name, b_name, target, a_rate, b_rate):
        super().__init__(title, client, a_name, b_name, "hit", target)
        self.a_rate, self.b_rate = a_rate, b_rate

    def status(self):
        if self.skipped:
            return "not measured: " + self.skipped
        if self.failed:
            return "failed: " + self.failed
        if self.a_rate is None or self.b_rate is None or self.b_rate <= 0:
            return "failed: no hit rate for both sides (B's is %s)" % self.b_rate
        return None

    def ratios(self):
        return [self.a_rate / self.b_rate] if self.status() is None else []

    def met(self):
        if self.status() is not None or self.target is None:
            return "-"
        return "yes" if self.ratios()[0] >= self.target else "NO"

    def cells(self, short=False):
        st = self.status()
        client = self.client.split(",")[0].split(":")[0] if short else self.client
        if st is not None:
            return [self.title, client, st.split(":")[0] if short else st, "-", "-", "-", self.target_text(), "-"]
        a_name, b_name = ("", "") if short else (self.a_name + ": ", self.b_name + ": ")
        return [self.title, client, "%s%.3f" % (a_name, self.a_rate), "%s%.3f" % (b_name, self.b_rate),
                "%.3fx" % self.ratios()[0], "-", self.target_text(), self.met()]


def epoch_result(e):
    return loadgen.Result("reader", e["reads"], e["seconds"], 0, OBJ_SIZE)


def rows_from(fig, shaped):
    """The two rows (read rate, hit rate) from the child's figures."""
    sim = fig["sim_%d" % HIGH_PCT]
    sim_lo = fig["sim_%d" % LOW_PCT]
    simtext = ("simulator (bench/hintsim.py, same order) at the high mark's %d objects: LRU %.3f, hint %.3f, "
               "MIN %.3f; at the low mark's %d: LRU %.3f, MIN %.3f"
               % (sim["capacity"], sim["result"]["LRU"]["rate_after_first"],
                  sim["result"]["hint"]["rate_after_first"], sim["result"]["MIN"]["rate_after_first"],
                  sim_lo["capacity"], sim_lo["result"]["LRU"]["rate_after_first"],
                  sim_lo["result"]["MIN"]["rate_after_first"]))
    setup = ("%d objects of 128 KiB (%d MiB) in an ht:// bucket, lru_quota_bytes %d MiB (dataset 1.5x), marks "
             "%d/%d%%, 1 target; %d epochs of a seeded random order, %d GETs in flight; %s; origin direct %.0f MiB/s"
             % (fig["objects"], fig["objects"] * OBJ_SIZE // MIB, fig["quota"] // MIB, fig["high_pct"],
                fig["low_pct"], fig["epochs"], fig["readers"], shaped, fig["origin_mib_s"]))
    t_row = report.Row("Epoch hints vs LRU: read rate, epochs 2-3",
                       "%d GETs in flight, reads/s of each of epochs 2 and 3 (1/wall time); %s"
                       % (fig["readers"], setup),
                       "order hints, staging on", "LRU", "rps", 1 / 0.7,
                       pairs=[(epoch_result(a), epoch_result(b)) for r in fig["rounds"]
                              for a, b in zip(later(r["hints"]["epochs"]), later(r["lru"]["epochs"]))])
    h_row = HitRateRow("Epoch hints vs LRU: hit rate, epochs 2-3",
                       "1 - origin GETs/reads, epochs 2 and 3 together; " + simtext, "order hints, staging on", "LRU",
                       1.5,
                       hit_rate(epochs_of(fig, "hints")), hit_rate(epochs_of(fig, "lru")))
    parts = []
    for key, label, _, _ in VARIANTS:
        eps = epochs_of(fig, key)
        parts.append("%s: epoch wall times %s s, hit rate %.3f" % (
            label, " ".join("%.2f" % e["seconds"] for e in eps), hit_rate(eps)))
    note = "Epochs 2-3 of %d round(s): %s. %s." % (len(fig["rounds"]), "; ".join(parts),
                                                   simtext[0].upper() + simtext[1:])
    t_row.notes = h_row.notes = note
    return [t_row, h_row]


def bench_hints(b, rate=RATE, rounds=ROUNDS):
    """Adds the rows "Epoch hints vs LRU: ..." to b.rows (b: bench/run.py's Bench)."""
    titles = ["Epoch hints vs LRU: read rate, epochs 2-3", "Epoch hints vs LRU: hit rate, epochs 2-3"]
    try:
        fig, shaped = run_child(b, rate, rounds)
        rows = rows_from(fig, shaped)
        for r in rows:
            log("bench: %s: %s" % (r.title, r.notes))
        b.rows.extend(rows)
        b.raw.append({"group": "epoch hints", "figures": fig, "shaping": shaped})
    except (HintsError, OSError, ValueError, KeyError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        log("bench: hints: %s" % why)
        b.rows.append(report.Row(titles[0], "-", "order hints", "LRU", "rps", 1 / 0.7, skipped=why))
        b.rows.append(HitRateRow(titles[1], "-", "order hints", "LRU", 1.5, None, None))
        b.rows[-1].skipped = why


def on_term(signum, _frame):
    # SystemExit unwinds through the finally blocks: the cluster and the origin are always stopped.
    raise SystemExit(128 + signum)


def main(argv=None):
    p = argparse.ArgumentParser(description="The epoch hints rows' runs (normally started by bench/run.py "
                                "--only hints, inside a rate-limited network namespace).")
    p.add_argument("--child", action="store_true", required=True)
    p.add_argument("--bindir", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--origin-port", type=int, default=0)
    p.add_argument("--rounds", type=int, default=ROUNDS)
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, on_term)
    try:
        return child(a)
    except (HintsError, OSError) as e:
        print("hints: %s" % e, file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - the cluster launcher's and the client's errors too, with their text
        print("hints: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
