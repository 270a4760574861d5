# SPDX-License-Identifier: Apache-2.0
# S3 multipart upload: boto3 and aws CLI against a real cluster, the target's part store directly, and crash recovery.
"""
Parts live on the target that owns the object (target/obj/mpu.c); the proxy relays (proxy/s3/multipart.c).
The native tests drive a target's internal endpoints (docs/api.md "Multipart upload") the way the
proxy does; the S3 tests use stock boto3 and /usr/bin/aws with default settings.

S3 keys and clients come from s3util (the launcher's key pair, or FT_S3_ACCESS_KEY/FT_S3_SECRET_KEY).
"""
import hashlib
import json
import os
import re
import subprocess
import threading
import time

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

import s3util
from ftutil import TIMEOUT, Api, RawConn, raw_request, session, unique, wait_until

MIB = 1 << 20
PART = 5 * MIB  # S3's smallest part but the last
AWS = "/usr/bin/aws"


# ---- helpers ----
def s3_client(h):
    return s3util.client(h, connect_timeout=10, read_timeout=120)


def s3_bucket(s3):
    b = s3util.bucket_name("mpu")
    s3.create_bucket(Bucket=b)
    return b


def error_code(exc_info):
    return exc_info.value.response["Error"]["Code"]


def http_status(exc_info):
    return exc_info.value.response["ResponseMetadata"]["HTTPStatusCode"]


def mpu_etag(parts):
    """S3's ETag of an object assembled from parts (bytes objects): md5 of the binary md5s, -N."""
    digest = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    return '"%s-%d"' % (digest, len(parts))


def md5q(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


def upload_parts(s3, bucket, key, upload_id, parts):
    """Uploads parts (list of bytes) as 1..N; returns the CompleteMultipartUpload part list."""
    out = []
    for i, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=i, Body=data)
        assert r["ETag"] == md5q(data), "part %d: ETag %s" % (i, r["ETag"])
        out.append({"PartNumber": i, "ETag": r["ETag"]})
    return out


def parts_or_none(s3, bucket, key, upload_id):
    """ListParts, or None while the owner is not serving yet (for wait_until)."""
    try:
        return s3.list_parts(Bucket=bucket, Key=key, UploadId=upload_id)
    except Exception:  # connection refused, 503 while it rejoins
        return None


def mpu_dirs(h):
    """Upload directories present on the local cluster's mountpaths."""
    out = []
    for mp in h.all_mountpaths():
        d = os.path.join(mp, ".mpu")
        if os.path.isdir(d):
            out += [os.path.join(d, x) for x in os.listdir(d)]
    return out


# ---- the target's internal endpoints (what the proxy uses) ----
class Native:
    """The owning target's multipart endpoints for one object, as the proxy calls them."""

    def __init__(self, h, bucket, key):
        self.api = Api(h.url, session())
        self.s = self.api.s
        self.url = self.api.owner(bucket, key)
        self.h = h

    def start(self, uid):
        return self.s.post(self.url + "?mpu=%s&action=start" % uid, timeout=TIMEOUT)

    def part(self, uid, n, data):
        return self.s.put(self.url + "?mpu=%s&part=%d" % (uid, n), data=data, timeout=TIMEOUT)

    def complete(self, uid, parts):
        body = {"parts": [{"part": n, "etag": e} for n, e in parts]}
        return self.s.post(self.url + "?mpu=%s&action=complete" % uid, json=body, timeout=TIMEOUT)

    def abort(self, uid):
        return self.s.post(self.url + "?mpu=%s&action=abort" % uid, timeout=TIMEOUT)

    def parts(self, uid, **params):
        q = "".join("&%s=%s" % kv for kv in params.items())
        return self.s.get(self.url + "?mpu=%s&action=parts%s" % (uid, q), timeout=TIMEOUT)


def new_id():
    return os.urandom(18).hex()  # 36 URL-safe characters


def assert_code(r, status, code):
    assert r.status_code == status, "%d %r" % (r.status_code, r.text)
    j = r.json()
    assert j["code"] == code and j["status"] == status and j["message"], j


def test_native_part_store_and_complete(cluster, api):
    b = unique("mpun")
    api.create_bucket(b)
    key = "dir/obj one"
    n = Native(cluster, b, key)
    uid = new_id()
    assert n.start(uid).status_code == 200
    assert_code(n.start(uid), 409, "InvalidRequest")  # an id is never reused
    parts = [os.urandom(PART), os.urandom(PART), b"tail" * 100]
    etags = []
    for i, data in enumerate(parts, 1):
        r = n.part(uid, i, data)
        assert r.status_code == 200, r.text
        assert r.headers["ETag"] == md5q(data)
        etags.append(r.json()["etag"])
    parts[1] = os.urandom(PART)  # re-uploading a part number replaces it
    r = n.part(uid, 2, parts[1])
    assert r.status_code == 200
    etags[1] = r.json()["etag"]

    j = n.parts(uid, max_parts=2).json()
    assert [p["part"] for p in j["parts"]] == [1, 2] and j["truncated"] and j["next_part_marker"] == 2
    assert [p["etag"] for p in j["parts"]] == etags[:2]
    j = n.parts(uid, part_marker=2).json()
    assert [(p["part"], p["size"]) for p in j["parts"]] == [(3, len(parts[2]))] and not j["truncated"]

    # the upload is listed on the owner's control port, and not as an object
    owner = cluster.targets()[[t["public_url"] for t in cluster.targets()].index(
        n.url.split("/v1/")[0])]
    ups = session().get(owner["control_url"] + "/v1/mpu?bucket=%s" % b, timeout=TIMEOUT).json()
    assert [(u["key"], u["upload_id"]) for u in ups["uploads"]] == [(key, uid)]
    assert api.list_all(b)[0] == []

    whole = list(zip((1, 2, 3), etags))
    assert_code(n.complete(uid, [whole[1], whole[0], whole[2]]), 400, "InvalidPartOrder")
    assert_code(n.complete(uid, [whole[0], (2, etags[0]), whole[2]]), 400, "InvalidPart")
    assert_code(n.complete(uid, whole + [(4, etags[0])]), 400, "InvalidPart")
    assert_code(n.complete(uid, [whole[0], whole[2], (5, etags[0])]), 400, "InvalidPart")
    small = n.part(uid, 5, b"x").json()["etag"]
    last = n.part(uid, 6, parts[2]).json()["etag"]
    assert_code(n.complete(uid, [whole[0], (5, small), (6, last)]), 400, "EntityTooSmall")
    assert_code(n.complete(new_id(), whole), 404, "NoSuchUpload")

    r = n.complete(uid, whole)
    assert r.status_code == 200, r.text
    data = b"".join(parts)
    assert r.json()["etag"] == mpu_etag(parts).strip('"') and r.json()["size"] == len(data)
    g = api.get(b, key)
    assert g.status_code == 200 and g.content == data
    assert g.headers["ETag"] == mpu_etag(parts)  # kept in the object's metadata
    # a retried completion (same list) gets the same answer; anything else finds no upload
    r2 = n.complete(uid, whole)
    assert r2.status_code == 200 and r2.json()["etag"] == r.json()["etag"]
    assert_code(n.complete(uid, whole[:2]), 404, "NoSuchUpload")
    assert_code(n.part(uid, 1, b"late"), 404, "NoSuchUpload")
    assert_code(n.abort(uid), 404, "NoSuchUpload")
    assert [e["name"] for e in api.list_all(b)[0]] == [key]
    ups = session().get(owner["control_url"] + "/v1/mpu?bucket=%s" % b, timeout=TIMEOUT).json()
    assert ups["uploads"] == []


def test_native_abort_and_bad_requests(cluster, api):
    b = unique("mpun")
    api.create_bucket(b)
    n = Native(cluster, b, "k")
    uid = new_id()
    assert_code(n.part(uid, 1, b"x"), 404, "NoSuchUpload")
    assert n.start(uid).status_code == 200
    assert n.part(uid, 1, b"abc").status_code == 200
    assert_code(n.part(uid, 0, b"x"), 400, "InvalidArgument")
    assert_code(n.part(uid, 10001, b"x"), 400, "InvalidArgument")
    assert_code(n.s.put(n.url + "?mpu=a/../b&part=1", data=b"x", timeout=TIMEOUT), 400,
                "InvalidArgument")
    r = n.s.post(n.url + "?mpu=%s&action=complete" % uid, data=b"{not json", timeout=TIMEOUT)
    assert_code(r, 400, "MalformedXML")
    assert_code(n.complete(uid, []), 400, "MalformedXML")
    # the same upload id on another key of the bucket is no upload
    other = Native(cluster, b, "k2")
    assert_code(other.complete(uid, [(1, md5q(b"abc"))]), 404, "NoSuchUpload")
    assert n.abort(uid).status_code == 200
    assert_code(n.abort(uid), 404, "NoSuchUpload")
    assert_code(n.complete(uid, [(1, md5q(b"abc"))]), 404, "NoSuchUpload")
    assert_code(n.parts(uid), 404, "NoSuchUpload")
    assert api.get(b, "k").status_code == 404
    if cluster.local:
        wait_until(lambda: not any(uid in p for p in mpu_dirs(cluster)), 10,
                   what="the aborted upload's directory to go")


def test_native_uploads_of_destroyed_bucket_go(cluster, api):
    cluster.require_local("looks at the mountpaths")
    b = unique("mpun")
    api.create_bucket(b)
    n = Native(cluster, b, "k")
    uid = new_id()
    assert n.start(uid).status_code == 200
    assert n.part(uid, 1, b"abc").status_code == 200
    assert any(p.endswith("/" + uid) for p in mpu_dirs(cluster))
    api.destroy_bucket(b)
    api.create_bucket(b)  # a new bucket of the same name does not inherit the upload
    wait_until(lambda: n.complete(uid, [(1, md5q(b"abc"))]).status_code == 404, 10,
               what="the upload to be unknown in the new bucket")
    for t in cluster.targets():
        r = session().get(t["control_url"] + "/v1/mpu", timeout=TIMEOUT)
        assert r.status_code == 200 and all(u["upload_id"] != uid for u in r.json()["uploads"])
    wait_until(lambda: not any(p.endswith("/" + uid) for p in mpu_dirs(cluster)), 10,
               what="the stale upload's directory to go")


def test_native_concurrent_completions_agree(cluster, api):
    """Two completions of one upload at once (a client retrying): both get the same 200."""
    b = unique("mpun")
    api.create_bucket(b)
    n = Native(cluster, b, "big")
    uid = new_id()
    assert n.start(uid).status_code == 200
    parts = [os.urandom(PART) for _ in range(4)]
    etags = [n.part(uid, i, p).json()["etag"] for i, p in enumerate(parts, 1)]
    results = []

    def complete():
        results.append(Native(cluster, b, "big").complete(uid, list(zip(range(1, 5), etags))))

    threads = [threading.Thread(target=complete) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200, 200], [r.text for r in results]
    assert results[0].json()["etag"] == results[1].json()["etag"] == mpu_etag(parts).strip('"')
    assert api.get(b, "big").content == b"".join(parts)


# ---- S3 API ----
@pytest.fixture(scope="module")
def s3(cluster):
    return s3_client(cluster)


def test_s3_multipart_lifecycle(cluster, s3):
    b = s3_bucket(s3)
    key = "data/model.bin"
    up = s3.create_multipart_upload(Bucket=b, Key=key)
    uid = up["UploadId"]
    assert up["Bucket"] == b and up["Key"] == key
    assert len(uid) >= 16 and all(c.isalnum() or c in "-_" for c in uid), uid
    other = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    assert other != uid

    parts = [os.urandom(PART), os.urandom(PART), os.urandom(300_000)]
    listed = upload_parts(s3, b, key, uid, parts)

    ups = s3.list_multipart_uploads(Bucket=b)
    assert sorted(u["UploadId"] for u in ups["Uploads"]) == sorted([uid, other])
    assert all(u["Key"] == key for u in ups["Uploads"])

    page = s3.list_parts(Bucket=b, Key=key, UploadId=uid, MaxParts=2)
    assert [p["PartNumber"] for p in page["Parts"]] == [1, 2] and page["IsTruncated"]
    assert [p["ETag"] for p in page["Parts"]] == [x["ETag"] for x in listed[:2]]
    assert [p["Size"] for p in page["Parts"]] == [PART, PART]
    rest = s3.list_parts(Bucket=b, Key=key, UploadId=uid,
                         PartNumberMarker=page["NextPartNumberMarker"])
    assert [(p["PartNumber"], p["Size"]) for p in rest["Parts"]] == [(3, 300_000)]
    assert not rest["IsTruncated"]
    paged = [p["PartNumber"] for pg in s3.get_paginator("list_parts").paginate(
        Bucket=b, Key=key, UploadId=uid, PaginationConfig={"PageSize": 1}) for p in pg["Parts"]]
    assert paged == [1, 2, 3]
    assert s3.list_objects_v2(Bucket=b)["KeyCount"] == 0  # parts are no objects

    done = s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid,
                                        MultipartUpload={"Parts": listed})
    data = b"".join(parts)
    assert done["ETag"] == mpu_etag(parts)
    assert done["Bucket"] == b and done["Key"] == key
    got = s3.get_object(Bucket=b, Key=key)
    assert got["Body"].read() == data
    head = s3.head_object(Bucket=b, Key=key)
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == mpu_etag(parts)
    rng = s3.get_object(Bucket=b, Key=key, Range="bytes=%d-%d" % (PART - 10, PART + 9))
    assert rng["Body"].read() == data[PART - 10:PART + 10]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]] == [key]

    ups = s3.list_multipart_uploads(Bucket=b)
    assert [u["UploadId"] for u in ups.get("Uploads", [])] == [other]
    s3.abort_multipart_upload(Bucket=b, Key=key, UploadId=other)
    assert s3.list_multipart_uploads(Bucket=b).get("Uploads", []) == []


def test_s3_part_reupload_replaces(cluster, s3):
    b = s3_bucket(s3)
    uid = s3.create_multipart_upload(Bucket=b, Key="k")["UploadId"]
    first = os.urandom(PART)
    e1 = s3.upload_part(Bucket=b, Key="k", UploadId=uid, PartNumber=1, Body=first)["ETag"]
    second = os.urandom(PART)
    e2 = s3.upload_part(Bucket=b, Key="k", UploadId=uid, PartNumber=1, Body=second)["ETag"]
    assert e1 != e2
    parts = s3.list_parts(Bucket=b, Key="k", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["ETag"]) for p in parts] == [(1, e2)]
    last = b"end"
    e3 = s3.upload_part(Bucket=b, Key="k", UploadId=uid, PartNumber=2, Body=last)["ETag"]
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e3}]})
    assert error_code(ei) == "InvalidPart" and http_status(ei) == 400
    done = s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e2}, {"PartNumber": 2, "ETag": e3}]})
    assert done["ETag"] == mpu_etag([second, last])
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == second + last


def test_s3_upload_file_multipart(cluster, s3, tmp_path):
    b = s3_bucket(s3)
    src = tmp_path / "src.bin"
    data = os.urandom(12 * MIB + 12345)
    src.write_bytes(data)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=4)
    s3.upload_file(str(src), b, "up/file.bin", Config=cfg)
    chunks = [data[i:i + 5 * MIB] for i in range(0, len(data), 5 * MIB)]
    assert len(chunks) == 3
    head = s3.head_object(Bucket=b, Key="up/file.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == mpu_etag(chunks)
    dst = tmp_path / "dst.bin"
    s3.download_file(b, "up/file.bin", str(dst), Config=cfg)
    assert dst.read_bytes() == data
    assert s3.list_multipart_uploads(Bucket=b).get("Uploads", []) == []


def test_aws_cli_cp_20mib(cluster, s3, tmp_path):
    ak, sk = s3util.keys(cluster)
    b = s3_bucket(s3)
    src = tmp_path / "big.bin"
    data = os.urandom(20 * MIB)
    src.write_bytes(data)
    env = s3util.clean_env({"AWS_ACCESS_KEY_ID": ak, "AWS_SECRET_ACCESS_KEY": sk,
                            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                            "AWS_CONFIG_FILE": str(tmp_path / "none"),
                            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}, home=tmp_path)
    base = [s3util.require_tool(AWS), "--endpoint-url", s3util.endpoint(cluster)]

    def run(*args):
        p = subprocess.run(base + list(args), env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, "aws %s: %d\n%s\n%s" % (" ".join(args), p.returncode, p.stdout, p.stderr)
        return p.stdout

    run("s3", "cp", "--only-show-errors", str(src), "s3://%s/cli/big.bin" % b)
    head = json.loads(run("s3api", "head-object", "--bucket", b, "--key", "cli/big.bin"))
    assert head["ContentLength"] == len(data)
    # the CLI's default: 8 MiB parts -> 8 + 8 + 4
    assert head["ETag"] == mpu_etag([data[:8 * MIB], data[8 * MIB:16 * MIB], data[16 * MIB:]])
    back = tmp_path / "back.bin"
    run("s3", "cp", "--only-show-errors", "s3://%s/cli/big.bin" % b, str(back))
    assert back.read_bytes() == data
    out = json.loads(run("s3api", "list-multipart-uploads", "--bucket", b) or "{}")
    assert not out.get("Uploads")


def test_s3_upload_part_aws_chunked(cluster, s3):
    """UploadPart with a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body: every chunk signature checked;
    a tampered chunk stores nothing."""
    b = s3_bucket(s3)
    key = "chunked/obj"
    uid = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    p1 = os.urandom(PART + 1000)
    path = "/%s/%s?partNumber=%%d&uploadId=%s" % (b, key, uid)
    r = s3util.put_aws_chunked(cluster, path % 1, p1, chunk_size=256 * 1024)
    assert r.status_code == 200, r.text
    assert r.headers["ETag"] == md5q(p1)
    r = s3util.put_aws_chunked(cluster, path % 2, os.urandom(300_000), tamper_chunk=2)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "SignatureDoesNotMatch", r.text
    parts = s3.list_parts(Bucket=b, Key=key, UploadId=uid)["Parts"]
    assert [p["PartNumber"] for p in parts] == [1]
    p2 = b"last part"
    r = s3util.put_aws_chunked(cluster, path % 2, p2)
    assert r.status_code == 200 and r.headers["ETag"] == md5q(p2)
    done = s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": md5q(p1)}, {"PartNumber": 2, "ETag": md5q(p2)}]})
    assert done["ETag"] == mpu_etag([p1, p2])
    assert s3.get_object(Bucket=b, Key=key)["Body"].read() == p1 + p2


def test_s3_complete_errors(cluster, s3):
    b = s3_bucket(s3)
    key = "neg"
    uid = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    p1, p2, p3 = os.urandom(PART), b"small middle", b"last"
    listed = upload_parts(s3, b, key, uid, [p1, p2, p3])

    def complete(parts, upload_id=uid):
        with pytest.raises(ClientError) as ei:
            s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=upload_id,
                                         MultipartUpload={"Parts": parts})
        return error_code(ei), http_status(ei)

    wrong = dict(listed[0], ETag=md5q(b"something else"))
    assert complete([wrong] + listed[1:]) == ("InvalidPart", 400)
    assert complete([listed[0], dict(listed[2], PartNumber=7)]) == ("InvalidPart", 400)
    assert complete([listed[1], listed[0], listed[2]]) == ("InvalidPartOrder", 400)
    # a part listed twice with different ETags: one of them is not the stored part
    assert complete([listed[0], dict(listed[0], ETag=md5q(b"else"))]) == ("InvalidPart", 400)
    assert complete(listed) == ("EntityTooSmall", 400)
    assert complete(listed, upload_id="NoSuchUploadIdAtAll0123") == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as ei:
        s3.upload_part(Bucket=b, Key=key, UploadId="NoSuchUploadIdAtAll0123", PartNumber=1, Body=b"x")
    assert error_code(ei) == "NoSuchUpload"
    with pytest.raises(ClientError) as ei:
        s3.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=10001, Body=b"x")
    assert error_code(ei) == "InvalidArgument"
    with pytest.raises(ClientError) as ei:
        s3.list_parts(Bucket=b, Key=key, UploadId="bad id!")
    assert error_code(ei) == "NoSuchUpload"
    with pytest.raises(ClientError) as ei:
        s3.list_parts(Bucket=b, Key="another-key", UploadId=uid)
    assert error_code(ei) == "NoSuchUpload"
    with pytest.raises(ClientError) as ei:
        s3.upload_part_copy(Bucket=b, Key=key, UploadId=uid, PartNumber=4,
                            CopySource={"Bucket": b, "Key": "whatever"})
    assert error_code(ei) == "NoSuchKey" and http_status(ei) == 404  # UploadPartCopy: test_s3_part_copy.py
    # the failed completions left the upload intact: the valid list still completes
    done = s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid,
                                        MultipartUpload={"Parts": [listed[0], listed[2]]})
    assert done["ETag"] == mpu_etag([p1, p3])
    assert s3.get_object(Bucket=b, Key=key)["Body"].read() == p1 + p3
    # nothing was stored by the failed ones in between
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]] == [key]


def _declared_too_large(cluster, path, headers, payload):
    """A signed PUT whose head declares more than S3 allows and whose body never comes: the answer must not wait
    for it. Returns (status, XML error code)."""
    ak, sk = s3util.keys(cluster)
    url = s3util.endpoint(cluster) + path
    h = s3util.Signer(ak, sk).sign("PUT", url, headers, payload)
    host = url.split("/")[2]
    head = "PUT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (
        url[len("http://") + len(host):], host, "".join("%s: %s\r\n" % kv for kv in h.items()))
    with RawConn(url, timeout=20) as c:
        c.send(head.encode())
        r = c.read_response("PUT")
    return r.status_code, re.search(rb"<Code>([^<]*)</Code>", r.body).group(1).decode()


def test_s3_more_than_5_gib_is_refused_at_the_head(cluster, s3):
    """PutObject and UploadPart of more than 5 GiB (declared by Content-Length, or by x-amz-decoded-content-length
    for aws-chunked) get 400 EntityTooLarge at once, before any body byte is read or stored."""
    b = s3_bucket(s3)
    u = s3.create_multipart_upload(Bucket=b, Key="big")["UploadId"]
    over = str((5 << 30) + 1)
    for path in ("/%s/big" % b, "/%s/big?partNumber=1&uploadId=%s" % (b, u)):
        assert _declared_too_large(cluster, path, {"Content-Length": over}, "UNSIGNED-PAYLOAD") == \
            (400, "EntityTooLarge"), path
        assert _declared_too_large(cluster, path, {"Content-Encoding": "aws-chunked", "Content-Length": over,
                                                   "x-amz-decoded-content-length": over}, s3util.STREAMING) == \
            (400, "EntityTooLarge"), path
    assert s3.list_parts(Bucket=b, Key="big", UploadId=u).get("Parts", []) == []
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=b, Key="big")
    assert http_status(ei) == 404


def test_s3_abort(cluster, s3):
    b = s3_bucket(s3)
    uid = s3.create_multipart_upload(Bucket=b, Key="gone")["UploadId"]
    listed = upload_parts(s3, b, "gone", uid, [os.urandom(PART), b"x"])
    r = s3.abort_multipart_upload(Bucket=b, Key="gone", UploadId=uid)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    for call in (
            lambda: s3.complete_multipart_upload(Bucket=b, Key="gone", UploadId=uid,
                                                 MultipartUpload={"Parts": listed}),
            lambda: s3.abort_multipart_upload(Bucket=b, Key="gone", UploadId=uid),
            lambda: s3.list_parts(Bucket=b, Key="gone", UploadId=uid),
            lambda: s3.upload_part(Bucket=b, Key="gone", UploadId=uid, PartNumber=1, Body=b"y")):
        with pytest.raises(ClientError) as ei:
            call()
        assert error_code(ei) == "NoSuchUpload" and http_status(ei) == 404
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=b, Key="gone")
    assert http_status(ei) == 404
    assert s3.list_multipart_uploads(Bucket=b).get("Uploads", []) == []
    if cluster.local:
        wait_until(lambda: not any(p.endswith("/" + uid) for p in mpu_dirs(cluster)), 10,
                   what="the aborted upload's directory to go")


def test_s3_list_multipart_uploads_paging(cluster, s3):
    """Uploads spread over every target come back merged, sorted, paged and rolled up."""
    b = s3_bucket(s3)
    keys = ["a/1", "a/2", "b", "c/x/1", "c/y", "d", "d", "e"]
    ids = {}
    for k in keys:
        ids.setdefault(k, []).append(s3.create_multipart_upload(Bucket=b, Key=k)["UploadId"])
    want = sorted((k, u) for k, us in ids.items() for u in us)
    got = [(u["Key"], u["UploadId"]) for u in s3.list_multipart_uploads(Bucket=b)["Uploads"]]
    assert got == want

    pages, seen = 0, []
    for page in s3.get_paginator("list_multipart_uploads").paginate(
            Bucket=b, PaginationConfig={"PageSize": 3}):
        pages += 1
        assert len(page.get("Uploads", [])) <= 3
        seen += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
    assert seen == want and pages == 3

    r = s3.list_multipart_uploads(Bucket=b, Prefix="c/")
    assert [u["Key"] for u in r["Uploads"]] == ["c/x/1", "c/y"]
    r = s3.list_multipart_uploads(Bucket=b, Delimiter="/")
    assert [u["Key"] for u in r["Uploads"]] == ["b", "d", "d", "e"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "c/"]
    r = s3.list_multipart_uploads(Bucket=b, Prefix="c/", Delimiter="/")
    assert [u["Key"] for u in r.get("Uploads", [])] == ["c/y"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["c/x/"]
    r = s3.list_multipart_uploads(Bucket=b, KeyMarker="c/y")
    assert [u["Key"] for u in r["Uploads"]] == ["d", "d", "e"]
    d_ids = sorted(ids["d"])
    r = s3.list_multipart_uploads(Bucket=b, KeyMarker="d", UploadIdMarker=d_ids[0])
    assert [(u["Key"], u["UploadId"]) for u in r["Uploads"]] == [("d", d_ids[1]), ("e", ids["e"][0])]
    for k, us in ids.items():
        for u in us:
            s3.abort_multipart_upload(Bucket=b, Key=k, UploadId=u)
    assert s3.list_multipart_uploads(Bucket=b).get("Uploads", []) == []


def test_s3_upload_survives_target_sigkill(make_cluster):
    """A target SIGKILLed mid-part and restarted: whole parts remain, the cut one is absent,
    completing works, and no short object is ever visible."""
    h = make_cluster()
    s3 = s3_client(h)
    b = s3_bucket(s3)
    key = "crash/obj"
    uid = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    p1, p2 = os.urandom(PART), os.urandom(PART)
    listed = upload_parts(s3, b, key, uid, [p1, p2])

    owner_url = Api(h.url).owner(b, key)
    victim = h.index_of_url(owner_url)
    # part 3 reaches the owner with half of its body, then the owner dies
    with RawConn(owner_url) as c:
        path = owner_url[owner_url.index("/v1/"):] + "?mpu=%s&part=3" % uid
        c.send(raw_request("PUT", path, "t", [("Content-Length", str(PART))], b""))
        c.send(os.urandom(PART // 2))
        time.sleep(0.2)
        h.kill_target(victim)
    h.restart_target(victim)
    wait_until(lambda: parts_or_none(s3, b, key, uid), 20, what="the upload to be back")

    parts = s3.list_parts(Bucket=b, Key=key, UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == \
        [(1, listed[0]["ETag"], PART), (2, listed[1]["ETag"], PART)]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=b)["Uploads"]] == [uid]
    assert s3.list_objects_v2(Bucket=b)["KeyCount"] == 0
    assert not h.work_files([victim]), "work files left after restart"

    # completing with the part that never arrived fails cleanly and stores nothing
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid, MultipartUpload={
            "Parts": listed + [{"PartNumber": 3, "ETag": md5q(b"never")}]})
    assert error_code(ei) == "InvalidPart"
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=b, Key=key)
    assert http_status(ei) == 404

    p3 = b"the real third part"
    r = s3.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=3, Body=p3)
    listed.append({"PartNumber": 3, "ETag": r["ETag"]})
    done = s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid,
                                        MultipartUpload={"Parts": listed})
    assert done["ETag"] == mpu_etag([p1, p2, p3])
    assert s3.get_object(Bucket=b, Key=key)["Body"].read() == p1 + p2 + p3

    # an upload left behind by the killed target survives another restart, then completes
    uid2 = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    listed2 = upload_parts(s3, b, key, uid2, [p3])
    h.kill_target(victim)
    h.restart_target(victim)
    wait_until(lambda: parts_or_none(s3, b, key, uid2), 20, what="the upload to be back")
    done = s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid2,
                                        MultipartUpload={"Parts": listed2})
    assert done["ETag"] == mpu_etag([p3])
    assert s3.get_object(Bucket=b, Key=key)["Body"].read() == p3


def test_s3_slow_completion_keeps_the_client_waiting(make_cluster):
    """A completion slower than the client's read timeout (the owner stalls here): the proxy
    answers 200 early and keeps the connection alive with spaces, then sends the result, or the
    error inside the 200, which the SDK raises as usual. The raw client has a 5 s read timeout
    and no retries (botocore would retry a timed-out completion, which the target answers too)."""
    h = make_cluster(keepalive_ms=5000)  # the stalled owner must stay in the map (15 s)
    s3 = s3_client(h)
    b = s3_bucket(s3)
    key = "slow/obj"
    uid = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    parts = [os.urandom(PART), b"end"]
    listed = upload_parts(s3, b, key, uid, parts)
    victim = h.index_of_url(Api(h.url).owner(b, key))
    ak, sk = s3util.keys(h)

    def complete_raw(entries):
        xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (p["PartNumber"], p["ETag"])
            for p in entries)
        url = "%s/%s/%s?uploadId=%s" % (s3util.endpoint(h), b, key, uid)
        body = xml.encode()
        hdrs = s3util.Signer(ak, sk).sign("POST", url, {}, hashlib.sha256(body).hexdigest())
        return session().post(url, data=body, headers=hdrs, timeout=(5, 5))

    def stalled(fn, seconds=9):
        h.kill_target(victim, "STOP")
        t0 = time.monotonic()
        timer = threading.Timer(seconds, lambda: h.kill_target(victim, "CONT"))
        timer.start()
        try:
            return fn(), time.monotonic() - t0
        finally:
            timer.join()

    r, took = stalled(lambda: complete_raw([dict(listed[0], ETag=md5q(b"wrong")), listed[1]]))
    assert took > 8, "the completion did not wait for the stalled target (%.1f s)" % took
    assert r.status_code == 200, r.text
    text = r.content.decode()
    # the declaration came at once, then at least one keepalive space before the late result
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n '), text[:80]
    assert s3util.xml_error(type("R", (), {"content": text.split("?>", 1)[1].strip().encode()}))[0] \
        == "InvalidPart", text

    r, took = stalled(lambda: complete_raw(listed))
    assert took > 8 and r.status_code == 200, r.text
    assert "<ETag>&quot;%s&quot;</ETag>" % mpu_etag(parts).strip('"') in r.text or \
        "<ETag>%s</ETag>" % mpu_etag(parts) in r.text, r.text
    assert s3.get_object(Bucket=b, Key=key)["Body"].read() == b"".join(parts)

    # boto3 parses the early 200 as any other
    uid = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    listed = upload_parts(s3, b, key, uid, parts)
    done, took = stalled(lambda: s3.complete_multipart_upload(
        Bucket=b, Key=key, UploadId=uid, MultipartUpload={"Parts": listed}), seconds=5)
    assert done["ETag"] == mpu_etag(parts)


# ---- expiry of incomplete uploads (target/obj/mpu.c MPU_EXPIRE_NS, 7 days) ----
EXPIRE_S = 7 * 24 * 3600


def upload_dir(h, uid):
    found = [p for p in mpu_dirs(h) if p.endswith("/" + uid)]
    assert len(found) == 1, found
    return found[0]


def age_upload(h, uid, seconds):
    """Moves the upload's start back in time, as if it had been started `seconds` ago."""
    path = os.path.join(upload_dir(h, uid), "meta.json")
    with open(path) as f:
        meta = json.load(f)
    meta["initiated"] -= seconds * 1000000000
    with open(path, "w") as f:
        json.dump(meta, f)


def listed_ids(s3, b):
    return {u["UploadId"] for u in s3.list_multipart_uploads(Bucket=b).get("Uploads", [])}


def test_s3_expired_upload_is_gone(cluster):
    """An upload older than the expiry answers NoSuchUpload to every request and its parts go."""
    cluster.require_local("ages an upload on the mountpaths")
    s3 = s3_client(cluster)
    b = s3_bucket(s3)
    old = s3.create_multipart_upload(Bucket=b, Key="old")["UploadId"]
    young = s3.create_multipart_upload(Bucket=b, Key="young")["UploadId"]
    listed = upload_parts(s3, b, "old", old, [b"part one"])
    upload_parts(s3, b, "young", young, [b"kept"])
    age_upload(cluster, old, EXPIRE_S + 60)
    age_upload(cluster, young, EXPIRE_S - 3600)  # an hour left: still alive
    for call in (lambda: s3.upload_part(Bucket=b, Key="old", UploadId=old, PartNumber=2, Body=b"x"),
                 lambda: s3.list_parts(Bucket=b, Key="old", UploadId=old),
                 lambda: s3.complete_multipart_upload(Bucket=b, Key="old", UploadId=old,
                                                      MultipartUpload={"Parts": listed}),
                 lambda: s3.abort_multipart_upload(Bucket=b, Key="old", UploadId=old)):
        with pytest.raises(ClientError) as ei:
            call()
        assert error_code(ei) == "NoSuchUpload" and http_status(ei) == 404
    wait_until(lambda: not any(p.endswith("/" + old) for p in mpu_dirs(cluster)), 10,
               what="the expired upload's parts to be deleted")
    assert listed_ids(s3, b) == {young}
    assert [p["PartNumber"] for p in s3.list_parts(Bucket=b, Key="young", UploadId=young)["Parts"]] == [1]
    with pytest.raises(ClientError):
        s3.head_object(Bucket=b, Key="old")  # never completed
    s3.abort_multipart_upload(Bucket=b, Key="young", UploadId=young)
    s3.delete_bucket(Bucket=b)


def test_s3_expired_uploads_are_swept(make_cluster):
    """Expired uploads nobody asks for are deleted by the sweeps: ListMultipartUploads, and the
    first upload started after a target (re)start."""
    h = make_cluster(targets=1)
    h.require_local("ages uploads on the mountpaths")
    s3 = s3_client(h)
    b = s3_bucket(s3)
    a = s3.create_multipart_upload(Bucket=b, Key="a")["UploadId"]
    upload_parts(s3, b, "a", a, [b"aaa"])
    age_upload(h, a, EXPIRE_S + 1)
    assert listed_ids(s3, b) == set()  # the listing sweeps it
    wait_until(lambda: not any(p.endswith("/" + a) for p in mpu_dirs(h)), 10,
               what="the listed-away upload's parts to be deleted")
    # nothing asks about this one: the first start after a restart sweeps it
    c = s3.create_multipart_upload(Bucket=b, Key="c")["UploadId"]
    upload_parts(s3, b, "c", c, [b"ccc"])
    age_upload(h, c, EXPIRE_S + 1)
    h.restart_target(0)

    def start_d():
        try:
            return s3.create_multipart_upload(Bucket=b, Key="d")["UploadId"]
        except ClientError:  # 503 until the restarted target is back in the map
            return None
    wait_until(start_d, 30, what="the restarted target to start uploads")
    wait_until(lambda: not any(p.endswith("/" + c) for p in mpu_dirs(h)), 10,
               what="the swept upload's parts to be deleted")


def test_s3_overlapping_part_uploads_last_wins(cluster, s3):
    """Two uploads of one part number at once: one entry listed, the one that finished last; a
    Complete naming it once or twice succeeds, with the other's ETag it is InvalidPart."""
    b = s3_bucket(s3)
    uid = s3.create_multipart_upload(Bucket=b, Key="k")["UploadId"]
    bodies = [os.urandom(PART), os.urandom(PART)]
    barrier = threading.Barrier(2)
    done = {}
    lock = threading.Lock()

    def one(i):
        c = s3util.client(cluster)
        barrier.wait()
        etag = c.upload_part(Bucket=b, Key="k", UploadId=uid, PartNumber=1, Body=bodies[i])["ETag"]
        with lock:
            done[i] = (etag, time.monotonic())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    parts = s3.list_parts(Bucket=b, Key="k", UploadId=uid)["Parts"]
    assert len(parts) == 1
    winner = [i for i in range(2) if done[i][0] == parts[0]["ETag"]]
    assert len(winner) == 1
    w, other = winner[0], 1 - winner[0]
    tail = b"tail"
    e2 = s3.upload_part(Bucket=b, Key="k", UploadId=uid, PartNumber=2, Body=tail)["ETag"]
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": done[other][0]}, {"PartNumber": 2, "ETag": e2}]})
    assert error_code(ei) == "InvalidPart"
    r = s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": done[w][0]}, {"PartNumber": 1, "ETag": done[w][0]},
                  {"PartNumber": 2, "ETag": e2}]})
    assert r["ETag"] == mpu_etag([bodies[w], tail])
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == bodies[w] + tail


def test_s3_get_and_head_by_part_number(cluster, s3):
    b = s3_bucket(s3)
    parts = [os.urandom(PART), os.urandom(PART), os.urandom(1234)]
    uid = s3.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
    listed = upload_parts(s3, b, "m", uid, parts)
    s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=uid, MultipartUpload={"Parts": listed})
    whole = b"".join(parts)
    etag = s3.head_object(Bucket=b, Key="m")["ETag"]
    off = 0
    for n, p in enumerate(parts, 1):
        g = s3.get_object(Bucket=b, Key="m", PartNumber=n)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert g["Body"].read() == p and g["PartsCount"] == 3 and g["ETag"] == etag
        assert g["ContentRange"] == "bytes %d-%d/%d" % (off, off + len(p) - 1, len(whole))
        h = s3.head_object(Bucket=b, Key="m", PartNumber=n)
        assert h["ContentLength"] == len(p) and h["PartsCount"] == 3
        off += len(p)
    for bad in (4, 10000):
        with pytest.raises(ClientError) as ei:
            s3.get_object(Bucket=b, Key="m", PartNumber=bad)
        assert error_code(ei) == "InvalidPartNumber" and http_status(ei) == 416
    # an object stored whole is its one part 1
    s3.put_object(Bucket=b, Key="w", Body=b"whole")
    g = s3.get_object(Bucket=b, Key="w", PartNumber=1)
    assert g["Body"].read() == b"whole"
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=b, Key="w", PartNumber=2)
    assert error_code(ei) == "InvalidPartNumber"
    # bad part numbers, a Range with it
    for q in ("0", "10001", "x"):
        r = s3util.signed_request(cluster, "GET", "/%s/m?partNumber=%s" % (b, q))
        assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidArgument", r.text
    r = s3util.signed_request(cluster, "GET", "/%s/m?partNumber=1" % b, headers={"Range": "bytes=0-1"})
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidRequest", r.text
    for k in ("m", "w"):
        s3.delete_object(Bucket=b, Key=k)
