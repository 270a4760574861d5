# SPDX-License-Identifier: Apache-2.0
# TLS on the public ports: HTTPS GET/PUT/HEAD/range and redirects, S3 over HTTPS, bad clients, client certificates.
import hashlib
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid

import http.server
import threading

import boto3
import pytest
import requests
from botocore.config import Config

import ftcluster
import s3util
from conftest import FT_BIN, module_cluster
from ftutil import Api, recv_until_closed, session
from test_aistore_wire import batch_client_leaves
from test_etl import _Reverser
from test_batch import listener_connections, spread_batch, untar
from test_metrics import parse

tcluster = module_cluster("tls", "it starts its own cluster with HTTPS public ports", targets=2, tls=True)

TIMEOUT = 30


@pytest.fixture(scope="module")
def ca(tcluster):
    return tcluster.c.ca_file


@pytest.fixture(scope="module")
def s(tcluster, ca):
    sess = session("")
    sess.verify = ca
    return sess


@pytest.fixture(scope="module")
def bucket(tcluster, s):
    name = "tls-" + uuid.uuid4().hex[:8]
    r = s.post(tcluster.url + "/v1/buckets/" + name, json={"action": "create-bck"}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return name


def obj_url(tcluster, bucket, name):
    return "%s/v1/objects/%s/%s" % (tcluster.url, bucket, name)


def test_urls_are_https(tcluster):
    assert tcluster.url.startswith("https://")
    smap = tcluster.smap()
    assert smap["targets"] and all(t["public_url"].startswith("https://") for t in smap["targets"])


def test_put_get_head_range_with_requests(tcluster, s, bucket):
    body = os.urandom(300 * 1024 + 7)
    url = obj_url(tcluster, bucket, "small")
    r = s.put(url, data=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    r = s.get(url, timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == body
    r = s.head(url, timeout=TIMEOUT, allow_redirects=True)
    assert r.status_code == 200 and int(r.headers["Content-Length"]) == len(body)
    r = s.get(url, headers={"Range": "bytes=1000-1999"}, timeout=TIMEOUT)
    assert r.status_code == 206 and r.content == body[1000:2000]
    r = s.get(url, headers={"Range": "bytes=-10"}, timeout=TIMEOUT)
    assert r.status_code == 206 and r.content == body[-10:]


def test_redirect_goes_to_the_targets_https_port(tcluster, s, bucket):
    url = obj_url(tcluster, bucket, "redir")
    assert s.put(url, data=b"x" * 1000, timeout=TIMEOUT).status_code == 200
    r = s.get(url, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307
    loc = r.headers["Location"]
    assert loc.startswith("https://")
    tcluster.index_of_url(loc)  # one of the targets' public URLs
    r = s.get(loc, timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == b"x" * 1000


def test_large_object_intact_with_curl(tcluster, ca, bucket, tmp_path):
    src = tmp_path / "big"
    src.write_bytes(os.urandom(8 << 20))
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    url = obj_url(tcluster, bucket, "big")
    out = subprocess.run(["curl", "-sS", "-f", "-L", "--cacert", ca, "-T", str(src), url],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = tmp_path / "got"
    out = subprocess.run(["curl", "-sS", "-f", "-L", "--cacert", ca, "-o", str(got), url],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert hashlib.sha256(got.read_bytes()).hexdigest() == want
    # a range across the middle, and HEAD
    out = subprocess.run(["curl", "-sS", "-f", "-L", "--cacert", ca, "-r", "4194000-4195000", url],
                         capture_output=True, timeout=60)
    assert out.returncode == 0 and out.stdout == src.read_bytes()[4194000:4195001]
    out = subprocess.run(["curl", "-sS", "-f", "-L", "-I", "--cacert", ca, url], capture_output=True, timeout=60)
    assert out.returncode == 0 and b"content-length: 8388608" in out.stdout.lower()
    # without the CA, curl refuses the self-signed chain
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null", url], capture_output=True, timeout=60)
    assert out.returncode == 60, out.stderr


def proxy_metric(s, url, name, labels=()):
    """A sample of the proxy's /metrics (0 when absent), over HTTPS."""
    r = s.get(url + "/metrics", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return parse(r.text).get((name, tuple(labels)), 0.0)


def relay_gets(s, url, way):
    """The proxy's ft_s3_relay_gets_total{way}."""
    return proxy_metric(s, url, "ft_s3_relay_gets_total", (("way", way),))


def test_s3_boto3_over_https(tcluster, ca, s):
    """boto3 over HTTPS. The proxy reaches the targets of its machine on their plain Unix sockets, so
    a large GET's body is moved from a plain socket into the client's TLS connection on the loop
    thread (ft_resp_socket: through kernel TLS, else the connection's staging buffer): counted as
    spliced, and the bytes come whole."""
    ak, sk = s3util.keys(tcluster)
    cli = boto3.session.Session().client(
        "s3", endpoint_url=tcluster.url + "/s3", aws_access_key_id=ak, aws_secret_access_key=sk,
        region_name=s3util.REGION, verify=ca, config=Config(retries={"max_attempts": 1, "mode": "standard"}))
    b = s3util.bucket_name("tls")
    cli.create_bucket(Bucket=b)
    body = os.urandom(3 << 20)
    cli.put_object(Bucket=b, Key="k/one", Body=body)
    spliced = relay_gets(s, tcluster.url, "spliced")
    for _ in range(3):
        assert cli.get_object(Bucket=b, Key="k/one")["Body"].read() == body
    assert cli.get_object(Bucket=b, Key="k/one", Range="bytes=100-2000099")["Body"].read() == body[100:2000100]
    assert relay_gets(s, tcluster.url, "spliced") - spliced == 4
    assert cli.head_object(Bucket=b, Key="k/one")["ContentLength"] == len(body)
    part = cli.get_object(Bucket=b, Key="k/one", Range="bytes=10-19")["Body"].read()
    assert part == body[10:20]
    keys = [o["Key"] for o in cli.list_objects_v2(Bucket=b).get("Contents", [])]
    assert keys == ["k/one"]
    cli.delete_object(Bucket=b, Key="k/one")
    cli.delete_bucket(Bucket=b)


def test_s3_relay_without_the_targets_sockets(make_cluster):
    """The Unix sockets gone (the files moved away; the map still names them): the proxy cannot reach
    the targets there and must not speak plain HTTP to their TLS ports, so it relays through its TLS
    client (way "worker"); the bodies come whole, and on the sockets again once they are back. A
    cluster of its own: no relay connection to a target is kept open before the sockets go."""
    h = make_cluster(targets=2, tls=True)
    s = session("")
    s.verify = h.c.ca_file
    ak, sk = s3util.keys(h)
    cli = boto3.session.Session().client(
        "s3", endpoint_url=h.url + "/s3", aws_access_key_id=ak, aws_secret_access_key=sk,
        region_name=s3util.REGION, verify=h.c.ca_file,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}))
    b = s3util.bucket_name("tlsnosock")
    cli.create_bucket(Bucket=b)
    body = os.urandom(1 << 20)
    cli.put_object(Bucket=b, Key="o", Body=body)
    paths = [t["public_unix"] for t in h.targets()]
    assert len(paths) == 2 and all(os.path.exists(p) for p in paths), paths
    ways = ("spliced", "worker")
    # a socket that cannot be had is no sign of a dead target: no relay error, no retry on another owner
    trouble = [("ft_errors_total", (("kind", "relay"),)), ("ft_s3_relay_retries_total", ())]
    before = [relay_gets(s, h.url, w) for w in ways]
    trouble_before = [proxy_metric(s, h.url, *m) for m in trouble]
    for p in paths:
        os.rename(p, p + ".away")
    try:
        for _ in range(3):
            assert cli.get_object(Bucket=b, Key="o")["Body"].read() == body
        after = [relay_gets(s, h.url, w) for w in ways]
        assert [a - b for a, b in zip(after, before)] == [0, 3], (before, after)
        assert [proxy_metric(s, h.url, *m) for m in trouble] == trouble_before
        with open(h.c.proxy.log) as f:
            assert f.read().count("cannot be reached; relaying over TLS instead") == 1  # once a minute at most
    finally:
        for p in paths:
            os.rename(p + ".away", p)
    assert cli.get_object(Bucket=b, Key="o")["Body"].read() == body
    assert relay_gets(s, h.url, "spliced") - after[0] == 1
    cli.delete_object(Bucket=b, Key="o")
    cli.delete_bucket(Bucket=b)


def test_get_batch_pulls_over_the_unix_socket(tcluster, s, bucket):
    """A GetBatch assembled by one target pulls the other target's part over its Unix socket, in plain HTTP (the
    socket speaks no TLS); with the socket gone (the file moved away, the map still names it) the pull is not sent
    in plain HTTP to the TLS port but asked again over TLS. The answer is whole either way."""
    items, want = spread_batch(Api(tcluster.url, s), tcluster, bucket)
    url0, url1 = (t.public_url for t in tcluster.c.targets)

    def batch():
        r = s.post(url0 + "/v1/batch", json={"in": items}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text[:300]
        assert untar(r.content) == want

    before = listener_connections(url1, "unix", s)
    batch()
    assert listener_connections(url1, "unix", s) > before
    path = [t["public_unix"] for t in tcluster.targets() if t["public_url"] == url1][0]
    os.rename(path, path + ".away")
    try:
        before = listener_connections(url1, "unix", s)
        batch()
        assert listener_connections(url1, "unix", s) == before
    finally:
        os.rename(path + ".away", path)


def test_ft_cli_verifies_with_cacert(tcluster, ca, bucket, tmp_path):
    """ft takes the cluster's CA with --cacert (or FT_CACERT) and refuses the endpoint without it."""
    ft = os.path.join(FT_BIN, "ft")
    env = {k: v for k, v in os.environ.items() if k not in ("FT_CACERT", "FT_TOKEN", "FT_ENDPOINT")}
    env["HOME"] = str(tmp_path)
    base = [ft, "--endpoint", tcluster.url, "--token", tcluster.c.token or ""]
    r = subprocess.run(base + ["--cacert", ca, "bucket", "ls"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert bucket in r.stdout
    r = subprocess.run(base + ["bucket", "ls"], env=dict(env, FT_CACERT=ca), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and bucket in r.stdout, r.stderr
    r = subprocess.run(base + ["bucket", "ls"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert "certificate" in r.stderr.lower(), r.stderr
    r = subprocess.run(base + ["--cacert", str(tmp_path / "missing.pem"), "bucket", "ls"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and r.stderr.strip(), (r.returncode, r.stderr)


def host_port(url):
    hp = url.split("://", 1)[1]
    host, port = hp.rsplit(":", 1)
    return host, int(port)


def test_plain_http_to_a_tls_port_fails_cleanly(tcluster, s):
    host, port = host_port(tcluster.url)
    with socket.create_connection((host, port), timeout=10) as c:
        c.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        got = recv_until_closed(c)
    assert got.startswith(b"HTTP/1.1 400 "), got
    assert b"HTTPS" in got
    r = requests.get(tcluster.url.replace("https://", "http://") + "/v1/health", timeout=10)
    assert r.status_code == 400
    assert s.get(tcluster.url + "/v1/health", timeout=TIMEOUT).status_code == 200


def cpu_seconds(pid):
    """User + system CPU time of pid so far (/proc/<pid>/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # TLS 1.0/1.1 on purpose
def test_garbage_and_stalled_handshakes_do_not_hurt_others(tcluster, s, bucket):
    url = obj_url(tcluster, bucket, "during-garbage")
    body = os.urandom(200 * 1024)
    assert s.put(url, data=body, timeout=TIMEOUT).status_code == 200
    host, port = host_port(tcluster.url)
    stalled = [socket.create_connection((host, port), timeout=10) for _ in range(4)]
    stalled[0].sendall(b"\x16\x03\x01\x00")  # a record header cut short
    stalled[1].sendall(b"\x16\x03\x01\x02\x00\x01\x00")  # a record cut short after its header
    # waiting for the rest of a record costs no CPU (no busy re-polling of bytes OpenSSL already holds)
    cpu0 = cpu_seconds(tcluster.c.proxy.pid)
    time.sleep(1.0)
    assert cpu_seconds(tcluster.c.proxy.pid) - cpu0 < 0.15
    garbage = []
    for i in range(8):
        g = socket.create_connection((host, port), timeout=10)
        # Random bytes after two that start no record. OpenSSL reads a 5-byte header: unless it is an SSLv2 one
        # (high bit in the first byte) or its second byte (the version's major) is 3, it refuses the connection at
        # once; otherwise it waits for the length the header names (up to ~18 KiB), like the stalled handshakes
        # above. A random second byte did that about once in 1,000 connections.
        g.sendall(bytes([1 + i, 0]) + os.urandom(2046))
        garbage.append(g)
    for _ in range(5):
        assert s.get(url, timeout=TIMEOUT).content == body
    for g in garbage:  # each is refused and closed, none answered
        g.settimeout(10)
        try:
            data = g.recv(4096)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(b"HTTP/"), data
        g.close()
    # a TLS client that offers nothing the server accepts
    ctx = ssl.create_default_context(cafile=tcluster.c.ca_file)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    with socket.create_connection((host, port), timeout=10) as raw:
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(raw, server_hostname=host).close()
    for c in stalled:
        c.close()
    assert s.get(url, timeout=TIMEOUT).content == body


def test_get_batch_stops_when_a_tls_client_leaves(tcluster, s, ca):
    """A TLS client that leaves a buffered GetBatch ends its assembly as a plain one does (the loop watches the
    TLS connection while the handler works): test_aistore_wire.py's batch_client_leaves over HTTPS."""
    ctx = ssl.create_default_context(cafile=ca)

    def connect(host, port):
        return ctx.wrap_socket(socket.create_connection((host, port), timeout=10), server_hostname=host)

    batch_client_leaves(tcluster.url, s, connect)


def test_https_transformer_with_a_cluster_certificate(tcluster, s, bucket):
    """A transformer server whose certificate the cluster's CA signed (tls_ca) is trusted, as the nodes are."""
    tls = os.path.dirname(tcluster.c.ca_file)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Reverser)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(tls, "server.pem"), os.path.join(tls, "server.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    name = "rev-" + uuid.uuid4().hex[:8]
    try:
        r = s.post(tcluster.url + "/v1/etl", timeout=TIMEOUT,
                   json={"name": name, "url": "https://127.0.0.1:%d/" % srv.server_address[1]})
        assert r.status_code == 200, r.text
        assert s.put(obj_url(tcluster, bucket, "etl-in"), data=b"abc def", timeout=TIMEOUT).status_code == 200
        r = s.get(obj_url(tcluster, bucket, "etl-in") + "?etl=" + name, timeout=TIMEOUT)
        assert (r.status_code, r.content) == (200, b"fed cba"), r.text
    finally:
        s.delete(tcluster.url + "/v1/etl/" + name, timeout=TIMEOUT)
        srv.shutdown()
        srv.server_close()


class _Origin(http.server.SimpleHTTPRequestHandler):
    served = []

    def do_GET(self):
        _Origin.served.append(self.path)
        return super().do_GET()

    def log_message(self, *args):
        pass


def test_https_backend_is_verified_by_default(tcluster, s, tmp_path):
    """An ht:// origin over HTTPS with a certificate no system CA signed: the cold GET fails, nothing is fetched
    (tls_ca is for the cluster's own public ports; backends keep libcurl's verification with the system CAs)."""
    (tmp_path / "obj").write_bytes(b"secret-origin-bytes")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tlsdir = os.path.join(tcluster.c.dir, "tls")
    ctx.load_cert_chain(os.path.join(tlsdir, "server.pem"), os.path.join(tlsdir, "server.key"))
    handler = lambda *a, **k: _Origin(*a, directory=str(tmp_path), **k)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        b = "tlsorigin-" + uuid.uuid4().hex[:8]
        r = s.post("%s/v1/buckets/%s?provider=ht" % (tcluster.url, b),
                   json={"action": "create-bck",
                         "value": {"backend": {"endpoint": "https://127.0.0.1:%d" % srv.server_address[1]}}},
                   timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        r = s.get("%s/v1/objects/%s/obj?provider=ht" % (tcluster.url, b), timeout=TIMEOUT)
        assert r.status_code >= 400 and b"secret-origin-bytes" not in r.content, (r.status_code, r.text)
        assert _Origin.served == []
        assert r.status_code == 502 and "certificate" in r.json()["message"], r.text
    finally:
        srv.shutdown()
        srv.server_close()


# ---- daemons started by hand: client certificates, bad flags ----

def free_port():
    for _ in range(100):
        with socket.socket() as x:
            x.bind(("127.0.0.1", 0))
            p = x.getsockname()[1]
        if ftcluster.port_free("127.0.0.1", p) and ftcluster.port_free("127.0.0.1", p + 1):
            return p
    raise RuntimeError("no free port")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Two CAs with a certificate each: server (for the port) and client (for a client certificate)."""
    d = tmp_path_factory.mktemp("pki")
    server = ftcluster.ensure_tls(str(d / "server"), ["127.0.0.1"])
    client = ftcluster.ensure_tls(str(d / "client"), ["ft-client"])
    return {"dir": d, "server": server, "client": client}


def run_proxy(args, tmp, port):
    log = open(os.path.join(str(tmp), "proxy-%d.log" % port), "w+")
    argv = [os.path.join(FT_BIN, "ft-proxy"), "--bind", "127.0.0.1", "--public_port", str(port),
            "--control_port", str(port + 1), "--state_dir", os.path.join(str(tmp), "p%d" % port)] + args
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log


def test_client_certificate_required(pki, tmp_path):
    ca, cert, key = pki["server"]
    cca, ccert, ckey = pki["client"]
    port = free_port()
    p, log = run_proxy(["--tls_cert", cert, "--tls_key", key, "--tls_client_ca", cca], tmp_path, port)
    url = "https://127.0.0.1:%d/v1/health" % port
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                r = requests.get(url, verify=ca, cert=(ccert, ckey), timeout=5)
                break
            except requests.exceptions.ConnectionError:
                assert p.poll() is None and time.monotonic() < deadline, open(log.name).read()
                time.sleep(0.1)
        assert r.status_code == 200
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(url, verify=ca, timeout=5)  # no client certificate
        # a certificate from another CA (the server's own) is refused too
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(url, verify=ca, cert=(cert, key), timeout=5)
        out = subprocess.run(["curl", "-sS", "--cacert", ca, url], capture_output=True, timeout=30)
        assert out.returncode != 0
        assert requests.get(url, verify=ca, cert=(ccert, ckey), timeout=5).status_code == 200
        assert p.poll() is None
    finally:
        p.terminate()
        assert p.wait(timeout=15) == 0
        log.close()


@pytest.mark.parametrize("exe", ["ft-proxy", "ft-target"])
def test_bad_certificate_flags_refuse_to_start(pki, tmp_path, exe):
    ca, cert, key = pki["server"]
    _, ccert, ckey = pki["client"]
    cases = [
        (["--tls_cert", cert, "--tls_key", ckey], "is not the key of tls_cert"),
        (["--tls_cert", str(tmp_path / "missing.pem"), "--tls_key", key], "tls_cert %s" % (tmp_path / "missing.pem")),
        (["--tls_cert", cert], "tls_cert and tls_key go together"),
        (["--tls_cert", key, "--tls_key", key], "tls_cert"),
        (["--tls_cert", cert, "--tls_key", key, "--tls_client_ca", str(tmp_path / "none")], "tls_client_ca"),
        (["--tls_cert", cert, "--tls_key", key, "--tls_ca", key], "tls_ca"),
    ]
    extra = ["--mountpath", str(tmp_path / "mp")] if exe == "ft-target" else []
    for flags, want in cases:
        port = free_port()
        base = [os.path.join(FT_BIN, exe), "--bind", "127.0.0.1", "--public_port", str(port),
                "--control_port", str(port + 1), "--state_dir", str(tmp_path / ("s%d" % port))] + extra
        out = subprocess.run(base + flags + ["--check-config"], capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and want in out.stderr, (flags, out.stderr)
        out = subprocess.run(base + flags, capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and want in out.stderr, (flags, out.stderr)
    port = free_port()
    ok = [os.path.join(FT_BIN, exe), "--public_port", str(port), "--tls_cert", cert, "--tls_key", key,
          "--tls_ca", ca, "--check-config"] + extra
    out = subprocess.run(ok, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "public=https://" in out.stdout, out.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
