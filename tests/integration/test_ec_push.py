# SPDX-License-Identifier: Apache-2.0
# EC slices over the public port (PUT /v1/ec/slice, target/protect/ec_recv.c): stored, refused when corrupt, cut or badly signed.
import hashlib
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ftcluster
from ftutil import TIMEOUT, Api, assert_json_error, session, unique, wait_until
from test_ec import KA_MS, ec_cluster, main_files, set_ec, slice_files


def slice_target(b, name, xfer):
    return "/v1/ec/slice?provider=ais&bucket=%s&obj=%s&xfer=%016x" % (b, name, xfer)


def put_slice(h, i, target, body, headers=None):
    """PUT of body to target i's public port at target (path and query)."""
    hdrs = {"Content-Type": "application/octet-stream"}
    hdrs.update(headers or {})
    return session().put(h.c.targets[i].public_url + target, data=body, headers=hdrs, timeout=TIMEOUT)


def held_slice(h, b, name):
    """(target index, path, bytes) of the first slice of b/name."""
    i, path = sorted(slice_files(h, b, name).items())[0]
    with open(path, "rb") as f:
        return i, path, f.read()


def raw_put_cut(h, i, target, body, send, extra=""):
    """Sends the head of a PUT of body (full Content-Length) and its first send bytes, then closes."""
    t = h.c.targets[i]
    s = socket.create_connection((t.host, t.public_port), timeout=TIMEOUT)
    try:
        s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n" % (target, len(body), extra)).encode()
                  + body[:send])
        time.sleep(0.2)
    finally:
        s.close()


def target_metric(h, prefix, labels, s=None):
    """Sum over the targets of the samples of the metric whose line starts with prefix and has every label."""
    total = 0.0
    for t in h.c.targets:
        text = (s or session()).get(t.public_url + "/metrics", timeout=TIMEOUT).text
        for line in text.splitlines():
            if line.startswith(prefix + "{") and all(lab in line for lab in labels):
                total += float(line.rsplit(" ", 1)[1])
    return total


def put_bytes(h, s=None):
    """PUT body bytes the targets' public ports answered with 2xx, summed (ft_http_request_bytes_total)."""
    return target_metric(h, "ft_http_request_bytes_total", ('op="PUT"', 'code="2xx"'), s)


def test_put_travels_over_the_public_port(make_cluster):
    # An EC PUT sends its slices to the holders' public ports (the control port took them before):
    # the targets' public ports take the object and its three slices, and the slices are all there.
    h, api, b = ec_cluster(make_cluster, limit=0)
    data = os.urandom(1_000_003)
    before = put_bytes(h)
    assert api.put(b, "x", data).status_code == 200
    held = slice_files(h, b, "x")
    assert len(held) == 3, held
    slices = sum(os.path.getsize(p) for p in held.values())
    # (a request is counted once its answer is out: the owner may have the holders' answers first)
    wait_until(lambda: put_bytes(h) - before == len(data) + slices, timeout=10,
               what="%d + %d PUT bytes on the public ports" % (len(data), slices))
    owner = h.index_of_url(api.owner(b, "x"))
    os.remove(main_files(h, owner, b, "x")[0])
    r = api.get(b, "x")
    assert r.status_code == 200 and r.content == data
    assert h.work_files() == []


def test_put_in_a_tls_cluster_goes_over_the_unix_sockets(make_cluster):
    # In a TLS cluster the holders' public TCP ports speak TLS: the slices go to their Unix sockets (plain HTTP,
    # this machine), not to the control port; the objects are whole from their slices either way.
    h = make_cluster(targets=4, mountpaths=2, keepalive_ms=KA_MS, tls=True)
    s = session()
    s.verify = h.c.ca_file
    api = Api(h.url, s)
    b = unique("ectls")
    api.create_bucket(b, cksum="md5")
    set_ec(h, api, b, 2, 1, 0)
    data = os.urandom(1_000_003)

    def put_checked(name, slices_on_public_ports):
        before = put_bytes(h, s)
        assert api.put(b, name, data).status_code == 200
        held = slice_files(h, b, name)
        assert len(held) == 3, held
        want = len(data) + (sum(os.path.getsize(p) for p in held.values()) if slices_on_public_ports else 0)
        # (a request is counted once its answer is out: the owner may have the holders' answers first)
        wait_until(lambda: put_bytes(h, s) - before == want, timeout=10, what="%d PUT bytes on the public ports" % want)

    # first, no socket (the files moved away, the map still names them; no connection to one was made yet):
    # never plain HTTP to a TLS port, the control port takes the slices
    paths = [t["public_unix"] for t in h.targets()]
    for p in paths:
        os.rename(p, p + ".away")
    try:
        put_checked("y", False)
    finally:
        for p in paths:
            os.rename(p + ".away", p)
    unix = ('listener="unix"',)
    unix_before = target_metric(h, "ft_http_connections_total", unix, s)
    put_checked("x", True)
    assert target_metric(h, "ft_http_connections_total", unix, s) > unix_before
    for name in ("x", "y"):
        os.remove(main_files(h, h.index_of_url(api.owner(b, name)), b, name)[0])
        r = api.get(b, name)
        assert r.status_code == 200 and r.content == data


def test_put_after_the_holders_closed_idle_connections(make_cluster):
    # The owners pool their connections to the holders' public ports (several per holder after
    # concurrent PUTs); a holder closes those idle for longer than its idle timeout. The next PUTs
    # find them closed, drop them one by one and send on a new connection.
    h = make_cluster(targets=4, mountpaths=2, keepalive_ms=KA_MS, target_args=["--http_idle_timeout_ms", "300"])
    api = Api(h.url)
    b = "ecidle"
    api.create_bucket(b, cksum="md5")
    set_ec(h, api, b, 2, 1, 0)
    names = ["n%d" % i for i in range(15)] + ["long/" + ("\u00fc x%&?" * 5 + "/") * 15 + "end"]  # 600 bytes, escaped

    def put(rnd, n):
        r = Api(h.url).put(b, n, os.urandom(100_000 + rnd), expect=None)
        return r.status_code, r.text

    for rnd in range(3):
        with ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda n: put(rnd, n), names))
        assert all(st == 200 for st, _ in got), got
        for n in names:
            assert len(slice_files(h, b, n)) == 3, (rnd, n)
        time.sleep(1.0)
    for n in names:  # one at a time: each may meet the stale connections left in the pool
        assert put(3, n)[0] == 200, n
    for n in names:
        owner = h.index_of_url(api.owner(b, n))
        os.remove(main_files(h, owner, b, n)[0])
        r = api.get(b, n)
        assert r.status_code == 200 and len(r.content) == 100_003, n
    assert h.work_files() == []


def test_put_with_sync_full(make_cluster):
    # With sync "full" a holder publishes on a worker (it fsyncs the slice and its directory), not
    # on the loop thread that received it: the PUTs are acknowledged with every slice in place.
    h = make_cluster(targets=4, mountpaths=2, keepalive_ms=KA_MS, target_args=["--sync", "full"])
    api = Api(h.url)
    b = "ecsync"
    api.create_bucket(b, cksum="md5")
    set_ec(h, api, b, 2, 1, 0)
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda i: api.put(b, "s%d" % i, os.urandom(200_000 + i), expect=None).status_code,
                          range(12)))
    assert got == [200] * 12, got
    for i in range(12):
        held = slice_files(h, b, "s%d" % i)
        assert len(held) == 3, (i, held)
    assert h.work_files() == []


def test_slice_put_stores_and_refuses_corrupt(make_cluster):
    # A whole slice PUT on the public port is checked as it streams: a corrupt one (payload byte
    # flipped, or a length other than its header says) gets 400 and leaves nothing; the held slice
    # stays as it was; the good one is taken.
    h, api, b = ec_cluster(make_cluster)
    api.put(b, "x", os.urandom(300_001))
    i, path, good = held_slice(h, b, "x")
    bad = bytearray(good)
    bad[-7] ^= 0x5A
    assert_json_error(put_slice(h, i, slice_target(b, "x", 0xe1), bytes(bad)), 400, "corrupt")
    assert_json_error(put_slice(h, i, slice_target(b, "x", 0xe2), good[:-1]), 400, "corrupt")
    assert_json_error(put_slice(h, i, slice_target(b, "x", 0xe3), b"FTEC" + good[4:100]), 400, "corrupt")
    assert_json_error(put_slice(h, i, slice_target(b, "y", 0xe4), good), 400, "names")  # header of another object
    with open(path, "rb") as f:
        assert f.read() == good, "a refused slice replaced the one held"
    assert h.work_files() == []
    os.remove(path)
    r = put_slice(h, i, slice_target(b, "x", 0xe5), good)
    assert r.status_code == 200 and r.json().get("idx") is not None, (r.status_code, r.text)
    with open(path, "rb") as f:
        assert f.read() == good
    assert h.work_files() == []
    # only PUT, and only with a transfer id and a length
    assert_json_error(session().post(h.c.targets[i].public_url + slice_target(b, "x", 0xe6), data=good,
                                     timeout=TIMEOUT), 405, "not allowed")
    assert_json_error(put_slice(h, i, "/v1/ec/slice?provider=ais&bucket=%s&obj=x" % b, good), 400, "xfer")


def test_slice_put_cut_mid_body_leaves_nothing(make_cluster):
    # The sender dies mid-body (in the header, then in the payload): the holder publishes nothing
    # and removes the work file; a slice held before stays untouched.
    h, api, b = ec_cluster(make_cluster)
    api.put(b, "x", os.urandom(300_001))
    i, path, good = held_slice(h, b, "x")
    os.remove(path)
    for n, cut in enumerate((20, len(good) // 2, len(good) - 1)):
        raw_put_cut(h, i, slice_target(b, "x", 0xf0 + n), good, cut)
        wait_until(lambda: h.work_files() == [], timeout=10, what="work files of cut transfers removed")
        assert not os.path.exists(path), "a cut slice transfer (%d of %d bytes) was published" % (cut, len(good))
        assert i not in slice_files(h, b, "x")
    # a slice held stays when a newer transfer of it is cut
    r = put_slice(h, i, slice_target(b, "x", 0xf9), good)
    assert r.status_code == 200, r.text
    raw_put_cut(h, i, slice_target(b, "x", 0xfa), good, len(good) // 2)
    wait_until(lambda: h.work_files() == [], timeout=10, what="work file of the cut transfer removed")
    with open(path, "rb") as f:
        assert f.read() == good


def test_slice_put_signed_with_auth(make_cluster):
    # With a cluster secret a slice PUT must carry the control plane's signature, over the body's
    # sha256 sent ahead: unsigned, badly signed, replayed, or a body other than the one signed is
    # refused (401) and nothing is published. EC PUTs through the proxy (signed by the owner) work.
    h = make_cluster(targets=4, mountpaths=2, keepalive_ms=KA_MS, auth=True)
    api = Api(h.url, token=h.c.token)
    b = "ecauth"
    api.create_bucket(b, cksum="md5")
    r = api.s.post(h.url + "/v1/buckets/" + b, timeout=TIMEOUT,
                   json={"action": "set-bprops",
                         "value": {"ec": {"data_slices": 2, "parity_slices": 1, "objsize_limit": 0}}})
    assert r.status_code == 200, r.text
    secret = ftcluster.ensure_cluster_secret(h.c.dir)
    want = api.bmd()["version"]
    for t in h.c.targets:
        wait_until(lambda: ftcluster.http_json("POST", t.control_url + "/v1/metasync", {}, timeout=TIMEOUT,
                                               secret=secret)[1]["bmd_version"] >= want,
                   timeout=10, what="BMD v%d on %s" % (want, t.name))
    data = os.urandom(700_001)
    assert api.put(b, "x", data).status_code == 200
    held = slice_files(h, b, "x")
    assert len(held) == 3, held
    i, path, good = held_slice(h, b, "x")
    os.remove(path)

    def signed(target, body, claimed=None):
        hdrs = ftcluster.ctl_headers(secret, "PUT", target, body)
        hdrs["Ft-Body-Sha256"] = claimed or hashlib.sha256(body).hexdigest()
        return hdrs

    t1 = slice_target(b, "x", 0xa1)
    assert_json_error(put_slice(h, i, t1, good), 401, "unsigned")
    hdrs = signed(t1, good)
    hdrs["Ft-Signature"] = "0" * 64
    assert_json_error(put_slice(h, i, t1, good, hdrs), 401, "bad signature")
    assert_json_error(put_slice(h, i, slice_target(b, "x", 0xa2), good, signed(t1, good)), 401, "bad signature")
    no_claim = signed(t1, good)
    del no_claim["Ft-Body-Sha256"]
    assert_json_error(put_slice(h, i, t1, good, no_claim), 401, "bad signature")
    # signed for the good body, another one (same length, still a valid slice of its own? no: any bytes) sent
    bad = bytearray(good)
    bad[-3] ^= 0x11
    assert_json_error(put_slice(h, i, t1, bytes(bad), signed(t1, good)), 401, "not the one signed")
    # a body whose claimed digest is its own but not the signed one
    assert_json_error(put_slice(h, i, t1, bytes(bad), signed(t1, good, hashlib.sha256(bytes(bad)).hexdigest())
                                | {"Ft-Signature": signed(t1, good)["Ft-Signature"]}), 401, "bad signature")
    assert not os.path.exists(path)
    assert h.work_files() == []
    # a signed transfer cut mid-body publishes nothing either
    cut_hdrs = "".join("%s: %s\r\n" % kv for kv in signed(slice_target(b, "x", 0xa3), good).items())
    raw_put_cut(h, i, slice_target(b, "x", 0xa3), good, len(good) // 2, cut_hdrs)
    wait_until(lambda: h.work_files() == [], timeout=10, what="work file of the cut transfer removed")
    assert not os.path.exists(path)
    ok = signed(t1, good)
    r = put_slice(h, i, t1, good, ok)
    assert r.status_code == 200, r.text
    with open(path, "rb") as f:
        assert f.read() == good
    assert_json_error(put_slice(h, i, t1, good, ok), 401, "replayed")



class Front:
    """A TCP front on host:port for another address (to) that forwards every byte both ways; with
    rename, the path of an EC slice PUT is renamed to one the target has no route for, so that the
    target answers it as a release without public slice PUTs does (404 "no such endpoint")."""

    def __init__(self, host, port, to, rename=False):
        self.to = to
        self.rename = rename
        self.renamed = 0
        self.socks = []
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((host, port))
        self.ls.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        for s in [self.ls] + self.socks:
            _shut(s)
            s.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
                u = socket.create_connection(self.to, timeout=TIMEOUT)
            except OSError:
                return
            u.settimeout(None)
            self.socks += [c, u]
            threading.Thread(target=_pipe, args=(u, c), daemon=True).start()
            threading.Thread(target=self._requests if self.rename else _pipe, args=(c, u), daemon=True).start()

    def _requests(self, c, u):
        """Forwards request after request (heads parsed for the rename, bodies by Content-Length);
        a body of another framing ends the parsing, and the rest is forwarded as it comes."""
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
                if head.startswith(b"PUT /v1/ec/slice?"):
                    head = b"PUT /v1/ec/slice-unknown?" + head[len(b"PUT /v1/ec/slice?"):]
                    self.renamed += 1
                u.sendall(head + b"\r\n\r\n")
                fields = {k.strip().lower(): v.strip() for k, _, v in
                          (ln.partition(b":") for ln in head.split(b"\r\n")[1:])}
                if b"content-length" not in fields:
                    if b"transfer-encoding" in fields:
                        u.sendall(buf)
                        _pipe(c, u)
                        return
                    continue
                left = int(fields[b"content-length"])
                while left > 0:
                    if not buf:
                        buf = c.recv(min(left, 65536))
                        if not buf:
                            return
                    part, buf = buf[:left], buf[left:]
                    u.sendall(part)
                    left -= len(part)
        except OSError:
            pass
        finally:
            _shut(c)
            _shut(u)


def _shut(s):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _pipe(src, dst):
    try:
        while True:
            d = src.recv(65536)
            if not d:
                break
            dst.sendall(d)
    except OSError:
        pass
    finally:
        _shut(src)
        _shut(dst)


def test_put_to_a_holder_of_an_older_release(make_cluster):
    # Mid rolling upgrade a holder may run a release whose public port has no slice PUT: it answers
    # 404, and the owner sends that slice by the control port, as releases before did. One target is
    # restarted to advertise itself at 127.0.0.2, where fronts forward its two ports, and the public
    # one renames the slice PUTs it receives to a path the target has no route for.
    h, api, b = ec_cluster(make_cluster, limit=0)
    old = h.c.targets[3]
    to = old.host
    fronts = [Front("127.0.0.2", old.public_port, (to, old.public_port), rename=True),
              Front("127.0.0.2", old.control_port, (to, old.control_port))]
    try:
        old.argv += ["--public_host", "127.0.0.2", "--public_unix", "off"]  # an older release has no socket
        old.host = "127.0.0.2"
        h.c.restart_target(3)
        bodies = {"o%d" % i: os.urandom(200_000 + i) for i in range(16)}
        with ThreadPoolExecutor(4) as ex:
            got = list(ex.map(lambda kv: api.put(b, kv[0], kv[1], expect=None).status_code, bodies.items()))
        assert got == [200] * len(bodies), got
        held_by_old = [n for n in bodies if 3 in slice_files(h, b, n)]
        assert held_by_old and fronts[0].renamed >= len(held_by_old), (held_by_old, fronts[0].renamed)
        for n, data in bodies.items():
            assert len(slice_files(h, b, n)) == 3, n
            for p in main_files(h, h.index_of_url(api.owner(b, n)), b, n):
                os.remove(p)
            r = api.get(b, n)
            assert r.status_code == 200 and r.content == data, n
        assert h.work_files() == []
    finally:
        for f in fronts:
            f.close()
