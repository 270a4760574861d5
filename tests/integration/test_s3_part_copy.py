# SPDX-License-Identifier: Apache-2.0
# S3 UploadPartCopy (x-amz-copy-source on UploadPart, with and without x-amz-copy-source-range) with stock boto3.
import hashlib
import os

import pytest
from botocore.exceptions import ClientError

import s3util

MIB = 1 << 20

s3 = s3util.client_fixture(read_timeout=120)
bucket = s3util.bucket_fixture("pcopy")


def md5q(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


def code_and_status(exc_info):
    r = exc_info.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def test_parts_copied_from_ranges_and_whole_objects(s3, bucket):
    big = os.urandom(12 * MIB + 123)
    small = os.urandom(1000)
    s3.put_object(Bucket=bucket, Key="src/big", Body=big)
    other = s3util.bucket_name("pcsrc")
    s3.create_bucket(Bucket=other)
    try:
        s3.put_object(Bucket=other, Key="small one", Body=small)  # another bucket, a key to escape
        up = s3.create_multipart_upload(Bucket=bucket, Key="joined")["UploadId"]
        half = 6 * MIB
        r1 = s3.upload_part_copy(Bucket=bucket, Key="joined", UploadId=up, PartNumber=1,
                                 CopySource={"Bucket": bucket, "Key": "src/big"},
                                 CopySourceRange="bytes=0-%d" % (half - 1))
        r2 = s3.upload_part_copy(Bucket=bucket, Key="joined", UploadId=up, PartNumber=2,
                                 CopySource={"Bucket": bucket, "Key": "src/big"},
                                 CopySourceRange="bytes=%d-%d" % (half, len(big) - 1))
        middle = os.urandom(5 * MIB)
        r3 = s3.upload_part(Bucket=bucket, Key="joined", UploadId=up, PartNumber=3, Body=middle)
        r4 = s3.upload_part_copy(Bucket=bucket, Key="joined", UploadId=up, PartNumber=4,
                                 CopySource={"Bucket": other, "Key": "small one"})
        assert r1["CopyPartResult"]["ETag"] == md5q(big[:half])
        assert r2["CopyPartResult"]["ETag"] == md5q(big[half:])
        assert r4["CopyPartResult"]["ETag"] == md5q(small)
        assert r1["CopyPartResult"]["LastModified"] is not None
        listed = s3.list_parts(Bucket=bucket, Key="joined", UploadId=up)["Parts"]
        assert [(p["PartNumber"], p["Size"]) for p in listed] == [
            (1, half), (2, len(big) - half), (3, len(middle)), (4, len(small))]
        parts = [{"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]},
                 {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]},
                 {"PartNumber": 3, "ETag": r3["ETag"]},
                 {"PartNumber": 4, "ETag": r4["CopyPartResult"]["ETag"]}]
        s3.complete_multipart_upload(Bucket=bucket, Key="joined", UploadId=up, MultipartUpload={"Parts": parts})
        got = s3.get_object(Bucket=bucket, Key="joined")["Body"].read()
        assert hashlib.md5(got).digest() == hashlib.md5(big + middle + small).digest()
    finally:
        s3.delete_object(Bucket=other, Key="small one")
        s3.delete_bucket(Bucket=other)


def test_single_byte_and_last_byte_ranges(s3, bucket):
    data = os.urandom(4096)
    s3.put_object(Bucket=bucket, Key="src", Body=data)
    up = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    r = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=up, PartNumber=1,
                            CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange="bytes=4095-4095")
    assert r["CopyPartResult"]["ETag"] == md5q(data[4095:])
    s3.complete_multipart_upload(Bucket=bucket, Key="dst", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == data[4095:]


def refused_range(s3, bucket, rng):
    """UploadPartCopy from a 10-byte source with CopySourceRange rng must fail with InvalidArgument
    (400) and store no part. Returns the error message."""
    s3.put_object(Bucket=bucket, Key="src", Body=b"0123456789")
    up = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    with pytest.raises(ClientError) as ei:
        s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=up, PartNumber=1,
                            CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange=rng)
    assert code_and_status(ei) == ("InvalidArgument", 400)
    assert s3.list_parts(Bucket=bucket, Key="dst", UploadId=up).get("Parts", []) == []
    return ei.value.response["Error"]["Message"]


@pytest.mark.parametrize("rng", ["bytes=0-", "0-10", "bytes=-5", "bytes=5-2", "bytes=0-1,3-4", "bytes=a-b",
                                 "bytes=1-2x"])
def test_malformed_range_is_invalid_argument(s3, bucket, rng):
    refused_range(s3, bucket, rng)


@pytest.mark.parametrize("rng", ["bytes=0-10", "bytes=10-12", "bytes=5-100"])
def test_range_outside_the_source_is_refused(s3, bucket, rng):
    """As S3: InvalidArgument "Range specified is not valid for source object of size: N"; nothing stored."""
    assert "size: 10" in refused_range(s3, bucket, rng)


def test_part_copy_errors(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"abc")
    up = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    cases = [
        (dict(CopySource={"Bucket": bucket, "Key": "missing"}, UploadId=up), ("NoSuchKey", 404)),
        (dict(CopySource={"Bucket": "no-such-bucket-pc", "Key": "src"}, UploadId=up), ("NoSuchBucket", 404)),
        (dict(CopySource={"Bucket": bucket, "Key": "src"}, UploadId="A" * 32), ("NoSuchUpload", 404)),
        (dict(CopySource={"Bucket": bucket, "Key": "src"}, UploadId=up, CopySourceIfMatch='"0000"'),
         ("PreconditionFailed", 412)),
    ]
    for kw, want in cases:
        with pytest.raises(ClientError) as ei:
            s3.upload_part_copy(Bucket=bucket, Key="dst", PartNumber=1, **kw)
        assert code_and_status(ei) == want, kw
    assert s3.list_parts(Bucket=bucket, Key="dst", UploadId=up).get("Parts", []) == []
    # the condition that holds copies
    r = s3.upload_part_copy(Bucket=bucket, Key="dst", PartNumber=1, UploadId=up,
                            CopySource={"Bucket": bucket, "Key": "src"}, CopySourceIfMatch=md5q(b"abc"))
    assert r["CopyPartResult"]["ETag"] == md5q(b"abc")
