# SPDX-License-Identifier: Apache-2.0
# Local FastTier cluster launcher: starts, stops, kills and restarts ft-proxy/ft-target processes.
"""
DESIGN
A cluster lives in one directory DIR:
  DIR/cluster.json      pids, ports, argv of every node (rewritten on every change)
  DIR/logs/<name>.log   stdout+stderr of each node (appended across restarts)
  DIR/proxy/            the proxy's state dir
  DIR/t<i>/             target i's state dir (node.id), with mountpaths DIR/t<i>/mp<j>
  DIR/s3keys.json       the identity store: an admin access key pair for the native and S3 APIs
                        (generated once, mode 0600)
  DIR/cluster.secret    with auth on: the cluster secret (generated once, mode 0600), copied into
                        every node's state dir; it signs tokens, redirects and the control plane
  DIR/token             with auth on: an admin token (POST /v1/tokens with the key pair), mode 0600
  DIR/tls/              with tls on: a self-signed CA (ca.pem, ca.key) and one server certificate for the
                        advertised host (server.pem, server.key), made once with the openssl CLI; every
                        public port serves it and every node trusts ca.pem for the others' https URLs

The proxy gets public port PORT and control port PORT+1; every target gets the next two free
ports after that (checked by binding).

With proxies > 1 (docs/multi-proxy.md) the launcher also runs etcd (data in DIR/etcd, client and
peer ports the next free ones, log DIR/logs/etcd.log); every proxy gets --etcd, proxy 0 keeps PORT
(the cluster URL), proxies 1.. are p1, p2, ... on further free ports with state DIR/p<i>/, and every
target's --proxy_url lists all proxies' control URLs. Daemons run in their own session, so a Ctrl-C in the
terminal reaches only the launcher, which then stops them in order.

The same Cluster class serves the command line (scripts/ft-cluster) and the integration tests
(tests/integration/conftest.py), so both start daemons the same way. Standard library only.
"""

import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "ThreadSanitizer",
)

DEFAULT_START_TIMEOUT = 30.0
ETCD_BIN = os.environ.get("FT_ETCD") or "/usr/bin/etcd"
DEFAULT_STOP_TIMEOUT = 10.0

# Direct connections only: a proxy from the environment must never sit between us and loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_TLS_CAS = set()  # CA files trusted by http_json besides the system's (clusters started with tls)


def trust_ca(path):
    """Makes http_json trust the CA certificates in path (PEM) for https URLs, besides the system's."""
    global _OPENER
    import ssl

    _TLS_CAS.add(os.path.abspath(path))
    ctx = ssl.create_default_context()
    for ca in sorted(_TLS_CAS):
        ctx.load_verify_locations(cafile=ca)
    _OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                          urllib.request.HTTPSHandler(context=ctx))


def ensure_tls(directory, hosts):
    """DIR/tls/{ca.pem,ca.key,server.pem,server.key}: a self-signed CA and a server certificate for hosts
    (names or IP literals, also localhost and 127.0.0.1), made with the openssl CLI unless there. Returns
    (ca, cert, key) paths."""
    d = os.path.join(directory, "tls")
    ca, ca_key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    cert, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    if all(os.path.exists(p) for p in (ca, ca_key, cert, key)):
        return ca, cert, key
    os.makedirs(d, mode=0o700, exist_ok=True)
    names = []
    for h in list(hosts) + ["localhost", "127.0.0.1"]:
        h = h.strip("[]")
        entry = ("IP:" if h.replace(".", "").isdigit() or ":" in h else "DNS:") + h
        if entry not in names:
            names.append(entry)
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n" % ",".join(names))
    steps = [
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", ca_key, "-out", ca, "-days", "825", "-subj", "/CN=FastTier cluster CA"],
        ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key, "-out", os.path.join(d, "server.csr"), "-subj", "/CN=%s" % hosts[0]],
        ["openssl", "x509", "-req", "-in", os.path.join(d, "server.csr"), "-CA", ca, "-CAkey", ca_key,
         "-CAcreateserial", "-out", cert, "-days", "825", "-extfile", ext],
    ]
    for argv in steps:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise ClusterError("%s failed:\n%s" % (" ".join(argv[:3]), r.stdout))
    for p in (ca_key, key):
        os.chmod(p, 0o600)
    return ca, cert, key


class ClusterError(Exception):
    """Raised when a cluster cannot be started or driven; the message says why."""


S3_KEYS_FILE = "s3keys.json"


def ensure_s3_keys(directory):
    """DIR/s3keys.json ({"ACCESS_KEY": "SECRET"}): created with a new random pair when missing,
    kept otherwise (so a restarted cluster keeps its keys). Returns (path, access_key, secret)."""
    path = os.path.join(directory, S3_KEYS_FILE)
    try:
        with open(path) as f:
            keys = json.load(f)
        if isinstance(keys, dict) and keys:
            access, secret = next(iter(keys.items()))
            return path, access, secret
    except (OSError, ValueError):
        pass
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    access = "FT" + "".join(secrets.choice(alphabet) for _ in range(18))
    secret = secrets.token_urlsafe(30)[:40]
    write_private(path, json.dumps({access: secret}) + "\n")  # 0600 even over a temp file a crash left
    return path, access, secret


SECRET_FILE = "cluster.secret"
TOKEN_FILE = "token"
TOKEN_TTL = 7 * 24 * 3600


def write_private(path, text):
    """Writes text to path through a temp file created with mode 0600."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def ensure_cluster_secret(directory):
    """DIR/cluster.secret: 64 random hex digits, created when missing (mode 0600). Returns it."""
    path = os.path.join(directory, SECRET_FILE)
    try:
        with open(path) as f:
            secret = f.read().strip()
        if len(secret) >= 32:
            return secret
    except OSError:
        pass
    secret = secrets.token_hex(32)
    write_private(path, secret + "\n")
    return secret


def read_token(directory):
    """The token in DIR/token, or None."""
    try:
        with open(os.path.join(directory, TOKEN_FILE)) as f:
            return f.read().strip() or None
    except OSError:
        return None


def ctl_headers(secret, method, target, body=b""):
    """Headers that authenticate one control-port request with the cluster secret (the scheme of
    common/rpc/client.c: HMAC-SHA256 over method, request target, time, nonce and body hash)."""
    key = hmac.new(secret.encode(), b"fasttier ctl v1", hashlib.sha256).digest()
    ts = str(int(time.time()))
    nonce = secrets.token_hex(16)
    msg = "ft-ctl-v1\n%s\n%s\n%s\n%s\n%s" % (method, target, ts, nonce,
                                               hashlib.sha256(body or b"").hexdigest())
    sig = hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()
    return {"Ft-Time": ts, "Ft-Nonce": nonce, "Ft-Signature": sig}


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_bindir():
    return os.environ.get("FT_BIN") or os.path.join(repo_root(), "build", "bin")


def port_free(host, port, reuse=False):
    """True when a listener could bind host:port now. reuse=True mirrors a daemon's SO_REUSEADDR
    (ignores TIME_WAIT leftovers), for restarting a node on its old ports."""
    if port <= 0 or port > 65535:
        return False
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def next_free_port(host, start, taken=()):
    """The lowest port >= start that is free and not in taken."""
    port = start
    while port <= 65535:
        if port not in taken and port_free(host, port):
            return port
        port += 1
    raise ClusterError("no free port at or above %d on %s" % (start, host))


def http_json(method, url, body=None, timeout=2.0, headers=None, secret=None):
    """One HTTP exchange. Returns (status, parsed JSON or None). Raises OSError when unreachable.
    headers: extra request headers; secret: sign it as a control-port request."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    if secret:
        target = url[url.index("/", url.index("://") + 3):]
        for k, v in ctl_headers(secret, method, target, data).items():
            req.add_header(k, v)
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def signal_number(sig):
    """Accepts 9, "9", "KILL", "SIGKILL" (any case)."""
    if isinstance(sig, int):
        return sig
    s = str(sig).strip().upper()
    if s.isdigit():
        return int(s)
    if not s.startswith("SIG"):
        s = "SIG" + s
    try:
        return int(getattr(signal, s))
    except AttributeError:
        raise ClusterError("unknown signal %r" % sig) from None


def _proc_state(pid):
    """Process state letter from /proc (e.g. 'S', 'Z'), or None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split(" ", 1)[0]


def _proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return None


def tail(path, lines=30):
    """Last lines of a file, as one string ('' if unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def scan_sanitizer(path, offset=0):
    """Looks for sanitizer reports in a log from offset on. Returns (excerpt or None, new offset)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return None, offset
    text = data.decode(errors="replace")
    new_offset = offset + len(data)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if any(m in line for m in SANITIZER_MARKERS):
            return "\n".join(lines[max(0, i - 2):i + 60]), new_offset
    return None, new_offset


class Node:
    """One daemon process: how to start it, where it listens, and its process if running."""

    def __init__(self, name, kind, argv, public_port, control_port, state_dir, log, host,
                 mountpaths=(), scheme="http"):
        self.name = name
        self.scheme = scheme              # of the public port: "https" in a cluster started with tls
        self.kind = kind                  # "proxy" | "target"
        self.argv = list(argv)
        self.public_port = public_port
        self.control_port = control_port
        self.state_dir = state_dir
        self.mountpaths = list(mountpaths)
        self.log = log
        self.host = host
        self.id = None                    # from the cluster map once joined
        self.pid = None
        self.proc = None                  # subprocess.Popen when started by this process
        self.returncode = None            # exit status once reaped (negative = signal)
        self.expected_dead = False        # killed on purpose (tests), so not a crash

    @property
    def public_url(self):
        return "%s://%s:%d" % (self.scheme, self.host, self.public_port)

    @property
    def control_url(self):
        return "http://%s:%d" % (self.host, self.control_port)

    def to_json(self):
        return {"name": self.name, "kind": self.kind, "argv": self.argv, "id": self.id,
                "pid": self.pid, "public_port": self.public_port,
                "control_port": self.control_port, "public_url": self.public_url,
                "control_url": self.control_url, "state_dir": self.state_dir,
                "mountpaths": self.mountpaths, "log": self.log, "scheme": self.scheme}

    @classmethod
    def from_json(cls, j, host):
        n = cls(j["name"], j["kind"], j["argv"], j["public_port"], j["control_port"],
                j["state_dir"], j["log"], host, j.get("mountpaths", []), j.get("scheme", "http"))
        n.id = j.get("id")
        n.pid = j.get("pid")
        return n

    def spawn(self, env):
        """Starts the process (stdout+stderr appended to the log, own session)."""
        os.makedirs(self.state_dir, exist_ok=True)
        for mp in self.mountpaths:
            os.makedirs(mp, exist_ok=True)
        os.makedirs(os.path.dirname(self.log), exist_ok=True)
        with open(self.log, "ab") as logf:
            logf.write(("==== %s starting: %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"),
                                                    " ".join(self.argv))).encode())
            logf.flush()
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=logf,
                                             stderr=subprocess.STDOUT, env=env,
                                             start_new_session=True, close_fds=True)
            except OSError as e:
                raise ClusterError("cannot run %s: %s" % (self.argv[0], e)) from None
        self.pid = self.proc.pid
        self.returncode = None
        self.expected_dead = False

    def _ours(self):
        """True when pid is still this node's process (guards against pid reuse)."""
        if self.proc is not None:
            return True
        return self.pid is not None and _proc_cmdline(self.pid) == self.argv

    def alive(self):
        if self.pid is None:
            return False
        if self.proc is not None:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                return False
            return True
        if not self._ours():
            return False
        try:  # our child from an earlier call in this process? reap it.
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                return False
        except ChildProcessError:
            pass
        state = _proc_state(self.pid)
        return state is not None and state != "Z"

    def signal(self, sig):
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait_dead(self, timeout):
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True


class Cluster:
    """A local cluster: one proxy and N targets under one directory."""

    def __init__(self, directory, port, targets=3, mountpaths=2, bindir=None, keepalive_ms=None,
                 host="127.0.0.1", proxy_args=(), target_args=(), env=None, public_host=None,
                 auth=False, proxies=1, lease_ttl=None, tls=False):
        self.dir = os.path.abspath(directory)
        self.port = int(port)
        self.n_targets = int(targets)
        self.n_mountpaths = int(mountpaths)
        self.bindir = os.path.abspath(bindir or default_bindir())
        self.keepalive_ms = keepalive_ms
        self.host = host                          # bind address
        self.public_host = public_host or host    # advertised in URLs (map, redirects)
        self.proxy_args = list(proxy_args)
        self.target_args = list(target_args)
        self.auth = bool(auth)                    # public ports need credentials; control plane signed
        self.tls = bool(tls)                      # public ports speak HTTPS (DIR/tls/)
        if self.tls and os.path.exists(os.path.join(self.dir, "tls", "ca.pem")):
            trust_ca(os.path.join(self.dir, "tls", "ca.pem"))  # a cluster loaded from its directory
        self.env = self._daemon_env(env)
        self.n_proxies = int(proxies)
        self.lease_ttl = lease_ttl                # --lease_ttl_s of every proxy (None: the default)
        self.proxy = None                         # proxy 0 (the cluster URL's)
        self.proxies = []                         # every proxy, proxy 0 first
        self.etcd = None                          # with several proxies: the etcd node
        self.targets = []
        if self.n_targets < 0 or self.n_mountpaths < 1 or self.n_proxies < 1:
            raise ClusterError("need targets >= 0, mountpaths >= 1 and proxies >= 1")

    # ---- paths and state ----
    @property
    def state_file(self):
        return os.path.join(self.dir, "cluster.json")

    @property
    def url(self):
        return "%s://%s:%d" % (self.scheme, self.public_host, self.port)

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    @property
    def ca_file(self):
        """The CA that signed the public ports' certificate (tls on), else None."""
        return os.path.join(self.dir, "tls", "ca.pem") if self.tls else None

    @property
    def nodes(self):
        return ([self.etcd] if self.etcd else []) + (self.proxies or ([self.proxy] if self.proxy else [])) \
            + self.targets

    @property
    def etcd_url(self):
        """etcd's client URL: https with tls on (it then asks every client for a certificate of the cluster CA)."""
        if not self.etcd:
            return None
        return "%s://%s:%d" % ("https" if self.tls else "http", self.host, self.etcd.public_port)

    def etcd_health(self):
        """(status, JSON) of etcd's /health; with tls on over a client certificate of the cluster CA."""
        if not self.tls:
            return http_json("GET", self.etcd_url + "/health", timeout=1.0)
        import ssl

        ca, cert, key = ensure_tls(self.dir, [self.public_host])
        ctx = ssl.create_default_context(cafile=ca)
        ctx.load_cert_chain(cert, key)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                             urllib.request.HTTPSHandler(context=ctx))
        with opener.open(self.etcd_url + "/health", timeout=1.0) as resp:
            return resp.status, json.loads(resp.read() or b"null")

    def _daemon_env(self, env):
        e = dict(os.environ if env is None else env)
        # libcurl honours proxy variables: keep node-to-node traffic on loopback direct.
        extra = ",".join(["127.0.0.1", "localhost", self.host, self.public_host])
        for key in ("no_proxy", "NO_PROXY"):
            e[key] = (e[key] + "," + extra) if e.get(key) else extra
        e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        return e

    def save(self):
        os.makedirs(self.dir, exist_ok=True)
        state = {"host": self.host, "public_host": self.public_host, "port": self.port, "url": self.url, "bindir": self.bindir,
                 "targets_expected": self.n_targets, "mountpaths": self.n_mountpaths,
                 "keepalive_ms": self.keepalive_ms, "auth": self.auth, "tls": self.tls,
                 "proxy": self.proxy.to_json() if self.proxy else None,
                 "proxies": [p.to_json() for p in self.proxies[1:]],
                 "etcd": self.etcd.to_json() if self.etcd else None, "lease_ttl": self.lease_ttl,
                 "targets": [t.to_json() for t in self.targets]}
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.state_file)

    @classmethod
    def load(cls, directory):
        """The cluster recorded in DIR/cluster.json (processes are found by pid)."""
        path = os.path.join(os.path.abspath(directory), "cluster.json")
        try:
            with open(path) as f:
                st = json.load(f)
        except FileNotFoundError:
            raise ClusterError("no cluster in %s (no cluster.json)" % directory) from None
        except ValueError as e:
            raise ClusterError("%s is corrupt: %s" % (path, e)) from None
        c = cls(directory, st["port"], st.get("targets_expected", len(st["targets"])),
                st.get("mountpaths", 2), st.get("bindir"), st.get("keepalive_ms"), st["host"],
                public_host=st.get("public_host"), auth=st.get("auth", False),
                proxies=1 + len(st.get("proxies", [])), lease_ttl=st.get("lease_ttl"), tls=st.get("tls", False))
        c.proxy = Node.from_json(st["proxy"], c.public_host) if st.get("proxy") else None
        c.proxies = ([c.proxy] if c.proxy else []) + [Node.from_json(p, c.public_host)
                                                      for p in st.get("proxies", [])]
        c.etcd = Node.from_json(st["etcd"], c.host) if st.get("etcd") else None
        c.targets = [Node.from_json(t, c.public_host) for t in st["targets"]]
        return c

    # ---- building the node list ----
    def _common_args(self, public_port, control_port, state_dir):
        args = ["--bind", self.host, "--public_port", str(public_port),
                "--control_port", str(control_port), "--state_dir", state_dir]
        if self.public_host != self.host:
            args += ["--public_host", self.public_host]
        if self.auth:  # each node gets its own copy of the secret, as a real deployment would
            node_secret = os.path.join(state_dir, SECRET_FILE)
            write_private(node_secret, ensure_cluster_secret(self.dir) + "\n")
            args += ["--auth", "true", "--cluster_secret", node_secret]
        if self.tls:
            ca, cert, key = ensure_tls(self.dir, [self.public_host])
            trust_ca(ca)
            args += ["--tls_cert", cert, "--tls_key", key, "--tls_ca", ca]
        return args

    def _plan(self):
        """Chooses ports and argv for every node (does not start anything)."""
        for exe in ("ft-proxy", "ft-target"):
            path = os.path.join(self.bindir, exe)
            if not os.access(path, os.X_OK):
                raise ClusterError("%s not found or not executable (build with `make`, or set "
                                   "--bin / FT_BIN)" % path)
        for p in (self.port, self.port + 1):
            if not port_free(self.host, p):
                raise ClusterError("port %d on %s is in use" % (p, self.host))
        logs = os.path.join(self.dir, "logs")
        taken = {self.port, self.port + 1}
        nxt = self.port + 2
        self.etcd = None
        if self.n_proxies > 1:
            if not os.access(ETCD_BIN, os.X_OK):
                raise ClusterError("%s not found: several proxies need etcd (Debian etcd-server)" % ETCD_BIN)
            cport = next_free_port(self.host, nxt, taken)
            pport = next_free_port(self.host, cport + 1, taken | {cport})
            taken.update((cport, pport))
            nxt = pport + 1
            edir = os.path.join(self.dir, "etcd")
            scheme = "https" if self.tls else "http"
            curl, purl = "%s://%s:%d" % (scheme, self.host, cport), "http://%s:%d" % (self.host, pport)
            argv = [ETCD_BIN, "--name", "ft", "--data-dir", edir, "--listen-client-urls", curl,
                    "--advertise-client-urls", curl, "--listen-peer-urls", purl,
                    "--initial-advertise-peer-urls", purl, "--initial-cluster", "ft=" + purl,
                    "--log-level", "warn"]
            if self.tls:  # clients must show a certificate of the cluster CA: the proxies show their own
                ca, cert, key = ensure_tls(self.dir, [self.public_host])
                argv += ["--cert-file", cert, "--key-file", key, "--trusted-ca-file", ca, "--client-cert-auth"]
            self.etcd = Node("etcd", "etcd", argv, cport, pport, edir, os.path.join(logs, "etcd.log"),
                             self.host)
        keys_path, _, _ = ensure_s3_keys(self.dir)
        self.proxies = []
        for i in range(self.n_proxies):
            if i == 0:
                pub, ctl, name, pdir = self.port, self.port + 1, "proxy", os.path.join(self.dir, "proxy")
            else:
                pub = next_free_port(self.host, nxt, taken)
                ctl = next_free_port(self.host, pub + 1, taken | {pub})
                taken.update((pub, ctl))
                nxt = ctl + 1
                name, pdir = "p%d" % i, os.path.join(self.dir, "p%d" % i)
            argv = [os.path.join(self.bindir, "ft-proxy")]
            argv += self._common_args(pub, ctl, pdir)
            argv += ["--s3_keys", keys_path]
            if self.keepalive_ms:  # the proxy judges silence by the same interval
                argv += ["--keepalive_ms", str(int(self.keepalive_ms))]
            if self.etcd:
                argv += ["--etcd", self.etcd_url]
                if self.lease_ttl:
                    argv += ["--lease_ttl_s", str(int(self.lease_ttl))]
            argv += self.proxy_args
            self.proxies.append(Node(name, "proxy", argv, pub, ctl, pdir, os.path.join(logs, name + ".log"),
                                     self.public_host, scheme=self.scheme))
        self.proxy = self.proxies[0]
        self.targets = []
        for i in range(self.n_targets):
            pub = next_free_port(self.host, nxt, taken)
            ctl = next_free_port(self.host, pub + 1, taken)
            taken.update((pub, ctl))
            nxt = ctl + 1
            tdir = os.path.join(self.dir, "t%d" % i)
            mps = [os.path.join(tdir, "mp%d" % j) for j in range(self.n_mountpaths)]
            argv = [os.path.join(self.bindir, "ft-target")]
            argv += self._common_args(pub, ctl, tdir)
            argv += ["--proxy_url", self.proxy_urls()]
            for mp in mps:
                argv += ["--mountpath", mp]
            if self.keepalive_ms:
                argv += ["--keepalive_ms", str(int(self.keepalive_ms))]
            argv += self.target_args
            self.targets.append(Node("t%d" % i, "target", argv, pub, ctl, tdir,
                                     os.path.join(logs, "t%d.log" % i), self.public_host, mps,
                                     scheme=self.scheme))

    def proxy_urls(self):
        """What targets get as --proxy_url: every proxy's control URL, comma-separated."""
        return ",".join(p.control_url for p in (self.proxies or [self.proxy]))

    def wait_etcd(self, timeout=10.0):
        """Waits until etcd answers /health."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                status, body = self.etcd_health()
                if status == 200 and isinstance(body, dict) and body.get("health") == "true":
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise ClusterError("etcd at %s not healthy after %.0f s" % (self.etcd_url, timeout))
            time.sleep(0.05)

    def running(self):
        """Nodes whose process is alive."""
        return [n for n in self.nodes if n.alive()]

    # ---- lifecycle ----
    def start(self, timeout=DEFAULT_START_TIMEOUT):
        """Starts the proxy and the targets; returns the proxy URL once the map holds every target.
        On failure everything started is killed and ClusterError carries the logs' tails."""
        if os.path.exists(self.state_file):
            try:
                old = Cluster.load(self.dir)
            except ClusterError:
                old = None
            if old is not None and old.running():
                raise ClusterError("a cluster is already running in %s (pids %s); stop it first"
                                   % (self.dir, ", ".join(str(n.pid) for n in old.running())))
        self._plan()
        if self.auth:  # a token of an earlier run may be signed with another secret: get a new one
            try:
                os.unlink(os.path.join(self.dir, TOKEN_FILE))
            except OSError:
                pass
        try:
            if self.etcd:
                self.etcd.spawn(self.env)
                self.save()
                self.wait_etcd()
            for p in self.proxies:
                p.spawn(self.env)
            for t in self.targets:
                t.spawn(self.env)
            self.save()
            self.wait_ready(timeout)
            self.save()
        except (ClusterError, OSError) as e:
            msg = "%s\n%s" % (e, self.logs_tails())
            self.stop(timeout=2)
            raise ClusterError(msg) from None
        return self.url

    # ---- credentials ----
    @property
    def secret(self):
        """The cluster secret (auth on), else None."""
        return ensure_cluster_secret(self.dir) if self.auth else None

    @property
    def token(self):
        """The admin token in DIR/token (auth on), else None."""
        return read_token(self.dir) if self.auth else None

    def auth_headers(self):
        tok = self.token
        return {"Authorization": "Bearer " + tok} if tok else {}

    def issue_token(self, ttl=TOKEN_TTL, timeout=2.0):
        """POSTs the admin key pair to /v1/tokens and writes the token to DIR/token (0600)."""
        access, secret = self.s3_keys()
        status, body = http_json("POST", self.url + "/v1/tokens",
                                 {"access_key": access, "secret_key": secret, "ttl": ttl},
                                 timeout=timeout)
        if status != 200 or not isinstance(body, dict) or "token" not in body:
            raise ClusterError("POST /v1/tokens answered %s: %s" % (status, body))
        write_private(os.path.join(self.dir, TOKEN_FILE), body["token"] + "\n")
        return body["token"]

    def s3_keys(self):
        """(access_key, secret) of DIR/s3keys.json, the pair the proxy was started with."""
        _, access, secret = ensure_s3_keys(self.dir)
        return access, secret

    def smap(self, timeout=2.0):
        """The proxy's cluster map, or None when it does not answer with one."""
        try:
            if self.auth and read_token(self.dir) is None:
                self.issue_token(timeout=timeout)
        except (OSError, ClusterError):
            return None
        for url in self._proxy_urls_alive():
            try:
                status, body = http_json("GET", url + "/v1/cluster?what=smap", timeout=timeout,
                                         headers=self.auth_headers())
            except OSError:
                continue
            if status == 200 and isinstance(body, dict):
                return body
        return None

    def _proxy_urls_alive(self):
        """Public URLs of the proxies to ask: the cluster URL first, then the other live proxies."""
        urls = [self.url]
        for p in self.proxies[1:]:
            if not p.expected_dead and p.pid is not None:
                urls.append(p.public_url)
        return urls

    def _check_alive(self):
        for n in self.nodes:
            if not n.expected_dead and n.pid is not None and not n.alive():
                raise ClusterError("%s exited early (status %s); log %s"
                                   % (n.name, n.returncode, n.log))

    def _record_ids(self, smap):
        by_url = {t.get("public_url"): t.get("id") for t in smap.get("targets", [])}
        for t in self.targets:
            if by_url.get(t.public_url):
                t.id = by_url[t.public_url]
        for p in smap.get("proxies", []):
            for node in self.proxies or [self.proxy]:
                if p.get("public_url") == node.public_url:
                    node.id = p.get("id")

    def wait_ready(self, timeout=DEFAULT_START_TIMEOUT, nodes=None):
        """Waits until the map lists exactly the running targets with their public URLs and each
        of the given nodes (default: all) answers /v1/health on its public port."""
        deadline = time.monotonic() + timeout
        nodes = self.nodes if nodes is None else nodes
        why = "no answer from the proxy at %s" % self.url
        while True:
            self._check_alive()
            smap = self.smap()
            if smap is not None:
                urls = sorted(t.get("public_url", "") for t in smap.get("targets", []))
                want = sorted(t.public_url for t in self.targets if not t.expected_dead)
                if urls == want and all(self._healthy(n) for n in nodes):
                    self._record_ids(smap)
                    lagging = [n.name for n in nodes if not self._synced(n, smap)]
                    if not lagging:
                        return smap
                    why = "%s not yet at smap version %s" % (", ".join(lagging),
                                                            smap.get("version"))
                else:
                    why = "cluster map lists targets %s, want %s" % (urls, want)
            if time.monotonic() >= deadline:
                raise ClusterError("cluster not ready after %.0f s: %s" % (timeout, why))
            time.sleep(0.05)

    def _synced(self, node, smap):
        """A proxy is synced when the map lists it and it holds the same version.
        A target answers a metadata-free /v1/metasync with the versions it holds: it has
        joined once it holds the proxy's map. A target that refuses the empty probe (non-200)
        is taken as synced; the map listing it then has to do."""
        if node.kind == "proxy" and self.etcd is not None:
            if node.public_url not in [p.get("public_url") for p in smap.get("proxies", [])]:
                return False
            try:
                status, body = http_json("GET", node.public_url + "/v1/cluster?what=smap", timeout=1.0,
                                         headers=self.auth_headers())
            except OSError:
                return False
            return status == 200 and isinstance(body, dict) and body.get("version") == smap.get("version")
        if node.kind != "target":
            return True
        try:
            status, body = http_json("POST", node.control_url + "/v1/metasync", {}, timeout=1.0,
                                     secret=self.secret)
        except OSError:
            return False
        if status != 200 or not isinstance(body, dict):
            return True
        return body.get("smap_version", -1) >= smap.get("version", 0)

    def _healthy(self, node):
        if node.kind == "etcd":
            return True
        try:
            status, _ = http_json("GET", node.public_url + "/v1/health", timeout=1.0)
        except OSError:
            return False
        return status == 200

    def stop(self, timeout=DEFAULT_STOP_TIMEOUT):
        """SIGTERM to every running node, then SIGKILL after timeout. Returns {name: status} for
        the nodes that were running: the exit status, or 'killed' when SIGKILL was needed."""
        result = {}
        live = self.running()
        deadline = time.monotonic() + timeout
        # etcd last: the proxies hand their leases back on the way out
        for group in ([n for n in live if n.kind != "etcd"], [n for n in live if n.kind == "etcd"]):
            for n in group:
                n.signal(signal.SIGTERM)
            for n in group:
                if n.wait_dead(max(0.0, deadline - time.monotonic())):
                    # etcd ends by re-raising SIGTERM: that is its clean exit
                    clean = n.kind == "etcd" and n.returncode == -signal.SIGTERM
                    result[n.name] = 0 if clean else n.returncode
                else:
                    n.signal(signal.SIGKILL)
                    n.wait_dead(5)
                    result[n.name] = "killed"
        for n in self.nodes:
            n.expected_dead = True
        if os.path.isdir(self.dir):
            self.save()
        return result

    def target(self, index):
        if not 0 <= index < len(self.targets):
            raise ClusterError("no target %d (cluster has %d)" % (index, len(self.targets)))
        return self.targets[index]

    def kill_target(self, index, sig=signal.SIGKILL, wait=True):
        """Sends sig to target index; for KILL/TERM/INT waits until the process is gone."""
        t = self.target(index)
        sig = signal_number(sig)
        if not t.alive():
            raise ClusterError("target %d is not running" % index)
        t.expected_dead = sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
        t.signal(sig)
        if wait and t.expected_dead and not t.wait_dead(DEFAULT_STOP_TIMEOUT):
            raise ClusterError("target %d (pid %d) did not exit after signal %d"
                               % (index, t.pid, sig))
        self.save()
        return t

    def restart_target(self, index, timeout=DEFAULT_START_TIMEOUT):
        """Stops target index if it runs, starts it again with the same argv (ports, state,
        mountpaths), and waits until it is back in the map and healthy."""
        t = self.target(index)
        if t.alive():
            t.signal(signal.SIGTERM)
            if not t.wait_dead(DEFAULT_STOP_TIMEOUT):
                t.signal(signal.SIGKILL)
                t.wait_dead(5)
        deadline = time.monotonic() + 10
        while not (port_free(self.host, t.public_port, reuse=True)
                   and port_free(self.host, t.control_port, reuse=True)):
            if time.monotonic() >= deadline:
                raise ClusterError("ports %d/%d of target %d are still taken"
                                   % (t.public_port, t.control_port, index))
            time.sleep(0.05)
        old_id = t.id
        t.spawn(self.env)
        self.save()
        try:
            self.wait_ready(timeout, nodes=[t])
        except ClusterError as e:
            raise ClusterError("%s\n%s" % (e, self.logs_tails([t]))) from None
        if old_id and t.id != old_id:
            raise ClusterError("target %d came back as %s, was %s" % (index, t.id, old_id))
        self.save()
        return t

    # ---- logs ----
    def log_paths(self):
        return [n.log for n in self.nodes]

    def logs_tails(self, nodes=None, lines=30):
        out = []
        for n in (self.nodes if nodes is None else nodes):
            out.append("---- %s (%s) last %d lines ----\n%s" % (n.name, n.log, lines,
                                                               tail(n.log, lines)))
        return "\n".join(out)


def print_auth_help(cluster, out):
    """How to use the admin token of a cluster with authentication on."""
    o = cluster.url + "/v1/objects/demo/hello.txt"
    print("Authentication is on. Admin token (valid %d days) in %s:"
          % (TOKEN_TTL // 86400, os.path.join(cluster.dir, TOKEN_FILE)), file=out)
    print("  export FT_TOKEN=%s" % cluster.token, file=out)
    cacert = " --cacert %s" % cluster.ca_file if cluster.tls else ""
    print("  curl -L%s -H \"Authorization: Bearer $FT_TOKEN\" %s" % (cacert, o), file=out)
    print("A new token: POST %s/v1/tokens {\"access_key\": ..., \"secret_key\": ...} (keys in %s)"
          % (cluster.url, os.path.join(cluster.dir, S3_KEYS_FILE)), file=out)


def run_foreground(cluster, out=sys.stdout):
    """`make run`: starts the cluster, prints how to use it, waits for Ctrl-C or SIGTERM, stops.
    Returns the exit status (1 when a daemon died on its own)."""
    stop_requested = []

    def on_signal(signum, _frame):
        stop_requested.append(signum)

    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    try:
        url = cluster.start()
        if stop_requested:
            cluster.stop()
            return 0
        b = url + "/v1/buckets/demo"
        o = url + "/v1/objects/demo/hello.txt"
        print("FastTier is up: %d prox%s, %d targets x %d mountpaths, state in %s"
              % (cluster.n_proxies, "y" if cluster.n_proxies == 1 else "ies", cluster.n_targets,
                 cluster.n_mountpaths, cluster.dir), file=out)
        if cluster.etcd:
            print("Proxies: %s   etcd: %s" % (", ".join(p.public_url for p in cluster.proxies),
                                             cluster.etcd_url), file=out)
        print("Endpoint: %s   (logs: %s/logs/)" % (url, cluster.dir), file=out)
        auth = ' -H "Authorization: Bearer $FT_TOKEN"' if cluster.auth else ""
        if cluster.auth:
            print_auth_help(cluster, out)
        print("Try:", file=out)
        print("  curl%s -X POST -d '{\"action\":\"create-bck\"}' %s" % (auth, b), file=out)
        print("  curl%s -L -X PUT --data-binary 'hello, FastTier' %s" % (auth, o), file=out)
        print("  curl%s -L %s" % (auth, o), file=out)
        access, secret = cluster.s3_keys()
        print("S3 endpoint: %s/s3   region us-east-1   keys in %s" % (url, os.path.join(cluster.dir, S3_KEYS_FILE)),
              file=out)
        print("  access key: %s" % access, file=out)
        print("  secret key: %s" % secret, file=out)
        print("  export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_DEFAULT_REGION=us-east-1"
              % (access, secret), file=out)
        print("  /usr/bin/aws --endpoint-url %s/s3 s3 mb s3://demo-s3" % url, file=out)
        print("  /usr/bin/aws --endpoint-url %s/s3 s3 ls" % url, file=out)
        print("Ctrl-C stops the cluster.", file=out)
        out.flush()
        while not stop_requested:
            dead = [n for n in cluster.nodes if not n.alive()]
            if dead:
                for n in dead:
                    print("ft-cluster: %s exited (status %s)" % (n.name, n.returncode),
                          file=sys.stderr)
                print(cluster.logs_tails(dead), file=sys.stderr)
                cluster.stop()
                return 1
            time.sleep(0.2)
        print("\nstopping...", file=out)
        out.flush()
        status = cluster.stop()
        bad = {k: v for k, v in status.items() if v != 0}
        if bad:
            print("ft-cluster: unclean exits: %s" % bad, file=sys.stderr)
            return 1
        print("stopped.", file=out)
        return 0
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
