# SPDX-License-Identifier: Apache-2.0
# Canned ACLs (private, public-read) on buckets and objects: S3 and native API, anonymous reads of public data only.
import json
import os
import subprocess

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

import s3util
from conftest import module_cluster
from ftutil import Api, assert_json_error, session, unique

PUBLIC = ("--allow_public_read", "true")
pcluster = module_cluster("acl", "it restarts nodes and changes the identity store", targets=2, mountpaths=1,
                          auth=True, proxy_args=PUBLIC, target_args=PUBLIC)

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
RO = ("RO", "ro-secret-0123456789")


@pytest.fixture(scope="module")
def s3(pcluster):
    return s3util.client(pcluster)


@pytest.fixture(scope="module")
def anon(pcluster):
    return s3util.client(pcluster, signature_version=UNSIGNED)


@pytest.fixture(scope="module")
def ro_s3(pcluster):
    """A boto3 client with a readonly key (added to the identity store; the proxy restarted to read it)."""
    path = os.path.join(pcluster.c.dir, "s3keys.json")
    with open(path) as f:
        doc = json.load(f)
    doc[RO[0]] = {"secret": RO[1], "role": "readonly"}
    with open(path, "w") as f:
        json.dump(doc, f)
    restart_proxy(pcluster)
    return s3util.client(pcluster, access=RO[0], secret=RO[1])


def restart_proxy(h):
    p = h.c.proxy
    p.signal(15)
    assert p.wait_dead(10)
    p.spawn(h.c.env)
    h.c.wait_ready(30)


def code_of(fn, *a, **kw):
    with pytest.raises(ClientError) as ei:
        fn(*a, **kw)
    return s3util.error_code(ei.value), ei.value.response["ResponseMetadata"]["HTTPStatusCode"]


def grants(acl):
    """{(kind, who, permission)} of a Get*Acl answer."""
    out = set()
    for g in acl["Grants"]:
        who = g["Grantee"].get("URI") or g["Grantee"].get("ID")
        out.add((g["Grantee"]["Type"], who, g["Permission"]))
    return out


def is_public(acl):
    return ("Group", ALL_USERS, "READ") in grants(acl)


def make_bucket(s3, acl=None):
    b = s3util.bucket_name("acl")
    if acl:
        s3.create_bucket(Bucket=b, ACL=acl)
    else:
        s3.create_bucket(Bucket=b)
    return b


def s3_url(h, bucket, key=""):
    return "%s/%s/%s" % (s3util.endpoint(h), bucket, key)


def native_url(h, bucket, key):
    return "%s/v1/objects/%s/%s" % (h.url, bucket, key)


def anon_native_get(h, bucket, key, method="GET"):
    """An anonymous native read through the proxy, the redirect followed (as curl -L would)."""
    return session(token="").request(method, native_url(h, bucket, key), timeout=30)


def assert_anon_denied_everywhere(h, anon, bucket, key):
    """No anonymous read of bucket/key succeeds: S3 (boto3 unsigned and plain HTTP), native through the
    proxy (redirect followed), and every target's port directly, with and without the proxy's anon mark."""
    assert code_of(anon.get_object, Bucket=bucket, Key=key) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as ei:
        anon.head_object(Bucket=bucket, Key=key)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    r = session(token="").get(s3_url(h, bucket, key), timeout=30)
    assert r.status_code == 403 and s3util.xml_error(r)[0] == "AccessDenied", r.text
    for m in ("GET", "HEAD"):
        r = anon_native_get(h, bucket, key, m)
        assert r.status_code == 401, (m, r.status_code, r.text)
        if m == "GET":
            assert_json_error(r, 401)
    for t in h.c.targets:
        for q in ("", "?ft_anon=1", "?archpath=x"):
            u = "%s/v1/objects/%s/%s%s" % (t.public_url, bucket, key, q)
            for m in ("GET", "HEAD"):
                r = session(token="").request(m, u, timeout=30)
                assert r.status_code == 401, (m, u, r.status_code, r.text)


def assert_anon_reads(h, anon, bucket, key, data):
    assert anon.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    assert anon.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(data)
    r = session(token="").get(s3_url(h, bucket, key), timeout=30)
    assert r.status_code == 200 and r.content == data
    r = anon_native_get(h, bucket, key)
    assert r.status_code == 200 and r.content == data, r.text
    assert anon_native_get(h, bucket, key, "HEAD").status_code == 200


def cleanup(s3, bucket):
    for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        s3.delete_object(Bucket=bucket, Key=o["Key"])
    s3.delete_bucket(Bucket=bucket)


# ---- buckets ----

def test_bucket_acl_put_get(s3):
    b = make_bucket(s3)
    acl = s3.get_bucket_acl(Bucket=b)
    assert grants(acl) == {("CanonicalUser", "fasttier", "FULL_CONTROL")}
    assert acl["Owner"]["ID"] == "fasttier"
    s3.put_bucket_acl(Bucket=b, ACL="public-read")
    assert is_public(s3.get_bucket_acl(Bucket=b))
    s3.put_bucket_acl(Bucket=b, ACL="private")
    assert not is_public(s3.get_bucket_acl(Bucket=b))
    # canned names that mean private for one owner
    s3.put_bucket_acl(Bucket=b, ACL="bucket-owner-full-control")
    assert not is_public(s3.get_bucket_acl(Bucket=b))
    s3.delete_bucket(Bucket=b)


def test_bucket_acl_policy_body(s3):
    b = make_bucket(s3)
    owner = {"ID": "fasttier", "DisplayName": "fasttier"}
    full = {"Grantee": {"Type": "CanonicalUser", "ID": "fasttier"}, "Permission": "FULL_CONTROL"}
    read = {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"}
    s3.put_bucket_acl(Bucket=b, AccessControlPolicy={"Owner": owner, "Grants": [full, read]})
    assert is_public(s3.get_bucket_acl(Bucket=b))
    s3.put_bucket_acl(Bucket=b, AccessControlPolicy={"Owner": owner, "Grants": [full]})
    assert not is_public(s3.get_bucket_acl(Bucket=b))
    # anything that is not exactly private or public-read: 501 with a message, nothing changed
    other = {"Grantee": {"Type": "CanonicalUser", "ID": "someone-else"}, "Permission": "READ"}
    write = {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "WRITE"}
    for g in ([full, other], [full, write], [read]):
        with pytest.raises(ClientError) as ei:
            s3.put_bucket_acl(Bucket=b, AccessControlPolicy={"Owner": owner, "Grants": g})
        assert s3util.error_code(ei.value) == "NotImplemented"
        assert "public-read" in ei.value.response["Error"]["Message"]
    assert not is_public(s3.get_bucket_acl(Bucket=b))
    for canned in ("public-read-write", "authenticated-read"):
        assert code_of(s3.put_bucket_acl, Bucket=b, ACL=canned) == ("NotImplemented", 501)
    assert code_of(s3.put_bucket_acl, Bucket=b, GrantRead="uri=" + ALL_USERS) == ("NotImplemented", 501)
    s3.delete_bucket(Bucket=b)


def test_bad_acl_bodies(pcluster, s3):
    b = make_bucket(s3)
    for body in (b"<AccessControlPolicy><AccessControlList>", b"<Other/>", b""):
        r = s3util.signed_request(pcluster, "PUT", "/%s?acl" % b, body=body)
        assert r.status_code == 400 and s3util.xml_error(r)[0] == "MalformedXML", (body, r.text)
    r = s3util.signed_request(pcluster, "PUT", "/%s?acl" % b, body=b"<x/>", headers={"x-amz-acl": "private"})
    assert r.status_code == 400 and s3util.xml_error(r)[0] == "InvalidRequest", r.text
    s3.delete_bucket(Bucket=b)


def test_public_bucket_anonymous_reads_and_listing(pcluster, s3, anon):
    b = make_bucket(s3, acl="public-read")
    assert is_public(s3.get_bucket_acl(Bucket=b))
    s3.put_object(Bucket=b, Key="data/one.bin", Body=b"1" * 5000)
    s3.put_object(Bucket=b, Key="data/two.bin", Body=b"2" * 10)
    assert_anon_reads(pcluster, anon, b, "data/one.bin", b"1" * 5000)
    assert [o["Key"] for o in anon.list_objects_v2(Bucket=b)["Contents"]] == ["data/one.bin", "data/two.bin"]
    assert [o["Key"] for o in anon.list_objects(Bucket=b, Prefix="data/t")["Contents"]] == ["data/two.bin"]
    anon.head_bucket(Bucket=b)
    r = session(token="").get(s3_url(pcluster, b) + "?list-type=2", timeout=30)
    assert r.status_code == 200 and b"data/one.bin" in r.content
    # native: the listing and HEAD of a public bucket
    r = session(token="").get("%s/v1/buckets/%s" % (pcluster.url, b), timeout=30)
    assert r.status_code == 200 and "data/two.bin" in r.text, r.text
    assert session(token="").head("%s/v1/buckets/%s" % (pcluster.url, b), timeout=30).status_code == 200
    # the redirect of an anonymous read is not signed: the target decides
    r = session(token="").get(native_url(pcluster, b, "data/one.bin"), allow_redirects=False, timeout=30)
    assert r.status_code == 307 and "ft_sig=" not in r.headers["Location"]
    # a missing key of a public bucket is a 404 to anyone
    assert code_of(anon.get_object, Bucket=b, Key="absent") == ("NoSuchKey", 404)
    cleanup(s3, b)


def test_anonymous_writes_and_other_requests_are_refused(pcluster, s3, anon):
    b = make_bucket(s3, acl="public-read")
    s3.put_object(Bucket=b, Key="k", Body=b"v")
    assert code_of(anon.put_object, Bucket=b, Key="k2", Body=b"x") == ("AccessDenied", 403)
    assert code_of(anon.delete_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert code_of(anon.put_bucket_acl, Bucket=b, ACL="private") == ("AccessDenied", 403)
    assert code_of(anon.put_object_acl, Bucket=b, Key="k", ACL="private") == ("AccessDenied", 403)
    assert code_of(anon.get_bucket_acl, Bucket=b) == ("AccessDenied", 403)
    assert code_of(anon.get_object_acl, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert code_of(anon.list_multipart_uploads, Bucket=b) == ("AccessDenied", 403)
    assert code_of(anon.create_multipart_upload, Bucket=b, Key="m") == ("AccessDenied", 403)
    assert code_of(anon.delete_bucket, Bucket=b) == ("AccessDenied", 403)
    assert code_of(anon.list_buckets) == ("AccessDenied", 403)
    assert code_of(anon.create_bucket, Bucket=s3util.bucket_name("anon")) == ("AccessDenied", 403)
    anonymous = session(token="")
    u = native_url(pcluster, b, "k")
    assert_json_error(anonymous.put(u, data=b"x", timeout=30), 401)
    assert_json_error(anonymous.delete(u, timeout=30), 401)
    assert_json_error(anonymous.put(u + "?acl=private", timeout=30), 401)
    assert_json_error(anonymous.get(u + "?uploadId=abc", timeout=30), 401)  # multipart calls are never public
    assert_json_error(anonymous.post("%s/v1/buckets/%s" % (pcluster.url, b),
                                     json={"action": "set-bprops", "value": {"acl": "private"}}, timeout=30), 401)
    assert_json_error(anonymous.get(pcluster.url + "/v1/buckets/", timeout=30), 401)
    for t in pcluster.c.targets:
        r = anonymous.put("%s/v1/objects/%s/k?ft_anon=1" % (t.public_url, b), data=b"x", timeout=30)
        assert r.status_code == 401
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"v"
    cleanup(s3, b)


# ---- objects ----

def test_private_everything_is_never_anonymous(pcluster, s3, anon):
    b = make_bucket(s3)
    s3.put_object(Bucket=b, Key="secret", Body=b"private data")
    assert not is_public(s3.get_object_acl(Bucket=b, Key="secret"))
    assert_anon_denied_everywhere(pcluster, anon, b, "secret")
    assert_anon_denied_everywhere(pcluster, anon, b, "absent")  # the same answer: nothing said about existence
    assert code_of(anon.list_objects_v2, Bucket=b) == ("AccessDenied", 403)
    assert code_of(anon.head_bucket, Bucket=b)[1] == 403
    assert_json_error(session(token="").get("%s/v1/buckets/%s" % (pcluster.url, b), timeout=30), 401)
    cleanup(s3, b)


def test_public_object_in_private_bucket(pcluster, s3, anon):
    b = make_bucket(s3)
    s3.put_object(Bucket=b, Key="pub/a.txt", Body=b"for everyone", ACL="public-read")
    s3.put_object(Bucket=b, Key="pub/b.txt", Body=b"only us")
    assert is_public(s3.get_object_acl(Bucket=b, Key="pub/a.txt"))
    assert_anon_reads(pcluster, anon, b, "pub/a.txt", b"for everyone")
    assert_anon_denied_everywhere(pcluster, anon, b, "pub/b.txt")
    assert code_of(anon.list_objects_v2, Bucket=b) == ("AccessDenied", 403)
    # PutObjectAcl both ways
    s3.put_object_acl(Bucket=b, Key="pub/b.txt", ACL="public-read")
    assert_anon_reads(pcluster, anon, b, "pub/b.txt", b"only us")
    s3.put_object_acl(Bucket=b, Key="pub/a.txt", ACL="private")
    assert not is_public(s3.get_object_acl(Bucket=b, Key="pub/a.txt"))
    assert_anon_denied_everywhere(pcluster, anon, b, "pub/a.txt")
    # a new version without x-amz-acl is private again (as S3 does)
    s3.put_object(Bucket=b, Key="pub/b.txt", Body=b"v2")
    assert_anon_denied_everywhere(pcluster, anon, b, "pub/b.txt")
    assert code_of(s3.get_object_acl, Bucket=b, Key="absent") == ("NoSuchKey", 404)
    assert code_of(s3.put_object_acl, Bucket=b, Key="absent", ACL="public-read") == ("NoSuchKey", 404)
    assert code_of(s3.put_object, Bucket=b, Key="x", Body=b"x", ACL="authenticated-read") == ("NotImplemented", 501)
    cleanup(s3, b)


def test_native_object_acl(pcluster, s3, anon):
    api = Api(pcluster.url, token=pcluster.token)
    b = unique("nacl")
    api.create_bucket(b)
    api.put(b, "n1", b"native public", headers={"x-amz-acl": "public-read"})
    api.put(b, "n2", b"native private")
    assert api.head(b, "n1").headers.get("x-amz-acl") == "public-read"
    assert anon_native_get(pcluster, b, "n1").content == b"native public"
    assert_anon_denied_everywhere(pcluster, anon, b, "n2")
    s = session(token=pcluster.token)
    r = s.put(native_url(pcluster, b, "n2") + "?acl=public-read", timeout=30)
    assert r.status_code == 200, r.text
    assert anon_native_get(pcluster, b, "n2").content == b"native private"
    assert_json_error(s.put(native_url(pcluster, b, "n2") + "?acl=bogus", timeout=30), 400, "public-read")
    r = api.put(b, "n3", b"x", headers={"x-amz-acl": "public-read-write"}, expect=400)
    # the bucket's flag through set-bprops
    r = s.post("%s/v1/buckets/%s" % (pcluster.url, b), json={"action": "set-bprops", "value": {"acl": "public-read"}},
               timeout=30)
    assert r.status_code == 200, r.text
    assert is_public(s3.get_bucket_acl(Bucket=b))
    r = session(token="").get("%s/v1/buckets/%s" % (pcluster.url, b), timeout=30)
    assert r.status_code == 200 and "n1" in r.text
    r = s.post("%s/v1/buckets/%s" % (pcluster.url, b), json={"action": "set-bprops", "value": {"acl": "open"}},
               timeout=30)
    assert_json_error(r, 400, "public-read")
    cleanup(s3, b)


def test_copy_and_multipart_with_acl(pcluster, s3, anon):
    b = make_bucket(s3)
    s3.put_object(Bucket=b, Key="src", Body=b"source", ACL="public-read")
    s3.copy_object(Bucket=b, Key="copy-public", CopySource={"Bucket": b, "Key": "src"}, ACL="public-read")
    assert_anon_reads(pcluster, anon, b, "copy-public", b"source")
    # a copy does not inherit the source's ACL
    s3.copy_object(Bucket=b, Key="copy-private", CopySource={"Bucket": b, "Key": "src"})
    assert_anon_denied_everywhere(pcluster, anon, b, "copy-private")
    s3.copy_object(Bucket=b, Key="copy-replace", CopySource={"Bucket": b, "Key": "src"}, ACL="public-read",
                   MetadataDirective="REPLACE", Metadata={"m": "1"})
    assert anon.get_object(Bucket=b, Key="copy-replace")["Metadata"] == {"m": "1"}
    part = b"p" * (5 << 20)
    up = s3.create_multipart_upload(Bucket=b, Key="mpu", ACL="public-read")
    e1 = s3.upload_part(Bucket=b, Key="mpu", UploadId=up["UploadId"], PartNumber=1, Body=part)["ETag"]
    e2 = s3.upload_part(Bucket=b, Key="mpu", UploadId=up["UploadId"], PartNumber=2, Body=b"end")["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="mpu", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert_anon_reads(pcluster, anon, b, "mpu", part + b"end")
    up = s3.create_multipart_upload(Bucket=b, Key="mpu-private")
    e1 = s3.upload_part(Bucket=b, Key="mpu-private", UploadId=up["UploadId"], PartNumber=1, Body=b"x")["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="mpu-private", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}]})
    assert_anon_denied_everywhere(pcluster, anon, b, "mpu-private")
    cleanup(s3, b)


def test_readonly_key_cannot_change_acls(pcluster, s3, ro_s3):
    b = make_bucket(s3)
    s3.put_object(Bucket=b, Key="k", Body=b"v")
    assert code_of(ro_s3.put_bucket_acl, Bucket=b, ACL="public-read") == ("AccessDenied", 403)
    assert code_of(ro_s3.put_object_acl, Bucket=b, Key="k", ACL="public-read") == ("AccessDenied", 403)
    assert not is_public(ro_s3.get_bucket_acl(Bucket=b))  # reading an ACL is a read
    r = session(token="").post(pcluster.url + "/v1/tokens", json={"access_key": RO[0], "secret_key": RO[1]},
                               timeout=30)
    ro = session(token=r.json()["token"])
    r = ro.post("%s/v1/buckets/%s" % (pcluster.url, b), json={"action": "set-bprops", "value": {"acl": "public-read"}},
                timeout=30)
    assert_json_error(r, 403)
    assert_json_error(ro.put(native_url(pcluster, b, "k") + "?acl=public-read", timeout=30,
                             allow_redirects=False), 403)
    assert not is_public(s3.get_bucket_acl(Bucket=b))
    assert not is_public(s3.get_object_acl(Bucket=b, Key="k"))
    cleanup(s3, b)


def test_acls_survive_restarts(pcluster, s3, anon):
    pub = make_bucket(s3, acl="public-read")
    priv = make_bucket(s3)
    s3.put_object(Bucket=pub, Key="a", Body=b"A")
    s3.put_object(Bucket=priv, Key="open", Body=b"O", ACL="public-read")
    s3.put_object(Bucket=priv, Key="closed", Body=b"C")
    restart_proxy(pcluster)
    for i in range(len(pcluster.c.targets)):
        pcluster.restart_target(i)
    assert is_public(s3.get_bucket_acl(Bucket=pub))
    assert_anon_reads(pcluster, anon, pub, "a", b"A")
    assert_anon_reads(pcluster, anon, priv, "open", b"O")
    assert_anon_denied_everywhere(pcluster, anon, priv, "closed")
    assert [o["Key"] for o in anon.list_objects_v2(Bucket=pub)["Contents"]] == ["a"]
    cleanup(s3, pub)
    cleanup(s3, priv)


def curl(*args):
    p = subprocess.run(["curl", "-sS", "--noproxy", "*", "-w", "\n%{http_code}"] + list(args), capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code), body


def test_curl_reads_public_data_only(pcluster, s3):
    b = make_bucket(s3)
    s3.put_object(Bucket=b, Key="open.txt", Body=b"hello, world", ACL="public-read")
    s3.put_object(Bucket=b, Key="closed.txt", Body=b"not for you")
    assert curl("-L", native_url(pcluster, b, "open.txt")) == (200, b"hello, world")
    assert curl(s3_url(pcluster, b, "open.txt")) == (200, b"hello, world")
    code, body = curl("-L", native_url(pcluster, b, "closed.txt"))
    assert code == 401 and b"authentication required" in body
    code, body = curl(s3_url(pcluster, b, "closed.txt"))
    assert code == 403 and b"<Code>AccessDenied</Code>" in body
    code, _ = curl("-L", "-X", "PUT", "--data-binary", "x", native_url(pcluster, b, "open.txt"))
    assert code == 401
    cleanup(s3, b)


# ---- public access off (the default) ----

def test_public_read_is_off_by_default(make_cluster):
    h = make_cluster(targets=1, mountpaths=1, auth=True)
    s3 = s3util.client(h)
    anon = s3util.client(h, signature_version=UNSIGNED)
    b = make_bucket(s3)
    s3.put_object(Bucket=b, Key="k", Body=b"v")
    for call, kw in ((s3.put_bucket_acl, {"ACL": "public-read"}),
                     (s3.put_object_acl, {"Key": "k", "ACL": "public-read"}),
                     (s3.put_object, {"Key": "k2", "Body": b"x", "ACL": "public-read"})):
        with pytest.raises(ClientError) as ei:
            call(Bucket=b, **kw)
        assert s3util.error_code(ei.value) == "AccessDenied"
        assert "allow_public_read" in ei.value.response["Error"]["Message"]
    assert code_of(s3.create_bucket, Bucket=s3util.bucket_name("acl"), ACL="public-read") == ("AccessDenied", 403)
    s3.put_bucket_acl(Bucket=b, ACL="private")  # private is always fine
    tok = session(token=h.token)
    r = tok.post("%s/v1/buckets/%s" % (h.url, b), json={"action": "set-bprops", "value": {"acl": "public-read"}},
                 timeout=30)
    assert_json_error(r, 403, "allow_public_read")
    r = tok.put(native_url(h, b, "k") + "?acl=public-read", timeout=30)
    assert_json_error(r, 403, "allow_public_read")
    r = tok.put(native_url(h, b, "k3"), data=b"x", headers={"x-amz-acl": "public-read"}, timeout=30)
    assert_json_error(r, 400, "allow_public_read")
    assert code_of(anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert_json_error(anon_native_get(h, b, "k"), 401)
    for q in ("", "?ft_anon=1"):
        r = session(token="").get("%s/v1/objects/%s/k%s" % (h.c.targets[0].public_url, b, q), timeout=30)
        assert r.status_code == 401
    cleanup(s3, b)
