# SPDX-License-Identifier: Apache-2.0
# Public-port HTTP/1.1 edge cases over raw sockets: keep-alive, pipelining, 100-continue, chunked, limits.
import os
import socket
import time
import urllib.parse

import pytest

from ftutil import TIMEOUT, Api, RawConn, assert_json_error, hostport, md5_hex, raw_request, unique


@pytest.fixture(scope="module")
def bkt(cluster):
    a = Api(cluster.url)
    b = unique("http")
    a.create_bucket(b, cksum="md5")
    a.put(b, "one", b"first object")
    a.put(b, "two", b"second object, longer")
    yield b
    a.destroy_bucket(b, expect=None)


def split(url):
    u = urllib.parse.urlsplit(url)
    return u.netloc, u.path + ("?" + u.query if u.query else "")


def test_keepalive_many_requests_one_connection(cluster):
    host, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        for _ in range(50):
            c.send(raw_request("GET", "/v1/health", host))
            r = c.read_response()
            assert r.status_code == 200 and r.json()["role"] == "proxy"
            assert r.headers.get("Connection", "").lower() != "close"
        assert not c.closed_by_peer(0.3)


def test_pipelined_gets_on_proxy(cluster):
    host, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        c.send(raw_request("GET", "/v1/health", host) +
               raw_request("GET", "/v1/cluster?what=smap", host) +
               raw_request("GET", "/v1/health", host))
        r1, r2, r3 = c.read_response(), c.read_response(), c.read_response()
    assert r1.json()["role"] == "proxy"
    assert "targets" in r2.json()
    assert r3.json()["role"] == "proxy"


def test_pipelined_gets_on_target(cluster, api, bkt):
    loc1, loc2 = api.owner(bkt, "one"), api.owner(bkt, "two")
    # both on one owner? then pipeline them there; else pipeline each twice on its own owner
    for loc, other, body, other_body in ((loc1, loc2, b"first object", b"second object, longer"),
                                         (loc2, loc1, b"second object, longer", b"first object")):
        host, path = split(loc)
        same = split(other)[0] == host
        with RawConn(loc) as c:
            reqs = [path, split(other)[1] if same else path, path]
            c.send(b"".join(raw_request("GET", p, host) for p in reqs) +
                   raw_request("HEAD", path, host) + raw_request("GET", path, host))
            got = [c.read_response() for _ in reqs]
            rh = c.read_response("HEAD")
            rl = c.read_response()
        want = [body, other_body if same else body, body]
        assert [g.body for g in got] == want
        assert [g.status_code for g in got] == [200, 200, 200]
        assert rh.status_code == 200 and rh.body == b"" and int(rh.headers["Content-Length"]) == \
            len(body)
        assert rl.body == body


def test_pipelined_put_then_get(cluster, api, bkt):
    loc = api.owner(bkt, "pipe-put")
    host, path = split(loc)
    data = os.urandom(200_000)
    with RawConn(loc) as c:
        c.send(raw_request("PUT", path, host, body=data) + raw_request("GET", path, host))
        rp = c.read_response()
        rg = c.read_response()
    assert rp.status_code == 200 and rp.headers["Ais-Checksum-Value"] == md5_hex(data)
    assert rg.status_code == 200 and rg.body == data


def test_expect_100_continue_put(cluster, api, bkt):
    loc = api.owner(bkt, "expect")
    host, path = split(loc)
    data = os.urandom(1_500_000)
    with RawConn(loc) as c:
        c.send(raw_request("PUT", path, host, [("Content-Length", str(len(data))),
                                               ("Expect", "100-continue")]))
        r = c.read_response()
        assert r.status_code == 100, r.status_code
        c.send(data)
        r = c.read_response()
        assert r.status_code == 200, r.body
        assert r.headers["Ais-Checksum-Value"] == md5_hex(data)
        # the connection stays usable
        c.send(raw_request("GET", path, host))
        assert c.read_response().body == data


def test_expect_100_continue_at_proxy_gets_307_without_continue(cluster, bkt):
    host, _ = split(cluster.url)
    path = "/v1/objects/%s/expect-proxy" % bkt
    with RawConn(cluster.url) as c:
        c.send(raw_request("PUT", path, host, [("Content-Length", "5000000"),
                                               ("Expect", "100-continue")]))
        r = c.read_response()
    assert r.status_code == 307, r.status_code
    assert r.headers["Location"].endswith(path)


def test_expect_100_continue_empty_body(cluster, api, bkt):
    # An empty body with "Expect: 100-continue" still gets "100 Continue" before the final status
    # (botocore 1.29 misreads the next response otherwise), on the target and on the proxy, and the
    # connection stays usable.
    loc = api.owner(bkt, "expect-empty")
    host, path = split(loc)
    expect = [("Content-Length", "0"), ("Expect", "100-continue")]
    with RawConn(loc) as c:
        c.send(raw_request("PUT", path, host, expect))
        r = c.read_response()
        assert r.status_code == 100, r.status_code
        r = c.read_response()
        assert r.status_code == 200, r.body
        c.send(raw_request("GET", path, host))
        r = c.read_response()
        assert r.status_code == 200 and r.body == b""
        assert not c.closed_by_peer(0.2)
    phost, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        c.send(raw_request("GET", "/v1/health", phost, expect))
        r = c.read_response()
        assert r.status_code == 100, r.status_code
        r = c.read_response()
        assert r.status_code == 200 and r.json()["role"] == "proxy"
        c.send(raw_request("GET", "/v1/health", phost))
        assert c.read_response().status_code == 200


def test_botocore_after_expect_with_empty_body(cluster, api, bkt):
    # botocore 1.29's own connection: after an "Expect: 100-continue" PUT with an empty body, it
    # reuses the connection for a PUT whose body it holds back for the 100. Without the interim
    # response to the empty one, it kept that exchange's status line and timed out on the next.
    import io
    from botocore.awsrequest import AWSHTTPConnection
    loc = api.owner(bkt, "boto-empty")
    (host, port), (_, path) = hostport(loc), split(loc)
    conn = AWSHTTPConnection(host, port, timeout=10)
    try:
        for _ in range(2):
            conn.request("PUT", path, body=b"", headers={"Expect": b"100-continue", "Content-Length": "0"})
            r = conn.getresponse()
            assert r.status == 200, r.read()
            r.read()
        conn.request("PUT", path, body=io.BytesIO(b"abc"), headers={"Expect": b"100-continue", "Content-Length": "3"})
        r = conn.getresponse()
        assert r.status == 200, r.read()
        r.read()
        conn.request("GET", path)
        r = conn.getresponse()
        assert r.status == 200 and r.read() == b"abc"
    finally:
        conn.close()


def test_chunked_put(cluster, api, bkt):
    loc = api.owner(bkt, "chunked")
    host, path = split(loc)
    parts = [os.urandom(n) for n in (1, 4096, 100_000, 17, 65536)]
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts[:3])
    body += b"%x;ext=1\r\n%s\r\n" % (len(parts[3]), parts[3])   # chunk extension
    body += b"%X\r\n%s\r\n" % (len(parts[4]), parts[4])          # upper-case hex
    body += b"0\r\nX-Trailer: yes\r\n\r\n"                        # trailer section
    data = b"".join(parts)
    with RawConn(loc) as c:
        c.send(raw_request("PUT", path, host, [("Transfer-Encoding", "chunked")]))
        for i in range(0, len(body), 7001):  # odd write boundaries
            c.send(body[i:i + 7001])
        r = c.read_response()
        assert r.status_code == 200, r.body
        assert r.headers["Ais-Checksum-Value"] == md5_hex(data)
        c.send(raw_request("GET", path, host))
        g = c.read_response()
    assert g.body == data


def test_chunked_put_with_expect(cluster, api, bkt):
    loc = api.owner(bkt, "chunked-expect")
    host, path = split(loc)
    with RawConn(loc) as c:
        c.send(raw_request("PUT", path, host, [("Transfer-Encoding", "chunked"),
                                               ("Expect", "100-continue")]))
        assert c.read_response().status_code == 100
        c.send(b"5\r\nhello\r\n0\r\n\r\n")
        r = c.read_response()
    assert r.status_code == 200
    assert r.headers["Ais-Checksum-Value"] == md5_hex(b"hello")


@pytest.mark.parametrize("bad", [b"zz\r\nhello\r\n0\r\n\r\n", b"5\r\nhelloXX0\r\n\r\n",
                                 b"-1\r\n\r\n"])
def test_bad_chunked_framing_stores_nothing(cluster, api, bkt, bad):
    name = unique("badchunk")
    loc = api.owner(bkt, name)
    host, path = split(loc)
    with RawConn(loc) as c:
        c.send(raw_request("PUT", path, host, [("Transfer-Encoding", "chunked")]) + bad)
        try:
            r = c.read_response()
            assert r.status_code == 400, r.status_code
        except (EOFError, ConnectionResetError):
            pass  # closing on a framing error is fine too
    assert api.get(bkt, name).status_code == 404


def test_oversize_header_is_431(cluster):
    host, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        c.send(raw_request("GET", "/v1/health", host, [("X-Big", "a" * 20000)]))
        r = c.read_response()
        assert r.status_code == 431
        assert c.closed_by_peer(5)


def test_too_many_headers_is_431(cluster):
    host, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        c.send(raw_request("GET", "/v1/health", host, [("X-H%d" % i, "v") for i in range(150)]))
        r = c.read_response()
        assert r.status_code == 431
        assert c.closed_by_peer(5)


def test_header_just_under_limit_is_fine(cluster):
    host, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        c.send(raw_request("GET", "/v1/health", host, [("X-Big", "a" * 12000)]))
        assert c.read_response().status_code == 200


def test_header_sent_byte_by_byte(cluster):
    host, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        for ch in raw_request("GET", "/v1/health", host):
            c.send(bytes([ch]))
        assert c.read_response().status_code == 200


@pytest.mark.parametrize("req", [
    b"GARBAGE\r\n\r\n",
    b"GET /v1/health HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    b"GET /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"GET /v1/health HTTP/1.1\r\nBad Header\r\n\r\n",
    b"PUT /v1/objects/x/y HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
])
def test_malformed_request_is_4xx_and_closes(cluster, req):
    with RawConn(cluster.url) as c:
        c.send(req)
        try:
            r = c.read_response()
        except (EOFError, ConnectionResetError):
            return  # closing without an answer is acceptable for garbage
        assert 400 <= r.status_code < 500 or r.status_code in (501, 505), r.status_code
        assert c.closed_by_peer(5)


def test_http10_closes_after_response(cluster):
    with RawConn(cluster.url) as c:
        c.send(b"GET /v1/health HTTP/1.0\r\n\r\n")
        r = c.read_response()
        assert r.status_code == 200
        assert c.closed_by_peer(5)


def test_connection_close_is_honoured(cluster):
    host, _ = split(cluster.url)
    with RawConn(cluster.url) as c:
        c.send(raw_request("GET", "/v1/health", host, [("Connection", "close")]))
        assert c.read_response().status_code == 200
        assert c.closed_by_peer(5)


def test_many_idle_connections_do_not_block_service(cluster):
    host, _ = split(cluster.url)
    idle = [socket.create_connection(("127.0.0.1", int(host.split(":")[1]))) for _ in range(200)]
    try:
        for s in idle[:50]:
            s.sendall(b"GET /v1/health HTTP/1.1\r\n")  # half a request head
        t0 = time.monotonic()
        with RawConn(cluster.url) as c:
            c.send(raw_request("GET", "/v1/health", host))
            assert c.read_response().status_code == 200
        assert time.monotonic() - t0 < 2
    finally:
        for s in idle:
            s.close()


def test_put_body_to_proxy_gets_clean_307(cluster, api, bkt):
    """A client that sends its whole body to the proxy first (no Expect) still reads the 307:
    the server drains or lingers instead of resetting the connection."""
    data = os.urandom(2_000_000)
    for _ in range(3):
        r = api.s.put(cluster.url + "/v1/objects/%s/big-to-proxy" % bkt, data=data,
                      allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code == 307
        r = api.s.put(r.headers["Location"], data=data, timeout=TIMEOUT)
        assert r.status_code == 200 and r.headers["Ais-Checksum-Value"] == md5_hex(data)


def test_unknown_route_on_target_is_json_404(cluster):
    for t in cluster.targets():
        with RawConn(t["public_url"]) as c:
            host, _ = split(t["public_url"])
            c.send(raw_request("GET", "/v1/nothing-here", host))
            assert_json_error(c.read_response(), 404)


def test_idle_and_slow_client_timeouts(make_cluster):
    """With short limits: an idle keep-alive connection is closed, a half-sent head gets 408 and
    a close, a stalled body aborts the PUT and stores nothing."""
    limits = ["--http_idle_timeout_ms", "700", "--http_header_timeout_ms", "700",
              "--http_body_timeout_ms", "700"]
    h = make_cluster(targets=1, proxy_args=limits, target_args=limits)
    api = Api(h.url)
    b = unique("slow")
    api.create_bucket(b)
    host, _ = split(h.url)

    with RawConn(h.url) as c:  # idle after one request
        c.send(raw_request("GET", "/v1/health", host))
        assert c.read_response().status_code == 200
        t0 = time.monotonic()
        assert c.closed_by_peer(5)
        assert 0.3 < time.monotonic() - t0 < 4

    with RawConn(h.url) as c:  # head never finished
        c.send(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        try:
            r = c.read_response()
            assert r.status_code == 408, r.status_code
        except (EOFError, ConnectionResetError):
            pass  # closing without a 408 is acceptable
        assert time.monotonic() - t0 < 4
        assert c.closed_by_peer(2)

    # The session's pooled connection has been idle past the 700 ms limit: the server closed it,
    # so take a fresh session rather than race that close.
    api = Api(h.url)
    loc = api.owner(b, "stalled")
    lhost, path = split(loc)
    with RawConn(loc) as c:  # body stalls halfway
        c.send(raw_request("PUT", path, lhost, [("Content-Length", "100000")]) + b"x" * 5000)
        t0 = time.monotonic()
        try:
            r = c.read_response()
            assert r.status_code in (400, 408), r.status_code
        except (EOFError, ConnectionResetError):
            pass
        assert time.monotonic() - t0 < 4
    assert Api(h.url).get(b, "stalled").status_code == 404
    assert h.work_files() == []

    # a slow but steady client is fine: each gap below the limit
    with RawConn(loc) as c:
        c.send(raw_request("PUT", path, lhost, [("Content-Length", "4")]))
        for ch in b"slow":
            time.sleep(0.3)
            c.send(bytes([ch]))
        assert c.read_response().status_code == 200
    assert api.get(b, "stalled").content == b"slow"
