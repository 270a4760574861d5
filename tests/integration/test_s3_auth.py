# SPDX-License-Identifier: Apache-2.0
# S3 authentication and routing: SigV4 header/presigned/aws-chunked checks with the right error codes, SigV2, anonymous mode, / and virtual hosts.
import datetime
import hashlib
import os
import time

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

import s3util
from ftutil import session


@pytest.fixture(scope="module")
def s3(cluster):
    return s3util.client(cluster)


@pytest.fixture(scope="module")
def bucket(s3):
    name = s3util.bucket_name("auth")
    s3.create_bucket(Bucket=name)
    yield name
    for o in s3.list_objects_v2(Bucket=name).get("Contents", []):
        s3.delete_object(Bucket=name, Key=o["Key"])
    s3.delete_bucket(Bucket=name)


def code_of(fn, *a, **kw):
    with pytest.raises(ClientError) as ei:
        fn(*a, **kw)
    return s3util.error_code(ei.value), ei.value.response["ResponseMetadata"]["HTTPStatusCode"]


def assert_absent(s3, bucket, key):
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=bucket, Key=key)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


# ---- header form ----

def test_wrong_secret(cluster, bucket):
    ak, sk = s3util.keys(cluster)
    bad = s3util.client(cluster, secret=sk[:-1] + ("A" if sk[-1] != "A" else "B"))
    assert code_of(bad.list_objects_v2, Bucket=bucket) == ("SignatureDoesNotMatch", 403)
    assert code_of(bad.put_object, Bucket=bucket, Key="w", Body=b"x") == ("SignatureDoesNotMatch", 403)
    assert code_of(bad.list_buckets) == ("SignatureDoesNotMatch", 403)


def test_unknown_access_key(cluster, bucket):
    bad = s3util.client(cluster, access="AKIANOTAREALKEY00000")
    assert code_of(bad.get_object, Bucket=bucket, Key="x") == ("InvalidAccessKeyId", 403)


def test_anonymous_refused_by_default(cluster, bucket):
    anon = s3util.client(cluster, signature_version=UNSIGNED)
    assert code_of(anon.list_objects_v2, Bucket=bucket) == ("AccessDenied", 403)
    r = session().get(s3util.endpoint(cluster) + "/", timeout=10)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "AccessDenied"


def test_skewed_clock(cluster, bucket):
    for minutes in (-20, 20):
        date = s3util.amz_date(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=minutes))
        r = s3util.signed_request(cluster, "GET", "/%s?list-type=2" % bucket, date=date)
        assert r.status_code == 403, r.text
        assert s3util.xml_error(r)[0] == "RequestTimeTooSkewed"
    # within 15 minutes: accepted
    date = s3util.amz_date(datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5))
    assert s3util.signed_request(cluster, "GET", "/%s?list-type=2" % bucket, date=date).status_code == 200


def test_our_signer_agrees(cluster, bucket):
    """An independent SigV4 implementation (s3util.Signer) is accepted: sorted query, encoded keys."""
    r = s3util.signed_request(cluster, "PUT", "/%s/our%%20signer/k%%2Bx" % bucket, body=b"payload")
    assert r.status_code == 200, r.text
    r = s3util.signed_request(cluster, "GET", "/%s?prefix=our%%20&list-type=2&max-keys=3" % bucket)
    assert r.status_code == 200 and b"<Key>our signer/k+x</Key>" in r.content


def test_missing_content_sha256_header(cluster, bucket):
    ak, sk = s3util.keys(cluster)
    signer = s3util.Signer(ak, sk)
    url = s3util.endpoint(cluster) + "/%s?list-type=2" % bucket
    h = signer.sign("GET", url, {}, s3util.EMPTY_SHA256)
    del h["x-amz-content-sha256"]
    r = session().get(url, headers=h, timeout=10)
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidRequest"


def test_unsigned_payload_accepted(cluster, bucket, s3):
    r = s3util.signed_request(cluster, "PUT", "/%s/unsigned" % bucket, body=b"abc", payload_hash="UNSIGNED-PAYLOAD")
    assert r.status_code == 200, r.text
    assert s3.get_object(Bucket=bucket, Key="unsigned")["Body"].read() == b"abc"


def test_payload_hash_mismatch_stores_nothing(cluster, bucket, s3):
    body = os.urandom(300000)
    r = s3util.signed_request(cluster, "PUT", "/%s/shabad" % bucket, body=body,
                              payload_hash=hashlib.sha256(b"other").hexdigest())
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "XAmzContentSHA256Mismatch"
    assert_absent(s3, bucket, "shabad")
    r = s3util.signed_request(cluster, "PUT", "/%s/shabad" % bucket, body=body, payload_hash="nothex")
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidArgument"


# ---- presigned ----

@pytest.mark.parametrize("sigver", ["s3", "s3v4"])
def test_expired_presigned_url(cluster, bucket, s3, sigver):
    s3.put_object(Bucket=bucket, Key="exp", Body=b"e")
    c = s3util.client(cluster, signature_version=sigver)
    url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "exp"}, ExpiresIn=1)
    time.sleep(2.2)
    r = session().get(url, timeout=10)
    assert r.status_code == 403, r.text
    code, msg = s3util.xml_error(r)
    assert code == "AccessDenied" and "expired" in msg.lower()


@pytest.mark.parametrize("sigver", ["s3", "s3v4"])
def test_presigned_wrong_secret(cluster, bucket, sigver):
    ak, sk = s3util.keys(cluster)
    c = s3util.client(cluster, secret=sk + "x", signature_version=sigver)
    url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "exp"}, ExpiresIn=60)
    r = session().get(url, timeout=10)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "SignatureDoesNotMatch"


def test_presigned_put_with_signed_headers(cluster, bucket, s3):
    """rclone-style: a presigned PUT that signs Content-Type and a metadata header."""
    c = s3util.client(cluster, signature_version="s3v4")
    url = c.generate_presigned_url("put_object", ExpiresIn=60, Params={
        "Bucket": bucket, "Key": "presigned-hdrs", "ContentType": "text/plain", "Metadata": {"mtime": "1"}})
    r = session().put(url, data=b"hi", headers={"Content-Type": "text/plain", "x-amz-meta-mtime": "1"}, timeout=10)
    assert r.status_code == 200, r.text
    r = session().put(url, data=b"hi", headers={"Content-Type": "text/html", "x-amz-meta-mtime": "1"}, timeout=10)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "SignatureDoesNotMatch"


# ---- aws-chunked ----

@pytest.mark.parametrize("size,chunk", [(0, 65536), (1, 65536), (65536, 65536), (200000, 65536), (1 << 20, 8192)])
def test_aws_chunked_upload(cluster, bucket, s3, size, chunk):
    data = os.urandom(size)
    key = "chunked/%d-%d" % (size, chunk)
    r = s3util.put_aws_chunked(cluster, "/%s/%s" % (bucket, key), data, chunk_size=chunk)
    assert r.status_code == 200, r.text
    assert r.headers["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


@pytest.mark.parametrize("tamper", [0, 3, 15])
def test_aws_chunked_tampered_chunk(cluster, bucket, s3, tamper):
    data = os.urandom(16 * 65536)
    key = "tampered-%d" % tamper
    r = s3util.put_aws_chunked(cluster, "/%s/%s" % (bucket, key), data, tamper_chunk=tamper)
    assert r.status_code == 403, r.text
    assert s3util.xml_error(r)[0] == "SignatureDoesNotMatch"
    assert_absent(s3, bucket, key)
    # over an existing object: the old one stays
    s3.put_object(Bucket=bucket, Key=key, Body=b"old")
    r = s3util.put_aws_chunked(cluster, "/%s/%s" % (bucket, key), data, tamper_chunk=tamper)
    assert s3util.xml_error(r)[0] == "SignatureDoesNotMatch"
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"old"


def test_aws_chunked_wrong_decoded_length(cluster, bucket, s3):
    data = os.urandom(100000)
    for n in (len(data) - 1, len(data) + 1):
        r = s3util.put_aws_chunked(cluster, "/%s/declen" % bucket, data, decoded_length=n)
        assert r.status_code == 400, r.text
        assert s3util.xml_error(r)[0] == "IncompleteBody"
        assert_absent(s3, bucket, "declen")


def test_aws_chunked_needs_sigv4(cluster, bucket):
    ak, sk = s3util.keys(cluster)
    r = session().put(s3util.endpoint(cluster) + "/%s/x" % bucket, data=b"0\r\n\r\n",
                      headers={"x-amz-content-sha256": s3util.STREAMING, "x-amz-decoded-content-length": "0"},
                      timeout=10)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "AccessDenied"


# ---- SigV2 (legacy header form; boto3's default presigned URLs are covered in test_s3_boto3) ----

def test_sigv2_header(cluster, bucket, s3):
    import base64
    import hmac
    from email.utils import formatdate
    ak, sk = s3util.keys(cluster)
    s3.put_object(Bucket=bucket, Key="v2", Body=b"two")
    date = formatdate(usegmt=True)
    sts = "GET\n\n\n%s\n/%s/v2" % (date, bucket)
    sig = base64.b64encode(hmac.new(sk.encode(), sts.encode(), hashlib.sha1).digest()).decode()
    url = cluster.url + "/s3/%s/v2" % bucket
    r = session().get(url, headers={"Date": date, "Authorization": "AWS %s:%s" % (ak, sig)}, timeout=10)
    assert r.status_code == 200 and r.content == b"two", r.text
    bad = ("B" if sig[0] == "A" else "A") + sig[1:]  # another signature, whatever the first character was
    r = session().get(url, headers={"Date": date, "Authorization": "AWS %s:%s" % (ak, bad)}, timeout=10)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "SignatureDoesNotMatch"


# ---- configuration: anonymous access, root and virtual-host routing ----

def test_anonymous_mode_and_routing(make_cluster):
    h = make_cluster(targets=2, mountpaths=1,
                     proxy_args=["--s3_anonymous", "true", "--s3_root", "true", "--s3_domain", "s3.test"])
    http = session()
    base = h.url
    # unsigned requests work at /s3 and at /
    anon_root = s3util.client(h, url=base, signature_version=UNSIGNED)
    anon_s3 = s3util.client(h, url=base + "/s3", signature_version=UNSIGNED)
    anon_root.create_bucket(Bucket="anon-bucket")
    anon_s3.put_object(Bucket="anon-bucket", Key="k/1", Body=b"v1")
    assert anon_root.get_object(Bucket="anon-bucket", Key="k/1")["Body"].read() == b"v1"
    # signed requests are still verified
    bad = s3util.client(h, url=base, secret="wrong")
    assert code_of(bad.get_object, Bucket="anon-bucket", Key="k/1")[0] == "SignatureDoesNotMatch"
    good = s3util.client(h, url=base)
    assert good.get_object(Bucket="anon-bucket", Key="k/1")["Body"].read() == b"v1"
    # the native API keeps its paths under /v1 when S3 is served at /
    assert http.get(base + "/v1/health", timeout=10).json()["role"] == "proxy"
    # virtual-host style: Host <bucket>.<s3_domain>, path = key
    port = base.rsplit(":", 1)[1]
    r = http.get(base + "/k/1", headers={"Host": "anon-bucket.s3.test:" + port}, timeout=10)
    assert r.status_code == 200 and r.content == b"v1"
    r = http.get(base + "/?list-type=2", headers={"Host": "anon-bucket.S3.TEST"}, timeout=10)
    assert r.status_code == 200 and b"<Key>k/1</Key>" in r.content
    r = http.get(base + "/anon-bucket/k/1", headers={"Host": "s3.test"}, timeout=10)
    assert r.status_code == 200 and r.content == b"v1"
    # a signed virtual-host request (the signature covers the Host header and the path "/k/1")
    ak, sk = s3util.keys(h)
    signer = s3util.Signer(ak, sk)
    hd = signer.sign("GET", "http://anon-bucket.s3.test:%s/k/1" % port, {}, s3util.EMPTY_SHA256)
    hd["Host"] = "anon-bucket.s3.test:" + port
    r = http.get(base + "/k/1", headers=hd, timeout=10)
    assert r.status_code == 200 and r.content == b"v1", r.text
    anon_root.delete_object(Bucket="anon-bucket", Key="k/1")
    anon_root.delete_bucket(Bucket="anon-bucket")


def test_bad_keys_file_refuses_to_start(tmp_path):
    import subprocess
    from conftest import FT_BIN
    keys = tmp_path / "keys.json"
    keys.write_text('{"AK": 5}')
    p = subprocess.run([os.path.join(FT_BIN, "ft-proxy"), "--public_port", "1", "--s3_keys", str(keys),
                        "--state_dir", str(tmp_path)], capture_output=True, timeout=30)
    assert p.returncode != 0
    assert b"s3_keys" in p.stderr + p.stdout
    assert b"Sanitizer" not in p.stderr + p.stdout
