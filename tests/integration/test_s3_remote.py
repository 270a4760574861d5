# SPDX-License-Identifier: Apache-2.0
# S3 API on remote buckets (aws via s3rver, ht via nginx), resolved by name: reads, listings, writes, 501s, ambiguity.
"""
One cluster, one s3rver and one nginx origin for the module. Remote buckets are created with the native
API (as an operator does); boto3 then reaches them through the proxy's S3 API by name only:

- a name resolves to the ais bucket of that name, else to the one remote bucket of that name; several
  remote ones and no ais one: 409 InvalidBucketState naming the providers; none: 404 NoSuchBucket;
- GetObject (cold: fetched and cached; warm: served from the cache), HeadObject, Range, ListObjectsV2/V1
  (the backend's objects: prefix, delimiter, MaxKeys and continuation), PutObject and DeleteObject
  written through to the backend (aws; ht is read-only: 501), HeadBucket; multipart uploads are
  test_remote_multipart.py's;
- every other request on a remote bucket answers 501 NotImplemented and stores nothing;
- ListBuckets lists the ais and the remote buckets, each name once.

What the backend holds is read directly (a second boto3 client on s3rver, the origin's files), what the
cluster caches from the targets' mountpaths.
"""
import base64
import hashlib
import os
import re
import urllib.parse
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import peers
import s3util
from ftutil import TIMEOUT, create_remote, objects_on_disk, session, unique
from test_coldget import access_count, cached_files, put_origin

# The data set of the module's aws bucket: three "directories" and two top-level objects under ds/.
DATASET = {f"ds/d{i % 3}/obj-{i:03d}": os.urandom(1000 + 9973 * i) for i in range(23)}
DATASET.update({"ds/top-a": os.urandom(4097), "ds/top-b": os.urandom(1)})
SRC = b"the source object " * 500


s3 = s3util.client_fixture()
origin = peers.nginx_origin_fixture()


s3rver = peers.s3rver_fixture()


@pytest.fixture(scope="module")
def direct(s3rver):
    """A boto3 client on s3rver itself, not through the cluster."""
    import boto3
    return boto3.client("s3", endpoint_url=s3rver.url, aws_access_key_id=peers.S3RVER_KEY,
                        aws_secret_access_key=peers.S3RVER_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def aws_props(s3rver, backend_bucket):
    return {"bucket": backend_bucket, "endpoint": s3rver.url, "addressing": "path", "region": "us-east-1",
            "access_key": peers.S3RVER_KEY, "secret_key": peers.S3RVER_KEY}


def destroy_remote(cluster, bucket, provider):
    session().delete(f"{cluster.url}/v1/buckets/{bucket}?provider={provider}", timeout=TIMEOUT)


def remote_exists(cluster, bucket, provider):
    r = session().head(f"{cluster.url}/v1/buckets/{bucket}?provider={provider}", timeout=TIMEOUT)
    return r.status_code == 200


def new_aws_bucket(cluster, direct, s3rver, objects):
    """A fresh s3rver bucket holding objects, fronted by a new aws bucket of the cluster; returns
    (cluster bucket name, backend bucket name)."""
    name, backend = unique("rs"), unique("be")
    direct.create_bucket(Bucket=backend)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: direct.put_object(Bucket=backend, Key=kv[0], Body=kv[1]), objects.items()))
    create_remote(cluster.url, name, "aws", aws_props(s3rver, backend))
    return name, backend


def new_ht_bucket(cluster, origin, objects):
    """A fresh directory of the origin holding objects, fronted by a new ht bucket; returns
    (bucket name, the directory's name under the origin's root)."""
    name, sub = unique("rh"), unique("dir")
    (origin.root / sub).mkdir(mode=0o755)
    for k, v in objects.items():
        put_origin(origin, f"{sub}/{k}", v)
    create_remote(cluster.url, name, "ht", {"endpoint": f"{origin.url}/{sub}"})
    return name, sub


@pytest.fixture(scope="module")
def aws(cluster, direct, s3rver):
    """The module's aws bucket: (cluster bucket name, s3rver bucket name), DATASET on the backend."""
    name, backend = new_aws_bucket(cluster, direct, s3rver, DATASET)
    yield name, backend
    destroy_remote(cluster, name, "aws")


@pytest.fixture(scope="module")
def ht(cluster, origin):
    """The module's ht bucket: (bucket name, its directory under the origin's root)."""
    name, sub = new_ht_bucket(cluster, origin, {})
    yield name, sub
    destroy_remote(cluster, name, "ht")


@pytest.fixture
def ais_bucket(s3):
    """A fresh ais bucket (S3 API) holding "src", emptied and removed after the test."""
    name = s3util.bucket_name("ra")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="src", Body=SRC)
    yield name
    for p in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
        for o in p.get("Contents", []):
            s3.delete_object(Bucket=name, Key=o["Key"])
    s3.delete_bucket(Bucket=name)


def expect_error(code, status, fn, *args, **kw):
    """fn(*args, **kw) fails with the S3 error code and HTTP status; returns the ClientError."""
    with pytest.raises(ClientError) as ei:
        fn(*args, **kw)
    e = ei.value
    assert s3util.error_code(e) == code, e.response
    assert e.response["ResponseMetadata"]["HTTPStatusCode"] == status, e.response
    return e


def expect_not_implemented(fn, *args, **kw):
    e = expect_error("NotImplemented", 501, fn, *args, **kw)
    assert e.response["Error"].get("Message", "").strip(), e.response
    return e


def body(resp):
    return resp["Body"].read()


def direct_read(direct, backend, key):
    """The object's bytes on s3rver, None when s3rver does not have it."""
    try:
        return body(direct.get_object(Bucket=backend, Key=key))
    except ClientError as e:
        if s3util.error_code(e) in ("NoSuchKey", "404"):
            return None
        raise


def direct_keys(direct, backend):
    return {o["Key"]: o["Size"] for p in direct.get_paginator("list_objects_v2").paginate(Bucket=backend)
            for o in p.get("Contents", [])}


def origin_files(origin, sub):
    top = origin.root / sub
    return {str(p.relative_to(top)): p.read_bytes() for p in top.rglob("*") if p.is_file()}


def list_v2_all(s3, bucket, **kw):
    """Follows ContinuationToken by hand; returns (keys with sizes, common prefixes, pages)."""
    contents, prefixes, pages, token = [], [], 0, None
    while True:
        args = dict(kw, Bucket=bucket)
        if token:
            args["ContinuationToken"] = token
        r = s3.list_objects_v2(**args)
        page = r.get("Contents", [])
        if "MaxKeys" in kw:
            assert len(page) + len(r.get("CommonPrefixes", [])) <= kw["MaxKeys"], r
            assert r["MaxKeys"] == kw["MaxKeys"]
        assert r["KeyCount"] == len(page) + len(r.get("CommonPrefixes", [])), r
        contents += [(o["Key"], o["Size"]) for o in page]
        prefixes += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        pages += 1
        assert pages < 1000
        if not r["IsTruncated"]:
            assert not r.get("NextContinuationToken")
            return contents, prefixes, pages
        assert r["NextContinuationToken"] and r["NextContinuationToken"] != token
        token = r["NextContinuationToken"]


# ---- resolution by name ----

def test_head_bucket_remote(s3, aws, ht):
    assert s3.head_bucket(Bucket=aws[0])["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.head_bucket(Bucket=ht[0])["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_unknown_bucket_is_no_such_bucket(s3, aws):
    missing = s3util.bucket_name("none")
    expect_error("NoSuchBucket", 404, s3.get_object, Bucket=missing, Key="ds/top-a")
    expect_error("NoSuchBucket", 404, s3.list_objects_v2, Bucket=missing)
    expect_error("404", 404, s3.head_bucket, Bucket=missing)


def list_bucket_names(cluster, query=""):
    """Every name ListBuckets gives, page after page (signed requests: this boto3 sends no max-buckets or prefix)."""
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    names, token = [], None
    while True:
        q = query + ("&continuation-token=" + urllib.parse.quote(token, safe="") if token else "")
        r = s3util.signed_request(cluster, "GET", "/?" + q.lstrip("&"))
        assert r.status_code == 200, r.text
        root = ET.fromstring(r.content)
        names += [b.findtext(ns + "Name") for b in root.iter(ns + "Bucket")]
        token = root.findtext(ns + "ContinuationToken")
        if not token:
            return names


def test_list_buckets_lists_remote_buckets_each_name_once(cluster, s3, direct, s3rver, origin, aws, ht,
                                                           ais_bucket):
    """ListBuckets names the buckets the S3 API reaches by name: ais and remote ones, a name shared by an
    ais and a remote bucket once, sorted, across pages; not a name remote buckets of two providers share (409)."""
    ais_date = {b["Name"]: b["CreationDate"] for b in s3.list_buckets()["Buckets"]}[ais_bucket]
    shadowed_backend = unique("be")
    direct.create_bucket(Bucket=shadowed_backend)
    create_remote(cluster.url, ais_bucket, "aws", aws_props(s3rver, shadowed_backend))
    twice, _ = new_aws_bucket(cluster, direct, s3rver, {})
    create_remote(cluster.url, twice, "ht", {"endpoint": f"{origin.url}/{ht[1]}"})
    try:
        listed = s3.list_buckets()
        names = [b["Name"] for b in listed["Buckets"]]
        assert names == sorted(set(names)), names
        assert {aws[0], ht[0], ais_bucket} <= set(names) and twice not in names
        # The shared name stands for the ais bucket, which the S3 API reaches: its creation date.
        assert {b["Name"]: b["CreationDate"] for b in listed["Buckets"]}[ais_bucket] == ais_date
        assert list_bucket_names(cluster, "max-buckets=1") == names
        assert list_bucket_names(cluster, "prefix=" + aws[0]) == [aws[0]]
        assert list_bucket_names(cluster, "prefix=" + twice) == []
        destroy_remote(cluster, twice, "ht")
        assert list_bucket_names(cluster, "prefix=" + twice) == [twice]  # one provider left: reachable again
        s3.head_bucket(Bucket=aws[0])  # a listed remote name is reachable by that name
    finally:
        destroy_remote(cluster, twice, "ht")
        destroy_remote(cluster, twice, "aws")
        destroy_remote(cluster, ais_bucket, "aws")
    names = list_bucket_names(cluster)
    assert twice not in names and ais_bucket in names


def test_ais_bucket_wins_over_remote_of_same_name(cluster, s3, direct, s3rver, ais_bucket):
    backend = unique("be")
    direct.create_bucket(Bucket=backend)
    direct.put_object(Bucket=backend, Key="src", Body=b"remote bytes")
    direct.put_object(Bucket=backend, Key="only-remote", Body=b"remote only")
    create_remote(cluster.url, ais_bucket, "aws", aws_props(s3rver, backend))
    try:
        assert body(s3.get_object(Bucket=ais_bucket, Key="src")) == SRC
        expect_error("NoSuchKey", 404, s3.get_object, Bucket=ais_bucket, Key="only-remote")
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=ais_bucket).get("Contents", [])] == ["src"]
        s3.put_object(Bucket=ais_bucket, Key="new", Body=b"into ais")
        assert direct_read(direct, backend, "new") is None
        assert objects_on_disk(cluster.all_mountpaths(), ais_bucket, "aws") == {}
    finally:
        destroy_remote(cluster, ais_bucket, "aws")


def test_remote_served_once_ais_bucket_of_same_name_is_gone(cluster, s3, direct, s3rver):
    name, backend = unique("rs"), unique("be")
    direct.create_bucket(Bucket=backend)
    direct.put_object(Bucket=backend, Key="only-remote", Body=b"remote only")
    s3.create_bucket(Bucket=name)
    create_remote(cluster.url, name, "aws", aws_props(s3rver, backend))
    try:
        expect_error("NoSuchKey", 404, s3.get_object, Bucket=name, Key="only-remote")
        s3.delete_bucket(Bucket=name)  # the (empty) ais bucket; the aws one stays
        assert remote_exists(cluster, name, "aws")
        assert body(s3.get_object(Bucket=name, Key="only-remote")) == b"remote only"
    finally:
        destroy_remote(cluster, name, "aws")
        try:
            s3.delete_bucket(Bucket=name)  # the ais bucket, when the test failed before deleting it
        except ClientError:
            pass


def test_two_remote_buckets_of_one_name_are_ambiguous(cluster, s3, direct, s3rver, origin):
    name, backend = new_aws_bucket(cluster, direct, s3rver, {"k": b"from s3rver"})
    sub = unique("dir")
    put_origin(origin, f"{sub}/k", b"from nginx")
    create_remote(cluster.url, name, "ht", {"endpoint": f"{origin.url}/{sub}"})
    try:
        for fn, kw in ((s3.get_object, {"Key": "k"}), (s3.head_object, {"Key": "k"}),
                       (s3.list_objects_v2, {}), (s3.list_objects, {}),
                       (s3.put_object, {"Key": "new", "Body": b"x"}), (s3.delete_object, {"Key": "k"})):
            if fn.__name__ == "head_object":
                expect_error("409", 409, fn, Bucket=name, **kw)  # HEAD: status only, no body
                continue
            e = expect_error("InvalidBucketState", 409, fn, Bucket=name, **kw)
            msg = e.response["Error"].get("Message", "")
            assert re.search(r"\baws\b", msg) and re.search(r"\bht\b", msg), msg
        expect_error("409", 409, s3.head_bucket, Bucket=name)
        # Nothing stored or removed by the refused requests.
        assert direct_keys(direct, backend) == {"k": len(b"from s3rver")}
        assert origin_files(origin, sub) == {"k": b"from nginx"}
        assert objects_on_disk(cluster.all_mountpaths(), name, "aws") == {}
        assert objects_on_disk(cluster.all_mountpaths(), name, "ht") == {}
        # One of them gone: the name is the other one's.
        destroy_remote(cluster, name, "ht")
        assert body(s3.get_object(Bucket=name, Key="k")) == b"from s3rver"
    finally:
        destroy_remote(cluster, name, "ht")
        destroy_remote(cluster, name, "aws")


# ---- aws: reads ----

def test_aws_cold_then_warm_get(cluster, s3, direct, aws):
    name, backend = aws
    key, data = "cold/" + unique("o"), os.urandom(300007)
    direct.put_object(Bucket=backend, Key=key, Body=data)
    assert cached_files(cluster, "aws", name, key) == []
    g = s3.get_object(Bucket=name, Key=key)
    assert g["ContentLength"] == len(data)
    assert body(g) == data
    assert len(cached_files(cluster, "aws", name, key)) == 1
    # Changed on the backend behind the cluster's back: the warm GET serves the cached copy.
    direct.put_object(Bucket=backend, Key=key, Body=b"changed on the backend")
    g = s3.get_object(Bucket=name, Key=key)
    assert g["ContentLength"] == len(data)
    assert body(g) == data


def test_aws_get_missing_key(s3, aws):
    expect_error("NoSuchKey", 404, s3.get_object, Bucket=aws[0], Key="ds/no-such-object")
    expect_error("404", 404, s3.head_object, Bucket=aws[0], Key="ds/no-such-object")


def test_aws_head_object_cold_and_warm(cluster, s3, direct, aws):
    name, backend = aws
    key, data = "head/" + unique("o"), os.urandom(12345)
    direct.put_object(Bucket=backend, Key=key, Body=data)
    h = s3.head_object(Bucket=name, Key=key)
    assert h["ContentLength"] == len(data)
    assert h["LastModified"] is not None
    body(s3.get_object(Bucket=name, Key=key))
    assert len(cached_files(cluster, "aws", name, key)) == 1
    assert s3.head_object(Bucket=name, Key=key)["ContentLength"] == len(data)


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_aws_range_get(cluster, s3, direct, aws, warm):
    name, backend = aws
    key, data = "range/" + unique("o"), os.urandom(200003)
    direct.put_object(Bucket=backend, Key=key, Body=data)
    if warm:
        assert body(s3.get_object(Bucket=name, Key=key)) == data
        assert len(cached_files(cluster, "aws", name, key)) == 1
    n = len(data)
    for rng, lo, hi in (("bytes=10-99", 10, 99), ("bytes=-17", n - 17, n - 1),
                        ("bytes=150000-", 150000, n - 1), ("bytes=0-0", 0, 0)):
        g = s3.get_object(Bucket=name, Key=key, Range=rng)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206, rng
        assert g["ContentRange"] == "bytes %d-%d/%d" % (lo, hi, n), rng
        assert g["ContentLength"] == hi - lo + 1
        assert body(g) == data[lo:hi + 1], rng
    expect_error("InvalidRange", 416, s3.get_object, Bucket=name, Key=key, Range="bytes=%d-" % (n + 10))


# ---- aws: listings ----

def test_aws_list_v2_whole_prefix(s3, aws):
    contents, prefixes, pages = list_v2_all(s3, aws[0], Prefix="ds/")
    assert pages == 1 and prefixes == []
    assert contents == sorted((k, len(v)) for k, v in DATASET.items())


def test_aws_list_v2_pages(s3, aws):
    want = sorted((k, len(v)) for k, v in DATASET.items())
    for size in (1, 4, 7):
        contents, _, pages = list_v2_all(s3, aws[0], Prefix="ds/", MaxKeys=size)
        assert contents == want, size
        assert pages >= len(want) // size
    # The paginator gets the same, and StartAfter skips what it names.
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=aws[0], Prefix="ds/",
                                                         PaginationConfig={"PageSize": 5})
    assert [(o["Key"], o["Size"]) for p in pages for o in p.get("Contents", [])] == want
    contents, _, _ = list_v2_all(s3, aws[0], Prefix="ds/", StartAfter=want[9][0], MaxKeys=6)
    assert contents == want[10:]


def test_aws_list_v2_delimiter(s3, aws):
    contents, prefixes, _ = list_v2_all(s3, aws[0], Prefix="ds/", Delimiter="/")
    assert prefixes == ["ds/d0/", "ds/d1/", "ds/d2/"]
    assert contents == [("ds/top-a", 4097), ("ds/top-b", 1)]
    # In pages of 2, the directories and objects come each once, in order.
    contents, prefixes, pages = list_v2_all(s3, aws[0], Prefix="ds/", Delimiter="/", MaxKeys=2)
    assert prefixes == ["ds/d0/", "ds/d1/", "ds/d2/"]
    assert contents == [("ds/top-a", 4097), ("ds/top-b", 1)]
    assert pages >= 3
    contents, prefixes, _ = list_v2_all(s3, aws[0], Prefix="ds/d1/", Delimiter="/")
    assert prefixes == [] and [k for k, _ in contents] == sorted(k for k in DATASET if k.startswith("ds/d1/"))
    contents, prefixes, _ = list_v2_all(s3, aws[0], Prefix="nothing-here/")
    assert contents == [] and prefixes == []


def test_aws_list_v1_marker_pages(s3, aws):
    want = sorted((k, len(v)) for k, v in DATASET.items())
    got, marker, pages = [], "", 0
    while True:
        r = s3.list_objects(Bucket=aws[0], Prefix="ds/", MaxKeys=5, Marker=marker)
        page = [(o["Key"], o["Size"]) for o in r.get("Contents", [])]
        assert len(page) <= 5
        got += page
        pages += 1
        assert pages < 100
        if not r["IsTruncated"]:
            break
        marker = page[-1][0]
    assert got == want
    r = s3.list_objects(Bucket=aws[0], Prefix="ds/", Delimiter="/")
    assert [p["Prefix"] for p in r.get("CommonPrefixes", [])] == ["ds/d0/", "ds/d1/", "ds/d2/"]
    assert [o["Key"] for o in r.get("Contents", [])] == ["ds/top-a", "ds/top-b"]


def test_aws_list_shows_cached_and_uncached(cluster, s3, direct, aws):
    name, backend = aws
    pre = "mixed-" + unique("p") + "/"
    data = {pre + "%02d" % i: os.urandom(100 + i) for i in range(6)}
    for k, v in data.items():
        direct.put_object(Bucket=backend, Key=k, Body=v)
    got = sorted(data)[::2]
    for k in got:
        assert body(s3.get_object(Bucket=name, Key=k)) == data[k]
    for k in data:
        assert len(cached_files(cluster, "aws", name, k)) == (1 if k in got else 0), k
    contents, _, _ = list_v2_all(s3, name, Prefix=pre, MaxKeys=4)
    assert contents == sorted((k, len(v)) for k, v in data.items())


# ---- aws: writes go through ----

def test_aws_put_writes_through(cluster, s3, direct, aws):
    name, backend = aws
    key = "put/" + unique("o")
    for data in (os.urandom(70001), b"second version"):
        r = s3.put_object(Bucket=name, Key=key, Body=data)
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert direct_read(direct, backend, key) == data
        assert len(cached_files(cluster, "aws", name, key)) == 1
        assert body(s3.get_object(Bucket=name, Key=key)) == data
        assert s3.head_object(Bucket=name, Key=key)["ContentLength"] == len(data)
    assert (key, len(b"second version")) in list_v2_all(s3, name, Prefix="put/")[0]


def test_aws_delete_writes_through(cluster, s3, direct, aws):
    name, backend = aws
    key, data = "del/" + unique("o"), os.urandom(5000)
    direct.put_object(Bucket=backend, Key=key, Body=data)
    assert body(s3.get_object(Bucket=name, Key=key)) == data
    assert len(cached_files(cluster, "aws", name, key)) == 1
    r = s3.delete_object(Bucket=name, Key=key)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert direct_read(direct, backend, key) is None
    assert cached_files(cluster, "aws", name, key) == []
    expect_error("NoSuchKey", 404, s3.get_object, Bucket=name, Key=key)
    # S3 does not tell a missing key: deleting one succeeds.
    assert s3.delete_object(Bucket=name, Key=key)["ResponseMetadata"]["HTTPStatusCode"] == 204


def backend_lists(s3rver, backend):
    """How many listings of backend s3rver has served so far (its log)."""
    return s3rver.log_path.read_text(errors="replace").count('Fetched bucket "%s"' % backend)


def test_aws_list_v1_marker_resumes_in_the_backends_page(cluster, s3, direct, s3rver):
    # ListObjects v1 pages by key, the backend by its own token: the key a truncated page ends with leads the next
    # request straight to the backend page it is in (one backend listing), not through the pages before it (two
    # here: 1,005 keys, backend pages of 1,000). A marker never handed out is still answered right, from the start.
    # The same pages with V2 tokens cost one backend listing each too.
    keys = ["k%04d" % i for i in range(1005)]
    name, backend = new_aws_bucket(cluster, direct, s3rver, {k: b"v" for k in keys})
    try:
        before = backend_lists(s3rver, backend)
        first = s3.list_objects(Bucket=name, MaxKeys=1000)
        assert first["IsTruncated"] and [o["Key"] for o in first["Contents"]] == keys[:1000]
        # a page that fills up at the end of a backend page needs no second backend page to tell more follow
        assert backend_lists(s3rver, backend) - before == 1
        before = backend_lists(s3rver, backend)
        second = s3.list_objects(Bucket=name, MaxKeys=1000, Marker=first["NextMarker"])
        assert [o["Key"] for o in second["Contents"]] == keys[1000:] and not second["IsTruncated"]
        assert backend_lists(s3rver, backend) - before == 1, "the backend listed again from its first page"
        other = s3.list_objects(Bucket=name, MaxKeys=3, Marker="k0500")
        assert [o["Key"] for o in other["Contents"]] == keys[501:504]
        # A marker or start-after never handed out (another proxy's page, a restart): the backend starts after it
        # (S3's start-after), one backend listing, not one for each backend page before it.
        before = backend_lists(s3rver, backend)
        far = s3.list_objects(Bucket=name, MaxKeys=2, Marker="k1001")
        assert [o["Key"] for o in far["Contents"]] == keys[1002:1004] and far["IsTruncated"]
        far = s3.list_objects_v2(Bucket=name, StartAfter="k1002")
        assert [o["Key"] for o in far["Contents"]] == keys[1003:] and not far["IsTruncated"]
        assert backend_lists(s3rver, backend) - before == 2
        # A page ending in a common prefix has skipped the names under it: its backend page serves the same
        # delimiter only. With delimiter "0" the first backend page rolls up into "k0"; a listing without a
        # delimiter after the marker "k0" must still give k0000... (it gave k1000... when the kept page was used).
        rolled = s3.list_objects(Bucket=name, Delimiter="0", MaxKeys=1)
        assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["k0"] and rolled["IsTruncated"], rolled
        flat = s3.list_objects(Bucket=name, MaxKeys=1000, Marker="k0")
        assert [o["Key"] for o in flat["Contents"]] == keys[:1000]
        rest = s3.list_objects(Bucket=name, Delimiter="0", MaxKeys=1, Marker=rolled["NextMarker"])
        assert [p["Prefix"] for p in rest["CommonPrefixes"]] == ["k10"] and not rest.get("Contents"), rest
        before = backend_lists(s3rver, backend)
        v2 = s3.list_objects_v2(Bucket=name, MaxKeys=1000)
        rest = s3.list_objects_v2(Bucket=name, MaxKeys=1000, ContinuationToken=v2["NextContinuationToken"])
        assert [o["Key"] for o in v2["Contents"] + rest["Contents"]] == keys and not rest["IsTruncated"]
        assert backend_lists(s3rver, backend) - before == 2
    finally:
        destroy_remote(cluster, name, "aws")


def test_aws_list_slash_delimiter_is_the_backends(cluster, s3, direct, s3rver):
    # With delimiter "/" the backend rolls a "directory" up into one entry of its listing: one backend listing
    # for a directory of 1,001 names (two when the proxy rolled the names up itself, a backend page of 1,000 names
    # after another). Another delimiter is applied by the proxy to the flat listing (s3rver loses "e+f/x" under
    # delimiter "+"). A token of one kind of listing is refused by the other.
    keys = ["d/%04d" % i for i in range(1001)] + ["e+f/x", "top"]
    name, backend = new_aws_bucket(cluster, direct, s3rver, {k: b"v" for k in keys})
    try:
        before = backend_lists(s3rver, backend)
        for listed in (s3.list_objects_v2(Bucket=name, Delimiter="/"), s3.list_objects(Bucket=name, Delimiter="/")):
            assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["d/", "e+f/"], listed
            assert [o["Key"] for o in listed["Contents"]] == ["top"] and not listed["IsTruncated"]
        assert backend_lists(s3rver, backend) - before == 2, "not one backend listing per S3 listing"
        contents, prefixes, _ = list_v2_all(s3, name, Delimiter="+")
        assert prefixes == ["e+"] and [k for k, _ in contents] == keys[:1001] + ["top"]
        first = s3.list_objects_v2(Bucket=name, Delimiter="/", MaxKeys=1)
        assert [p["Prefix"] for p in first["CommonPrefixes"]] == ["d/"] and first["IsTruncated"]
        token = first["NextContinuationToken"]
        rest = s3.list_objects_v2(Bucket=name, Delimiter="/", ContinuationToken=token)
        assert [p["Prefix"] for p in rest["CommonPrefixes"]] == ["e+f/"] and [o["Key"] for o in rest["Contents"]] == ["top"]
        expect_error("InvalidArgument", 400, s3.list_objects_v2, Bucket=name, ContinuationToken=token)
        flat = s3.list_objects_v2(Bucket=name, MaxKeys=1)
        expect_error("InvalidArgument", 400, s3.list_objects_v2, Bucket=name, Delimiter="/",
                     ContinuationToken=flat["NextContinuationToken"])
    finally:
        destroy_remote(cluster, name, "aws")


def test_list_refusals(s3, aws, ht):
    # An ht bucket has no listing (400, as the native API answers); a continuation token that is not one this
    # proxy made for a remote bucket is InvalidArgument, whatever its shape.
    e = expect_error("InvalidRequest", 400, s3.list_objects_v2, Bucket=ht[0])
    assert "no listing" in e.response["Error"]["Message"]
    for raw in (b"fr1:999999:x", b"fr1:x", b"fr1:", b"ft1:k0001", b"garbage!", b"fr1:3:ab"):
        token = base64.b64encode(raw).decode()
        expect_error("InvalidArgument", 400, s3.list_objects_v2, Bucket=aws[0], ContinuationToken=token)
    expect_error("InvalidArgument", 400, s3.list_objects_v2, Bucket=aws[0], ContinuationToken="@@@@")
    # well-formed, but the backend's token in it is not one the backend made: the backend refuses it (400)
    bogus = base64.b64encode(b"fr1:8:AAAAAAAAds/").decode()
    e = expect_error("InvalidArgument", 400, s3.list_objects_v2, Bucket=aws[0], ContinuationToken=bogus)
    assert "continuation token" in e.response["Error"]["Message"]
    # "fr1:3:ab" claims 3 bytes of backend token and has 2: refused above; a well-formed one with an empty
    # backend token (the first page) and a marker reads on after the marker
    token = base64.b64encode(b"fr1:0:ds/d0/k00").decode()
    got = s3.list_objects_v2(Bucket=aws[0], Prefix="ds/", ContinuationToken=token)
    assert [o["Key"] for o in got["Contents"]] == sorted(k for k in DATASET if k > "ds/d0/k00")


def test_get_by_part_number_not_implemented(s3, aws):
    # A remote object has no multipart layout here: GetObject by partNumber is refused, not answered as a part.
    key = sorted(DATASET)[0]
    e = expect_not_implemented(s3.get_object, Bucket=aws[0], Key=key, PartNumber=1)
    assert "partNumber" in e.response["Error"]["Message"]


def test_acl_headers_on_remote_writes_not_implemented(cluster, s3, direct, s3rver):
    # The ACL would be kept on the cached copy only (the backend's object has none, an eviction drops it).
    name, backend = new_aws_bucket(cluster, direct, s3rver, {"src": SRC})
    try:
        expect_not_implemented(s3.put_object, Bucket=name, Key="acl", Body=b"x", ACL="public-read")
        expect_not_implemented(s3.create_multipart_upload, Bucket=name, Key="acl", ACL="private")
        expect_not_implemented(s3.put_object, Bucket=name, Key="acl", Body=b"x", GrantRead="id=someone")
        assert direct_keys(direct, backend) == {"src": len(SRC)}
        assert cached_files(cluster, "aws", name, "acl") == []
    finally:
        destroy_remote(cluster, name, "aws")


def test_create_bucket_of_a_remote_name_creates_nothing(cluster, s3, direct, s3rver):
    # Tools call CreateBucket to make sure a bucket exists: the remote bucket of that name is the one, and no ais
    # bucket is made to shadow it (in us-east-1 S3 answers 200 for a bucket one owns).
    name, backend = new_aws_bucket(cluster, direct, s3rver, {"src": SRC})
    try:
        s3.create_bucket(Bucket=name)
        assert not remote_exists(cluster, name, "ais")  # (ListBuckets names the remote bucket: it cannot tell)
        assert body(s3.get_object(Bucket=name, Key="src")) == SRC
        s3.put_object(Bucket=name, Key="after", Body=b"through")
        assert direct_read(direct, backend, "after") == b"through"
    finally:
        destroy_remote(cluster, name, "aws")


def test_aws_delete_objects_writes_through(cluster, s3, direct, s3rver):
    # DeleteObjects (what `aws s3 rm --recursive` sends): every key deleted on the backend and from the cache; a
    # key the backend never had is reported deleted, as S3 does.
    objects = {"a": b"1" * 100, "b": b"2" * 200, "keep": b"3" * 300}
    name, backend = new_aws_bucket(cluster, direct, s3rver, objects)
    try:
        assert body(s3.get_object(Bucket=name, Key="a")) == objects["a"]  # cached
        assert len(cached_files(cluster, "aws", name, "a")) == 1
        r = s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "a"}, {"Key": "b"}, {"Key": "never"}]})
        assert sorted(d["Key"] for d in r.get("Deleted", [])) == ["a", "b", "never"], r
        assert not r.get("Errors"), r
        assert direct_keys(direct, backend) == {"keep": 300}
        assert cached_files(cluster, "aws", name, "a") == []
        expect_error("NoSuchKey", 404, s3.get_object, Bucket=name, Key="b")
        assert body(s3.get_object(Bucket=name, Key="keep")) == objects["keep"]
    finally:
        destroy_remote(cluster, name, "aws")


def test_ht_delete_objects_not_implemented(cluster, s3, origin):
    name, sub = new_ht_bucket(cluster, origin, {"src": SRC})
    try:
        e = expect_not_implemented(s3.delete_objects, Bucket=name, Delete={"Objects": [{"Key": "src"}]})
        assert "read-only" in e.response["Error"]["Message"]
        assert origin_files(origin, sub) == {"src": SRC}
        assert body(s3.get_object(Bucket=name, Key="src")) == SRC
    finally:
        destroy_remote(cluster, name, "ht")


# ---- ht: read-only ----

def test_ht_cold_then_warm_get(cluster, s3, origin, ht):
    name, sub = ht
    key, data = "cold/" + unique("o") + ".bin", os.urandom(250001)
    put_origin(origin, f"{sub}/{key}", data)
    assert cached_files(cluster, "ht", name, key) == []
    g = s3.get_object(Bucket=name, Key=key)
    assert g["ContentLength"] == len(data)
    assert body(g) == data
    assert len(cached_files(cluster, "ht", name, key)) == 1
    assert access_count(origin, f"{sub}/{key}") == 1
    for _ in range(3):
        assert body(s3.get_object(Bucket=name, Key=key)) == data
    assert access_count(origin, f"{sub}/{key}") == 1, "a warm GET went to the origin"


def test_ht_head_and_range(s3, origin, ht):
    name, sub = ht
    key, data = "hr/" + unique("o"), os.urandom(100000)
    put_origin(origin, f"{sub}/{key}", data)
    assert s3.head_object(Bucket=name, Key=key)["ContentLength"] == len(data)
    g = s3.get_object(Bucket=name, Key=key, Range="bytes=1000-1999")
    assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert g["ContentRange"] == "bytes 1000-1999/%d" % len(data)
    assert body(g) == data[1000:2000]
    assert body(s3.get_object(Bucket=name, Key=key, Range="bytes=-10")) == data[-10:]
    expect_error("NoSuchKey", 404, s3.get_object, Bucket=name, Key="hr/not-on-the-origin")


def test_ht_put_and_delete_not_implemented(cluster, s3, origin, ht):
    name, sub = ht
    key, data = "ro/" + unique("o"), os.urandom(3000)
    expect_not_implemented(s3.put_object, Bucket=name, Key=key, Body=b"refused")
    assert not (origin.root / sub / key).exists()
    assert cached_files(cluster, "ht", name, key) == []
    put_origin(origin, f"{sub}/{key}", data)
    assert body(s3.get_object(Bucket=name, Key=key)) == data
    expect_not_implemented(s3.put_object, Bucket=name, Key=key, Body=b"refused overwrite")
    expect_not_implemented(s3.delete_object, Bucket=name, Key=key)
    assert (origin.root / sub / key).read_bytes() == data
    assert len(cached_files(cluster, "ht", name, key)) == 1
    assert body(s3.get_object(Bucket=name, Key=key)) == data
    assert cluster.work_files() == []


# ---- everything else: 501 NotImplemented, nothing stored ----

TAGS = {"TagSet": [{"Key": "k", "Value": "v"}]}
REFUSED = {
    "copy_into_remote": lambda s3, b, ais: s3.copy_object(Bucket=b, Key="copied",
                                                          CopySource={"Bucket": ais, "Key": "src"}),
    "copy_out_of_remote": lambda s3, b, ais: s3.copy_object(Bucket=ais, Key="copied",
                                                            CopySource={"Bucket": b, "Key": "src"}),
    "copy_within_remote": lambda s3, b, ais: s3.copy_object(Bucket=b, Key="copied",
                                                            CopySource={"Bucket": b, "Key": "src"}),
    "get_object_acl": lambda s3, b, ais: s3.get_object_acl(Bucket=b, Key="src"),
    "put_object_acl": lambda s3, b, ais: s3.put_object_acl(Bucket=b, Key="src", ACL="public-read"),
    "get_bucket_acl": lambda s3, b, ais: s3.get_bucket_acl(Bucket=b),
    "put_bucket_acl": lambda s3, b, ais: s3.put_bucket_acl(Bucket=b, ACL="public-read"),
    "get_object_tagging": lambda s3, b, ais: s3.get_object_tagging(Bucket=b, Key="src"),
    "put_object_tagging": lambda s3, b, ais: s3.put_object_tagging(Bucket=b, Key="src", Tagging=TAGS),
    "delete_object_tagging": lambda s3, b, ais: s3.delete_object_tagging(Bucket=b, Key="src"),
    "get_bucket_tagging": lambda s3, b, ais: s3.get_bucket_tagging(Bucket=b),
    "delete_bucket": lambda s3, b, ais: s3.delete_bucket(Bucket=b),
}


@pytest.mark.parametrize("op", sorted(REFUSED))
@pytest.mark.parametrize("provider", ["aws", "ht"])
def test_refused_on_remote_bucket(cluster, s3, direct, s3rver, origin, ais_bucket, provider, op):
    if provider == "aws":
        name, backend = new_aws_bucket(cluster, direct, s3rver, {"src": SRC})
    else:
        name, sub = new_ht_bucket(cluster, origin, {"src": SRC})
    try:
        expect_not_implemented(REFUSED[op], s3, name, ais_bucket)
        # Nothing stored, changed or removed: the backend, the cache, the ais bucket, the bucket itself.
        if provider == "aws":
            assert direct_keys(direct, backend) == {"src": len(SRC)}
            assert direct_read(direct, backend, "src") == SRC
        else:
            assert origin_files(origin, sub) == {"src": SRC}
        assert objects_on_disk(cluster.all_mountpaths(), name, provider) == {}
        assert cluster.work_files() == []
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=ais_bucket).get("Contents", [])] == ["src"]
        assert remote_exists(cluster, name, provider)
        assert body(s3.get_object(Bucket=name, Key="src")) == SRC
    finally:
        destroy_remote(cluster, name, provider)


# ---- a PyTorch-style epoch: list with the paginator, GET everything in 4 threads ----

def test_pytorch_style_read_of_remote_bucket(cluster, s3, aws):
    name = aws[0]
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix="ds/",
                                                         PaginationConfig={"PageSize": 6})
    keys = [o["Key"] for p in pages for o in p.get("Contents", [])]
    assert sorted(keys) == sorted(DATASET)

    def fetch(key):
        return key, hashlib.sha256(body(s3.get_object(Bucket=name, Key=key))).hexdigest()

    for epoch in range(2):  # cold, then warm
        with ThreadPoolExecutor(4) as pool:
            got = dict(pool.map(fetch, keys[::-1] if epoch else keys))
        assert got == {k: hashlib.sha256(v).hexdigest() for k, v in DATASET.items()}, "epoch %d" % epoch
        assert set(objects_on_disk(cluster.all_mountpaths(), name, "aws")) >= set(DATASET)
