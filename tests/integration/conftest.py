# SPDX-License-Identifier: Apache-2.0
# Integration-test fixtures: real ft-proxy/ft-target clusters on free loopback ports, sanitizer-checked teardown.
"""
Each cluster is started by scripts/ftcluster.py (the code path of `scripts/ft-cluster` and `make run`)
in a fresh temporary directory with binaries from $FT_BIN (default build/bin).

- `cluster` (module scope): 1 proxy + 3 targets x 2 mountpaths, shared by a module's tests, which only
  create their own uniquely named buckets.
- `make_cluster` (function scope): a factory for tests that kill, restart or fill a cluster.
- `module_cluster(...)`: makes a module-scoped fixture with a cluster of its own (other shapes,
  mountpaths the tests look at or damage).
- With FT_CLUSTER_URL set, `cluster` is that running cluster (1 proxy, 3 targets, as `make run`
  starts); tests that need to start or kill processes or look at mountpaths skip, saying why.

After every test each live cluster's logs are scanned for sanitizer reports and every node that should
run is checked to be alive; at teardown the cluster is stopped (always, even on failure), every node
must exit 0 on SIGTERM, and the logs are scanned once more (leak reports come at exit).
"""
import os
import random
import signal
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import ftcluster  # noqa: E402

from ftutil import Api, session  # noqa: E402

FT_BIN = os.environ.get("FT_BIN") or str(ROOT / "build" / "bin")
EXTERNAL_URL = os.environ.get("FT_CLUSTER_URL", "").rstrip("/")
# Ports below the kernel's ephemeral range (32768-60999), so client sockets never take them.
PORT_LO, PORT_HI = 20000, 32000
START_TIMEOUT = float(os.environ.get("FT_START_TIMEOUT", "30"))
TEST_TIMEOUT = float(os.environ.get("FT_TEST_TIMEOUT", "300"))

_live = []  # local handles whose logs the per-test guard scans

# The daemons inherit the environment. Under ThreadSanitizer (make test-tsan) a lock-order report shows both stacks;
# reports never stop a daemon (the per-test scan and the exit status catch them).
os.environ.setdefault("TSAN_OPTIONS", "second_deadlock_stack=1 halt_on_error=0")


def _summaries(path, start, end):
    """The sanitizer "SUMMARY:" lines of path between byte offsets start and end, one per line, then a blank line
    ("" if none)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            text = f.read(max(0, end - start)).decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if "SUMMARY: " in line and "Sanitizer" in line]
    return "\n".join(lines) + "\n\n" if lines else ""


class ClusterHandle:
    """What tests see of a cluster: its URL, its nodes, and (when local) its processes and disks."""

    def __init__(self, url, cluster=None):
        self.url = url
        self.c = cluster
        self.offsets = {}
        self.token = cluster.token if cluster is not None else None  # auth on: an admin token
        self.api = Api(url, token=self.token)
        if cluster is not None and cluster.tls:
            self.api.s.verify = cluster.ca_file  # HTTPS public ports: verify against the cluster's CA

    @property
    def local(self):
        return self.c is not None

    def require_local(self, why):
        if not self.local:
            pytest.skip("FT_CLUSTER_URL is set (external cluster): this test %s" % why)

    # ---- nodes ----
    def smap(self):
        return self.api.smap()

    def targets(self):
        """Targets of the current map, sorted by id: dicts with id, public_url, control_url."""
        return sorted(self.smap()["targets"], key=lambda t: t["id"])

    def index_of_url(self, url):
        """Local target index whose public URL starts url (e.g. a 307 Location)."""
        for i, t in enumerate(self.c.targets):
            if url == t.public_url or url.startswith(t.public_url + "/"):
                return i
        raise AssertionError("%s is no target's public URL (%s)"
                             % (url, [t.public_url for t in self.c.targets]))

    def mountpaths(self, index):
        return list(self.c.targets[index].mountpaths)

    def all_mountpaths(self):
        return [mp for t in self.c.targets for mp in t.mountpaths]

    def work_files(self, indexes=None):
        """Files left in the .work/ directories of the given targets' mountpaths."""
        out = []
        idx = range(len(self.c.targets)) if indexes is None else indexes
        for i in idx:
            for mp in self.c.targets[i].mountpaths:
                for dirpath, _, files in os.walk(os.path.join(mp, ".work")):
                    out += [os.path.join(dirpath, f) for f in files]
        return out

    def kill_target(self, index, sig="KILL"):
        return self.c.kill_target(index, sig)

    def restart_target(self, index):
        return self.c.restart_target(index, timeout=START_TIMEOUT)

    def add_target(self, mountpaths=None):
        """Starts one more target (as scripts/ftcluster.py plans the others: same arguments, next
        free ports, DIR/t<i>/mp<j>) and waits until the proxy's map lists it and it holds that
        map. Returns its index in c.targets; stop_cluster stops it with the rest."""
        c = self.c
        i = len(c.targets)
        taken = {c.port, c.port + 1}
        for t in c.targets:
            taken.update((t.public_port, t.control_port))
        pub = ftcluster.next_free_port(c.host, max(taken) + 1, taken)
        ctl = ftcluster.next_free_port(c.host, pub + 1, taken | {pub})
        tdir = os.path.join(c.dir, "t%d" % i)
        n_mp = c.n_mountpaths if mountpaths is None else mountpaths
        mps = [os.path.join(tdir, "mp%d" % j) for j in range(n_mp)]
        argv = [os.path.join(c.bindir, "ft-target")] + c._common_args(pub, ctl, tdir)
        argv += ["--proxy_url", c.proxy_urls()]
        for mp in mps:
            argv += ["--mountpath", mp]
        if c.keepalive_ms:
            argv += ["--keepalive_ms", str(int(c.keepalive_ms))]
        argv += c.target_args
        node = ftcluster.Node("t%d" % i, "target", argv, pub, ctl, tdir,
                              os.path.join(c.dir, "logs", "t%d.log" % i), c.public_host, mps,
                              scheme=c.scheme)
        c.targets.append(node)
        node.spawn(c.env)
        c.save()
        try:
            c.wait_ready(START_TIMEOUT, nodes=[node])
        except ftcluster.ClusterError as e:
            pytest.fail("added target did not join:\n%s\n%s" % (e, c.logs_tails([node])),
                        pytrace=False)
        c.save()
        return i

    # ---- checks ----
    def check_logs(self):
        """Sanitizer report excerpts found since the last call (empty list if none), each led by the
        "SUMMARY:" lines of every report in that stretch of the log (ThreadSanitizer logs one per race)."""
        found = []
        for path in self.c.log_paths():
            start = self.offsets.get(path, 0)
            excerpt, self.offsets[path] = ftcluster.scan_sanitizer(path, start)
            if excerpt:
                found.append("%s:\n%s%s" % (path, _summaries(path, start, self.offsets[path]), excerpt))
        return found

    def check_alive(self):
        """Nodes that died without being told to."""
        return [n for n in self.c.nodes if not n.expected_dead and not n.alive()]


def _free_base():
    for _ in range(200):
        base = random.randrange(PORT_LO, PORT_HI - 64)
        if all(ftcluster.port_free("127.0.0.1", p) for p in range(base, base + 8)):
            return base
    raise RuntimeError("no free loopback ports in %d-%d" % (PORT_LO, PORT_HI))


def start_cluster(tmp_dir, targets=3, mountpaths=2, keepalive_ms=None, target_args=(),
                  proxy_args=(), public_host=None, auth=False, proxies=1, lease_ttl=None, tls=False, env=None):
    """Starts a local cluster in tmp_dir; retries on other ports if one was taken meanwhile.
    auth=True: authentication on (cluster secret, admin token in h.c.token; docs/security.md).
    proxies > 1: that many proxies and a local etcd (docs/multi-proxy.md), lease_ttl their lease TTL.
    tls=True: HTTPS public ports (CA in h.c.ca_file).
    env: variables added to the daemons' environment (e.g. a backend account, docs/backends.md)."""
    last = None
    for attempt in range(3):
        d = os.path.join(str(tmp_dir), "c%d" % attempt)
        c = ftcluster.Cluster(d, _free_base(), targets, mountpaths, FT_BIN, keepalive_ms,
                              "127.0.0.1", proxy_args, target_args, public_host=public_host,
                              auth=auth, proxies=proxies, lease_ttl=lease_ttl, tls=tls,
                              env=dict(os.environ, **env) if env else None)
        try:
            c.start(timeout=START_TIMEOUT)
        except ftcluster.ClusterError as e:
            last = str(e)
            if "in use" in last or "Address already in use" in last:
                continue
            pytest.fail("cluster did not start:\n%s" % last, pytrace=False)
        h = ClusterHandle(c.url, c)
        _live.append(h)
        return h
    pytest.fail("cluster did not start (ports kept being taken):\n%s" % last, pytrace=False)


def stop_cluster(h):
    """Stops every node and returns the problems found (empty list: clean)."""
    problems = []
    dead = h.check_alive()
    if dead:
        problems.append("died during the test: %s\n%s"
                        % (", ".join("%s (status %s)" % (n.name, n.returncode) for n in dead),
                           h.c.logs_tails(dead)))
    status = h.c.stop()
    if h in _live:
        _live.remove(h)
    unclean = {k: v for k, v in status.items() if v != 0}
    if unclean:
        problems.append("unclean exit on SIGTERM (want status 0): %s\n%s"
                        % (unclean, h.c.logs_tails([n for n in h.c.nodes if n.name in unclean])))
    problems += ["sanitizer report in " + x for x in h.check_logs()]
    return problems


def _tmp_dir(tmp_path_factory, name):
    # Short paths: mountpaths end up in argv and logs.
    return tmp_path_factory.mktemp(name, numbered=True)


def _run_cluster(base, **kw):
    """Generator body of a fixture owning a local cluster: starts it in base, yields its handle,
    then stops it (also after a failed test) and fails on any problem stop_cluster() reports."""
    h = start_cluster(base, **kw)
    try:
        yield h
    finally:
        problems = stop_cluster(h)
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)


def run_cluster(tmp_path_factory, name, why, **kw):
    """Generator body of a fixture owning a local cluster (start_cluster() keywords in kw) in a
    fresh directory named after name, for a fixture whose keywords come from other fixtures (e.g.
    env=peers' URLs). Skips under FT_CLUSTER_URL, giving why (what the tests do that an external
    cluster does not allow)."""
    if EXTERNAL_URL:
        pytest.skip("FT_CLUSTER_URL is set (external cluster): " + why)
    yield from _run_cluster(_tmp_dir(tmp_path_factory, name), **kw)


def module_cluster(name, why, **kw):
    """A module-scoped fixture owning a local cluster (start_cluster() keywords in kw) in a fresh
    directory named after name. Assign it to the fixture's name in the test module:
    `mcluster = module_cluster("mirror", "these tests look at the mountpaths", targets=2)`.
    Skips under FT_CLUSTER_URL, giving why (what the tests do that an external cluster does not
    allow)."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory):
        yield from run_cluster(tmp_path_factory, name, why, **kw)

    return fixture


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if EXTERNAL_URL:
        yield ClusterHandle(EXTERNAL_URL)
        return
    yield from _run_cluster(_tmp_dir(tmp_path_factory, "cluster"))


@pytest.fixture
def make_cluster(tmp_path_factory, request):
    """Factory: make_cluster(targets=3, mountpaths=2, keepalive_ms=None, target_args=(),
    proxy_args=(), public_host=None, auth=False, proxies=1, lease_ttl=None, env=None) starts a private local cluster for
    this test; skips under FT_CLUSTER_URL."""
    started = []

    def factory(**kw):
        if EXTERNAL_URL:
            pytest.skip("FT_CLUSTER_URL is set (external cluster): %s starts and kills its own "
                        "daemons" % request.node.name)
        h = start_cluster(_tmp_dir(tmp_path_factory, "fc"), **kw)
        started.append(h)
        return h

    yield factory
    problems = []
    for h in started:
        problems += stop_cluster(h)
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def _watchdog_fire(timed_out):
    """A test ran past TEST_TIMEOUT: SIGKILL every daemon so whatever waits on them fails now
    instead of hanging the suite."""
    timed_out.append(True)
    for h in list(_live):
        for n in h.c.nodes:
            if n.alive():
                n.expected_dead = True
                n.signal(signal.SIGKILL)


@pytest.fixture(autouse=True)
def daemon_guard():
    """After each test: no sanitizer report in any live cluster's logs, no node died unasked.
    A test running longer than FT_TEST_TIMEOUT seconds gets its daemons killed and fails."""
    timed_out = []
    watchdog = threading.Timer(TEST_TIMEOUT, _watchdog_fire, (timed_out,))
    watchdog.daemon = True
    watchdog.start()
    yield
    watchdog.cancel()
    problems = []
    if timed_out:
        problems.append("test exceeded %.0f s (FT_TEST_TIMEOUT): every daemon was SIGKILLed"
                        % TEST_TIMEOUT)
    for h in list(_live):
        problems += ["sanitizer report in " + x for x in h.check_logs()]
        dead = h.check_alive()
        if dead:
            problems.append("daemon died: %s\n%s"
                            % (", ".join("%s (status %s)" % (n.name, n.returncode) for n in dead),
                               h.c.logs_tails(dead)))
            for n in dead:
                n.expected_dead = True  # reported once
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def api(cluster):
    return Api(cluster.url, session())
