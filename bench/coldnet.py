# SPDX-License-Identifier: Apache-2.0
# `make bench` row "Cold GET 8 MiB, network-bound origin": the origin nginx in a network namespace of its own behind a tc rate limit.
"""
DESIGN
The cold row of bench/run.py puts origin, target and client on the same two cores and loopback, so
it measures CPU per byte more than anything a deployment sees. Here the origin is where it is in
practice: behind a link slower than the machine. The harness (run.py --only coldnet) starts its
usual cluster (1 proxy + 1 target) and 8 MiB objects; this module then
  - creates a network namespace with a veth pair into it (host end 10.213.N.1/30, namespace end
    10.213.N.2/30, N from the pid), and shapes both ends' egress with an htb class at RATE
    (the origin's responses leave through the namespace end: that is the link limit);
  - lays out the cold objects with run.py's cold_setup (hard links in the loopback nginx's origin
    root) and starts a second nginx inside the namespace serving that same directory on
    10.213.N.2:ORIGIN_PORT;
  - points the ht:// bucket at that origin and runs, per round, A: the bucket destroyed and
    re-created (every copy dropped), then ft-loader reading each object once through the owning
    target (which fetches it over the link while streaming it); B: ft-loader reading the same
    objects once straight from the origin over the same link.
Both sides cross the same shaped link once per byte, so a target that keeps up with the link gives
a ratio near 1. The namespace (and with it the veth pair and the qdiscs) and its nginx are removed
in a finally block, whatever happens. Without the privileges for a namespace the row says "not
measured" with the reason. Goal: >= 0.95x.
"""
import http.client
import os
import signal
import subprocess
import time

import loadgen
import peers
import report
import sysprobe

IP = "/usr/sbin/ip"
TC = "/usr/sbin/tc"
RATE = "2gbit"
ORIGIN_PORT = 18080
WORKERS = 8
TITLE = "Cold GET 8 MiB, origin behind %s"
TARGET = 0.95

NGINX_CONF = """worker_processes 2;
%(user)s
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000000;
    client_body_temp_path %(dir)s/tmp/body;
    proxy_temp_path %(dir)s/tmp/proxy;
    fastcgi_temp_path %(dir)s/tmp/fastcgi;
    uwsgi_temp_path %(dir)s/tmp/uwsgi;
    scgi_temp_path %(dir)s/tmp/scgi;
    server {
        listen %(addr)s:%(port)d;
        root %(root)s;
        location / { }
    }
}
"""


class NetError(Exception):
    """The shaped link or its origin could not be set up; the message says why."""


def _run(argv):
    peers.run_checked(argv, NetError)


class ShapedLink:
    """A network namespace reached from the host over a veth pair shaped to rate in both directions."""

    def __init__(self, rate):
        self.ns = "ftcoldnet%d" % os.getpid()
        self.host_if, self.ns_if = "ftcn%dh" % os.getpid(), "ftcn%dn" % os.getpid()
        self.host_addr = self.ns_addr = None
        self.rate = rate
        self.made = False

    @staticmethod
    def free_subnet():
        """A 10.213.N.0/30 no interface of the host has an address in (another run's link), or None."""
        p = subprocess.run([IP, "-4", "-o", "addr", "show"], capture_output=True, text=True)
        used = {line.split()[3].rsplit(".", 1)[0] for line in p.stdout.splitlines() if len(line.split()) > 3}
        for k in range(250):
            n = (os.getpid() + k) % 250
            if "10.213.%d" % n not in used:
                return n
        return None

    def exec_argv(self):
        return [IP, "netns", "exec", self.ns]

    def create(self):
        for tool in (IP, TC):
            if not os.access(tool, os.X_OK):
                raise NetError("%s is missing" % tool)
        n = self.free_subnet()
        if n is None:
            raise NetError("every 10.213.N.0/30 is taken by other links")
        self.host_addr, self.ns_addr = "10.213.%d.1" % n, "10.213.%d.2" % n
        _run([IP, "netns", "add", self.ns])
        self.made = True
        ns = self.exec_argv()
        _run([IP, "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if, "netns", self.ns])
        _run([IP, "addr", "add", self.host_addr + "/30", "dev", self.host_if])
        _run([IP, "link", "set", self.host_if, "up"])
        _run(ns + [IP, "addr", "add", self.ns_addr + "/30", "dev", self.ns_if])
        _run(ns + [IP, "link", "set", self.ns_if, "up"])
        _run(ns + [IP, "link", "set", "lo", "up"])
        for prefix, dev in (([], self.host_if), (ns, self.ns_if)):
            _run(prefix + [TC, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
            _run(prefix + [TC, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                           "rate", self.rate, "ceil", self.rate])

    def delete(self):
        """Removes the namespace (its veth end, hence the pair, and the qdiscs go with it)."""
        if self.made:
            subprocess.run([IP, "netns", "del", self.ns], capture_output=True)
            subprocess.run([IP, "link", "del", self.host_if], capture_output=True)
            self.made = False


class NsOrigin:
    """nginx inside the namespace serving root on addr:port."""

    def __init__(self, directory, link, root, port):
        self.dir, self.link, self.root, self.port = directory, link, root, port
        self.proc = None

    def start(self):
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF % {"dir": self.dir, "root": self.root, "port": self.port,
                                  "addr": self.link.ns_addr,
                                  "user": "user root;" if os.geteuid() == 0 else ""})
        with open(os.path.join(self.dir, "stderr.log"), "ab") as errf:
            self.proc = subprocess.Popen(self.link.exec_argv() + [
                peers.NGINX, "-p", self.dir, "-c", conf, "-e", os.path.join(self.dir, "error.log"),
                "-g", "daemon off;"], stdin=subprocess.DEVNULL, stdout=errf, stderr=errf, start_new_session=True)
        if not peers.wait_port(self.link.ns_addr, self.port, 10.0, self.proc):
            self.stop()
            raise NetError("the origin nginx in namespace %s did not answer on %s:%d (see %s)"
                           % (self.link.ns, self.link.ns_addr, self.port, self.dir))

    def worker_pids(self):
        return peers.children(self.proc.pid) if self.proc is not None else []

    def stop(self):
        peers.stop_master(self.proc)


def _task_clock_start(pid):
    """perf stat -e task-clock on pid until stopped (_task_clock_stop), or None without perf."""
    if not os.access(sysprobe.PERF, os.X_OK):
        return None
    try:
        return subprocess.Popen([sysprobe.PERF, "stat", "-x,", "-e", "task-clock", "-p", str(pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except OSError:
        return None


def _task_clock_stop(perf):
    """The CPU seconds perf counted, or None."""
    if perf is None:
        return None
    perf.send_signal(signal.SIGINT)
    try:
        _, err = perf.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        perf.kill()
        perf.communicate()
        return None
    for line in err.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2].startswith("task-clock"):
            try:
                return float(parts[0]) / 1000.0
            except ValueError:
                return None
    return None


def _cpu_run(b, origin, into, run):
    """run() (one ft-loader pass); appends (target, origin nginx, target by perf or None) CPU seconds per
    GiB to into: /proc/<pid>/stat of the target and the origin's workers, and perf stat -e task-clock of
    the target."""
    pids = origin.worker_pids()
    perf = _task_clock_start(b.target.pid)
    time.sleep(0.2)  # perf attached before the load starts
    t0, n0 = sysprobe.proc_cpu_seconds([b.target.pid]), sysprobe.proc_cpu_seconds(pids)
    try:
        r = run()
    finally:
        t1, n1 = sysprobe.proc_cpu_seconds([b.target.pid]), sysprobe.proc_cpu_seconds(pids)
        clock = _task_clock_stop(perf)
    if r.requests and not r.errors:
        gib = r.requests * r.object_size / float(1 << 30)
        into.append(((t1 - t0) / gib, (n1 - n0) / gib, clock / gib if clock is not None else None))
    return r


def _rounds(b, origin, s, names, urls):
    pairs, left, cpu = [], [], {"A": [], "B": []}
    for rnd in range(b.args.rounds):
        def cold_a():
            try:
                left.append(b.cold_recreate())
            except (b.Error, OSError, http.client.HTTPException) as e:
                raise loadgen.LoadError("re-creating the ht:// bucket: %s" % e) from None
            return _cpu_run(b, origin, cpu["A"], lambda: b.loader.run_once_direct(
                b.cluster.port, "bench-cold", names, s.size, WORKERS, provider="ht", log=b.runlog))
        pairs.append(b.pair("cold net", s.label, "ft-loader", rnd, cold_a,
                            lambda: _cpu_run(b, origin, cpu["B"], lambda: b.loader.run_once_url_list(
                                urls, s.size, WORKERS, log=b.runlog)), "bps"))
    return pairs, left, cpu


def _note(rate, cpu):
    def med(side, i):
        xs = sorted(x[i] for x in cpu[side] if x[i] is not None)
        return "%.2f" % xs[len(xs) // 2] if xs else "-"
    return ("origin nginx in a network namespace behind a veth pair shaped to %s each way (tc htb); CPU "
            "seconds per GiB delivered (medians): through the cluster target %s (perf stat -e task-clock; "
            "%s by /proc/<pid>/stat) + origin nginx %s; straight from the origin nginx %s"
            % (rate, med("A", 2), med("A", 0), med("A", 1), med("B", 1)))


def bench_coldnet(b, rate=RATE):
    """Appends the row to b.rows (b: run.py's Bench after setup(), with the 8 MiB set)."""
    title = TITLE % rate
    ft_side, peer_side = "FastTier (ht:// bucket, cold)", "origin direct, same link"
    s = next(x for x in b.sets if x.label == "8 MiB")
    why = b.skip_reason("ft-loader") if b.loader is None else None if b.cold_files else b.cold_setup(s)
    if why:
        b.rows.append(report.Row(title, "-", ft_side, peer_side, "bps", TARGET, skipped=why))
        return
    link, origin = ShapedLink(rate), None
    try:
        try:
            link.create()
            origin = NsOrigin(os.path.join(b.workdir, "coldnet-origin"), link, b.nginx.origin_root, ORIGIN_PORT)
            origin.start()
        except (NetError, OSError) as e:
            b.rows.append(report.Row(title, "-", ft_side, peer_side, "bps", TARGET,
                                     skipped="no shaped link here: %s" % e))
            return
        base = "http://%s:%d/bench-cold" % (link.ns_addr, ORIGIN_PORT)
        names = b.cold_files[0]
        urls = os.path.join(b.workdir, "urls-coldnet.txt")
        with open(names) as fn, open(urls, "w") as fu:
            count = 0
            for line in fn:
                fu.write("%s/%s\n" % (base, line.strip()))
                count += 1
        b.cold_endpoint = base
        t = time.monotonic()
        pairs, left, cpu = _rounds(b, origin, s, names, urls)
        print("[%s] cold net: %d rounds in %.0f s; cached object files after each re-create %s"
              % (b.elapsed(), len(pairs), time.monotonic() - t, left), flush=True)
        desc = ("ft-loader -epochs 1 -uniquegets -numworkers %d: each of %d objects (%d MiB) once per run; "
                "-provider ht -direct, bucket re-created before each run (FastTier), -url-list of the "
                "origin (direct); the origin in a network namespace behind %s"
                % (WORKERS, count, count * s.size // (1 << 20), rate))
        row = report.Row(title, desc, ft_side, peer_side, "bps", TARGET, pairs=pairs)
        row.notes = _note(rate, cpu)
        if any(left):
            row.failed = "%d cached object files remained after re-creating the bucket" % max(left)
        b.rows.append(row)
    finally:
        if origin is not None:
            origin.stop()
        link.delete()
        try:
            b.cold_destroy()
        except (b.Error, OSError, http.client.HTTPException):
            pass
