# SPDX-License-Identifier: Apache-2.0
"""Real backend peers on loopback for the integration suite: s3rver, azurite, the firebase storage emulator, nginx.

Each start_* function picks free ports, starts the peer from tests/peers/node_modules (npm) or
Debian's nginx, waits until it answers HTTP, and returns a Peer; Peer.stop() ends exactly the
process it started, by pid. ensure_installed() runs scripts/peers-deps.sh when something is missing.
"""

import base64
import datetime
import functools
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = ROOT / "tests" / "peers"
NODE_BIN = PEERS_DIR / "node_modules" / ".bin"

# Azure's published development-storage account (the same in azurite and Microsoft's docs).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
S3RVER_KEY = "S3RVER"

START_TIMEOUT = 90.0


# Below the kernel's ephemeral range (32768-60999), so no client socket takes a port between our
# probe and the peer's bind; the same range as the cluster fixtures, picked at random.
PORT_LO, PORT_HI = 20000, 32000


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    for _ in range(200):
        port = random.randint(PORT_LO, PORT_HI)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port found")


# What a peer's log says when another process took its port between free_port() and the peer's bind (the suite's
# parallel workers pick ports in the same range).
PORT_CLASH = ("eaddrinuse", "address already in use", "port taken")


def _retry_port_clash(start):
    """start_*, run again (new ports) when the peer exited because a port it was given was taken meanwhile."""
    @functools.wraps(start)
    def wrapper(*args, **kwargs):
        for attempt in range(3):
            try:
                return start(*args, **kwargs)
            except RuntimeError as e:
                if attempt == 2 or " exited with " not in str(e) or not any(w in str(e).lower() for w in PORT_CLASH):
                    raise
    return wrapper


def ensure_installed():
    """Installs nginx and the npm peers if any is missing (scripts/peers-deps.sh); raises on failure."""
    wanted = [NODE_BIN / b for b in ("s3rver", "azurite-blob", "firebase")]
    stamp = PEERS_DIR / "node_modules" / ".ft-lock.sha256"
    if all(p.exists() for p in wanted) and stamp.exists() and nginx_path():
        return
    proc = subprocess.run([str(ROOT / "scripts" / "peers-deps.sh")], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError("scripts/peers-deps.sh failed:\n" + proc.stdout + proc.stderr)


def nginx_path():
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


class Peer:
    """A started peer process: its url, port, scratch dir and log."""

    def __init__(self, name, proc, url, port, workdir, log_path, stop_signal=signal.SIGTERM):
        self.name = name
        self.proc = proc
        self.url = url
        self.port = port
        self.workdir = Path(workdir)
        self.log_path = Path(log_path)
        self.stop_signal = stop_signal

    def log_tail(self, n=40):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self, timeout=15.0):
        """Stops the process we started (by pid), escalating to SIGKILL; safe to call twice."""
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, self.stop_signal)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def _http_status(url, timeout=2.0):
    """Status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def _wait_ready(peer, probe_url, ok=lambda status: status is not None):
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if peer.proc.poll() is not None:
            raise RuntimeError(f"{peer.name} exited with {peer.proc.returncode}:\n{peer.log_tail()}")
        if ok(_http_status(probe_url)):
            return peer
        time.sleep(0.2)
    peer.stop()
    raise RuntimeError(f"{peer.name} did not answer {probe_url} within {START_TIMEOUT:.0f} s:\n{peer.log_tail()}")


def _spawn(name, argv, workdir, env=None, cwd=None):
    log_path = Path(workdir) / f"{name}.log"
    log = open(log_path, "wb")
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(cwd or workdir), env=full_env, start_new_session=True)
    finally:
        log.close()
    return proc, log_path


@_retry_port_clash
def start_s3rver(workdir, bucket="ft-backend-test", port=None):
    """s3rver on a free port (or port: a restart where it ran, over the same workdir) with bucket created;
    keys S3RVER/S3RVER. url: http://127.0.0.1:PORT (path-style)."""
    port = port or free_port()
    data = Path(workdir) / "s3rver-data"
    data.mkdir(parents=True, exist_ok=True)
    # Node 20 needs the legacy OpenSSL provider for s3rver's continuation tokens (else paged listings 500).
    env = {"NODE_OPTIONS": "--openssl-legacy-provider"}
    proc, log = _spawn("s3rver", [str(NODE_BIN / "s3rver"), "-d", str(data), "-a", "127.0.0.1", "-p", str(port),
                                  "--service-endpoint", "localhost", "--configure-bucket", bucket], workdir, env)
    peer = Peer("s3rver", proc, f"http://127.0.0.1:{port}", port, workdir, log)
    peer.bucket = bucket
    # Virtual-host style: <bucket>.s3.localhost (libcurl resolves *.localhost to loopback itself).
    peer.vhost_url = f"http://s3.localhost:{port}"
    return _wait_ready(peer, peer.url + "/")


@_retry_port_clash
def start_azurite(workdir, container="ft-backend-test"):
    """azurite blob service on a free port with container created. url: http://127.0.0.1:PORT/devstoreaccount1."""
    port = free_port()
    data = Path(workdir) / "azurite-data"
    data.mkdir(parents=True, exist_ok=True)
    proc, log = _spawn("azurite", [str(NODE_BIN / "azurite-blob"), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                                   "-l", str(data), "--disableTelemetry", "--skipApiVersionCheck", "--loose"], workdir)
    peer = Peer("azurite", proc, f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}", port, workdir, log)
    peer.account, peer.key, peer.container = AZURITE_ACCOUNT, AZURITE_KEY, container
    _wait_ready(peer, f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}?comp=list")
    try:
        azure_create_container(peer, container)
    except RuntimeError:
        # Another server on the port (taken between free_port and azurite's bind) may have answered the probe
        # while azurite was still starting, then failing on the port: that is a clash, retried on a new port.
        try:
            peer.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            peer.stop()
            raise
        raise RuntimeError(f"{peer.name} exited with {peer.proc.returncode}:\n{peer.log_tail()}")
    return peer


def azure_create_container(peer, container):
    """PUT ?restype=container signed with Shared Key (written here independently of the C signer)."""
    path = f"/{peer.account}/{container}"
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers = {"x-ms-date": date, "x-ms-version": "2021-08-06", "Content-Length": "0"}
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in sorted((k.lower(), v) for k, v in headers.items()
                                                                  if k.lower().startswith("x-ms-")))
    string_to_sign = "PUT\n" + "\n" * 11 + canonical_headers + f"/{peer.account}{path}\nrestype:container"
    sig = base64.b64encode(hmac.new(base64.b64decode(peer.key), string_to_sign.encode(), hashlib.sha256).digest())
    headers["Authorization"] = f"SharedKey {peer.account}:{sig.decode()}"
    req = urllib.request.Request(f"http://127.0.0.1:{peer.port}{path}?restype=container", method="PUT",
                                 headers=headers, data=None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    if status not in (201, 409):
        raise RuntimeError(f"azurite: creating container {container} answered {status}")


@_retry_port_clash
def start_gcs(workdir, bucket="ft-backend-test"):
    """firebase-tools' storage emulator, offline, its rules engine switched off (tests/peers/firebase-offline.js).

    url: http://127.0.0.1:PORT (the GCS JSON API root). Buckets appear on first use.
    """
    workdir = Path(workdir)
    gcs_dir = workdir / "gcs"
    (gcs_dir / "home").mkdir(parents=True, exist_ok=True)
    (gcs_dir / "tmp").mkdir(parents=True, exist_ok=True)
    port, hub, logging = free_port(), free_port(), free_port()
    config = json.loads((PEERS_DIR / "firebase.json").read_text())
    config["storage"]["rules"] = str(PEERS_DIR / "storage.rules")
    config["emulators"]["storage"]["port"] = port
    config["emulators"]["hub"]["port"] = hub
    config["emulators"]["logging"]["port"] = logging
    (gcs_dir / "firebase.json").write_text(json.dumps(config, indent=2))
    env = {
        "NODE_OPTIONS": f"--require {PEERS_DIR / 'firebase-offline.js'}",
        "HOME": str(gcs_dir / "home"),      # the CLI's config store
        "TMPDIR": str(gcs_dir / "tmp"),     # the emulator's blob files
        "CI": "true",                       # no MOTD fetch, no update check
        "NO_UPDATE_NOTIFIER": "1",
    }
    proc, log = _spawn("gcs", [str(NODE_BIN / "firebase"), "emulators:start", "--only", "storage",
                               "--project", "demo-test"], workdir, env, cwd=gcs_dir)
    peer = Peer("gcs", proc, f"http://127.0.0.1:{port}", port, workdir, log)
    peer.bucket = bucket
    return _wait_ready(peer, f"{peer.url}/storage/v1/b/{bucket}/o", ok=lambda s: s == 200)


@_retry_port_clash
def start_nginx(workdir):
    """nginx serving <workdir>/www at /files/ (GET, HEAD, Range). url: http://127.0.0.1:PORT/files; peer.root: the dir."""
    workdir = Path(workdir)
    ngx = workdir / "nginx"
    www = workdir / "www"
    for d in (ngx / "conf", ngx / "tmp", www):
        d.mkdir(parents=True, exist_ok=True)
    # Workers run as nobody when started as root: the served tree must be world-readable.
    for d in (workdir, www):
        d.chmod(0o755)
    port = free_port()
    conf = f"""
worker_processes 1;
pid {ngx}/nginx.pid;
error_log {ngx}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log {ngx}/access.log;
    client_body_temp_path {ngx}/tmp/body;
    proxy_temp_path {ngx}/tmp/proxy;
    fastcgi_temp_path {ngx}/tmp/fastcgi;
    uwsgi_temp_path {ngx}/tmp/uwsgi;
    scgi_temp_path {ngx}/tmp/scgi;
    default_type application/octet-stream;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        location /files/ {{ alias {www}/; }}
    }}
}}
"""
    (ngx / "conf" / "nginx.conf").write_text(conf)
    proc, log = _spawn("nginx", [nginx_path(), "-p", str(ngx), "-c", str(ngx / "conf" / "nginx.conf"),
                                 "-e", str(ngx / "error.log"), "-g", "daemon off;"], workdir)
    peer = Peer("nginx", proc, f"http://127.0.0.1:{port}/files", port, workdir, log, stop_signal=signal.SIGQUIT)
    peer.root = www
    peer.access_log = ngx / "access.log"
    return _wait_ready(peer, peer.url + "/")


def scratch_dir(prefix="ft-peers-"):
    """A fresh directory under the system temp dir, traversable by nginx's workers (0755)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(0o755)
    return d


def s3rver_fixture():
    """A module-scoped fixture `s3rver`: s3rver (start_s3rver in a scratch dir), stopped and removed after the
    module. Assign it in the test module: `s3rver = peers.s3rver_fixture()`."""
    import pytest

    @pytest.fixture(scope="module")
    def fixture():
        ensure_installed()
        d = scratch_dir()
        p = start_s3rver(d / "s3")
        try:
            yield p
        finally:
            p.stop()
            shutil.rmtree(d, ignore_errors=True)

    return fixture


def nginx_origin_fixture():
    """A module-scoped fixture `origin`: an nginx origin (start_nginx in a scratch dir), stopped after the module.
    Assign it in the test module: `origin = peers.nginx_origin_fixture()`."""
    import pytest

    @pytest.fixture(scope="module")
    def fixture():
        ensure_installed()
        p = start_nginx(scratch_dir())
        try:
            yield p
        finally:
            p.stop()

    return fixture

@_retry_port_clash
def start_prometheus(workdir, scrape_urls, interval="1s"):
    """Debian's prometheus scraping each of scrape_urls ("http://host:port", /metrics) every interval, with its own
    tsdb under workdir and its web/API on a free 127.0.0.1 port. url: http://127.0.0.1:PORT."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    hosts = [u.split("://", 1)[1].rstrip("/") for u in scrape_urls]
    conf = ("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n"
            "  - job_name: fasttier\n    metrics_path: /metrics\n    static_configs:\n      - targets: [%s]\n"
            % (interval, interval, ", ".join('"%s"' % h for h in hosts)))
    (workdir / "prometheus.yml").write_text(conf)
    argv = [shutil.which("prometheus") or "/usr/bin/prometheus", "--config.file", str(workdir / "prometheus.yml"),
            "--storage.tsdb.path", str(workdir / "tsdb"), "--web.listen-address", f"127.0.0.1:{port}",
            "--log.level", "warn"]
    proc, log = _spawn("prometheus", argv, workdir)
    peer = Peer("prometheus", proc, f"http://127.0.0.1:{port}", port, workdir, log)
    return _wait_ready(peer, peer.url + "/-/ready", ok=lambda s: s == 200)
