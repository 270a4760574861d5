# SPDX-License-Identifier: Apache-2.0
# Conditional writes (If-None-Match: *, If-Match) on S3 PutObject and native PUT against a real local cluster, races included.
"""
The target checks the conditions under the object's name lock in its publish step, so of racing
conditional creates of one key exactly one wins; the others get 412 and store nothing. boto3 1.26
has no IfNoneMatch parameter: the headers go in through botocore's before-sign event, so the
requests are still signed by boto3.
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

import s3util


s3 = s3util.client_fixture()
bucket = s3util.bucket_fixture("cond")


def conditional_client(cluster, headers):
    """A boto3 client that adds headers to every PutObject before signing it."""
    c = s3util.client(cluster)

    def add(request, **_):
        for k, v in headers.items():
            request.headers[k] = v
    c.meta.events.register("before-sign.s3.PutObject", add)
    return c


def put_err(c, **kw):
    with pytest.raises(ClientError) as ei:
        c.put_object(**kw)
    return s3util.error_code(ei.value), ei.value.response["ResponseMetadata"]["HTTPStatusCode"]


def test_if_none_match_create_only(cluster, s3, bucket):
    c = conditional_client(cluster, {"If-None-Match": "*"})
    r = c.put_object(Bucket=bucket, Key="k", Body=b"first")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert put_err(c, Bucket=bucket, Key="k", Body=b"second" * 1000) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"
    # after a delete the key can be created again
    s3.delete_object(Bucket=bucket, Key="k")
    c.put_object(Bucket=bucket, Key="k", Body=b"third")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"third"


def test_if_match(cluster, s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")["ETag"]
    # the current ETag, quoted or bare: replaced
    r = conditional_client(cluster, {"If-Match": etag}).put_object(Bucket=bucket, Key="k", Body=b"v2")
    etag2 = r["ETag"]
    conditional_client(cluster, {"If-Match": etag2.strip('"')}).put_object(Bucket=bucket, Key="k", Body=b"v3")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v3"
    # a stale ETag: 412, nothing changed
    assert put_err(conditional_client(cluster, {"If-Match": etag}), Bucket=bucket, Key="k",
                   Body=b"v4") == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v3"
    # no such object: 404 NoSuchKey, as S3 answers, and nothing created
    assert put_err(conditional_client(cluster, {"If-Match": etag}), Bucket=bucket, Key="none",
                   Body=b"x") == ("NoSuchKey", 404)
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="none")


def test_if_none_match_other_than_star_refused(cluster, s3, bucket):
    code, status = put_err(conditional_client(cluster, {"If-None-Match": '"abc"'}), Bucket=bucket, Key="k",
                           Body=b"x")
    assert status == 400
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="k")


def test_racing_conditional_creates(cluster, s3, bucket):
    """Many rounds of 4 concurrent If-None-Match: * PUTs of one key: exactly one wins each round."""
    n = 4
    clients = [conditional_client(cluster, {"If-None-Match": "*"}) for _ in range(n)]
    for rnd in range(12):
        key = "race-%d" % rnd
        bodies = [os.urandom(64 * 1024 + i) for i in range(n)]
        barrier = threading.Barrier(n)

        def one(i):
            barrier.wait()
            try:
                clients[i].put_object(Bucket=bucket, Key=key, Body=bodies[i])
                return i, 200
            except ClientError as e:
                return i, e.response["ResponseMetadata"]["HTTPStatusCode"]

        with ThreadPoolExecutor(n) as ex:
            results = list(ex.map(one, range(n)))
        winners = [i for i, st in results if st == 200]
        assert len(winners) == 1, results
        assert all(st == 412 for i, st in results if i not in winners), results
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == bodies[winners[0]]


def test_native_put_conditions(cluster, api, s3, bucket):
    """The native API: the same headers on PUT /v1/objects (sent again to the 307 Location)."""
    api.put(bucket, "n", b"one", headers={"If-None-Match": "*"})
    api.put(bucket, "n", b"two", headers={"If-None-Match": "*"}, expect=412)
    etag = api.head(bucket, "n").headers["ETag"]
    api.put(bucket, "n", b"three", headers={"If-Match": etag})
    api.put(bucket, "n", b"four", headers={"If-Match": etag}, expect=412)
    api.put(bucket, "missing", b"x", headers={"If-Match": etag}, expect=404)
    assert api.get(bucket, "n").content == b"three"
    assert api.get(bucket, "missing").status_code == 404
