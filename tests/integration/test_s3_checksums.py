# SPDX-License-Identifier: Apache-2.0
# S3 streaming trailers and flexible checksums against a real local cluster: aws-chunked trailer forms, x-amz-checksum-*.
"""
Bodies in the trailer forms are built by s3util's own signer (the forms current SDKs send and Debian's
boto3 does not); header checksums come from boto3. Every refused upload is checked to have stored
nothing: the key stays absent, or keeps its earlier content.
"""
import os

import pytest
from botocore.exceptions import ClientError

import s3util

ALGS = ("crc32", "crc32c", "sha1", "sha256")


s3 = s3util.client_fixture()
bucket = s3util.bucket_fixture("ck")


def absent(s3, bucket, key):
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=bucket, Key=key)
    return ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def body_of(s3, bucket, key):
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


# ---- trailer forms ----

@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
@pytest.mark.parametrize("alg", ALGS)
def test_trailer_upload(cluster, s3, bucket, signed, alg):
    for size in (0, 5, 64 * 1024, 150 * 1024 + 3):
        if alg == "crc32c" and size > 70000:
            continue  # the pure-Python CRC-32C is too slow for the big body
        data = os.urandom(size)
        key = "t-%s-%d" % (alg, size)
        r = s3util.put_trailer(cluster, "/%s/%s" % (bucket, key), data, "x-amz-checksum-" + alg,
                               s3util.checksum_b64(alg, data), signed=signed)
        assert r.status_code == 200, r.text
        assert body_of(s3, bucket, key) == data


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_trailer_checksum_mismatch_stores_nothing(cluster, s3, bucket, signed):
    data = os.urandom(100 * 1024)
    s3.put_object(Bucket=bucket, Key="kept", Body=b"old")
    for key in ("new", "kept"):
        r = s3util.put_trailer(cluster, "/%s/%s" % (bucket, key), data, "x-amz-checksum-crc32",
                               s3util.checksum_b64("crc32", data + b"x"), signed=signed)
        assert r.status_code == 400, r.text
        assert s3util.xml_error(r)[0] == "BadDigest"
    assert absent(s3, bucket, "new")
    assert body_of(s3, bucket, "kept") == b"old"


def test_trailer_signature_and_framing_faults(cluster, s3, bucket):
    data = os.urandom(70 * 1024)
    good = s3util.checksum_b64("sha256", data)
    path = "/%s/bad" % bucket
    cases = [
        # a wrong trailer signature; a tampered chunk (chunk signatures break)
        (dict(signed=True, trailer_sig="0" * 64), 403, "SignatureDoesNotMatch"),
        (dict(signed=True, tamper_chunk=0), 403, "SignatureDoesNotMatch"),
        # a trailer value that is no SHA-256
        (dict(value="AAAAAA=="), 400, "InvalidRequest"),
        # no x-amz-trailer; one naming something else than a checksum; a trailer other than announced
        (dict(announce=""), 400, "InvalidRequest"),
        (dict(announce="x-amz-meta-foo"), 400, "InvalidRequest"),
        (dict(announce="x-amz-checksum-crc32"), 400, "IncompleteBody"),
        # a trailer checksum and a header checksum at once
        (dict(headers={"x-amz-checksum-crc32": s3util.checksum_b64("crc32", data)}), 400, "InvalidRequest"),
        # a CRC64NVME trailer that is not the body's
        (dict(name="x-amz-checksum-crc64nvme", value="AAAAAAAAAAA="), 400, "BadDigest"),
    ]
    for kw, status, code in cases:
        kw = dict(kw)
        name = kw.pop("name", "x-amz-checksum-sha256")
        value = kw.pop("value", good)
        r = s3util.put_trailer(cluster, path, data, name, value, **kw)
        assert (r.status_code, s3util.xml_error(r)[0]) == (status, code), (kw, r.text)
        assert absent(s3, bucket, "bad"), kw


def test_trailer_cut_body_stores_nothing(cluster, s3, bucket):
    """A body that ends inside the trailer: nothing stored."""
    ak, sk = s3util.keys(cluster)
    signer = s3util.Signer(ak, sk)
    data = os.urandom(10000)
    url = s3util.endpoint(cluster) + "/%s/cut" % bucket
    body = s3util.trailer_body(signer, data, "x-amz-checksum-crc32", s3util.checksum_b64("crc32", data), False)
    body = body[:-2]  # without the empty line that ends the trailer
    h = signer.sign("PUT", url, {"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)),
                                 "x-amz-trailer": "x-amz-checksum-crc32", "Content-Length": str(len(body))},
                    s3util.UNSIGNED_TRAILER)
    r = s3util.session().put(url, data=body, headers=h, timeout=60)
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "IncompleteBody", r.text
    assert absent(s3, bucket, "cut")


# ---- header checksums (boto3) ----

@pytest.mark.parametrize("alg", ALGS)
def test_header_checksum_put(s3, bucket, alg):
    data = os.urandom(200 * 1024 if alg != "crc32c" else 3000)
    arg = "Checksum" + alg.upper()
    r = s3.put_object(Bucket=bucket, Key="h-" + alg, Body=data, **{arg: s3util.checksum_b64(alg, data)})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert body_of(s3, bucket, "h-" + alg) == data
    # boto3 computing it itself
    if alg != "crc32c":
        s3.put_object(Bucket=bucket, Key="a-" + alg, Body=data, ChecksumAlgorithm=alg.upper())
        assert body_of(s3, bucket, "a-" + alg) == data


@pytest.mark.parametrize("alg", ALGS)
def test_header_checksum_mismatch(s3, bucket, alg):
    data = os.urandom(50 * 1024)
    s3.put_object(Bucket=bucket, Key="kept", Body=b"old")
    wrong = s3util.checksum_b64(alg, b"other")
    for key in ("new", "kept"):
        with pytest.raises(ClientError) as ei:
            s3.put_object(Bucket=bucket, Key=key, Body=data, **{"Checksum" + alg.upper(): wrong})
        assert s3util.error_code(ei.value) == "BadDigest"
        assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert absent(s3, bucket, "new")
    assert body_of(s3, bucket, "kept") == b"old"


def test_header_checksum_malformed(cluster, s3, bucket):
    for headers, status, code in [({"x-amz-checksum-crc32": "AAAA"}, 400, "InvalidRequest"),
                                  ({"x-amz-checksum-sha1": "y/Q5Jg=="}, 400, "InvalidRequest"),
                                  ({"x-amz-checksum-crc32": "y/Q5Jg==", "x-amz-checksum-sha1": "x"}, 400,
                                   "InvalidRequest"),
                                  ({"x-amz-checksum-crc64nvme": "y/Q5Jg=="}, 400, "InvalidRequest"),
                                  ({"x-amz-checksum-crc64nvme": "AAAAAAAAAAA="}, 400, "BadDigest")]:
        r = s3util.signed_request(cluster, "PUT", "/%s/m" % bucket, body=b"123456789", headers=headers)
        assert (r.status_code, s3util.xml_error(r)[0]) == (status, code), (headers, r.text)
    assert absent(s3, bucket, "m")
    r = s3util.signed_request(cluster, "PUT", "/%s/m" % bucket, body=b"123456789",
                              headers={"x-amz-checksum-crc32": "y/Q5Jg=="})
    assert r.status_code == 200, r.text


def test_upload_part_checksums(s3, bucket):
    data = os.urandom(5 * 1024 * 1024)
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    with pytest.raises(ClientError) as ei:
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, Body=data,
                       ChecksumSHA256=s3util.checksum_b64("sha256", b"x"))
    assert s3util.error_code(ei.value) == "BadDigest"
    assert s3.list_parts(Bucket=bucket, Key="mp", UploadId=up).get("Parts", []) == []
    r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, Body=data,
                       ChecksumSHA256=s3util.checksum_b64("sha256", data))
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    assert body_of(s3, bucket, "mp") == data


# ---- stored with the object, returned with x-amz-checksum-mode: ENABLED ----

def get_raw(cluster, bucket, key, method="GET", headers=None):
    return s3util.signed_request(cluster, method, "/%s/%s" % (bucket, key), headers=headers)


@pytest.mark.parametrize("alg", ALGS + ("crc64nvme",))
def test_checksum_kept_and_returned(cluster, s3, bucket, alg):
    data = os.urandom(100 * 1024 + 7 if alg != "crc32c" else 3000)
    value = s3util.checksum_b64(alg, data)
    hdr = "x-amz-checksum-" + alg
    r = s3util.signed_request(cluster, "PUT", "/%s/k" % bucket, body=data, headers={hdr: value})
    assert r.status_code == 200, r.text
    assert r.headers.get(hdr) == value  # PutObject answers with the checksum it stored
    for method in ("GET", "HEAD"):
        r = get_raw(cluster, bucket, "k", method, {"x-amz-checksum-mode": "ENABLED"})
        assert r.status_code == 200
        assert r.headers.get(hdr) == value and r.headers.get("x-amz-checksum-type") == "FULL_OBJECT", r.headers
        r = get_raw(cluster, bucket, "k", method)
        assert hdr not in r.headers  # only when asked for
    r = get_raw(cluster, bucket, "k", "GET", {"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-9"})
    assert r.status_code == 206 and hdr not in r.headers  # a range has no checksum of its own
    if alg in ("crc32", "sha1", "sha256"):  # botocore 1.29 knows these; it validates what comes back
        g = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
        assert g["Body"].read() == data and g["Checksum" + alg.upper()] == value
    # an overwrite without a checksum keeps none
    s3.put_object(Bucket=bucket, Key="k", Body=b"plain")
    assert hdr not in get_raw(cluster, bucket, "k", "HEAD", {"x-amz-checksum-mode": "ENABLED"}).headers


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_trailer_checksum_kept(cluster, s3, bucket, signed):
    data = os.urandom(70 * 1024)
    r = s3util.put_trailer(cluster, "/%s/t" % bucket, data, "x-amz-checksum-crc32",
                           s3util.checksum_b64("crc32", data), signed=signed)
    assert r.status_code == 200, r.text
    h = s3.head_object(Bucket=bucket, Key="t", ChecksumMode="ENABLED")
    assert h["ChecksumCRC32"] == s3util.checksum_b64("crc32", data)


def test_crc64nvme_trailer(cluster, s3, bucket):
    data = os.urandom(33 * 1024)
    r = s3util.put_trailer(cluster, "/%s/c64" % bucket, data, "x-amz-checksum-crc64nvme",
                           s3util.checksum_b64("crc64nvme", data), signed=False)
    assert r.status_code == 200, r.text
    r = get_raw(cluster, bucket, "c64", "HEAD", {"x-amz-checksum-mode": "ENABLED"})
    assert r.headers["x-amz-checksum-crc64nvme"] == s3util.checksum_b64("crc64nvme", data)


# ---- multipart: parts, COMPOSITE and FULL_OBJECT ----

MIB5 = 5 * 1024 * 1024


def with_header(s3, op, name, value):
    """Adds a header to the next requests of operation op (botocore 1.29 has no parameter for it)."""
    def add(request, **kw):
        request.headers[name] = value
    s3.meta.events.register("before-sign.s3.%s" % op, add)
    return add


def test_multipart_composite(cluster, s3, bucket):
    import base64
    import hashlib
    parts = [os.urandom(MIB5), os.urandom(1000)]
    up = s3.create_multipart_upload(Bucket=bucket, Key="comp", ChecksumAlgorithm="SHA256")
    assert up.get("ChecksumAlgorithm") == "SHA256"
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="comp", UploadId=up["UploadId"], PartNumber=i, Body=p,
                           ChecksumAlgorithm="SHA256")
        assert r["ChecksumSHA256"] == s3util.checksum_b64("sha256", p)
        done.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumSHA256": r["ChecksumSHA256"]})
    # a part checksum that is not the stored part's
    bad = [dict(done[0], ChecksumSHA256=s3util.checksum_b64("sha256", b"x")), done[1]]
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="comp", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": bad})
    assert s3util.error_code(ei.value) == "InvalidPart"
    r = s3.complete_multipart_upload(Bucket=bucket, Key="comp", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": done})
    want = base64.b64encode(hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).digest())
    want = want.decode() + "-2"
    assert r["ChecksumSHA256"] == want
    h = get_raw(cluster, bucket, "comp", "HEAD", {"x-amz-checksum-mode": "ENABLED"})
    assert h.headers["x-amz-checksum-sha256"] == want and h.headers["x-amz-checksum-type"] == "COMPOSITE"
    assert body_of(s3, bucket, "comp") == b"".join(parts)


def test_multipart_full_object_crc(cluster, s3, bucket):
    parts = [os.urandom(MIB5), os.urandom(4321)]
    data = b"".join(parts)
    hook = with_header(s3, "CreateMultipartUpload", "x-amz-checksum-type", "FULL_OBJECT")
    try:
        up = s3.create_multipart_upload(Bucket=bucket, Key="full", ChecksumAlgorithm="CRC32")["UploadId"]
    finally:
        s3.meta.events.unregister("before-sign.s3.CreateMultipartUpload", hook)
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="full", UploadId=up, PartNumber=i, Body=p,
                           ChecksumCRC32=s3util.checksum_b64("crc32", p))
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    # the object's checksum the client expects, wrong: BadDigest, nothing stored, the upload stays
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="full", UploadId=up, MultipartUpload={"Parts": done},
                                     ChecksumCRC32=s3util.checksum_b64("crc32", b"nope"))
    assert s3util.error_code(ei.value) == "BadDigest", ei.value.response
    assert absent(s3, bucket, "full")
    r = s3.complete_multipart_upload(Bucket=bucket, Key="full", UploadId=up, MultipartUpload={"Parts": done},
                                     ChecksumCRC32=s3util.checksum_b64("crc32", data))
    assert r["ChecksumCRC32"] == s3util.checksum_b64("crc32", data)
    g = s3.get_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")  # botocore validates it
    assert g["Body"].read() == data and g["ChecksumCRC32"] == s3util.checksum_b64("crc32", data)


def test_multipart_checksum_faults(cluster, s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="f", ChecksumAlgorithm="CRC32")["UploadId"]
    with pytest.raises(ClientError) as ei:  # a part checksummed with another algorithm
        s3.upload_part(Bucket=bucket, Key="f", UploadId=up, PartNumber=1, Body=b"abc",
                       ChecksumSHA1=s3util.checksum_b64("sha1", b"abc"))
    assert s3util.error_code(ei.value) == "InvalidRequest"
    s3.abort_multipart_upload(Bucket=bucket, Key="f", UploadId=up)
    for headers in ({"x-amz-checksum-algorithm": "MD5"},
                    {"x-amz-checksum-algorithm": "SHA1", "x-amz-checksum-type": "FULL_OBJECT"},
                    {"x-amz-checksum-algorithm": "CRC64NVME", "x-amz-checksum-type": "COMPOSITE"},
                    {"x-amz-checksum-type": "FULL_OBJECT"}):
        r = s3util.signed_request(cluster, "POST", "/%s/f?uploads=" % bucket, headers=headers)
        assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidRequest", (headers, r.text)
    # CRC64NVME: FULL_OBJECT by default; the SDK-less client sends the parts' CRCs as headers
    r = s3util.signed_request(cluster, "POST", "/%s/c?uploads=" % bucket,
                              headers={"x-amz-checksum-algorithm": "CRC64NVME"})
    assert r.status_code == 200 and r.headers["x-amz-checksum-type"] == "FULL_OBJECT", r.text


def test_copy_keeps_the_algorithm(s3, bucket):
    data = os.urandom(20000)
    s3.put_object(Bucket=bucket, Key="src", Body=data, ChecksumAlgorithm="SHA256")
    s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    h = s3.head_object(Bucket=bucket, Key="dst", ChecksumMode="ENABLED")
    assert h["ChecksumSHA256"] == s3util.checksum_b64("sha256", data)
