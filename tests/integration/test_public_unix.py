# SPDX-License-Identifier: Apache-2.0
# A target's public port on a Unix socket: proxies of the same machine and mount namespace relay S3 GETs over it, else TCP.
"""
A target also listens on a Unix socket (`public_unix`, default <state_dir>/public-<id>.sock) and
advertises it in the cluster map with the machine's boot id and its mount namespace; a proxy with the
same host id relays S3 GETs to it over that socket instead of loopback TCP. These tests check the map entry, the socket's
mode, that relayed GETs really take the socket (the target's ft_http_connections_total{listener}),
that a target without one (`off`) or with a dead one is still reached over TCP, and the refusals:
a path that is not a socket, a live listener there, a relative path, tls_client_ca, a bad join; under
TLS the socket stays plain HTTP.
"""
import http.client
import os
import socket
import stat
import subprocess
import time

import s3util
import ftcluster
from conftest import FT_BIN, _free_base
from ftutil import Api, recv_until_closed, unique
from test_metrics import parse, scrape

MIB = 1 << 20


def host_id(pid="self"):
    """The boot id and the mount namespace of process pid, as targets advertise them."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip() + "/" + os.readlink("/proc/%s/ns/mnt" % pid)


def connections(h, listener):
    """ft_http_connections_total{listener} summed over the cluster's targets."""
    total = 0.0
    for t in h.targets():
        for (name, labels), v in parse(scrape(t["public_url"])).items():
            if name == "ft_http_connections_total" and ("listener", listener) in labels:
                total += v
    return total


def put_and_get_all(h, prefix):
    """PUTs objects of several sizes through the proxy's S3 API, reads them back whole and by range (relayed GETs)."""
    s3 = s3util.client(h, read_timeout=120)
    b = s3util.bucket_name(prefix)
    s3.create_bucket(Bucket=b)
    objs = {"s16k": os.urandom(16384), "m1": os.urandom(MIB + 3), "l9": os.urandom(9 * MIB + 5)}
    for k, v in objs.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    for k, v in objs.items():
        assert s3.get_object(Bucket=b, Key=k)["Body"].read() == v, k
        got = s3.get_object(Bucket=b, Key=k, Range="bytes=100-16099")["Body"].read()
        assert got == v[100:16100], k
    return s3, b, objs


def test_relayed_gets_take_the_unix_socket(make_cluster):
    h = make_cluster(targets=2, mountpaths=1)
    for i, t in enumerate(h.targets()):
        path = t["public_unix"]
        assert t["host_id"] == host_id()
        assert os.path.isabs(path) and path.endswith("/public-%s.sock" % t["id"])
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        assert st.st_uid == os.getuid()
    before = connections(h, "unix")
    put_and_get_all(h, "unixrelay")
    assert connections(h, "unix") > before, "no relayed GET came over a Unix socket"


def test_target_without_a_socket_is_reached_over_tcp(make_cluster):
    h = make_cluster(targets=2, mountpaths=1, target_args=("--public_unix", "off"))
    for t in h.targets():
        assert "public_unix" not in t and "host_id" not in t, t
    put_and_get_all(h, "unixoff")
    assert connections(h, "unix") == 0
    assert connections(h, "tcp") > 0


def test_target_in_another_mount_namespace_is_reached_over_tcp(make_cluster):
    # A container of the same machine: same boot id, its own files. Its socket path is visible here (unshare -m
    # copies the mounts) but the host id differs, so the proxy must not take that path for the target's socket.
    h = make_cluster(targets=1, mountpaths=1)
    t = h.c.targets[0]
    t.argv[:0] = ["unshare", "--mount", "--propagation", "private"]
    h.restart_target(0)
    entry = h.targets()[0]
    assert entry["host_id"] != host_id() and entry["host_id"].split("/")[0] == host_id().split("/")[0], entry
    assert os.path.exists(entry["public_unix"])
    put_and_get_all(h, "unixns")
    assert connections(h, "unix") == 0
    assert connections(h, "tcp") > 0


def test_socket_left_by_a_killed_target_is_replaced(make_cluster):
    h = make_cluster(targets=1, mountpaths=1)
    s3, b, objs = put_and_get_all(h, "unixkill")
    path = h.targets()[0]["public_unix"]
    h.kill_target(0)
    assert stat.S_ISSOCK(os.lstat(path).st_mode), "SIGKILL leaves the socket file"
    h.restart_target(0)
    assert h.targets()[0]["public_unix"] == path
    before = connections(h, "unix")
    for k, v in objs.items():  # kept connections to the dead target fail first, then new ones take the new socket
        for attempt in range(20):
            try:
                got = s3.get_object(Bucket=b, Key=k)["Body"].read()
                break
            except Exception:
                if attempt == 19:
                    raise
                time.sleep(0.25)
        assert got == v, k
    assert connections(h, "unix") > before


def run_target(tmp_path, *args, check=None, refused=False):
    """Starts ft-target with args and a proxy URL nobody serves. Returns (exit status, output) once it exited, or
    (None, output) if it still ran after 3 s: then check() is called, the target is stopped with SIGTERM and must
    exit 0. refused: the target is expected to exit on its own, and is given 60 s to (a sanitizer build on a busy
    machine took more than 3 s to get there)."""
    mp = tmp_path / "mp"
    mp.mkdir(exist_ok=True)
    port = _free_base()
    argv = [os.path.join(FT_BIN, "ft-target"), "--public_port", str(port), "--state_dir", str(tmp_path),
            "--mountpath", str(mp), "--proxy_url", "http://127.0.0.1:9"] + list(args)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=60 if refused else 3)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        try:
            if check is not None:
                check(port)
        finally:
            p.terminate()
            out, _ = p.communicate(timeout=15)
        assert p.returncode == 0, out
        return None, out


def test_socket_lives_with_its_target(tmp_path):
    seen = []

    def check(port):
        path = tmp_path / ("public-%s.sock" % (tmp_path / "node.id").read_text().strip())
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        seen.append(path)

    rc, out = run_target(tmp_path, check=check)
    assert rc is None and len(seen) == 1, out
    assert not os.path.exists(seen[0]), "the socket file outlived its target"


def unix_get(path, target):
    """(status, body) of a plain HTTP GET of target on the Unix socket at path."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target.encode())
        data = recv_until_closed(s)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_tls_port_keeps_a_plain_socket(tmp_path):
    """Under TLS the TCP port speaks HTTPS only, the Unix socket plain HTTP (only this user reaches it);
    with tls_client_ca (every client shows a certificate) there is no socket, and asking for one is refused."""
    ca, cert, key = ftcluster.ensure_tls(str(tmp_path / "pki"), ["127.0.0.1"])
    seen = []

    def check(port):
        path = tmp_path / ("public-%s.sock" % (tmp_path / "node.id").read_text().strip())
        seen.append(stat.S_IMODE(os.lstat(path).st_mode))
        assert unix_get(path, "/v1/health")[0] == 200
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # plain HTTP on the TCP port: no answer
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert not s.recv(4096).startswith(b"HTTP/1.1 200")

    rc, out = run_target(tmp_path, "--tls_cert", cert, "--tls_key", key, check=check)
    assert rc is None and seen == [0o600], (seen, out)
    seen.clear()
    rc, out = run_target(tmp_path, "--tls_cert", cert, "--tls_key", key, "--tls_client_ca", ca,
                         check=lambda port: seen.append([n for n in os.listdir(tmp_path) if n.endswith(".sock")]))
    assert rc is None and seen == [[]], (seen, out)
    rc, out = run_target(tmp_path, "--tls_cert", cert, "--tls_key", key, "--tls_client_ca", ca,
                         "--public_unix", str(tmp_path / "t.sock"), refused=True)
    assert rc not in (None, 0) and "public_unix: not with tls_client_ca" in out, out


def test_unusable_socket_paths_stop_the_target(tmp_path, make_cluster):
    plain = tmp_path / "plain-file"
    plain.write_bytes(b"keep me")
    rc, out = run_target(tmp_path, "--public_unix", str(plain), refused=True)
    assert rc not in (None, 0) and "exists and is not a socket" in out, out
    assert plain.read_bytes() == b"keep me"

    rc, out = run_target(tmp_path, "--public_unix", "relative.sock", refused=True)
    assert rc not in (None, 0) and "public_unix: an absolute path" in out, out
    check = subprocess.run([os.path.join(FT_BIN, "ft-target"), "--mountpath", str(tmp_path / "mp"),
                            "--public_unix", "relative.sock", "--check-config"], capture_output=True, text=True,
                           timeout=30)
    assert check.returncode == 2 and "public_unix: an absolute path" in check.stderr, check

    rc, out = run_target(tmp_path, "--public_unix", "/" + "x" * 120, refused=True)
    assert rc not in (None, 0) and "public_unix: an absolute path shorter than" in out, out

    h = make_cluster(targets=1, mountpaths=1)
    live = h.targets()[0]["public_unix"]
    rc, out = run_target(tmp_path, "--public_unix", live, refused=True)
    assert rc not in (None, 0) and "another server listens there" in out, out
    assert stat.S_ISSOCK(os.lstat(live).st_mode), "the live target's socket was removed"
    put_and_get_all(h, "unixlive")


def test_join_with_a_relative_socket_path_is_refused(make_cluster):
    h = make_cluster(targets=1, mountpaths=1)
    node = {"id": "t-unixbad", "public_url": "http://127.0.0.1:9", "control_url": "http://127.0.0.1:10",
            "host_id": host_id(), "public_unix": "rel/public.sock"}
    st, j = ftcluster.http_json("POST", h.c.proxy.control_url + "/v1/cluster/join", node, timeout=5,
                                secret=h.c.secret)
    assert st == 400 and "public_unix" in j["message"] and "absolute" in j["message"], (st, j)
    assert all(t["id"] != "t-unixbad" for t in h.targets())


def loop_cpu_ns(pid):
    """{thread name: CPU ns} of the public port's loop threads (ft-http-N) of process pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:  # other threads (workers, fetchers) come and go meanwhile; the loop threads live on
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
            if name.startswith("ft-http-") and name[8:].isdigit():
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    out[name] = int(f.read().split()[0])
        except FileNotFoundError:
            continue
    return out


def test_unix_connections_are_spread_over_the_loops(make_cluster):
    # A Unix socket has no SO_REUSEPORT: the first loop waiting on it would take every connection. Each
    # connection below is kept busy with GETs; both loop threads must have worked (CPU time from schedstat).
    h = make_cluster(targets=1, mountpaths=1, target_args=("--loop_threads", "2"))
    api = Api(h.url)
    b = unique("unixloops")
    api.create_bucket(b)
    data = os.urandom(16384)
    api.put(b, "o", data)
    t = h.c.targets[0]
    path = h.targets()[0]["public_unix"]
    conns = []
    for _ in range(8):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
        c = http.client.HTTPConnection("localhost")
        c.sock = s
        conns.append(c)
    before = loop_cpu_ns(t.pid)
    assert sorted(before) == ["ft-http-0", "ft-http-1"], before
    for _ in range(150):
        for c in conns:
            c.request("GET", "/v1/objects/%s/o" % b)
            r = c.getresponse()
            assert r.status == 200 and r.read() == data
    after = loop_cpu_ns(t.pid)
    for c in conns:
        c.close()
    worked = {n: after[n] - before[n] for n in before}
    assert all(ns > 0 for ns in worked.values()), worked
    assert min(worked.values()) > max(worked.values()) / 10, worked
