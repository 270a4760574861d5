# SPDX-License-Identifier: Apache-2.0
# The S3 GET relay (proxy/s3/relay_loop.c, relay.c, ft_resp_socket): whole bodies on kept-alive connections, errors relayed.
"""
A GET through /s3 is relayed by the proxy's own keep-alive client and spliced to the client (by the
proxy's loop thread, ft_resp_socket; a worker's ft_resp_stream_splice for what the loop hands over).
These tests check that answers small and large, ranged, conditional and failed come whole in turn
on one connection, that many large bodies at once come whole, and that connections kept from
before a target restart do not fail requests after it (faults mid-body: test_s3_relay_faults.py).
"""
import http.client
import os
import re
import socket
import threading
import urllib.parse

import pytest
from botocore.exceptions import ClientError

import s3util
from test_metrics import parse, scrape

MIB = 1 << 20


def presigned_get(s3, bucket, key):
    return s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600)


def open_get(url):
    """Sends the GET of url from a socket with a small receive buffer (so the kernel's buffers
    cannot hold the whole body); returns (connection, response) with the body unread."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(60)
    sock.connect((u.hostname, u.port))
    c.sock = sock
    c.request("GET", u.path + "?" + u.query)
    return c, c.getresponse()


def test_gets_after_target_restart_on_kept_connections(make_cluster):
    h = make_cluster(targets=1, proxy_args=("--log_level=debug",))
    s3 = s3util.client(h, read_timeout=120)
    b = s3util.bucket_name("relay")
    s3.create_bucket(Bucket=b)
    objs = {"o%02d" % i: os.urandom(100000 + i) for i in range(8)}
    for k, v in objs.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    # many GETs leave kept-alive relay connections in the loops' pools, HEADs in the workers' (relay.c)
    for _ in range(6):
        for k, v in objs.items():
            assert s3.get_object(Bucket=b, Key=k)["Body"].read() == v
            assert s3.head_object(Bucket=b, Key=k)["ContentLength"] == len(v)
    h.kill_target(0)
    h.restart_target(0)
    # every one of them is now closed by the target's restart: each GET and HEAD still succeeds, whole
    for _ in range(6):
        for k, v in objs.items():
            assert s3.head_object(Bucket=b, Key=k)["ContentLength"] == len(v)
            got = s3.get_object(Bucket=b, Key=k)
            assert got["ContentLength"] == len(v)
            assert got["Body"].read() == v
    # a worker found connections the restart had closed and asked again on new ones (the loops close
    # theirs as the target's close arrives: they watch their idle connections)
    with open(h.c.proxy.log, errors="replace") as f:
        assert "was closed; on a new one" in f.read()
    # ranged and conditional GETs, and errors, on the same path
    k, v = "o03", objs["o03"]
    assert s3.get_object(Bucket=b, Key=k, Range="bytes=10-99")["Body"].read() == v[10:100]
    etag = s3.head_object(Bucket=b, Key=k)["ETag"]
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=b, Key=k, IfNoneMatch=etag)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=b, Key="absent")
    assert s3util.error_code(ei.value) == "NoSuchKey"


def raw_get(conn, url, headers=None):
    """GET of a presigned url on the kept-alive conn: (status, lower-case headers, body)."""
    u = urllib.parse.urlsplit(url)
    conn.request("GET", u.path + "?" + u.query, headers=headers or {})
    r = conn.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()


def error_code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None


def one_connection(make_cluster, prefix, objs, **put_args):
    """A one-target cluster with a new bucket holding objs (PUT with put_args), and one kept-alive client
    connection to its proxy: (s3 client, bucket, connection, cluster); the caller closes the connection."""
    h = make_cluster(targets=1)
    s3 = s3util.client(h)
    b = s3util.bucket_name(prefix)
    s3.create_bucket(Bucket=b)
    for k, v in objs.items():
        s3.put_object(Bucket=b, Key=k, Body=v, **put_args)
    u = urllib.parse.urlsplit(h.url)
    return s3, b, http.client.HTTPConnection(u.hostname, u.port, timeout=60), h


def relay_gets(h, way):
    """The proxy's ft_s3_relay_gets_total{way}."""
    return parse(scrape(h.url)).get(("ft_s3_relay_gets_total", (("way", way),)), 0.0)


def target_unix_connections(h):
    """Connections the cluster's targets accepted on their Unix sockets (the proxy's; a scrape comes over TCP)."""
    return sum(v for t in h.targets() for (name, labels), v in parse(scrape(t["public_url"])).items()
               if name == "ft_http_connections_total" and ("listener", "unix") in labels)


def test_answers_whole_in_turn_on_one_connection(make_cluster):
    """Small bodies (answered whole by the relay loop), larger ones (moved socket to socket by the
    loop thread after the bytes it read with the head), ranges, an empty object and the target's error answers, in turn on one kept-alive
    client connection: each whole, the errors S3 XML with the target's reason."""
    objs = {"small": os.urandom(16 * 1024), "mid": os.urandom(100 * 1024), "big": os.urandom(3 * MIB),
            "empty": b""}
    s3, b, conn, _ = one_connection(make_cluster, "relay", objs)
    etag = s3.head_object(Bucket=b, Key="small")["ETag"]
    try:
        for _ in range(3):
            for k, v in objs.items():
                st, hd, body = raw_get(conn, presigned_get(s3, b, k))
                assert (st, int(hd["content-length"]), body) == (200, len(v), v), k
                assert hd["etag"] and hd["last-modified"]
            st, hd, body = raw_get(conn, presigned_get(s3, b, "small"), {"Range": "bytes=100-1099"})
            assert (st, hd["content-range"], body) == (206, "bytes 100-1099/16384", objs["small"][100:1100])
            st, hd, body = raw_get(conn, presigned_get(s3, b, "big"), {"Range": "bytes=1000-"})
            assert (st, body) == (206, objs["big"][1000:])
            st, hd, body = raw_get(conn, presigned_get(s3, b, "absent"))
            assert (st, error_code(body)) == (404, "NoSuchKey")
            assert "xml" in hd["content-type"] and b"<Resource>" in body
            st, hd, body = raw_get(conn, presigned_get(s3, b, "small"), {"If-None-Match": etag})
            assert (st, body) == (304, b"")
            st, hd, body = raw_get(conn, presigned_get(s3, b, "small"), {"If-Match": '"0123"'})
            assert (st, error_code(body)) == (412, "PreconditionFailed")
            st, hd, body = raw_get(conn, presigned_get(s3, b, "small"), {"Range": "bytes=99999-"})
            assert (st, error_code(body)) == (416, "InvalidRange")
    finally:
        conn.close()


def test_long_answer_heads_relayed_whole(make_cluster):
    """Objects whose target answer head is long (~1.9 KiB of user metadata and a 0.5 KiB
    Content-Disposition), small and larger, in turn on one kept-alive connection: each body, its
    metadata and its headers whole."""
    meta = {"m%02d" % i: ("v%02d" % i) * 20 for i in range(30)}  # 30 * (3 + 60) = 1890 bytes
    disposition = 'attachment; filename="%s.bin"' % ("d" * 480)
    objs = {"small": os.urandom(16 * 1024), "edge": os.urandom(62 * 1024), "mid": os.urandom(200 * 1024)}
    s3, b, conn, _ = one_connection(make_cluster, "relayhead", objs, Metadata=meta, ContentDisposition=disposition)
    try:
        for _ in range(3):
            for k, v in objs.items():
                st, hd, body = raw_get(conn, presigned_get(s3, b, k))
                assert (st, int(hd["content-length"]), body) == (200, len(v), v), k
                assert hd["content-disposition"] == disposition, k
                assert {n: hd.get("x-amz-meta-" + n) for n in meta} == meta, k
    finally:
        conn.close()


def test_large_bodies_moved_by_the_loop_on_kept_connections(make_cluster):
    """Bodies over the relay loop's small size, whole and by range (the first 100,000 bytes, a middle
    part, a suffix), go from the target's connection
    to the client on the loop thread (ft_s3_relay_gets_total{way="spliced"}), and the connection to
    the target (its Unix socket) carries the next GET: one client connection's 35 large GETs open no
    new one."""
    sizes = {"a": 64 * 1024 + 1, "b": 200 * 1024, "c": 3 * MIB + 7, "d": 9 * MIB}
    objs = {k: os.urandom(n) for k, n in sizes.items()}
    s3, b, conn, h = one_connection(make_cluster, "relaysplice", objs)
    try:
        st, _, body = raw_get(conn, presigned_get(s3, b, "a"))  # the first: opens the connection kept
        assert (st, body) == (200, objs["a"])
        spliced, opened = relay_gets(h, "spliced"), target_unix_connections(h)
        assert opened >= 1, "the relay did not reach the target over its Unix socket"
        for _ in range(5):
            for k, v in objs.items():
                st, hd, body = raw_get(conn, presigned_get(s3, b, k))
                assert (st, int(hd["content-length"]), body) == (200, len(v), v), k
            v = objs["c"]
            for rng, want in (("bytes=0-99999", v[:100000]), ("bytes=30000-2000000", v[30000:2000001]),
                              ("bytes=-1500000", v[-1500000:])):
                st, hd, body = raw_get(conn, presigned_get(s3, b, "c"), {"Range": rng})
                assert (st, body) == (206, want), rng
        assert relay_gets(h, "spliced") - spliced == 5 * 7
        assert target_unix_connections(h) == opened, "the relay's connection to the target was not kept"
        ways = ("small", "spliced", "worker")
        gets = [relay_gets(h, w) for w in ways]
        assert s3.head_object(Bucket=b, Key="d")["ContentLength"] == sizes["d"]
        assert [relay_gets(h, w) for w in ways] == gets, "a HEAD counted as a relayed GET"
    finally:
        conn.close()


def test_many_large_bodies_at_once_come_whole(make_cluster):
    """8 clients on their own connections GET large objects at once (3 targets, so each proxy loop
    moves several bodies from several connections side by side): every body is the object's."""
    h = make_cluster(targets=3)
    s3 = s3util.client(h, read_timeout=120)
    b = s3util.bucket_name("relaymany")
    s3.create_bucket(Bucket=b)
    objs = {"o%d" % i: os.urandom((i + 1) * 384 * 1024 + i) for i in range(8)}
    for k, v in objs.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    urls = {k: presigned_get(s3, b, k) for k in objs}
    u = urllib.parse.urlsplit(h.url)
    bad, done = [], []
    lock = threading.Lock()

    def client(seed):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        keys = sorted(objs)
        try:
            for i in range(6):
                k = keys[(seed + i * 3) % len(keys)]
                st, _, body = raw_get(conn, urls[k])
                with lock:
                    (done if (st, body) == (200, objs[k]) else bad).append((k, st, len(body)))
        finally:
            conn.close()

    spliced = relay_gets(h, "spliced")
    threads = [threading.Thread(target=client, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not bad, bad[:5]
    assert len(done) == 8 * 6
    assert relay_gets(h, "spliced") - spliced == 8 * 6
