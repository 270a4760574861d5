# SPDX-License-Identifier: Apache-2.0
# S3 object metadata (Content-Type, x-amz-meta-*) through PutObject, CopyObject, multipart uploads and GET/HEAD: boto3 and aws CLI.
"""
The proxy passes the Content-Type and x-amz-meta-* of a PutObject, a CopyObject (directive COPY:
the source's; REPLACE: the request's) and a CreateMultipartUpload to the target, which keeps them
with the object and sends them back on GET and HEAD (target/core/objmeta.c, target/obj/mpu.c).
"""
import hashlib
import io
import json
import os
import subprocess

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

import s3util

MIB = 1 << 20
AWS = "/usr/bin/aws"

s3 = s3util.client_fixture(read_timeout=120)
bucket = s3util.bucket_fixture("meta")


META = {"owner": "team-a", "label": "cats and dogs", "epoch": "7"}


def test_put_then_get_and_head_return_metadata(s3, bucket):
    data = os.urandom(3000)
    s3.put_object(Bucket=bucket, Key="img/1.jpg", Body=data, ContentType="image/jpeg", Metadata=META)
    h = s3.head_object(Bucket=bucket, Key="img/1.jpg")
    assert h["ContentType"] == "image/jpeg"
    assert h["Metadata"] == META
    assert h["ContentLength"] == len(data)
    g = s3.get_object(Bucket=bucket, Key="img/1.jpg")
    assert g["ContentType"] == "image/jpeg"
    assert g["Metadata"] == META
    assert g["Body"].read() == data
    # a range keeps them; a response-content-type override wins over the stored type
    g = s3.get_object(Bucket=bucket, Key="img/1.jpg", Range="bytes=10-19")
    assert g["ContentType"] == "image/jpeg" and g["Metadata"] == META and g["Body"].read() == data[10:20]
    g = s3.get_object(Bucket=bucket, Key="img/1.jpg", ResponseContentType="text/plain")
    assert g["ContentType"] == "text/plain" and g["Metadata"] == META


def test_overwrite_replaces_metadata(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"one", ContentType="text/plain", Metadata={"a": "1"})
    s3.put_object(Bucket=bucket, Key="k", Body=b"two")
    h = s3.head_object(Bucket=bucket, Key="k")
    assert h["Metadata"] == {}
    assert h["ContentType"] == "application/octet-stream"


def test_metadata_names_are_case_insensitive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Metadata={"MixedCase": "Value Kept"})
    assert s3.head_object(Bucket=bucket, Key="k")["Metadata"] == {"mixedcase": "Value Kept"}


def test_metadata_too_large_is_refused(s3, bucket):
    with pytest.raises(ClientError) as ei:
        s3.put_object(Bucket=bucket, Key="big", Body=b"x", Metadata={"m": "v" * 2100})
    assert s3util.error_code(ei.value) == "MetadataTooLarge"
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=bucket, Key="big")
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404  # nothing stored


def test_copy_object_directive_copy_and_replace(s3, bucket):
    data = os.urandom(70000)
    s3.put_object(Bucket=bucket, Key="src", Body=data, ContentType="video/mp4", Metadata=META)
    # COPY (the default): the source's metadata, even when the request carries other
    s3.copy_object(Bucket=bucket, Key="copied", CopySource={"Bucket": bucket, "Key": "src"},
                   ContentType="text/ignored", Metadata={"ignored": "yes"})
    h = s3.head_object(Bucket=bucket, Key="copied")
    assert h["ContentType"] == "video/mp4" and h["Metadata"] == META
    s3.copy_object(Bucket=bucket, Key="copied2", CopySource={"Bucket": bucket, "Key": "src"},
                   MetadataDirective="COPY")
    h = s3.head_object(Bucket=bucket, Key="copied2")
    assert h["ContentType"] == "video/mp4" and h["Metadata"] == META
    # REPLACE: the request's metadata only
    s3.copy_object(Bucket=bucket, Key="replaced", CopySource={"Bucket": bucket, "Key": "src"},
                   MetadataDirective="REPLACE", ContentType="application/x-new", Metadata={"fresh": "1"})
    g = s3.get_object(Bucket=bucket, Key="replaced")
    assert g["ContentType"] == "application/x-new" and g["Metadata"] == {"fresh": "1"}
    assert g["Body"].read() == data
    # REPLACE onto itself changes the metadata in place, data unchanged
    s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"second": "version"})
    g = s3.get_object(Bucket=bucket, Key="src")
    assert g["Metadata"] == {"second": "version"}
    assert g["ContentType"] == "application/octet-stream"
    assert g["Body"].read() == data


def test_copy_object_bad_directive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"x")
    with pytest.raises(ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"},
                       MetadataDirective="MERGE")
    assert s3util.error_code(ei.value) == "InvalidArgument"


def test_multipart_keeps_metadata_of_create(s3, bucket):
    """upload_file above the multipart threshold: CreateMultipartUpload carries the metadata."""
    data = os.urandom(11 * MIB)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=2)
    s3.upload_fileobj(io.BytesIO(data), bucket, "model.bin", Config=cfg,
                      ExtraArgs={"ContentType": "application/x-model", "Metadata": {"step": "1200"}})
    h = s3.head_object(Bucket=bucket, Key="model.bin")
    assert h["ETag"].endswith('-3"'), h["ETag"]  # it was a multipart upload
    assert h["ContentType"] == "application/x-model"
    assert h["Metadata"] == {"step": "1200"}
    g = s3.get_object(Bucket=bucket, Key="model.bin")
    assert g["Metadata"] == {"step": "1200"}
    assert hashlib.md5(g["Body"].read()).digest() == hashlib.md5(data).digest()


def test_multipart_without_metadata_has_none(s3, bucket):
    u = s3.create_multipart_upload(Bucket=bucket, Key="plain")["UploadId"]
    e = s3.upload_part(Bucket=bucket, Key="plain", UploadId=u, PartNumber=1, Body=b"abc")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="plain", UploadId=u,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    h = s3.head_object(Bucket=bucket, Key="plain")
    assert h["Metadata"] == {} and h["ContentType"] == "application/octet-stream"


def test_multipart_metadata_too_large_is_refused(s3, bucket):
    with pytest.raises(ClientError) as ei:
        s3.create_multipart_upload(Bucket=bucket, Key="k", Metadata={"m": "v" * 2100})
    assert s3util.error_code(ei.value) == "MetadataTooLarge"
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_aws_cli_cp_content_type_and_metadata(cluster, bucket, tmp_path):
    env = s3util.aws_cli_env(cluster, tmp_path)
    f = tmp_path / "notes.bin"
    f.write_bytes(os.urandom(5000))
    cli = [s3util.require_tool(AWS), "--endpoint-url", s3util.endpoint(cluster)]

    def run(*args):
        p = subprocess.run(cli + list(args), env=env, capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
        return p.stdout.decode()

    run("s3", "cp", "--no-progress", "--content-type", "text/x-notes", "--metadata", "source=cli,run=3",
        str(f), "s3://%s/notes.bin" % bucket)
    h = json.loads(run("s3api", "head-object", "--bucket", bucket, "--key", "notes.bin"))
    assert h["ContentType"] == "text/x-notes"
    assert h["Metadata"] == {"source": "cli", "run": "3"}
    # cp without --content-type guesses from the name, as against S3
    t = tmp_path / "page.html"
    t.write_bytes(b"<html></html>")
    run("s3", "cp", "--no-progress", str(t), "s3://%s/page.html" % bucket)
    h = json.loads(run("s3api", "head-object", "--bucket", bucket, "--key", "page.html"))
    assert h["ContentType"] == "text/html"


def test_empty_metadata_value_is_kept(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Metadata={"empty": "", "full": "v"})
    assert s3.head_object(Bucket=bucket, Key="k")["Metadata"] == {"empty": "", "full": "v"}
    s3.copy_object(Bucket=bucket, Key="k2", CopySource={"Bucket": bucket, "Key": "k"})
    assert s3.head_object(Bucket=bucket, Key="k2")["Metadata"] == {"empty": "", "full": "v"}


STD = {"CacheControl": "max-age=3600, public", "ContentDisposition": 'attachment; filename="a b.bin"',
       "ContentEncoding": "gzip", "ContentLanguage": "de-CH", "Expires": "Wed, 21 Oct 2037 07:28:00 GMT"}


def std_of(resp):
    out = {k: resp.get(k) for k in STD}
    if out["Expires"] is not None:  # botocore parses it into a datetime
        out["Expires"] = resp["ResponseMetadata"]["HTTPHeaders"]["expires"]
    return out


def test_standard_headers_kept(s3, bucket):
    s3.put_object(Bucket=bucket, Key="std", Body=b"x" * 100, **STD)
    assert std_of(s3.head_object(Bucket=bucket, Key="std")) == STD
    assert std_of(s3.get_object(Bucket=bucket, Key="std")) == STD
    # a response-* override replaces the stored one, not adds a second
    g = s3.get_object(Bucket=bucket, Key="std", ResponseCacheControl="no-store")
    assert g["CacheControl"] == "no-store"
    # CopyObject COPY keeps them, REPLACE takes the request's; an overwrite without them keeps none
    s3.copy_object(Bucket=bucket, Key="std2", CopySource={"Bucket": bucket, "Key": "std"})
    assert std_of(s3.head_object(Bucket=bucket, Key="std2")) == STD
    s3.copy_object(Bucket=bucket, Key="std3", CopySource={"Bucket": bucket, "Key": "std"},
                   MetadataDirective="REPLACE", CacheControl="no-cache")
    h = s3.head_object(Bucket=bucket, Key="std3")
    assert h["CacheControl"] == "no-cache" and h.get("ContentEncoding") is None
    s3.put_object(Bucket=bucket, Key="std", Body=b"y")
    assert std_of(s3.head_object(Bucket=bucket, Key="std")) == dict.fromkeys(STD)


def test_standard_headers_multipart(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mstd", **STD)["UploadId"]
    r = s3.upload_part(Bucket=bucket, Key="mstd", UploadId=up, PartNumber=1, Body=b"z" * 10)
    s3.complete_multipart_upload(Bucket=bucket, Key="mstd", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    assert std_of(s3.head_object(Bucket=bucket, Key="mstd")) == STD


def test_aws_chunked_is_not_a_content_encoding(cluster, s3, bucket):
    r = s3util.put_aws_chunked(cluster, "/%s/ch" % bucket, b"q" * 1000)
    assert r.status_code == 200, r.text
    assert s3.head_object(Bucket=bucket, Key="ch").get("ContentEncoding") is None


def test_standard_headers_too_large_refused(cluster, s3, bucket):
    r = s3util.signed_request(cluster, "PUT", "/%s/big" % bucket, body=b"1", headers={"Cache-Control": "a" * 700})
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidArgument", r.text
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="big")
