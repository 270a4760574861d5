# SPDX-License-Identifier: Apache-2.0
# Listing remote buckets (aws via s3rver, azure via azurite, gcp via the GCS emulator): pages, tokens, cached flags.
import base64
import datetime
import hashlib
import hmac
import os
import shutil
from urllib.parse import quote

import pytest
import requests

import peers
from ftutil import TIMEOUT, assert_json_error, create_remote, obj_url, unique
from test_coldget import cached_files

PROVIDERS = ["aws", "azure", "gcp"]
NAMES = [f"d{i % 3}/obj-{i:03d}" for i in range(23)] + ["top-a", "top-b"]


# ---- writing to the emulators (independently of the C backends) ----
def s3_client(p):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=p.url, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                        region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))


def azure_put(p, container, name, data):
    path = f"/{p.account}/{container}/{quote(name)}"
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers = {"x-ms-date": date, "x-ms-version": "2021-08-06", "x-ms-blob-type": "BlockBlob"}
    canon = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
    # VERB, Content-Encoding, -Language, -Length, -MD5, -Type, Date, If-Modified-Since, If-Match,
    # If-None-Match, If-Unmodified-Since, Range
    length = str(len(data)) if data else ""  # a zero length is signed as empty
    sts = "PUT\n\n\n" + length + "\n\napplication/octet-stream\n" + "\n" * 6 + canon + f"/{p.account}{path}"
    sig = base64.b64encode(hmac.new(base64.b64decode(p.key), sts.encode(), hashlib.sha256).digest()).decode()
    headers["Authorization"] = f"SharedKey {p.account}:{sig}"
    headers["Content-Type"] = "application/octet-stream"
    r = requests.put(f"http://127.0.0.1:{p.port}{path}", data=data, headers=headers, timeout=TIMEOUT)
    assert r.status_code == 201, r.text


def gcs_put(p, bucket, name, data):
    r = requests.post(f"{p.url}/upload/storage/v1/b/{bucket}/o", params={"uploadType": "media", "name": name},
                      data=data, headers={"Content-Type": "application/octet-stream"}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text


class Backend:
    """One emulator with one backend bucket holding NAMES; props() gives a cluster bucket's backend properties."""

    def __init__(self, provider, peer):
        self.provider, self.peer = provider, peer
        self.data = {n: os.urandom(100 + 7 * i) for i, n in enumerate(NAMES)}
        if provider == "aws":
            self.bucket = peer.bucket
            s3 = s3_client(peer)
            for n, d in self.data.items():
                s3.put_object(Bucket=self.bucket, Key=n, Body=d)
        elif provider == "azure":
            self.bucket = peer.container
            for n, d in self.data.items():
                azure_put(peer, self.bucket, n, d)
        else:
            self.bucket = peer.bucket
            for n, d in self.data.items():
                gcs_put(peer, self.bucket, n, d)

    def props(self, bucket=None):
        p = self.peer
        b = bucket or self.bucket
        if self.provider == "aws":
            return {"bucket": b, "endpoint": p.url, "addressing": "path", "region": "us-east-1",
                    "access_key": "S3RVER", "secret_key": "S3RVER"}
        if self.provider == "azure":
            return {"bucket": b, "endpoint": p.url, "account": p.account, "account_key": p.key}
        return {"bucket": b, "endpoint": p.url}


@pytest.fixture(scope="module", params=PROVIDERS)
def backend(request):
    peers.ensure_installed()
    d = peers.scratch_dir()
    start = {"aws": peers.start_s3rver, "azure": peers.start_azurite, "gcp": peers.start_gcs}[request.param]
    p = start(os.path.join(d, request.param))
    try:
        yield Backend(request.param, p)
    finally:
        p.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def rbucket(cluster, backend):
    b = unique("rl")
    create_remote(cluster.url, b, backend.provider, backend.props())
    yield b
    requests.delete(f"{cluster.url}/v1/buckets/{b}?provider={backend.provider}", timeout=TIMEOUT)


def list_page(cluster, provider, bucket, **params):
    return requests.get(f"{cluster.url}/v1/buckets/{bucket}", params={"provider": provider, **params}, timeout=TIMEOUT)


def list_all(cluster, provider, bucket, **params):
    """Follows tokens; returns (entries, pages). Pages never exceed pagesize; tokens always move."""
    entries, token, pages = [], None, 0
    while True:
        q = dict(params)
        if token:
            q["continuation_token"] = token
        r = list_page(cluster, provider, bucket, **q)
        assert r.status_code == 200, r.text
        j = r.json()
        if "pagesize" in params:
            assert len(j["entries"]) <= int(params["pagesize"])
        entries += j["entries"]
        pages += 1
        assert pages < 1000
        if not j["continuation_token"]:
            return entries, pages
        assert j["continuation_token"] != token
        token = j["continuation_token"]


def get_obj(cluster, provider, bucket, name):
    r = requests.get(obj_url(cluster.url, bucket, name, provider=provider), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.content


def test_list_all_pages_and_tokens(cluster, backend, rbucket):
    p = backend.provider
    entries, pages = list_all(cluster, p, rbucket)
    assert pages == 1
    assert [e["name"] for e in entries] == sorted(NAMES)
    for e in entries:
        assert e["size"] == len(backend.data[e["name"]]), e
        assert e["cached"] is False, e
    # Small pages: the backend's token passes through; every name exactly once, in order.
    for size in (1, 4, 7):
        entries, pages = list_all(cluster, p, rbucket, pagesize=str(size))
        assert [e["name"] for e in entries] == sorted(NAMES)
        assert pages >= len(NAMES) // size
    # A token handed back lists the rest.
    r = list_page(cluster, p, rbucket, pagesize="10")
    assert r.status_code == 200 and len(r.json()["entries"]) == 10
    rest, _ = list_all(cluster, p, rbucket, continuation_token=r.json()["continuation_token"])
    assert [e["name"] for e in rest] == sorted(NAMES)[10:]


def test_list_prefix(cluster, backend, rbucket):
    entries, _ = list_all(cluster, backend.provider, rbucket, prefix="d1/", pagesize="3")
    assert [e["name"] for e in entries] == sorted(n for n in NAMES if n.startswith("d1/"))
    entries, _ = list_all(cluster, backend.provider, rbucket, prefix="nothing-here/")
    assert entries == []


def test_cached_flags_exact(cluster, backend, rbucket):
    p = backend.provider
    got = sorted(NAMES)[::3]  # spread over the targets by HRW
    for n in got:
        assert get_obj(cluster, p, rbucket, n) == backend.data[n]
    for size in ("1000", "4"):
        entries, _ = list_all(cluster, p, rbucket, pagesize=size)
        assert [e["name"] for e in entries if e["cached"]] == got
        assert len(entries) == len(NAMES)
    # The cached-only listing: exactly those, in order, also in small pages.
    for size in ("1000", "2"):
        entries, _ = list_all(cluster, p, rbucket, cached="true", pagesize=size)
        assert [e["name"] for e in entries] == got
        assert all(e["cached"] is True and e["size"] == len(backend.data[e["name"]]) for e in entries)
    entries, _ = list_all(cluster, p, rbucket, cached="true", prefix="d0/")
    assert [e["name"] for e in entries] == [n for n in got if n.startswith("d0/")]
    # Evicting one clears its flag.
    gone = got[1]
    r = requests.delete(obj_url(cluster.url, rbucket, gone, provider=p, extra="&evict=true"), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    entries, _ = list_all(cluster, p, rbucket)
    assert [e["name"] for e in entries if e["cached"]] == [n for n in got if n != gone]
    entries, _ = list_all(cluster, p, rbucket, cached="true")
    assert [e["name"] for e in entries] == [n for n in got if n != gone]


def test_stray_copy_on_non_owner_is_not_cached(cluster, backend, rbucket):
    # A copy on a target that does not own the name (e.g. left by a map change) is not "in the cluster":
    # a GET goes to the owner. Listings must say what the owner has.
    cluster.require_local("places a file on a target's mountpath")
    p = backend.provider
    name = sorted(NAMES)[0]
    get_obj(cluster, p, rbucket, name)
    [path] = cached_files(cluster, p, rbucket, name)
    owner_mp = path[: -len(os.path.join(p, rbucket, name)) - 1]
    owner = next(i for i in range(len(cluster.c.targets)) if owner_mp in cluster.mountpaths(i))
    other = (owner + 1) % len(cluster.c.targets)
    stray_mps = cluster.mountpaths(other)
    for mp in stray_mps:
        dst = os.path.join(mp, p, rbucket, name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(path, dst)  # data and metadata xattrs: a valid object, on the wrong target
    r = requests.delete(obj_url(cluster.url, rbucket, name, provider=p, extra="&evict=true"), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    entries, _ = list_all(cluster, p, rbucket)
    assert not any(e["cached"] for e in entries if e["name"] == name)
    for size in ("1000", "1"):
        entries, _ = list_all(cluster, p, rbucket, cached="true", pagesize=size)
        assert name not in [e["name"] for e in entries]
    for mp in stray_mps:
        os.remove(os.path.join(mp, p, rbucket, name))


def test_bad_requests(cluster, backend, rbucket):
    p = backend.provider
    assert_json_error(list_page(cluster, p, unique("none")), 404, "does not exist")
    assert_json_error(list_page(cluster, p, rbucket, pagesize="x"), 400, "pagesize")
    assert_json_error(list_page(cluster, p, rbucket, cached="maybe"), 400, "cached")
    if p == "gcp":
        return  # the GCS emulator makes any bucket exist on first use: no missing-bucket case to test
    # A cluster bucket whose backend bucket does not exist: the backend's answer comes through.
    b = unique("rlx")
    create_remote(cluster.url, b, p, backend.props(bucket="no-such-backend-bucket"))
    try:
        r = list_page(cluster, p, b)
        assert r.status_code in (404, 502), r.text
        assert r.json()["message"]
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider={p}", timeout=TIMEOUT)


def test_ht_listing_refused(cluster):
    b = unique("rlh")
    create_remote(cluster.url, b, "ht", {"endpoint": f"http://127.0.0.1:{peers.free_port()}/x"})
    try:
        assert_json_error(list_page(cluster, "ht", b), 400, "cannot be listed")
        r = list_page(cluster, "ht", b, cached="true")
        assert r.status_code == 200, r.text
        assert r.json() == {"entries": [], "continuation_token": ""}
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def test_backend_names_the_cluster_cannot_store(cluster, backend, rbucket):
    # Folder markers ("dir/") are common in object stores but no valid name here: listed, never cached,
    # and they do not break the page they are on. Last in the file: it adds to the shared backend bucket.
    p, name = backend.provider, "zz-folder/"
    if p == "aws":
        s3_client(backend.peer).put_object(Bucket=backend.bucket, Key=name, Body=b"")
    elif p == "azure":
        azure_put(backend.peer, backend.bucket, name, b"")
    else:
        gcs_put(backend.peer, backend.bucket, name, b"")
    entries, _ = list_all(cluster, p, rbucket, prefix="zz-")
    assert [(e["name"], e["cached"]) for e in entries] == [(name, False)]
    entries, _ = list_all(cluster, p, rbucket, pagesize="5")
    assert sorted(e["name"] for e in entries) == sorted(NAMES + [name])
