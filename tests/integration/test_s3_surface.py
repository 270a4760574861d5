# SPDX-License-Identifier: Apache-2.0
# The rest of the S3 surface clients call: ListObjectVersions, GetBucketVersioning, ListBuckets paging, GetObjectAttributes, EncodingType=url, presign and range errors, non-ASCII metadata.
"""
boto3 1.26 (botocore 1.29) has no MaxBuckets parameter: ListBuckets paging goes through s3util's
signer. Everything else uses boto3 as it is.
"""
import base64
import hashlib
import os
import xml.etree.ElementTree as ET

import pytest
import requests
from botocore.exceptions import ClientError

import s3util

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"

s3 = s3util.client_fixture()
bucket = s3util.bucket_fixture("surf")


def code_status(ei):
    return s3util.error_code(ei.value), ei.value.response["ResponseMetadata"]["HTTPStatusCode"]


def test_versioning_never_enabled_and_list_object_versions(s3, bucket):
    v = s3.get_bucket_versioning(Bucket=bucket)
    assert "Status" not in v and "MFADelete" not in v
    keys = ["a", "b/1", "b/2", "c", "d%e+f g"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    r = s3.list_object_versions(Bucket=bucket)
    assert [x["Key"] for x in r["Versions"]] == keys
    assert all(x["VersionId"] == "null" and x["IsLatest"] for x in r["Versions"])
    assert [x["Size"] for x in r["Versions"]] == [len(k) for k in keys]
    assert "DeleteMarkers" not in r and r["IsTruncated"] is False
    seen = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, PaginationConfig={"PageSize": 2}):
        seen += [x["Key"] for x in page.get("Versions", [])]
    assert seen == keys  # every object once
    r = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [x["Key"] for x in r["Versions"]] == ["a", "c", "d%e+f g"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["b/"]
    r = s3.list_object_versions(Bucket=bucket, Prefix="b/", KeyMarker="b/1")
    assert [x["Key"] for x in r["Versions"]] == ["b/2"]
    with pytest.raises(ClientError) as ei:
        s3.list_object_versions(Bucket=bucket, VersionIdMarker="null")
    assert code_status(ei) == ("InvalidArgument", 400)
    # GET with versionId=null is the object
    assert s3.get_object(Bucket=bucket, Key="a", VersionId="null")["Body"].read() == b"a"


def test_list_buckets_paging(cluster, s3):
    names = sorted(s3util.bucket_name("lbp") for _ in range(3))
    for n in names:
        s3.create_bucket(Bucket=n)
    try:
        got, token, pages = [], None, 0
        while True:
            q = "/?max-buckets=2&prefix=lbp-" + ("&continuation-token=" + requests.utils.quote(token, safe="")
                                                 if token else "")
            r = s3util.signed_request(cluster, "GET", q)
            assert r.status_code == 200, r.text
            root = ET.fromstring(r.content)
            got += [b.findtext(NS + "Name") for b in root.iter(NS + "Bucket")]
            pages += 1
            token = root.findtext(NS + "ContinuationToken")
            if not token:
                break
        assert [g for g in got if g in names] == names and pages >= 2
        assert got == sorted(got)
        for bad in ("max-buckets=0", "max-buckets=10001", "max-buckets=x", "continuation-token=%21%21"):
            r = s3util.signed_request(cluster, "GET", "/?" + bad)
            assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidArgument", (bad, r.text)
        assert set(names) <= {b["Name"] for b in s3.list_buckets()["Buckets"]}
    finally:
        for n in names:
            s3.delete_bucket(Bucket=n)


def test_get_bucket_location(s3, bucket):
    assert s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") is None  # us-east-1


def test_get_object_attributes(s3, bucket):
    data = os.urandom(3000)
    etag = s3.put_object(Bucket=bucket, Key="o", Body=data, ChecksumAlgorithm="SHA256")["ETag"]
    r = s3.get_object_attributes(Bucket=bucket, Key="o",
                                 ObjectAttributes=["ETag", "Checksum", "ObjectSize", "StorageClass", "ObjectParts"])
    assert r["ETag"] == etag.strip('"') and r["ObjectSize"] == len(data) and r["StorageClass"] == "STANDARD"
    assert r["Checksum"]["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert "ObjectParts" not in r and r["LastModified"]
    r = s3.get_object_attributes(Bucket=bucket, Key="o", ObjectAttributes=["ObjectSize"])
    assert r["ObjectSize"] == len(data) and "ETag" not in r
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    parts = [s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=i, Body=b"x" * (5 << 20 if i == 1 else 10))
             for i in (1, 2)]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": i + 1, "ETag": p["ETag"]} for i, p in enumerate(parts)]})
    r = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts", "ObjectSize"])
    assert r["ObjectParts"]["TotalPartsCount"] == 2 and r["ObjectSize"] == (5 << 20) + 10
    with pytest.raises(ClientError) as ei:
        s3.get_object_attributes(Bucket=bucket, Key="none", ObjectAttributes=["ETag"])
    assert code_status(ei) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as ei:
        s3.get_object_attributes(Bucket=bucket, Key="o", ObjectAttributes=["Bogus"])
    assert code_status(ei) == ("InvalidArgument", 400)


def test_encoding_type_url(cluster, s3, bucket):
    keys = ["a\nb/1", "a\nb/2", "p%41q", "plus+sp ace", "x/\u00e9t\u00e9"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"1")
    # boto3 asks for encoding-type=url on every listing and decodes what comes back
    r = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in r["Contents"]] == sorted(keys)
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a\n", Delimiter="/")
    assert r["Prefix"] == "a\n" and r["Delimiter"] == "/"
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a\nb/"]
    r = s3.list_objects(Bucket=bucket, Prefix="a\n", Marker="a\nb/1")
    assert r["Prefix"] == "a\n" and r["Marker"] == "a\nb/1" and [o["Key"] for o in r["Contents"]] == ["a\nb/2"]
    # the raw answer: percent-encoded once, never twice
    q = "/%s?delimiter=%%2F&encoding-type=url&list-type=2&prefix=a%%0A" % bucket
    root = ET.fromstring(s3util.signed_request(cluster, "GET", q).content)
    assert root.findtext(NS + "Prefix") == "a%0A"
    assert root.find(NS + "CommonPrefixes").findtext(NS + "Prefix") == "a%0Ab/"
    root = ET.fromstring(s3util.signed_request(cluster, "GET", "/%s?encoding-type=url&list-type=2&prefix=p" %
                                               bucket).content)
    assert root.find(NS + "Contents").findtext(NS + "Key") == "p%2541q"
    # without encoding-type the names come as they are
    root = ET.fromstring(s3util.signed_request(cluster, "GET", "/%s?list-type=2&prefix=p" % bucket).content)
    assert root.find(NS + "Contents").findtext(NS + "Key") == "p%41q"


def test_presigned_expiry_out_of_range(cluster, bucket):
    c = s3util.client(cluster, signature_version="s3v4")
    for secs in (604801, 10 ** 7):
        url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"}, ExpiresIn=secs)
        r = s3util.session().get(url, timeout=30)
        assert r.status_code == 400 and s3util.xml_error(r)[0] == "AuthorizationQueryParametersError", r.text


def test_range_errors(s3, bucket):
    s3.put_object(Bucket=bucket, Key="r", Body=b"0123456789")
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=100-200")
    assert code_status(ei) == ("InvalidRange", 416)
    # a Range S3 cannot parse is ignored: the whole object
    for rng in ("bytes=5-2", "bytes=abc", "items=0-1", "bytes=0-1,3-4"):
        g = s3.get_object(Bucket=bucket, Key="r", Range=rng)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 200 and g["Body"].read() == b"0123456789", rng


def put_with_raw_meta(cluster, bucket, key, raw):
    """PUT with x-amz-meta-note as the bytes raw, left out of the signature (as an unsigned header)."""
    ak, sk = s3util.keys(cluster)
    url = s3util.endpoint(cluster) + "/%s/%s" % (bucket, key)
    h = s3util.Signer(ak, sk).sign("PUT", url, {}, hashlib.sha256(b"1").hexdigest())
    h["x-amz-meta-note"] = raw
    return s3util.session().put(url, data=b"1", headers=h, timeout=30)


@pytest.mark.parametrize("value", ["caf\u00e9", "\u65e5\u672c\u8a9e \u2713"])
def test_non_ascii_metadata_utf8(cluster, s3, bucket, value):
    """UTF-8 metadata comes back RFC 2047 encoded, as S3 sends it (botocore 1.29 refuses to send
    non-ASCII metadata itself: those clients send the encoded form, which is kept as it is)."""
    import email.header
    r = put_with_raw_meta(cluster, bucket, "nm", value.encode())
    assert r.status_code == 200, r.text
    got = s3.head_object(Bucket=bucket, Key="nm")["Metadata"]["note"]
    assert got.startswith("=?UTF-8?B?")
    (text, charset), = email.header.decode_header(got)
    assert text.decode(charset) == value
    enc = email.header.Header(value, "utf-8").encode()
    s3.put_object(Bucket=bucket, Key="nm2", Body=b"1", Metadata={"note": enc})
    assert s3.get_object(Bucket=bucket, Key="nm2")["Metadata"]["note"] == enc


def test_latin1_metadata_goes_back_as_sent(cluster, s3, bucket):
    """Node's HTTP client (the JS SDK) sends a Latin-1 value as Latin-1 bytes: they go back as they came."""
    r = put_with_raw_meta(cluster, bucket, "l1", "caf\u00e9".encode("latin-1"))
    assert r.status_code == 200, r.text
    assert s3.head_object(Bucket=bucket, Key="l1")["Metadata"]["note"] == "caf\u00e9"
