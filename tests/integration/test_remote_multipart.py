# SPDX-License-Identifier: Apache-2.0
# Multipart uploads into remote buckets (aws, azure, gcp), native and S3 API, written through to the backend on completion.
"""
Parts are kept on the owning target as for an ais bucket; the completion joins them, writes the whole
object to the backend in one PUT, and only then caches it. Checked through the cluster and directly on
s3rver (a second boto3 client): the native ?mpu= endpoints, boto3's upload_file above its multipart
threshold, the aws CLI's `s3 cp` of a file above 8 MiB, ListParts / ListMultipartUploads / Abort on a
remote bucket, a completion while the backend is down (an error, nothing cached, the upload kept and a
retry after the backend is back succeeds), UploadPartCopy, and ht buckets (read-only: 501). The native
completion is also run against azurite and the GCS emulator.
"""
import hashlib
import json
import os
import shutil
import subprocess

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

import peers
import s3util
from ftutil import TIMEOUT, assert_json_error, create_remote, obj_url, session, unique
from test_coldget import cached_files
from test_writethrough import STARTERS

MIB = 1 << 20
AWS = "/usr/bin/aws"  # Debian's awscli, as test_s3_cli.py runs it

s3 = s3util.client_fixture(read_timeout=120)


s3rver = peers.s3rver_fixture()


def direct_client(peer):
    """A boto3 client on s3rver itself, not through the cluster."""
    import boto3
    return boto3.client("s3", endpoint_url=peer.url, aws_access_key_id=peers.S3RVER_KEY,
                        aws_secret_access_key=peers.S3RVER_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def aws_props(endpoint, backend_bucket):
    return {"bucket": backend_bucket, "endpoint": endpoint, "addressing": "path", "region": "us-east-1",
            "access_key": peers.S3RVER_KEY, "secret_key": peers.S3RVER_KEY, "connect_timeout_ms": 2000}


def destroy_remote(cluster, bucket, provider):
    session().delete(f"{cluster.url}/v1/buckets/{bucket}?provider={provider}", timeout=TIMEOUT)


@pytest.fixture
def aws(cluster, s3rver):
    """A fresh aws bucket of the cluster over a fresh s3rver bucket: (name, backend name, direct client)."""
    direct = direct_client(s3rver)
    name, backend = unique("rm"), unique("be")
    direct.create_bucket(Bucket=backend)
    create_remote(cluster.url, name, "aws", aws_props(s3rver.url, backend))
    yield name, backend, direct
    destroy_remote(cluster, name, "aws")


def direct_read(direct, backend, key):
    try:
        return direct.get_object(Bucket=backend, Key=key)["Body"].read()
    except ClientError as e:
        if s3util.error_code(e) in ("NoSuchKey", "404"):
            return None
        raise


def mpu_etag(parts):
    """S3's ETag of an object uploaded in these parts: md5 of the parts' binary MD5s, "-N"."""
    return "%s-%d" % (hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest(), len(parts))


# ---- the native endpoints, through the proxy's 307 to the owning target ----
class Native:
    def __init__(self, cluster, bucket, key, provider="aws"):
        self.cluster, self.bucket, self.key, self.provider = cluster, bucket, key, provider
        self.s = session()

    def call(self, method, extra, **kw):
        r = self.s.request(method, obj_url(self.cluster.url, self.bucket, self.key, self.provider, extra),
                           allow_redirects=False, timeout=TIMEOUT, **kw)
        if r.status_code != 307:
            return r
        return self.s.request(method, r.headers["Location"], allow_redirects=False, timeout=120, **kw)

    def start(self, uid):
        return self.call("POST", "&mpu=%s&action=start" % uid)

    def part(self, uid, n, data):
        return self.call("PUT", "&mpu=%s&part=%d" % (uid, n), data=data)

    def complete(self, uid, parts):
        body = {"parts": [{"part": n, "etag": e} for n, e in parts]}
        return self.call("POST", "&mpu=%s&action=complete" % uid, data=json.dumps(body),
                         headers={"Content-Type": "application/json"})

    def parts(self, uid):
        return self.call("GET", "&mpu=%s&action=parts" % uid)

    def abort(self, uid):
        return self.call("POST", "&mpu=%s&action=abort" % uid)

    def uploads(self):
        """Upload ids of the bucket on every target's control port."""
        out = []
        for t in self.cluster.targets():
            r = self.s.get(t["control_url"] + "/v1/mpu", params={"provider": self.provider, "bucket": self.bucket},
                           timeout=TIMEOUT)
            assert r.status_code == 200, r.text
            out += [u["upload_id"] for u in r.json()["uploads"]]
        return out


def new_id():
    return os.urandom(18).hex()


def upload_parts(n, uid, parts):
    """Starts upload uid and uploads parts (1-based); returns [(part number, ETag)]."""
    r = n.start(uid)
    assert r.status_code == 200, r.text
    listed = []
    for i, data in enumerate(parts, 1):
        r = n.part(uid, i, data)
        assert r.status_code == 200, r.text
        assert r.headers["ETag"].strip('"') == hashlib.md5(data).hexdigest()
        listed.append((i, r.headers["ETag"]))
    return listed


def test_native_mpu_into_aws_bucket(cluster, aws):
    name, backend, direct = aws
    key = "native/" + unique("o") + ".bin"
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(MIB + 123)]
    whole = b"".join(parts)
    n = Native(cluster, name, key)
    uid = new_id()
    listed = upload_parts(n, uid, parts)
    # parts listed, the upload listed, nothing on the backend or in the cache yet
    r = n.parts(uid)
    assert r.status_code == 200, r.text
    assert [(p["part"], p["size"]) for p in r.json()["parts"]] == [(i, len(p)) for i, p in enumerate(parts, 1)]
    assert n.uploads() == [uid]
    assert direct_read(direct, backend, key) is None
    assert cached_files(cluster, "aws", name, key) == []

    r = n.complete(uid, listed)
    assert r.status_code == 200, r.text
    assert r.json()["etag"] == mpu_etag(parts) and r.json()["size"] == len(whole)
    assert r.headers.get("Ais-Cached") is None
    # on the backend, in one piece, and cached once with the multipart ETag
    assert direct_read(direct, backend, key) == whole
    assert len(cached_files(cluster, "aws", name, key)) == 1
    g = session().get(obj_url(cluster.url, name, key, "aws"), timeout=TIMEOUT)
    assert g.status_code == 200 and g.content == whole
    assert g.headers["ETag"].strip('"') == mpu_etag(parts)
    assert n.uploads() == []
    # a retried completion gets the same answer
    r = n.complete(uid, listed)
    assert r.status_code == 200 and r.json()["etag"] == mpu_etag(parts), r.text


def test_aistore_sdk_mpu_into_aws_bucket(cluster, aws):
    """AIStore's SDK (Object.multipart_upload(), docs/aistore-compat.md) into an aws bucket: POST mpt-upload, the
    parts PUT with ?uploadId&partNumber (the 307 followed with the body), POST mpt-complete; the object reaches
    the backend whole and is cached; mpt-abort of another upload leaves nothing anywhere."""
    name, backend, direct = aws
    ua = {"User-Agent": "ais/python test"}
    url = obj_url(cluster.url, name, "sdk/obj.bin", "aws")
    r = session().post(url, headers=ua, json={"action": "mpt-upload", "name": "", "value": None}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.text, r.text
    upload, parts = r.text, [os.urandom(5 * MIB), os.urandom(777)]
    for n, data in ((2, parts[1]), (1, parts[0])):
        r = session().put(url + f"&uploadId={upload}&partNumber={n}", data=data, headers=ua, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
    assert direct_read(direct, backend, "sdk/obj.bin") is None
    done = [{"part-number": 1, "etag": ""}, {"part-number": 2, "etag": ""}]
    r = session().post(url + f"&uploadId={upload}", headers=ua,
                       json={"action": "mpt-complete", "name": "", "value": done}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert direct_read(direct, backend, "sdk/obj.bin") == b"".join(parts)
    assert len(cached_files(cluster, "aws", name, "sdk/obj.bin")) == 1
    assert session().get(url, timeout=TIMEOUT).content == b"".join(parts)
    # an aborted upload: nothing on the backend, nothing cached, the upload gone
    ab_url = obj_url(cluster.url, name, "sdk/ab.bin", "aws")
    ab = session().post(ab_url, headers=ua, json={"action": "mpt-upload", "name": "", "value": None},
                        timeout=TIMEOUT).text
    assert session().put(ab_url + f"&uploadId={ab}&partNumber=1", data=b"z", timeout=TIMEOUT).status_code == 200
    r = session().delete(ab_url + f"&uploadId={ab}", headers=ua, json={"action": "mpt-abort", "name": "",
                                                                       "value": None}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    r = session().post(ab_url + f"&uploadId={ab}", headers=ua,
                       json={"action": "mpt-complete", "name": "", "value": done[:1]}, timeout=TIMEOUT)
    assert r.status_code == 404, r.text
    assert direct_read(direct, backend, "sdk/ab.bin") is None and cached_files(cluster, "aws", name, "sdk/ab.bin") == []


@pytest.mark.parametrize("provider", ["azure", "gcp"])
def test_native_mpu_into_azure_and_gcp_buckets(cluster, provider):
    """The same completion against azurite and the GCS emulator (their single-request writes)."""
    start, cls = STARTERS[provider]
    peers.ensure_installed()
    d = peers.scratch_dir()
    p = start(d / provider)
    name = unique("rz")
    try:
        direct = cls(p)
        create_remote(cluster.url, name, provider, direct.backend())
        key = "native/" + unique("o")
        parts = [os.urandom(5 * MIB), os.urandom(4321)]
        n = Native(cluster, name, key, provider)
        uid = new_id()
        r = n.complete(uid, upload_parts(n, uid, parts))
        assert r.status_code == 200, r.text
        assert r.json()["etag"] == mpu_etag(parts)
        assert direct.read(key) == b"".join(parts)
        assert len(cached_files(cluster, provider, name, key)) == 1
        g = session().get(obj_url(cluster.url, name, key, provider), timeout=TIMEOUT)
        assert g.status_code == 200 and g.content == b"".join(parts)
        assert n.uploads() == []
    finally:
        destroy_remote(cluster, name, provider)
        p.stop()
        shutil.rmtree(d, ignore_errors=True)


def test_native_abort_in_aws_bucket(cluster, aws):
    name, backend, direct = aws
    key = "native/" + unique("ab")
    n = Native(cluster, name, key)
    uid = new_id()
    upload_parts(n, uid, [os.urandom(MIB)])
    assert n.uploads() == [uid]
    r = n.abort(uid)
    assert r.status_code == 200, r.text
    assert n.uploads() == []
    assert_json_error(n.parts(uid), 404)
    assert direct_read(direct, backend, key) is None
    assert cached_files(cluster, "aws", name, key) == []


def test_native_completion_with_dead_backend(cluster):
    """The bucket's backend is a port nobody listens on: the completion fails with a backend status,
    nothing is cached, the upload stays (parts listed, abort works)."""
    name = unique("rd")
    create_remote(cluster.url, name, "aws", aws_props("http://127.0.0.1:%d" % peers.free_port(), "nowhere"))
    try:
        key = "dead/" + unique("o")
        n = Native(cluster, name, key)
        uid = new_id()
        listed = upload_parts(n, uid, [os.urandom(5 * MIB), os.urandom(1000)])
        r = n.complete(uid, listed)
        assert r.status_code in (502, 503, 504), r.text
        assert_json_error(r, r.status_code, "backend")
        assert cached_files(cluster, "aws", name, key) == []
        assert [p["part"] for p in n.parts(uid).json()["parts"]] == [1, 2]
        assert n.uploads() == [uid]
        assert n.abort(uid).status_code == 200
        assert n.uploads() == []
    finally:
        destroy_remote(cluster, name, "aws")


# ---- the S3 API ----

def test_boto3_upload_file_into_remote_bucket(cluster, s3, aws, tmp_path):
    name, backend, direct = aws
    key = "boto/" + unique("big") + ".bin"
    data = os.urandom(20 * MIB)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=2)
    s3.upload_file(str(src), name, key, Config=cfg)
    assert direct_read(direct, backend, key) == data
    assert len(cached_files(cluster, "aws", name, key)) == 1
    g = s3.get_object(Bucket=name, Key=key)
    assert g["Body"].read() == data
    chunks = [data[i:i + 5 * MIB] for i in range(0, len(data), 5 * MIB)]
    assert g["ETag"].strip('"') == mpu_etag(chunks)
    dst = tmp_path / "back.bin"
    s3.download_file(name, key, str(dst))
    assert dst.read_bytes() == data
    assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []


def test_s3_list_parts_uploads_and_abort_on_remote_bucket(cluster, s3, aws):
    name, backend, direct = aws
    key = "s3/" + unique("ab")
    uid = s3.create_multipart_upload(Bucket=name, Key=key)["UploadId"]
    e1 = s3.upload_part(Bucket=name, Key=key, UploadId=uid, PartNumber=1, Body=os.urandom(5 * MIB))["ETag"]
    ups = s3.list_multipart_uploads(Bucket=name)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [(key, uid)]
    parts = s3.list_parts(Bucket=name, Key=key, UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, e1, 5 * MIB)]
    s3.abort_multipart_upload(Bucket=name, Key=key, UploadId=uid)
    assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []
    with pytest.raises(ClientError) as ei:
        s3.list_parts(Bucket=name, Key=key, UploadId=uid)
    assert s3util.error_code(ei.value) == "NoSuchUpload"
    assert direct_read(direct, backend, key) is None
    assert cached_files(cluster, "aws", name, key) == []


def test_s3_completion_with_backend_down_then_retried(cluster, s3, tmp_path):
    """s3rver stopped at the completion: an error, nothing cached or stored, the upload still listed;
    s3rver restarted on its port: the same completion succeeds."""
    peers.ensure_installed()
    d = peers.scratch_dir()
    p = peers.start_s3rver(d / "s3")
    direct = direct_client(p)
    name, backend = unique("rb"), unique("be")
    direct.create_bucket(Bucket=backend)
    create_remote(cluster.url, name, "aws", aws_props(p.url, backend))
    try:
        key = "down/" + unique("o")
        parts = [os.urandom(5 * MIB), os.urandom(77777)]
        uid = s3.create_multipart_upload(Bucket=name, Key=key)["UploadId"]
        listed = [{"PartNumber": i, "ETag": s3.upload_part(Bucket=name, Key=key, UploadId=uid, PartNumber=i,
                                                           Body=data)["ETag"]}
                  for i, data in enumerate(parts, 1)]
        p.stop()
        with pytest.raises(ClientError) as ei:
            s3.complete_multipart_upload(Bucket=name, Key=key, UploadId=uid, MultipartUpload={"Parts": listed})
        assert s3util.error_code(ei.value) in ("InternalError", "ServiceUnavailable"), ei.value.response
        assert "backend" in ei.value.response["Error"]["Message"]
        assert cached_files(cluster, "aws", name, key) == []
        assert [(u["Key"], u["UploadId"]) for u in s3.list_multipart_uploads(Bucket=name)["Uploads"]] == [(key, uid)]
        assert len(s3.list_parts(Bucket=name, Key=key, UploadId=uid)["Parts"]) == 2

        p = peers.start_s3rver(d / "s3", bucket=backend, port=p.port)
        r = s3.complete_multipart_upload(Bucket=name, Key=key, UploadId=uid, MultipartUpload={"Parts": listed})
        assert r["ETag"].strip('"') == mpu_etag(parts)
        assert direct_read(direct, backend, key) == b"".join(parts)
        assert len(cached_files(cluster, "aws", name, key)) == 1
        assert s3.get_object(Bucket=name, Key=key)["Body"].read() == b"".join(parts)
        assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []
    finally:
        destroy_remote(cluster, name, "aws")
        p.stop()
        shutil.rmtree(d, ignore_errors=True)


def test_aws_cli_cp_into_remote_bucket(cluster, aws, tmp_path):
    name, backend, direct = aws
    env = s3util.aws_cli_env(cluster, tmp_path)
    data = os.urandom(18 * MIB)  # above the CLI's 8 MiB multipart threshold
    src = tmp_path / "cli.bin"
    src.write_bytes(data)
    p = subprocess.run([s3util.require_tool(AWS), "--endpoint-url", s3util.endpoint(cluster), "s3", "cp",
                        "--no-progress", str(src), "s3://%s/cli/big.bin" % name], env=env, capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert direct_read(direct, backend, "cli/big.bin") == data
    assert len(cached_files(cluster, "aws", name, "cli/big.bin")) == 1


# ---- ht: read-only ----

def test_ht_multipart_not_implemented(cluster, s3):
    name = unique("rh")
    create_remote(cluster.url, name, "ht", {"endpoint": "http://127.0.0.1:%d/x" % peers.free_port()})
    try:
        r = Native(cluster, name, "o", "ht").start(new_id())
        assert_json_error(r, 501, "read-only")
        for call in (lambda: s3.create_multipart_upload(Bucket=name, Key="o"),
                     lambda: s3.list_multipart_uploads(Bucket=name),
                     lambda: s3.upload_part(Bucket=name, Key="o", UploadId="0123456789abcdef0123", PartNumber=1,
                                            Body=b"x")):
            with pytest.raises(ClientError) as ei:
                call()
            assert s3util.error_code(ei.value) == "NotImplemented"
            assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 501
        assert cached_files(cluster, "ht", name, "o") == []
    finally:
        destroy_remote(cluster, name, "ht")


def test_s3_upload_part_copy_into_remote_bucket(cluster, s3, aws):
    """UploadPartCopy into a remote bucket's upload from an ais source works; from a remote source: 501."""
    name, backend, direct = aws
    src_bucket, src = s3util.bucket_name("pc"), os.urandom(5 * MIB + 99)
    s3.create_bucket(Bucket=src_bucket)
    s3.put_object(Bucket=src_bucket, Key="src", Body=src)
    try:
        key = "copy/" + unique("o")
        tail = os.urandom(1000)
        uid = s3.create_multipart_upload(Bucket=name, Key=key)["UploadId"]
        e1 = s3.upload_part_copy(Bucket=name, Key=key, UploadId=uid, PartNumber=1,
                                 CopySource={"Bucket": src_bucket, "Key": "src"})["CopyPartResult"]["ETag"]
        e2 = s3.upload_part(Bucket=name, Key=key, UploadId=uid, PartNumber=2, Body=tail)["ETag"]
        with pytest.raises(ClientError) as ei:
            s3.upload_part_copy(Bucket=name, Key=key, UploadId=uid, PartNumber=3,
                                CopySource={"Bucket": name, "Key": key})
        assert s3util.error_code(ei.value) == "NotImplemented"
        s3.complete_multipart_upload(Bucket=name, Key=key, UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
        assert direct_read(direct, backend, key) == src + tail
        assert s3.get_object(Bucket=name, Key=key)["Body"].read() == src + tail
    finally:
        s3.delete_object(Bucket=src_bucket, Key="src")
        s3.delete_bucket(Bucket=src_bucket)
