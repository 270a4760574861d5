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


def op_client(cluster, op, headers):
    """A boto3 client that adds headers to every request of operation op before signing it."""
    c = s3util.client(cluster)

    def add(request, **_):
        for k, v in headers.items():
            request.headers[k] = v
    c.meta.events.register("before-sign.s3.%s" % op, add)
    return c


def err_of(fn, **kw):
    with pytest.raises(ClientError) as ei:
        fn(**kw)
    return s3util.error_code(ei.value), ei.value.response["ResponseMetadata"]["HTTPStatusCode"]


def complete_one(s3, bucket, key, body, client=None):
    """An upload of key with one part, completed through client (s3 when None)."""
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=body)["ETag"]
    return up, lambda: (client or s3).complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})


def test_complete_multipart_conditions(cluster, s3, bucket):
    inm = op_client(cluster, "CompleteMultipartUpload", {"If-None-Match": "*"})
    _, done = complete_one(s3, bucket, "m", b"first", inm)
    done()
    up, done = complete_one(s3, bucket, "m", b"second", inm)
    assert err_of(done) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == b"first"
    # the upload stays: completed without the condition it replaces the object
    s3.list_parts(Bucket=bucket, Key="m", UploadId=up)
    etag = s3.head_object(Bucket=bucket, Key="m")["ETag"]
    _, done = complete_one(s3, bucket, "m", b"third", op_client(cluster, "CompleteMultipartUpload",
                                                                 {"If-Match": '"0123456789abcdef0123456789abcdef"'}))
    assert err_of(done) == ("PreconditionFailed", 412)
    _, done = complete_one(s3, bucket, "m", b"third", op_client(cluster, "CompleteMultipartUpload",
                                                                 {"If-Match": etag}))
    done()
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == b"third"
    _, done = complete_one(s3, bucket, "absent", b"x", op_client(cluster, "CompleteMultipartUpload",
                                                                  {"If-Match": etag}))
    assert err_of(done) == ("NoSuchKey", 404)


def test_racing_conditional_completions(cluster, s3, bucket):
    """Two uploads of one key completed at once with If-None-Match: *: exactly one wins."""
    inm = op_client(cluster, "CompleteMultipartUpload", {"If-None-Match": "*"})
    for rnd in range(6):
        key = "mrace-%d" % rnd
        dones = [complete_one(s3, bucket, key, b"body-%d" % i, inm)[1] for i in range(2)]
        barrier = threading.Barrier(2)

        def one(i):
            barrier.wait()
            try:
                dones[i]()
                return 200
            except ClientError as e:
                return e.response["ResponseMetadata"]["HTTPStatusCode"]

        with ThreadPoolExecutor(2) as ex:
            results = sorted(ex.map(one, range(2)))
        assert results in ([200, 409], [200, 412]), results


def test_copy_object_conditions(cluster, s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"source")
    s3.put_object(Bucket=bucket, Key="dst", Body=b"old")
    inm = op_client(cluster, "CopyObject", {"If-None-Match": "*"})
    src = {"Bucket": bucket, "Key": "src"}
    assert err_of(inm.copy_object, Bucket=bucket, Key="dst", CopySource=src) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"old"
    inm.copy_object(Bucket=bucket, Key="new", CopySource=src)
    assert s3.get_object(Bucket=bucket, Key="new")["Body"].read() == b"source"
    etag = s3.head_object(Bucket=bucket, Key="dst")["ETag"]
    im = op_client(cluster, "CopyObject", {"If-Match": etag})
    im.copy_object(Bucket=bucket, Key="dst", CopySource=src)
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"source"
    assert err_of(im.copy_object, Bucket=bucket, Key="dst", CopySource=src) == ("PreconditionFailed", 412)
    assert err_of(im.copy_object, Bucket=bucket, Key="nope", CopySource=src) == ("NoSuchKey", 404)


def test_delete_if_match(cluster, s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="d", Body=b"v1")["ETag"]
    s3.put_object(Bucket=bucket, Key="d", Body=b"v2")
    stale = op_client(cluster, "DeleteObject", {"If-Match": etag})
    assert err_of(stale.delete_object, Bucket=bucket, Key="d") == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == b"v2"
    cur = s3.head_object(Bucket=bucket, Key="d")["ETag"]
    r = op_client(cluster, "DeleteObject", {"If-Match": cur}).delete_object(Bucket=bucket, Key="d")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="d")
    # no such key: 204, as any delete of a missing key
    r = op_client(cluster, "DeleteObject", {"If-Match": cur}).delete_object(Bucket=bucket, Key="d")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_native_get_head_conditions(cluster, api, bucket):
    """GET and HEAD conditions on the native API (the S3 ones: test_s3_boto3.test_conditional_get)."""
    api.put(bucket, "g", b"data")
    h = api.head(bucket, "g").headers
    etag, lm = h["ETag"], h["Last-Modified"]
    for method in (api.get, api.head):
        assert method(bucket, "g", headers={"If-Match": etag}).status_code == 200
        assert method(bucket, "g", headers={"If-Match": '"other"'}).status_code == 412
        assert method(bucket, "g", headers={"If-None-Match": etag}).status_code == 304
        assert method(bucket, "g", headers={"If-None-Match": '"other"'}).status_code == 200
        assert method(bucket, "g", headers={"If-Modified-Since": lm}).status_code == 304
        assert method(bucket, "g", headers={"If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}).status_code == 200
        assert method(bucket, "g", headers={"If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}).status_code == 412
        assert method(bucket, "g", headers={"If-Unmodified-Since": lm}).status_code == 200
