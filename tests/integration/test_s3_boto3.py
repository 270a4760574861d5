# SPDX-License-Identifier: Apache-2.0
# S3 API with stock boto3 against a real local cluster: every non-multipart operation, paginators, presigned URLs, S3 errors.
import datetime
import hashlib
import os
import string
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

import s3util
from ftutil import session

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@pytest.fixture(scope="module")
def s3(cluster):
    return s3util.client(cluster)


@pytest.fixture
def bucket(s3):
    """A fresh bucket, emptied and removed after the test."""
    name = s3util.bucket_name()
    s3.create_bucket(Bucket=name)
    yield name
    keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=name)
            for o in p.get("Contents", [])]
    for i in range(0, len(keys), 1000):
        s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})
    s3.delete_bucket(Bucket=name)


def expect_error(code, fn, *args, status=None, **kw):
    with pytest.raises(ClientError) as ei:
        fn(*args, **kw)
    assert s3util.error_code(ei.value) == code, ei.value.response
    if status is not None:
        assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    return ei.value


def md5(data):
    return hashlib.md5(data).hexdigest()


# ---- buckets ----

def test_bucket_lifecycle(s3):
    name = s3util.bucket_name()
    before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)
    r = s3.create_bucket(Bucket=name)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r["Location"] == "/" + name
    listed = {b["Name"]: b for b in s3.list_buckets()["Buckets"]}
    assert name in listed
    assert listed[name]["CreationDate"] >= before
    assert s3.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_bucket_location(Bucket=name).get("LocationConstraint") is None  # us-east-1
    # recreating one's own bucket: 200 in us-east-1, as S3 answers there
    assert s3.create_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    s3.delete_bucket(Bucket=name)
    assert name not in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    expect_error("404", s3.head_bucket, Bucket=name)  # HEAD: status only, no body
    expect_error("NoSuchBucket", s3.delete_bucket, Bucket=name, status=404)
    expect_error("NoSuchBucket", s3.list_objects_v2, Bucket=name, status=404)


def test_create_bucket_with_location_constraint(s3):
    name = s3util.bucket_name()
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    s3.delete_bucket(Bucket=name)


def test_create_bucket_malformed_xml(cluster):
    name = s3util.bucket_name()
    r = s3util.signed_request(cluster, "PUT", "/" + name, body=b"<CreateBucketConfiguration><Loc")
    assert r.status_code == 400
    assert s3util.xml_error(r)[0] == "MalformedXML"


@pytest.mark.parametrize("name", ["ab", "UpperCase", "under_score", "-leading", "trailing-", "two..dots",
                                  "192.168.1.10", "x" * 64, "dot.-dash"])
def test_invalid_bucket_name(s3, name):
    expect_error("InvalidBucketName", s3.create_bucket, Bucket=name, status=400)


def test_delete_bucket_not_empty(s3, bucket):
    s3.put_object(Bucket=bucket, Key="deep/x", Body=b"1")
    expect_error("BucketNotEmpty", s3.delete_bucket, Bucket=bucket, status=409)
    assert s3.head_object(Bucket=bucket, Key="deep/x")["ContentLength"] == 1


# ---- objects ----

@pytest.mark.parametrize("size", [0, 1, 65536, 100003, 3 * 1024 * 1024 + 7])
def test_put_get_head(s3, bucket, size):
    data = os.urandom(size)
    t0 = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - datetime.timedelta(seconds=2)
    r = s3.put_object(Bucket=bucket, Key="obj/%d" % size, Body=data)
    assert r["ETag"] == '"%s"' % md5(data)
    g = s3.get_object(Bucket=bucket, Key="obj/%d" % size)
    assert g["Body"].read() == data
    assert g["ETag"] == '"%s"' % md5(data)
    assert g["ContentLength"] == size
    assert t0 <= g["LastModified"] <= datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
    h = s3.head_object(Bucket=bucket, Key="obj/%d" % size)
    assert h["ContentLength"] == size
    assert h["ETag"] == g["ETag"]
    assert h["LastModified"] == g["LastModified"]
    assert h["AcceptRanges"] == "bytes"


def test_native_object_in_sha512_bucket(api, s3):
    """An object PUT natively into a sha512 bucket has no MD5: its 128-digit sha512 serves as the S3 ETag, whole, on
    HEAD, GET, the listing and If-Match; an S3 PUT there gets the MD5 ETag and the bucket's sha512 checksum."""
    b = s3util.bucket_name("sha512")
    api.create_bucket(b, cksum="sha512")
    data = os.urandom(200003)
    api.put(b, "native", data)
    etag = '"%s"' % hashlib.sha512(data).hexdigest()
    assert s3.head_object(Bucket=b, Key="native")["ETag"] == etag
    g = s3.get_object(Bucket=b, Key="native", IfMatch=etag)
    assert g["ETag"] == etag and g["Body"].read() == data
    listed = s3.list_objects_v2(Bucket=b)["Contents"]
    assert [(o["Key"], o["ETag"]) for o in listed] == [("native", etag)]
    assert s3.put_object(Bucket=b, Key="viaS3", Body=data)["ETag"] == '"%s"' % md5(data)
    r = api.head(b, "viaS3")
    assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == ("sha512", etag.strip('"'))
    assert s3.head_object(Bucket=b, Key="viaS3")["ETag"] == '"%s"' % md5(data)
    api.destroy_bucket(b)


def test_empty_put_then_put_on_one_connection(cluster, bucket):
    """botocore sends Expect: 100-continue with PutObject, also with an empty body; botocore 1.29
    mis-reads the next response on that connection unless the empty PUT got its "100 Continue" too
    (the server sends it): without it the next call waits out its read timeout and fails."""
    s3 = s3util.client(cluster, max_pool_connections=1, read_timeout=10)
    for i in range(3):
        s3.put_object(Bucket=bucket, Key="e%d" % i, Body=b"")
        s3.put_object(Bucket=bucket, Key="f%d" % i, Body=b"x")
        assert s3.get_object(Bucket=bucket, Key="f%d" % i)["Body"].read() == b"x"


def test_overwrite_and_keys_on_every_target(cluster, s3, bucket):
    """Many keys land on different targets (HRW); each is served through the proxy, no redirect."""
    owners = set()
    for i in range(30):
        key = "spread/%d" % i
        s3.put_object(Bucket=bucket, Key=key, Body=b"first %d" % i)
        s3.put_object(Bucket=bucket, Key=key, Body=b"second %d" % i)
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"second %d" % i
        owners.add(cluster.api.owner(bucket, key).split("/v1/")[0])
    if cluster.local:
        assert len(owners) == len(cluster.c.targets), owners


def test_key_characters(s3, bucket):
    keys = ["with space", "plus+sign", "percent%41", "amp&er=sand?q#frag", "ünïcødé/ключ/鍵",
            "tilde~star*paren()", "quote'\"<tag>", "dir/sub/leaf.bin", "semi;colon,comma"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    for k in keys:
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == k.encode()
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert listed == sorted(keys, key=lambda s: s.encode())
    # botocore asks for encoding-type=url on its own and decodes; asked for explicitly, it does not.
    url_listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, EncodingType="url")["Contents"]]
    assert [urllib.parse.unquote(k) for k in url_listed] == listed
    assert all(set(k) <= set(string.ascii_letters + string.digits + "%-_.~/") for k in url_listed)


def test_key_too_long(s3, bucket):
    # "a//b", "trailing/", "dot/./seg", "up/../x" are keys like any other (test_s3_keys.py)
    expect_error("KeyTooLongError", s3.put_object, Bucket=bucket, Key="k" * 1025, Body=b"x", status=400)


def test_missing_key_and_bucket(s3, bucket):
    expect_error("NoSuchKey", s3.get_object, Bucket=bucket, Key="nope", status=404)
    expect_error("404", s3.head_object, Bucket=bucket, Key="nope")
    missing = s3util.bucket_name()
    expect_error("NoSuchBucket", s3.get_object, Bucket=missing, Key="k", status=404)
    expect_error("NoSuchBucket", s3.put_object, Bucket=missing, Key="k", Body=b"x", status=404)
    expect_error("NoSuchBucket", s3.delete_object, Bucket=missing, Key="k", status=404)
    # DeleteObject of a missing key succeeds, as in S3.
    assert s3.delete_object(Bucket=bucket, Key="nope")["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_error_body_is_s3_xml(cluster, bucket):
    r = s3util.signed_request(cluster, "GET", "/%s/missing-key" % bucket)
    assert r.status_code == 404
    assert r.headers["Content-Type"] == "application/xml"
    root = ET.fromstring(r.content)
    assert root.tag == "Error"
    assert root.findtext("Code") == "NoSuchKey"
    assert root.findtext("Message")
    assert root.findtext("Resource") == "/%s/missing-key" % bucket
    assert root.findtext("RequestId") == r.headers["x-amz-request-id"]


def test_delete_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="d/1", Body=b"x")
    assert s3.delete_object(Bucket=bucket, Key="d/1")["ResponseMetadata"]["HTTPStatusCode"] == 204
    expect_error("NoSuchKey", s3.get_object, Bucket=bucket, Key="d/1")


# ---- ranges and conditions ----

def test_range(s3, bucket):
    data = os.urandom(10000)
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    for rng, lo, hi in [("bytes=0-0", 0, 0), ("bytes=10-19", 10, 19), ("bytes=9990-", 9990, 9999),
                        ("bytes=-7", 9993, 9999), ("bytes=5000-20000", 5000, 9999)]:
        g = s3.get_object(Bucket=bucket, Key="r", Range=rng)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert g["Body"].read() == data[lo:hi + 1], rng
        assert g["ContentRange"] == "bytes %d-%d/10000" % (lo, hi)
        assert g["ContentLength"] == hi - lo + 1
    expect_error("InvalidRange", s3.get_object, Bucket=bucket, Key="r", Range="bytes=10000-", status=416)
    # S3 ignores a Range it does not support (several ranges) and sends the whole object.
    g = s3.get_object(Bucket=bucket, Key="r", Range="bytes=0-1,5-6")
    assert g["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert g["Body"].read() == data


def test_conditional_get(s3, bucket):
    data = b"conditional"
    etag = s3.put_object(Bucket=bucket, Key="c", Body=data)["ETag"]
    lm = s3.head_object(Bucket=bucket, Key="c")["LastModified"]
    past, future = lm - datetime.timedelta(hours=1), lm + datetime.timedelta(hours=1)
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == data
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch="*")["Body"].read() == data
    expect_error("PreconditionFailed", s3.get_object, Bucket=bucket, Key="c", IfMatch='"0000"', status=412)
    e = expect_error("304", s3.get_object, Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert e.response["ResponseMetadata"]["HTTPHeaders"]["etag"] == etag
    assert s3.get_object(Bucket=bucket, Key="c", IfNoneMatch='"other"')["Body"].read() == data
    expect_error("304", s3.get_object, Bucket=bucket, Key="c", IfModifiedSince=future)
    assert s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=past)["Body"].read() == data
    expect_error("PreconditionFailed", s3.get_object, Bucket=bucket, Key="c", IfUnmodifiedSince=past,
                 status=412)
    assert s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=future)["Body"].read() == data
    # If-Match that holds wins over a failing If-Unmodified-Since; If-None-Match over If-Modified-Since.
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag, IfUnmodifiedSince=past)["Body"].read() == data
    assert s3.get_object(Bucket=bucket, Key="c", IfNoneMatch='"x"', IfModifiedSince=future)["Body"].read() == data
    expect_error("412", s3.head_object, Bucket=bucket, Key="c", IfMatch='"0000"')
    expect_error("304", s3.head_object, Bucket=bucket, Key="c", IfNoneMatch=etag)


# ---- nothing partial is ever stored ----

def test_bad_content_md5_keeps_old_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="keep", Body=b"old version")
    import base64
    wrong = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    expect_error("BadDigest", s3.put_object, Bucket=bucket, Key="keep", Body=os.urandom(3 << 20),
                 ContentMD5=wrong, status=400)
    assert s3.get_object(Bucket=bucket, Key="keep")["Body"].read() == b"old version"
    expect_error("InvalidDigest", s3.put_object, Bucket=bucket, Key="keep", Body=b"x", ContentMD5="notbase64",
                 status=400)


def test_sha256_mismatch_keeps_old_object(cluster, s3, bucket):
    s3.put_object(Bucket=bucket, Key="big", Body=b"old")
    body = os.urandom(4 << 20)
    claimed = hashlib.sha256(body[:-1] + bytes([body[-1] ^ 1])).hexdigest()  # another body's, by one bit
    r = s3util.signed_request(cluster, "PUT", "/%s/big" % bucket, body=body, payload_hash=claimed)
    assert r.status_code == 400, r.text
    assert s3util.xml_error(r)[0] == "XAmzContentSHA256Mismatch"
    assert s3.get_object(Bucket=bucket, Key="big")["Body"].read() == b"old"
    r = s3util.signed_request(cluster, "PUT", "/%s/fresh" % bucket, body=body, payload_hash=claimed)
    assert s3util.xml_error(r)[0] == "XAmzContentSHA256Mismatch"
    expect_error("404", s3.head_object, Bucket=bucket, Key="fresh")
    if cluster.local:  # the targets removed the cut work files
        deadline = time.time() + 10
        while cluster.work_files() and time.time() < deadline:
            time.sleep(0.1)
        assert cluster.work_files() == []


# ---- copy ----

def test_copy_object(s3, bucket):
    other = s3util.bucket_name()
    s3.create_bucket(Bucket=other)
    try:
        data = os.urandom(2 * 1024 * 1024 + 3)
        s3.put_object(Bucket=bucket, Key="src/a", Body=data)
        r = s3.copy_object(Bucket=bucket, Key="dst/a", CopySource={"Bucket": bucket, "Key": "src/a"})
        assert r["CopyObjectResult"]["ETag"] == '"%s"' % md5(data)
        assert s3.get_object(Bucket=bucket, Key="dst/a")["Body"].read() == data
        s3.copy_object(Bucket=other, Key="x y+z", CopySource="%s/src/a" % bucket)
        assert s3.get_object(Bucket=other, Key="x y+z")["Body"].read() == data
        s3.copy_object(Bucket=bucket, Key="empty-copy", CopySource={"Bucket": other, "Key": "x y+z"})
        # copy of an empty object
        s3.put_object(Bucket=bucket, Key="zero", Body=b"")
        s3.copy_object(Bucket=other, Key="zero", CopySource={"Bucket": bucket, "Key": "zero"})
        assert s3.get_object(Bucket=other, Key="zero")["Body"].read() == b""
        expect_error("NoSuchKey", s3.copy_object, Bucket=bucket, Key="d", CopySource={"Bucket": bucket, "Key": "none"})
        expect_error("NoSuchBucket", s3.copy_object, Bucket=bucket, Key="d",
                     CopySource={"Bucket": s3util.bucket_name(), "Key": "a"})
        expect_error("InvalidRequest", s3.copy_object, Bucket=bucket, Key="src/a",
                     CopySource={"Bucket": bucket, "Key": "src/a"})
        s3.copy_object(Bucket=bucket, Key="src/a", CopySource={"Bucket": bucket, "Key": "src/a"},
                       MetadataDirective="REPLACE")
        assert s3.get_object(Bucket=bucket, Key="src/a")["Body"].read() == data
        expect_error("PreconditionFailed", s3.copy_object, Bucket=bucket, Key="d",
                     CopySource={"Bucket": bucket, "Key": "src/a"}, CopySourceIfMatch='"00"', status=412)
        s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": bucket, "Key": "src/a"},
                       CopySourceIfMatch='"%s"' % md5(data))
    finally:
        for k in ["x y+z", "zero"]:
            s3.delete_object(Bucket=other, Key=k)
        s3.delete_bucket(Bucket=other)


def test_copy_large_object(s3, bucket):
    """A copy larger than the proxy's relay ring (512 KiB) exercises pausing on both sides."""
    data = os.urandom(24 * 1024 * 1024 + 11)
    s3.put_object(Bucket=bucket, Key="big-src", Body=data)
    r = s3.copy_object(Bucket=bucket, Key="big-dst", CopySource={"Bucket": bucket, "Key": "big-src"})
    assert r["CopyObjectResult"]["ETag"] == '"%s"' % md5(data)
    assert hashlib.md5(s3.get_object(Bucket=bucket, Key="big-dst")["Body"].read()).hexdigest() == md5(data)


# ---- delete objects ----

def test_delete_objects(s3, bucket):
    keys = ["m/%03d" % i for i in range(40)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[:20] + ["m/missing"]]})
    assert sorted(d["Key"] for d in r["Deleted"]) == sorted(keys[:20] + ["m/missing"])
    assert "Errors" not in r
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[20:]], "Quiet": True})
    assert "Deleted" not in r and "Errors" not in r
    assert s3.list_objects_v2(Bucket=bucket, Prefix="m/")["KeyCount"] == 0


def test_delete_objects_malformed(cluster, bucket):
    for body in [b"<Delete><Object><Key>a</Key></Object>", b"not xml", b"<Other/>", b"<Delete></Delete>",
                 b"<!DOCTYPE x [<!ENTITY e SYSTEM 'file:///etc/passwd'>]><Delete><Object><Key>&e;</Key></Object></Delete>",
                 b"<Delete>" + b"<Object><Key>k</Key></Object>" * 1001 + b"</Delete>"]:
        r = s3util.signed_request(cluster, "POST", "/%s?delete=" % bucket, body=body)
        assert r.status_code == 400, (body[:40], r.text)
        assert s3util.xml_error(r)[0] == "MalformedXML"


# ---- listing ----

def put_many(s3, bucket, keys, body=b"."):
    """PUTs keys in parallel (boto3 clients are thread-safe)."""
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=body), keys))


def test_list_v2(s3, bucket):
    keys = ["a/1", "a/2", "a/b/3", "b/1", "c", "d/e/f/4", "d/e/g", "dz"]
    put_many(s3, bucket, keys)
    r = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in r["Contents"]] == keys
    assert r["KeyCount"] == len(keys) and r["IsTruncated"] is False
    for o in r["Contents"]:
        assert o["Size"] == 1 and o["StorageClass"] == "STANDARD" and o["ETag"] == '"%s"' % md5(b".")
    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["c", "dz"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "b/", "d/"]
    assert r["KeyCount"] == 5
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["a/1", "a/2"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/b/"]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="d", Delimiter="/")
    assert [o["Key"] for o in r.get("Contents", [])] == ["dz"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["d/"]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="d/", Delimiter="e/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["d/e/"]
    r = s3.list_objects_v2(Bucket=bucket, StartAfter="b/1")
    assert [o["Key"] for o in r["Contents"]] == ["c", "d/e/f/4", "d/e/g", "dz"]
    assert r["StartAfter"] == "b/1"
    r = s3.list_objects_v2(Bucket=bucket, Prefix="zzz")
    assert r["KeyCount"] == 0 and "Contents" not in r
    r = s3.list_objects_v2(Bucket=bucket, MaxKeys=0)
    assert r["KeyCount"] == 0 and r["MaxKeys"] == 0


def test_list_v2_paging(s3, bucket):
    keys = ["p/%02d/%d" % (i, j) for i in range(10) for j in range(3)] + ["p/x%02d" % i for i in range(7)]
    put_many(s3, bucket, keys)
    # Manual paging with continuation tokens: every key exactly once, in order.
    seen, token, pages = [], None, 0
    while True:
        kw = {"ContinuationToken": token} if token else {}
        r = s3.list_objects_v2(Bucket=bucket, Prefix="p/", MaxKeys=4, **kw)
        pages += 1
        seen += [o["Key"] for o in r.get("Contents", [])]
        assert r["KeyCount"] <= 4
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
        assert r.get("ContinuationToken") == kw.get("ContinuationToken")
    assert seen == sorted(keys)
    assert pages == (len(keys) + 3) // 4
    # Paginator with a delimiter: common prefixes and keys mixed across pages, none repeated.
    got_prefixes, got_keys = [], []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="p/", Delimiter="/",
                                                            PaginationConfig={"PageSize": 3}):
        assert page["KeyCount"] <= 3
        got_prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        got_keys += [o["Key"] for o in page.get("Contents", [])]
    assert got_prefixes == ["p/%02d/" % i for i in range(10)]
    assert got_keys == ["p/x%02d" % i for i in range(7)]
    # Exactly a full page: not truncated.
    r = s3.list_objects_v2(Bucket=bucket, Prefix="p/x", MaxKeys=7)
    assert r["KeyCount"] == 7 and r["IsTruncated"] is False
    expect_error("InvalidArgument", s3.list_objects_v2, Bucket=bucket, ContinuationToken="garbage!", status=400)


def test_list_default_page_is_1000(s3, bucket):
    keys = ["k%05d" % i for i in range(1203)]
    put_many(s3, bucket, keys, body=b"")
    r = s3.list_objects_v2(Bucket=bucket)
    assert r["KeyCount"] == 1000 and r["IsTruncated"] is True and r["MaxKeys"] == 1000
    r2 = s3.list_objects_v2(Bucket=bucket, MaxKeys=5000, ContinuationToken=r["NextContinuationToken"])
    assert [o["Key"] for o in r["Contents"] + r2["Contents"]] == keys
    assert r2["IsTruncated"] is False
    n = sum(len(p.get("Contents", [])) for p in s3.get_paginator("list_objects").paginate(Bucket=bucket))
    assert n == 1203


def test_list_v1(s3, bucket):
    keys = ["a/1", "a/2", "b/1", "b/2", "c", "d/1"]
    put_many(s3, bucket, keys)
    r = s3.list_objects(Bucket=bucket)
    assert [o["Key"] for o in r["Contents"]] == keys
    assert r["Marker"] == "" and r["IsTruncated"] is False
    assert r["Contents"][0]["Owner"]["ID"]
    r = s3.list_objects(Bucket=bucket, Marker="b/1")
    assert [o["Key"] for o in r["Contents"]] == ["b/2", "c", "d/1"]
    r = s3.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2)
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "b/"]
    assert r["IsTruncated"] is True and r["NextMarker"] == "b/"
    r = s3.list_objects(Bucket=bucket, Delimiter="/", Marker="b/")
    assert [o["Key"] for o in r["Contents"]] == ["c"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["d/"]
    pages = list(s3.get_paginator("list_objects").paginate(Bucket=bucket, Delimiter="/",
                                                          PaginationConfig={"PageSize": 1}))
    flat = [p.get("CommonPrefixes", [{}])[0].get("Prefix") or p["Contents"][0]["Key"] for p in pages]
    assert flat == ["a/", "b/", "c", "d/"]


def test_list_encoding_type_url_raw(cluster, bucket, s3):
    s3.put_object(Bucket=bucket, Key="sp ace/plus+&amp", Body=b"1")
    r = s3util.signed_request(cluster, "GET", "/%s?delimiter=%%2F&encoding-type=url&list-type=2" % bucket)
    assert r.status_code == 200
    root = ET.fromstring(r.content)
    assert root.findtext(NS + "EncodingType") == "url"
    assert root.find(NS + "CommonPrefixes").findtext(NS + "Prefix") == "sp%20ace/"
    r = s3util.signed_request(cluster, "GET", "/%s?encoding-type=url&list-type=2" % bucket)
    root = ET.fromstring(r.content)
    assert root.find(NS + "Contents").findtext(NS + "Key") == "sp%20ace/plus%2B%26amp"
    r = s3util.signed_request(cluster, "GET", "/%s?encoding-type=bogus&list-type=2" % bucket)
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidArgument"


# ---- presigned URLs ----

@pytest.mark.parametrize("sigver", ["default", "s3v4"])
def test_presigned_get_and_put(cluster, bucket, sigver):
    """boto3 presigns with SigV2 by default (botocore 1.29), with SigV4 when configured."""
    s3 = s3util.client(cluster) if sigver == "default" else s3util.client(cluster, signature_version="s3v4")
    http = session()
    data = os.urandom(70000)
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "pre/x"}, ExpiresIn=300)
    r = http.put(put_url, data=data, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["ETag"] == '"%s"' % md5(data)
    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "pre/x"}, ExpiresIn=300)
    r = http.get(get_url, timeout=30)
    assert r.status_code == 200 and r.content == data
    r = http.get(get_url, headers={"Range": "bytes=5-9"}, timeout=30)
    assert r.status_code == 206 and r.content == data[5:10]
    url = s3.generate_presigned_url("get_object", ExpiresIn=300, Params={
        "Bucket": bucket, "Key": "pre/x", "ResponseContentType": "text/plain",
        "ResponseContentDisposition": "attachment; filename=x.txt"})
    r = http.get(url, timeout=30)
    assert r.headers["Content-Type"] == "text/plain"
    assert r.headers["Content-Disposition"] == "attachment; filename=x.txt"
    # Another key with the same signature: refused.
    r = http.get(get_url.replace("pre/x", "pre/y"), timeout=30)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "SignatureDoesNotMatch"


# ---- configuration probes and what is not built ----

def test_configuration_probes(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"1")
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)  # never enabled
    acl = s3.get_bucket_acl(Bucket=bucket)
    assert acl["Grants"][0]["Permission"] == "FULL_CONTROL"
    assert s3.get_object_acl(Bucket=bucket, Key="o")["Grants"][0]["Permission"] == "FULL_CONTROL"
    assert s3.get_object_tagging(Bucket=bucket, Key="o")["TagSet"] == []
    assert "LoggingEnabled" not in s3.get_bucket_logging(Bucket=bucket)
    assert s3.get_bucket_request_payment(Bucket=bucket)["Payer"] == "BucketOwner"
    for call, code in [(s3.get_bucket_policy, "NoSuchBucketPolicy"),
                       (s3.get_bucket_lifecycle_configuration, "NoSuchLifecycleConfiguration"),
                       (s3.get_bucket_cors, "NoSuchCORSConfiguration"),
                       (s3.get_bucket_tagging, "NoSuchTagSet"),
                       (s3.get_bucket_website, "NoSuchWebsiteConfiguration"),
                       (s3.get_bucket_encryption, "ServerSideEncryptionConfigurationNotFoundError"),
                       (s3.get_public_access_block, "NoSuchPublicAccessBlockConfiguration")]:
        expect_error(code, call, Bucket=bucket, status=404)
    s3.delete_bucket_policy(Bucket=bucket)
    s3.delete_bucket_cors(Bucket=bucket)


def test_not_implemented(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"1")
    for call, kw in [(s3.put_bucket_versioning, {"VersioningConfiguration": {"Status": "Enabled"}}),
                     (s3.put_bucket_policy, {"Policy": "{}"}),
                     (s3.put_bucket_tagging, {"Tagging": {"TagSet": [{"Key": "a", "Value": "b"}]}}),
                     (s3.put_bucket_acl, {"ACL": "public-read-write"})]:  # private and public-read: test_s3_acl.py
        expect_error("NotImplemented", call, Bucket=bucket, status=501, **kw)
    expect_error("NotImplemented", s3.put_object_tagging, Bucket=bucket, Key="o",
                 Tagging={"TagSet": [{"Key": "a", "Value": "b"}]}, status=501)
    expect_error("NotImplemented", s3.get_object, Bucket=bucket, Key="o", VersionId="v123", status=501)
    expect_error("NotImplemented", s3.restore_object, Bucket=bucket, Key="o", RestoreRequest={"Days": 1},
                 status=501)


# ---- bounded memory ----

def _rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_large_object_streams_with_bounded_memory(cluster, s3, bucket):
    cluster.require_local("reads the proxy's memory use from /proc")
    size = 256 * 1024 * 1024
    block = os.urandom(1024 * 1024)
    pid = cluster.c.proxy.pid
    base = _rss_kib(pid)
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_kib(pid))
            time.sleep(0.02)

    class Body:
        """A file-like 256 MiB body generated on the fly (boto3 hashes it, then sends it)."""
        def __init__(self):
            self.pos = 0

        def read(self, n=-1):
            if self.pos >= size:
                return b""
            n = size - self.pos if n is None or n < 0 else min(n, size - self.pos)
            out = bytearray()
            while len(out) < n:
                off = (self.pos + len(out)) % len(block)
                out += block[off:off + n - len(out)]
            self.pos += n
            return bytes(out)

        def seek(self, off, whence=0):
            self.pos = off if whence == 0 else (self.pos + off if whence == 1 else size + off)
            return self.pos

        def tell(self):
            return self.pos

    want = hashlib.md5()
    for i in range(size // len(block)):
        want.update(block)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        r = s3.put_object(Bucket=bucket, Key="huge", Body=Body(), ContentLength=size)
        assert r["ETag"] == '"%s"' % want.hexdigest()
        got = hashlib.md5()
        n = 0
        for chunk in s3.get_object(Bucket=bucket, Key="huge")["Body"].iter_chunks(1 << 20):
            got.update(chunk)
            n += len(chunk)
        assert n == size and got.hexdigest() == want.hexdigest()
    finally:
        stop.set()
        t.join()
    grew_mib = (peak[0] - base) / 1024
    assert grew_mib < 64, "proxy RSS grew by %.0f MiB relaying a 256 MiB object" % grew_mib
