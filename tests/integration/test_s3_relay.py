# SPDX-License-Identifier: Apache-2.0
# The S3 GET relay (proxy/s3/relay.c + ft_resp_stream_splice): whole bodies on kept-alive connections, cut bodies when the target dies.
"""
A GET through /s3 is relayed by the proxy's own keep-alive client and spliced to the client. These
tests check what a client sees when the owning target dies in the middle of a body (a cut
response, never a whole-looking one) and that connections kept from before a target restart do
not fail requests after it.
"""
import http.client
import os
import socket
import urllib.parse

import pytest
from botocore.exceptions import ClientError

import s3util
from ftutil import Api

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


def test_target_killed_mid_body_cuts_the_response(make_cluster):
    h = make_cluster(targets=2)
    s3 = s3util.client(h, read_timeout=120)
    b = s3util.bucket_name("relay")
    s3.create_bucket(Bucket=b)
    data = os.urandom(128 * MIB)  # more than all the socket buffers on the way hold
    s3.put_object(Bucket=b, Key="big", Body=data)
    victim = h.index_of_url(Api(h.url).owner(b, "big"))

    c, r = open_get(presigned_get(s3, b, "big"))
    try:
        assert r.status == 200
        assert int(r.getheader("Content-Length")) == len(data)
        head = r.read(MIB)
        assert head == data[:MIB]
        h.kill_target(victim)
        got = len(head)
        while True:  # read(amt) ends with b"" at the connection's end, short or not
            chunk = r.read(MIB)
            if not chunk:
                break
            assert chunk == data[got:got + len(chunk)]
            got += len(chunk)
        assert got < len(data), "a whole body after its source died"
    finally:
        c.close()
    h.restart_target(victim)


def test_gets_after_target_restart_on_kept_connections(make_cluster):
    h = make_cluster(targets=1, proxy_args=("--log_level=debug",))
    s3 = s3util.client(h, read_timeout=120)
    b = s3util.bucket_name("relay")
    s3.create_bucket(Bucket=b)
    objs = {"o%02d" % i: os.urandom(100000 + i) for i in range(8)}
    for k, v in objs.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    # many GETs leave kept-alive relay connections on many proxy workers
    for _ in range(6):
        for k, v in objs.items():
            assert s3.get_object(Bucket=b, Key=k)["Body"].read() == v
    h.kill_target(0)
    h.restart_target(0)
    # every one of them is now closed by the target's restart: each GET still succeeds, whole
    for _ in range(6):
        for k, v in objs.items():
            got = s3.get_object(Bucket=b, Key=k)
            assert got["ContentLength"] == len(v)
            assert got["Body"].read() == v
    # the proxy found connections the restart had closed and asked again on new ones
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
