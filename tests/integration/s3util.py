# SPDX-License-Identifier: Apache-2.0
# Helpers for the S3 tests: endpoint and keys of a cluster, boto3 clients, a SigV4 signer of our own, CLI environments.
"""
The cluster fixtures start the proxy with DIR/s3keys.json (scripts/ftcluster.py). Against an
external cluster (FT_CLUSTER_URL) the keys come from FT_S3_ACCESS_KEY / FT_S3_SECRET_KEY.

sign_v4() is an independent SigV4 implementation (hmac/hashlib only) so tests can build what the
stock clients never send: skewed dates, aws-chunked bodies with per-chunk signatures, tampered
chunks, payload hashes that do not match the body.
"""
import datetime
import hashlib
import hmac
import os
import shutil
import urllib.parse
import uuid

import boto3
import pytest
from botocore.config import Config

from ftutil import crc32c_hex, session

REGION = "us-east-1"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


def keys(cluster):
    """(access_key, secret) the cluster's proxy accepts."""
    if cluster.local:
        return cluster.c.s3_keys()
    ak, sk = os.environ.get("FT_S3_ACCESS_KEY"), os.environ.get("FT_S3_SECRET_KEY")
    if not ak or not sk:
        pytest.fail("FT_CLUSTER_URL is set: also set FT_S3_ACCESS_KEY and FT_S3_SECRET_KEY "
                    "(make run prints them)", pytrace=False)
    return ak, sk


def endpoint(cluster):
    return cluster.url + "/s3"


def bucket_name(prefix="b"):
    """A unique name valid for S3 (lowercase, 3..63)."""
    return ("%s-%s" % (prefix, uuid.uuid4().hex[:12])).lower()


def client(cluster, url=None, access=None, secret=None, **config):
    """A boto3 S3 client with default settings (path style is what a URL with a path implies)."""
    ak, sk = keys(cluster)
    cfg = Config(retries={"max_attempts": 1, "mode": "standard"}, **config)
    return boto3.session.Session().client(
        "s3", endpoint_url=url or endpoint(cluster), aws_access_key_id=access or ak,
        aws_secret_access_key=secret or sk, region_name=REGION, config=cfg)


def client_fixture(**config):
    """A module-scoped fixture `s3`: client(cluster, **config) for the module's cluster. Assign it
    in the test module: `s3 = s3util.client_fixture(read_timeout=120)`."""

    @pytest.fixture(scope="module")
    def fixture(cluster):
        return client(cluster, **config)

    return fixture


def bucket_fixture(prefix):
    """A fixture `bucket` on the module's `s3` client: a fresh bucket named prefix-..., emptied of
    its objects and incomplete multipart uploads and deleted after the test (also a failed one)."""

    @pytest.fixture
    def fixture(s3):
        name = bucket_name(prefix)
        s3.create_bucket(Bucket=name)
        yield name
        for p in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for o in p.get("Contents", []):
                s3.delete_object(Bucket=name, Key=o["Key"])
        for u in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=name, Key=u["Key"], UploadId=u["UploadId"])
        s3.delete_bucket(Bucket=name)

    return fixture


def error_code(exc):
    return exc.response["Error"]["Code"]


def clean_env(extra=None, home=None):
    """The environment for a CLI client: no AWS_* or proxy settings inherited from the machine
    (an inherited AWS_CA_BUNDLE breaks rclone, an HTTP proxy would sit between us and loopback)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    if home:
        env["HOME"] = str(home)
    env.update(extra or {})
    return env


def aws_cli_env(cluster, tmp_path):
    """The environment for the aws CLI on the cluster: its keys, no config or credentials of the machine
    (a fresh home under tmp_path)."""
    ak, sk = keys(cluster)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return clean_env({
        "AWS_ACCESS_KEY_ID": ak, "AWS_SECRET_ACCESS_KEY": sk, "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(home / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"), "AWS_PAGER": ""}, home=home)


def require_tool(path):
    """Full path of a client program; fails (does not skip) when `make deps` did not install it."""
    found = path if os.path.isabs(path) and os.access(path, os.X_OK) else shutil.which(path)
    if not found:
        pytest.fail("%s not found: install it with `make deps` (scripts/deps.sh)" % path, pytrace=False)
    return found


# ---- SigV4, independently of botocore ----

def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def _uri_encode(s, safe="-_.~"):
    return urllib.parse.quote(s, safe=safe)


def canonical_query(query):
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    enc = sorted((_uri_encode(k), _uri_encode(v)) for k, v in pairs)
    return "&".join("%s=%s" % kv for kv in enc)


def amz_date(now=None):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ")


class Signer:
    """Signs one request in the header form; keeps what aws-chunked signatures chain from."""

    def __init__(self, access, secret, date=None, region=REGION):
        self.access, self.secret, self.region = access, secret, region
        self.date = date or amz_date()
        self.scope = "%s/%s/s3/aws4_request" % (self.date[:8], region)
        k = _hmac(("AWS4" + secret).encode(), self.date[:8])
        k = _hmac(k, region)
        k = _hmac(k, "s3")
        self.key = _hmac(k, "aws4_request")
        self.seed = None

    def sign(self, method, url, headers, payload_hash):
        """Adds x-amz-date, x-amz-content-sha256 and Authorization to headers (a dict)."""
        u = urllib.parse.urlsplit(url)
        headers = dict(headers)
        headers["Host"] = u.netloc
        headers["x-amz-date"] = self.date
        headers["x-amz-content-sha256"] = payload_hash
        canon = sorted((k.lower(), " ".join(str(v).split())) for k, v in headers.items())
        signed = ";".join(k for k, _ in canon)
        creq = "\n".join([method, u.path or "/", canonical_query(u.query),
                          "".join("%s:%s\n" % kv for kv in canon), signed, payload_hash])
        sts = "\n".join(["AWS4-HMAC-SHA256", self.date, self.scope,
                         hashlib.sha256(creq.encode()).hexdigest()])
        sig = hmac.new(self.key, sts.encode(), hashlib.sha256).hexdigest()
        self.seed = sig
        headers["Authorization"] = ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
                                    % (self.access, self.scope, signed, sig))
        del headers["Host"]  # requests sets it
        return headers

    def chunk_signature(self, prev, data):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", self.date, self.scope, prev, EMPTY_SHA256,
                         hashlib.sha256(data).hexdigest()])
        return hmac.new(self.key, sts.encode(), hashlib.sha256).hexdigest()


def aws_chunked(signer, data, chunk_size=64 * 1024, tamper_chunk=None):
    """The aws-chunked encoding of data (signer.sign must have run: its signature is the seed).
    tamper_chunk=i flips a byte of chunk i after signing it."""
    out, prev = [], signer.seed
    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)] + [b""]
    for i, c in enumerate(chunks):
        sig = signer.chunk_signature(prev, c)
        prev = sig
        if tamper_chunk == i and c:
            c = bytes([c[0] ^ 1]) + c[1:]
        out.append(b"%x;chunk-signature=%s\r\n" % (len(c), sig.encode()) + c + b"\r\n")
    return b"".join(out)


def signed_request(cluster, method, path, body=b"", headers=None, payload_hash=None, date=None,
                   secret=None, access=None):
    """Sends a request signed by our own signer; path is relative to the S3 endpoint and already
    encoded. Returns the requests.Response."""
    ak, sk = keys(cluster)
    signer = Signer(access or ak, secret or sk, date=date)
    url = endpoint(cluster) + path
    ph = payload_hash if payload_hash is not None else hashlib.sha256(body).hexdigest()
    h = signer.sign(method, url, headers or {}, ph)
    return session().request(method, url, data=body, headers=h, timeout=60)


def put_aws_chunked(cluster, path, data, chunk_size=64 * 1024, tamper_chunk=None, decoded_length=None):
    """PUT with an aws-chunked body (STREAMING-AWS4-HMAC-SHA256-PAYLOAD)."""
    ak, sk = keys(cluster)
    signer = Signer(ak, sk)
    url = endpoint(cluster) + path
    n = len(data) if decoded_length is None else decoded_length
    # The encoded length depends only on the chunk sizes: sign with it before the body exists.
    sizes = [min(chunk_size, len(data) - i) for i in range(0, len(data), chunk_size)] + [0]
    enc_len = sum(len(b"%x;chunk-signature=" % s) + 64 + 2 + s + 2 for s in sizes)
    h = signer.sign("PUT", url, {"Content-Encoding": "aws-chunked",
                                 "x-amz-decoded-content-length": str(n),
                                 "Content-Length": str(enc_len)}, STREAMING)
    body = aws_chunked(signer, data, chunk_size, tamper_chunk)
    assert len(body) == enc_len
    return session().put(url, data=body, headers=h, timeout=60)


def xml_error(resp):
    """(Code, Message) of an S3 XML error body."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(resp.content)
    assert root.tag == "Error", resp.content
    return root.findtext("Code"), root.findtext("Message")


STREAMING_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"


def trailer_signature(signer, prev, name, value):
    """The x-amz-trailer-signature of the trailer "name:value" after the final chunk signed prev."""
    canon = ("%s:%s\n" % (name.lower(), value)).encode()
    sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", signer.date, signer.scope, prev,
                     hashlib.sha256(canon).hexdigest()])
    return hmac.new(signer.key, sts.encode(), hashlib.sha256).hexdigest()


def trailer_body(signer, data, name, value, signed, chunk_size=64 * 1024, tamper_chunk=None,
                 trailer_sig=None):
    """The aws-chunked body of data with the trailer "name:value" (signed: chunk signatures and the
    trailer's signature, trailer_sig replacing it when given; else bare hex chunk sizes)."""
    out, prev = [], signer.seed
    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)]
    for i, c in enumerate(chunks + [b""]):
        if signed:
            prev = signer.chunk_signature(prev, c)
            head = b"%x;chunk-signature=%s\r\n" % (len(c), prev.encode())
        else:
            head = b"%x\r\n" % len(c)
        if tamper_chunk == i and c:
            c = bytes([c[0] ^ 1]) + c[1:]
        out.append(head + c + (b"\r\n" if c else b""))
    out.append(("%s:%s\r\n" % (name, value)).encode())
    if signed:
        sig = trailer_sig or trailer_signature(signer, prev, name, value)
        out.append(b"x-amz-trailer-signature:%s\r\n" % sig.encode())
    out.append(b"\r\n")
    return b"".join(out)


def put_trailer(cluster, path, data, name, value, signed=False, headers=None, chunk_size=64 * 1024,
                tamper_chunk=None, trailer_sig=None, announce=None):
    """PUT with an aws-chunked body carrying a trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER, or the
    signed ...-PAYLOAD-TRAILER form). announce replaces the x-amz-trailer header ("" omits it)."""
    ak, sk = keys(cluster)
    signer = Signer(ak, sk)
    url = endpoint(cluster) + path
    h = {"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))}
    if announce is None:
        announce = name
    if announce:
        h["x-amz-trailer"] = announce
    h.update(headers or {})
    # The body's length does not depend on the signatures: frame it once with a placeholder seed.
    signer.seed = "0" * 64
    h["Content-Length"] = str(len(trailer_body(signer, data, name, value, signed, chunk_size)))
    h = signer.sign("PUT", url, h, STREAMING_TRAILER if signed else UNSIGNED_TRAILER)
    body = trailer_body(signer, data, name, value, signed, chunk_size, tamper_chunk, trailer_sig)
    return session().put(url, data=body, headers=h, timeout=60)


_CRC64NVME_TABLE = []


def crc64nvme(data):
    """CRC-64/NVME of data (check value of b"123456789": 0xae8b14860a799888)."""
    if not _CRC64NVME_TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x9A6C9329AC4BC9B5 if c & 1 else c >> 1
            _CRC64NVME_TABLE.append(c)
    crc = 0xFFFFFFFFFFFFFFFF
    for b in data:
        crc = _CRC64NVME_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def checksum_b64(alg, data):
    """S3's x-amz-checksum-<alg> value of data (crc32, crc32c, crc64nvme, sha1, sha256)."""
    import base64
    import zlib
    if alg == "crc64nvme":
        return base64.b64encode(crc64nvme(data).to_bytes(8, "big")).decode()
    if alg == "crc32":
        return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    if alg == "crc32c":
        return base64.b64encode(bytes.fromhex(crc32c_hex(data))).decode()
    return base64.b64encode(hashlib.new(alg, data).digest()).decode()
