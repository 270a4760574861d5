# SPDX-License-Identifier: Apache-2.0
# AIStore's wire shapes: each request exactly as NVIDIA's AIStore Python SDK sends it, each answer field it reads.
"""The SDK itself is not ours to copy and CI cannot fetch it, so these tests send what it sends (method, path,
query, headers, body; read from python/aistore/sdk in NVIDIA/aistore) and check every field of the answer the SDK
reads. AIStore's ActionMsg is {"action", "name", "value"}; the SDK sends every JSON body with requests' json=.
Debian's Python has no msgpack module: msgpack_decode below is a small decoder of what the listing answers."""
import base64
import email.parser
import email.policy
import http.server
import json
import re
import socket
import struct
import threading
import time
import urllib.parse
from datetime import datetime

import pytest
import requests

import peers
from ftutil import TIMEOUT, create_remote, session, unique, wait_until
from test_batch import untar
from test_coldget import put_origin
from test_dsort import make_tar

origin = peers.nginx_origin_fixture()
s3rver = peers.s3rver_fixture()

UA = {"User-Agent": "ais/python test"}
MSGPACK = {**UA, "Accept": "application/msgpack"}


def act(action, value=None):
    """AIStore's ActionMsg as the SDK dumps it (pydantic model_dump: every field)."""
    return {"action": action, "name": "", "value": value}


# ---- the SDK's error classification (aistore/sdk/utils.py extract_and_parse_url, response_handler.py) ----
SDK_FQN = re.compile(r"(ais|aws|azure|gcp|oci|s3|gs)://([A-Za-z0-9@#._-]{1,64})(?:(/)|(?![A-Za-z0-9@#._-]))")


def sdk_error_class(resp):
    """The SDK's exception class name for a failed response: it reads the whole body text."""
    m = SDK_FQN.search(resp.text)
    if resp.status_code == 404 and m:
        return "ErrObjNotFound" if m.group(3) else ("ErrRemoteBckNotFound" if m.group(1) != "ais" else "ErrBckNotFound")
    if resp.status_code == 409:
        if resp.request.method == "GET":
            return "ErrGETConflict"
        if m and not m.group(3):
            return "ErrBckAlreadyExists"
    return "AISError"


# ---- a small msgpack decoder (the subset a BucketList uses, and a bit more) ----
def msgpack_decode(data):
    def one(i):
        t = data[i]
        i += 1
        if t <= 0x7F:
            return t, i
        if 0x80 <= t <= 0x8F:
            return pairs(i, t & 0x0F)
        if 0x90 <= t <= 0x9F:
            return items(i, t & 0x0F)
        if 0xA0 <= t <= 0xBF:
            n = t & 0x1F
            return data[i:i + n].decode(), i + n
        if t >= 0xE0:
            return t - 256, i
        if t in (0xC0, 0xC2, 0xC3):
            return {0xC0: None, 0xC2: False, 0xC3: True}[t], i
        fixed = {0xCC: "B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: "b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
                 0xCA: ">f", 0xCB: ">d"}
        if t in fixed:
            n = struct.calcsize(fixed[t])
            return struct.unpack(fixed[t], data[i:i + n])[0], i + n
        lens = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4, 0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}
        if t in lens:
            n = int.from_bytes(data[i:i + lens[t]], "big")
            i += lens[t]
            if t in (0xDC, 0xDD):
                return items(i, n)
            if t in (0xDE, 0xDF):
                return pairs(i, n)
            raw = data[i:i + n]
            return (raw.decode() if t >= 0xD9 else bytes(raw)), i + n
        raise ValueError("msgpack type 0x%02x" % t)

    def items(i, n):
        out = []
        for _ in range(n):
            v, i = one(i)
            out.append(v)
        return out, i

    def pairs(i, n):
        out = {}
        for _ in range(n):
            k, i = one(i)
            out[k], i = one(i)
        return out, i

    value, end = one(0)
    assert end == len(data), "trailing bytes after the msgpack value"
    return value


# ---- helpers ----
def bucket_url(cluster, bucket, provider="ais"):
    return f"{cluster.url}/v1/buckets/{bucket}?provider={provider}"


def obj_url(cluster, bucket, name, provider="ais", extra=""):
    return f"{cluster.url}/v1/objects/{bucket}/{name}?provider={provider}{extra}"


def list_msg(prefix="", page_size=0, uuid="", token="", flags=0, start_after=""):
    """The SDK's ListObjectsMsg.as_dict() (flags: a decimal string of the bit mask)."""
    v = {"prefix": prefix, "pagesize": page_size, "uuid": uuid, "props": "", "continuation_token": token,
         "flags": str(flags), "target": ""}
    if start_after:
        v["start_after"] = start_after
    return act("list", v)


def list_page(cluster, bucket, provider="ais", **kw):
    r = requests.get(bucket_url(cluster, bucket, provider), headers=MSGPACK, json=list_msg(**kw), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/msgpack"  # the SDK decodes msgpack only on this exact type
    page = msgpack_decode(r.content)
    # BucketList: UUID, ContinuationToken, Flags required (msgspec), Entries optional
    assert isinstance(page["UUID"], str) and page["UUID"], page
    assert isinstance(page["ContinuationToken"], str) and isinstance(page["Flags"], int)
    for e in page.get("Entries") or []:
        assert isinstance(e["n"], str) and isinstance(e["s"], int) and isinstance(e["f"], int)
        for k in ("cs", "a", "v"):
            assert isinstance(e.get(k, ""), str), e
    return page


def list_all(cluster, bucket, provider="ais", page_size=0, **kw):
    """Pages as the SDK's ObjectIterator does: uuid and token carried back, stop at an empty token."""
    names, uuid, token = [], "", ""
    for _ in range(1000):
        page = list_page(cluster, bucket, provider, page_size=page_size, uuid=uuid, token=token, **kw)
        names += [e["n"] for e in page.get("Entries") or []]
        uuid, token = page["UUID"], page["ContinuationToken"]
        if token == "":
            return names
    raise AssertionError("listing does not end")


@pytest.fixture
def bucket(cluster):
    b = unique("aisw")
    r = requests.post(bucket_url(cluster, b), headers=UA, json=act("create-bck"), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    yield b
    requests.delete(bucket_url(cluster, b), headers=UA, json=act("destroy-bck"), timeout=TIMEOUT)


def put(cluster, bucket, name, data, provider="ais"):
    r = requests.put(obj_url(cluster, bucket, name, provider), data=data, headers=UA, timeout=TIMEOUT)
    assert r.status_code == 200, r.text


# ---- cluster map, health ----
def test_daemon_smap(cluster):
    r = requests.get(f"{cluster.url}/v1/daemon", params={"what": "smap"}, headers=UA, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    smap = r.json()
    native = requests.get(f"{cluster.url}/v1/cluster?what=smap", timeout=TIMEOUT).json()
    assert sorted(smap["tmap"]) == sorted(t["id"] for t in native["targets"])
    assert int(smap["version"]) == native["version"] and smap["uuid"] == native["uuid"]
    for sid, si in list(smap["tmap"].items()) + list(smap["pmap"].items()):
        assert si["daemon_id"] == sid and si["daemon_type"] in ("proxy", "target")
        assert si["public_net"]["direct_url"].startswith("http://")
        assert isinstance(si["flags"], int) and isinstance(si["id_digest"], int) and si["id_digest"] >= 0
    for t in native["targets"]:
        assert smap["tmap"][t["id"]]["public_net"]["direct_url"] == t["public_url"]
        assert smap["tmap"][t["id"]]["daemon_type"] == "target"
    # cluster().get_primary_url() and is_ready(): GET {primary}/v1/health?prr=true
    primary = smap["proxy_si"]["public_net"]["direct_url"]
    assert primary == cluster.url
    assert requests.get(f"{primary}/v1/health", params={"prr": "true"}, headers=UA, timeout=TIMEOUT).ok


def test_daemon_bmd_and_bad_what(cluster, bucket):
    r = requests.get(f"{cluster.url}/v1/daemon?what=bmd", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert bucket in r.json()["providers"]["ais"]["#"]
    assert int(r.json()["version"]) >= 1
    assert requests.get(f"{cluster.url}/v1/daemon?what=nonsense", timeout=TIMEOUT).status_code == 400
    assert requests.post(f"{cluster.url}/v1/daemon?what=smap", timeout=TIMEOUT).status_code == 405


# ---- typed errors ----
def test_errors_typed_as_the_sdk_reads_them(cluster, bucket):
    again = requests.post(bucket_url(cluster, bucket), headers=UA, json=act("create-bck"), timeout=TIMEOUT)
    assert again.status_code == 409 and sdk_error_class(again) == "ErrBckAlreadyExists", again.text
    err = again.json()  # the fields of AIStore's JSON error its clients read: message, status
    assert err["status"] == 409 and "ais://" + bucket in err["message"]
    missing = unique("aisw-none")
    r = requests.delete(bucket_url(cluster, missing), headers=UA, json=act("destroy-bck"), timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrBckNotFound", r.text
    r = requests.get(obj_url(cluster, missing, "x"), headers=UA, timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrBckNotFound", r.text
    r = requests.get(obj_url(cluster, bucket, "no/such"), headers=UA, timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrObjNotFound", r.text
    put(cluster, bucket, "gone", b"x")
    assert requests.delete(obj_url(cluster, bucket, "gone"), headers=UA, timeout=TIMEOUT).status_code == 200
    r = requests.delete(obj_url(cluster, bucket, "gone"), headers=UA, timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrObjNotFound", r.text
    r = requests.get(bucket_url(cluster, missing), headers=MSGPACK, json=list_msg(), timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrBckNotFound", r.text


# ---- listing ----
def test_list_msgpack_pages(cluster, bucket):
    names = ["p/%02d" % i for i in range(23)] + ["q/1", "q/2"]
    for i, n in enumerate(names):
        put(cluster, bucket, n, b"v" * i)
    page = list_page(cluster, bucket, prefix="p/", page_size=10)
    got = page["Entries"]
    assert [e["n"] for e in got] == names[:10] and page["ContinuationToken"] == "p/09"
    assert got[3]["s"] == 3 and got[3]["cs"] and got[3]["v"] == "1" and got[3]["a"]
    assert all(e["f"] & (1 << 6) and e["f"] & 0x1F == 0 for e in got)  # is_cached(), is_ok()
    # the next page carries the listing's uuid and token back
    nxt = list_page(cluster, bucket, prefix="p/", page_size=10, uuid=page["UUID"], token=page["ContinuationToken"])
    assert nxt["UUID"] == page["UUID"] and [e["n"] for e in nxt["Entries"]] == names[10:20]
    assert list_all(cluster, bucket, prefix="p/", page_size=7) == names[:23]
    assert list_all(cluster, bucket) == sorted(names)
    assert list_all(cluster, bucket, start_after="p/20") == ["p/21", "p/22", "q/1", "q/2"]
    assert list_all(cluster, bucket, prefix="zzz") == []


def test_list_archive_dir(cluster, bucket):
    """list_objects(flags=[ListObjectFlag.ARCH_DIR]) (`ais ls --archive`): each shard's members follow it as
    "<shard>/<member>" with their sizes, flagged in-archive (EntryInArch) and cached; paged like any listing."""
    put(cluster, bucket, "s.tar", make_tar([("a.txt", b"alpha"), ("b/c.cls", b"7")]))
    put(cluster, bucket, "t.bin", b"plain")
    arch_dir = 1 << 3
    names = ["s.tar", "s.tar/a.txt", "s.tar/b/c.cls", "t.bin"]
    page = list_page(cluster, bucket, flags=arch_dir)
    got = {e["n"]: e for e in page["Entries"]}
    assert list(got) == names, list(got)
    assert got["s.tar/a.txt"]["s"] == 5 and got["s.tar/b/c.cls"]["s"] == 1
    for n, e in got.items():
        assert e["f"] & (1 << 6), e  # cached
        assert bool(e["f"] & (1 << 7)) == (n.count("/") > 0 and n.startswith("s.tar/")), e  # EntryInArch
    assert list_all(cluster, bucket, page_size=1, flags=arch_dir) == names
    assert list_all(cluster, bucket) == ["s.tar", "t.bin"]  # without the flag: objects only


def test_list_json_and_bad_messages(cluster, bucket):
    put(cluster, bucket, "a", b"abc")
    r = requests.get(bucket_url(cluster, bucket), headers=UA, json=list_msg(), timeout=TIMEOUT)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json"), r.text
    j = r.json()
    assert j["uuid"] and j["continuation_token"] == "" and j["entries"][0]["name"] == "a" and j["entries"][0]["size"] == 3
    # FastTier's own listing is untouched: query options, its JSON shape
    r = requests.get(bucket_url(cluster, bucket) + "&prefix=a", timeout=TIMEOUT)
    assert r.json() == {"entries": r.json()["entries"], "continuation_token": ""} and r.json()["entries"][0]["name"] == "a"
    for bad in (b"{", json.dumps(act("list", {"pagesize": "ten"})), json.dumps(act("list", {"flags": "x"})),
                json.dumps(act("list", [1])), json.dumps(act("frobnicate"))):
        r = requests.get(bucket_url(cluster, bucket), headers=MSGPACK, data=bad, timeout=TIMEOUT)
        assert r.status_code == 400 and r.json()["message"], (bad, r.text)


# ---- bucket summary ----
def summary_of(cluster, bucket, provider, head_params=None, value=None):
    """The summary as the SDK asks for it: HEAD ?bsumm_remote (Bucket.info()) when head_params, else GET summary-bck
    (Bucket.summary()) with value; 202 with the job's id first, then the id sent back until 200."""
    url = f"{cluster.url}/v1/buckets/{bucket}"
    if head_params is not None:
        params = {"provider": provider, "fltpresence": 1, **head_params}
        r = requests.head(url, params=params, headers=UA, timeout=TIMEOUT)
        assert r.status_code == 202 and r.headers["Ais-Xaction-Id"], r.headers
        params["uuid"] = r.headers["Ais-Xaction-Id"].strip('"')
        for _ in range(600):
            r = requests.head(url, params=params, headers=UA, timeout=TIMEOUT)
            if r.status_code != 202:
                break
            time.sleep(0.05)
        assert r.status_code == 200, r.headers
        return json.loads(r.headers["Ais-Bucket-Summ"])
    if not value.get("uuid"):
        r = requests.get(bucket_url(cluster, bucket, provider), headers=UA, json=act("summary-bck", value),
                         timeout=TIMEOUT)
        assert r.status_code == 202, r.text
        value = {**value, "uuid": r.text.strip('"')}
    for _ in range(600):
        r = requests.get(bucket_url(cluster, bucket, provider), headers=UA, json=act("summary-bck", value),
                         timeout=TIMEOUT)
        if r.status_code != 202:
            break
        assert r.json() == value["uuid"], r.text  # still running: the same id
        time.sleep(0.05)
    assert r.status_code == 200, r.text
    return r.json()[0]


def test_bucket_summary_head_and_get(cluster, bucket):
    for i in range(5):
        put(cluster, bucket, "s%d" % i, b"x" * (10 * (i + 1)))
    summ = summary_of(cluster, bucket, "ais", head_params={"bsumm_remote": True})
    assert summ["ObjCount"]["obj_count_present"] == "5" and summ["TotalSize"]["size_all_present_objs"] == "150"
    assert summ["ObjSize"] == {"obj_min_size": 10, "obj_avg_size": 30, "obj_max_size": 50} and summ["name"] == bucket
    assert summ["ObjCount"]["obj_count_remote"] == "0"
    summ = summary_of(cluster, bucket, "ais", value={"uuid": "", "prefix": "s", "cached": True, "present": True})
    assert summ["ObjCount"]["obj_count_present"] == "5", summ
    # an id this proxy never handed out (another proxy's, or expired): a summary under it; a bad one is 400
    r = requests.get(bucket_url(cluster, bucket), headers=UA,
                     json=act("summary-bck", {"uuid": "j-elsewhere-1", "prefix": "", "cached": True}), timeout=TIMEOUT)
    assert r.status_code in (200, 202), r.text
    r = requests.get(bucket_url(cluster, bucket), headers=UA,
                     json=act("summary-bck", {"uuid": "bad/id", "prefix": ""}), timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    # a bucket that does not exist: 404 at once, as the SDK's ErrBckNotFound
    r = requests.head(f"{cluster.url}/v1/buckets/{bucket}-none", params={"provider": "ais", "bsumm_remote": True},
                      headers=UA, timeout=TIMEOUT)
    assert r.status_code == 404
    r = requests.get(bucket_url(cluster, bucket + "-none"), headers=UA, json=act("summary-bck", {"uuid": ""}),
                     timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrBckNotFound", r.text
    # an id is answered for its own bucket only: another bucket's id starts a summary of this one
    other = unique("aisw-so")
    assert requests.post(bucket_url(cluster, other), headers=UA, json=act("create-bck"), timeout=TIMEOUT).ok
    try:
        r = requests.get(bucket_url(cluster, bucket), headers=UA, json=act("summary-bck", {"uuid": "", "prefix": ""}),
                         timeout=TIMEOUT)
        theirs = r.text.strip('"')
        s = summary_of(cluster, other, "ais", value={"uuid": theirs, "prefix": "", "cached": True})
        assert s["name"] == other and s["ObjCount"]["obj_count_present"] == "0", s
    finally:
        requests.delete(bucket_url(cluster, other), headers=UA, json=act("destroy-bck"), timeout=TIMEOUT)
    # more summaries than the proxy keeps: finished ones make room for new ones
    for _ in range(40):
        assert summary_of(cluster, bucket, "ais", value={"uuid": "", "prefix": "s3", "cached": True})[
            "ObjCount"]["obj_count_present"] == "1"


def test_remote_bucket_summary(cluster, s3rver):
    """A summary of an aws bucket: what the cluster holds (present), and with bsumm_remote (Bucket.info()'s
    default) or summary-bck without "cached", the backend's whole listing too (remote)."""
    import boto3
    direct = boto3.client("s3", endpoint_url=s3rver.url, aws_access_key_id=peers.S3RVER_KEY,
                          aws_secret_access_key=peers.S3RVER_KEY, region_name="us-east-1")
    name, backend = unique("aisw-rs"), unique("be")
    direct.create_bucket(Bucket=backend)
    for i in range(3):
        direct.put_object(Bucket=backend, Key="r/%d" % i, Body=b"y" * (100 * (i + 1)))
    direct.put_object(Bucket=backend, Key="other", Body=b"z")
    create_remote(cluster.url, name, "aws", {"bucket": backend, "endpoint": s3rver.url, "addressing": "path",
                                             "region": "us-east-1", "access_key": peers.S3RVER_KEY,
                                             "secret_key": peers.S3RVER_KEY})
    try:
        assert requests.get(obj_url(cluster, name, "r/1", "aws"), timeout=TIMEOUT).content == b"y" * 200
        s = summary_of(cluster, name, "aws", head_params={"bsumm_remote": True})
        assert s["ObjCount"] == {"obj_count_present": "1", "obj_count_remote": "4"}, s
        assert s["TotalSize"]["size_all_present_objs"] == "200" and s["TotalSize"]["size_all_remote_objs"] == "601"
        s = summary_of(cluster, name, "aws", head_params={"bsumm_remote": False})
        assert s["ObjCount"] == {"obj_count_present": "1", "obj_count_remote": "0"}, s
        s = summary_of(cluster, name, "aws", value={"uuid": "", "prefix": "r/", "cached": False, "present": True})
        assert s["ObjCount"] == {"obj_count_present": "1", "obj_count_remote": "3"}, s
        assert s["TotalSize"]["size_all_remote_objs"] == "600" and s["name"] == name and s["provider"] == "aws"
        s = summary_of(cluster, name, "aws", value={"uuid": "", "prefix": "", "cached": True, "present": True})
        assert s["ObjCount"] == {"obj_count_present": "1", "obj_count_remote": "0"}, s
        # ais ls --archive of a remote bucket: the cached objects and their members (every target may own some)
        members = [("m%02d.txt" % i, b"%d" % i) for i in range(20)]
        direct.put_object(Bucket=backend, Key="sh.tar", Body=make_tar(members))
        assert requests.get(obj_url(cluster, name, "sh.tar", "aws"), timeout=TIMEOUT).status_code == 200
        assert list_all(cluster, name, "aws", flags=1 << 3) == ["r/1", "sh.tar"] + ["sh.tar/" + m for m, _ in members]
    finally:
        requests.delete(bucket_url(cluster, name, "aws"), headers=UA, json=act("destroy-bck"), timeout=TIMEOUT)


# ---- native multipart ----
def test_multipart_upload(cluster, bucket):
    url = obj_url(cluster, bucket, "big/obj")
    r = requests.post(url, headers=UA, json=act("mpt-upload"), timeout=TIMEOUT)
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9_-]{16,}", r.text), r.text
    upload = r.text
    part1, part2 = b"a" * (5 << 20), b"tail"
    for n, data in ((2, part2), (1, part1)):  # ObjectWriter.put_content: PUT, the 307 followed with the body
        r = requests.put(url + f"&uploadId={upload}&partNumber={n}", data=data, headers=UA, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
    parts = [{"part-number": 1, "etag": ""}, {"part-number": 2, "etag": ""}]
    r = requests.post(url + f"&uploadId={upload}", headers=UA, json=act("mpt-complete", parts), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert requests.get(url, timeout=TIMEOUT).content == part1 + part2
    # abort: DELETE ?uploadId with mpt-abort; the upload is gone afterwards
    r = requests.post(obj_url(cluster, bucket, "ab"), headers=UA, json=act("mpt-upload"), timeout=TIMEOUT)
    ab = r.text
    r = requests.put(obj_url(cluster, bucket, "ab", extra=f"&uploadId={ab}&partNumber=1"), data=b"z", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    r = requests.delete(obj_url(cluster, bucket, "ab", extra=f"&uploadId={ab}"), headers=UA, json=act("mpt-abort"),
                        timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    r = requests.post(obj_url(cluster, bucket, "ab", extra=f"&uploadId={ab}"), headers=UA,
                      json=act("mpt-complete", parts[:1]), timeout=TIMEOUT)
    assert r.status_code == 404, r.text
    assert requests.get(obj_url(cluster, bucket, "ab"), timeout=TIMEOUT).status_code == 404


def test_multipart_bad_input(cluster, bucket):
    url = obj_url(cluster, bucket, "m")
    upload = requests.post(url, headers=UA, json=act("mpt-upload"), timeout=TIMEOUT).text
    r = requests.put(url + f"&uploadId={upload}&partNumber=0", data=b"x", timeout=TIMEOUT, allow_redirects=False)
    assert r.status_code == 400, r.text
    r = requests.post(url + f"&uploadId={upload}", json=act("mpt-complete", [{"part-number": 1, "etag": ""}]),
                      timeout=TIMEOUT)
    assert r.status_code == 400 and "not uploaded" in r.json()["message"], r.text
    r = requests.post(url + f"&uploadId={upload}", json=act("mpt-complete", "nope"), timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    r = requests.post(url + "&uploadId=no-such-upload-0123456789", json=act("mpt-complete", [{"part-number": 1}]),
                      timeout=TIMEOUT)
    assert r.status_code == 404, r.text
    r = requests.post(obj_url(cluster, unique("aisw-none"), "m"), json=act("mpt-upload"), timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrBckNotFound", r.text


# ---- not built yet: said so, never a wrong answer ----
def test_archpath_reads_one_member(cluster, bucket):
    # Object.get_reader(archive_config=...): GET ?archpath=<member> answers the member's bytes (docs/shards.md)
    put(cluster, bucket, "shard.tar", make_tar([("a.txt", b"alpha"), ("b/c.cls", b"7")]))
    r = requests.get(obj_url(cluster, bucket, "shard.tar", extra="&archpath=b/c.cls"), timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == b"7", r.text
    r = requests.get(obj_url(cluster, bucket, "shard.tar", extra="&archpath=nope"), timeout=TIMEOUT)
    assert r.status_code == 404, r.text
    put(cluster, bucket, "plain.bin", b"not a tar")
    r = requests.get(obj_url(cluster, bucket, "plain.bin", extra="&archpath=a.txt"), timeout=TIMEOUT)
    assert r.status_code == 400, r.text


def test_not_built_yet_is_501(cluster, bucket):
    # Bucket.rename(): POST ?bck_to= with move-bck and no value; Bucket.transform() with a pipeline of ETLs
    r = requests.post(bucket_url(cluster, bucket), params={"bck_to": "ais/@#/other/"}, json=act("move-bck"),
                      timeout=TIMEOUT)
    assert r.status_code == 501 and "move-bck" in r.json()["message"], r.text
    value = {**copy_msg(), "id": "my-etl", "request_timeout": "5m", "pipeline": ["second-etl"]}
    r = requests.post(bucket_url(cluster, bucket), params={"bck_to": "ais/@#/other/"}, json=act("etl-bck", value),
                      timeout=TIMEOUT)
    assert r.status_code == 501 and "pipeline" in r.json()["message"], r.text
    assert requests.head(bucket_url(cluster, "other"), timeout=TIMEOUT).status_code == 404


# ---- GetBatch (aistore/sdk/batch/batch.py: Batch.get) ----
def moss(cluster, body, bucket=None, provider="ais"):
    """Batch.get(): GET /v1/ml/moss[/<bucket>]?provider= with the MossReq as JSON (model_dump by alias, defaults
    left out), streamed; requests follows the proxy's 307 with the same method and body."""
    path = f"{cluster.url}/v1/ml/moss" + (f"/{bucket}" if bucket else "")
    return requests.get(path, params={"provider": provider} if bucket else {}, json=body,
                        headers={**UA, "Content-Type": "application/json"}, timeout=TIMEOUT)


def test_get_batch(cluster, bucket):
    """Objects of two buckets (on every target), a shard member, a range and a missing name, in the order asked,
    named as AIStore names them; "onob" drops the bucket; without "coer" a missing name fails the batch."""
    other = unique("aisw-gb")
    assert requests.post(bucket_url(cluster, other), headers=UA, json=act("create-bck"), timeout=TIMEOUT).ok
    try:
        objs = {f"gb/{i:02d}": (b"%02d" % i) * (40 + 13 * i) for i in range(16)}
        for n, d in objs.items():
            put(cluster, bucket, n, d)
        put(cluster, bucket, "sh.tar", make_tar([("a.txt", b"alpha"), ("b/c.cls", b"7")]))
        put(cluster, other, "x", b"from the other bucket")
        ins = [{"objname": n} for n in objs] + [
            {"objname": "sh.tar", "archpath": "b/c.cls"},
            {"objname": "x", "bucket": other, "provider": "ais"},
            {"objname": "gb/03", "start": 10, "length": 20},
            {"objname": "nope"}]
        want = [(f"{bucket}/{n}", d) for n, d in objs.items()] + [
            (f"{bucket}/sh.tar/b/c.cls", b"7"), (f"{other}/x", b"from the other bucket"),
            (f"{bucket}/gb/03", objs["gb/03"][10:30]), (f"__404__/{bucket}/nope", b"")]
        r = moss(cluster, {"in": ins, "mime": ".tar", "coer": True, "strm": True}, bucket)
        assert r.status_code == 200, r.text
        assert untar(r.content) == want
        r = moss(cluster, {"in": ins, "coer": True, "onob": True, "strm": True}, bucket)
        assert r.status_code == 200, r.text
        assert untar(r.content) == [(name.split("/", 1)[1] if not name.startswith("__404__/") else
                                       "__404__/" + name.split("/", 2)[2], d) for name, d in want]
        # no bucket in the URL: every item names its own
        r = moss(cluster, {"in": [{"objname": "x", "bucket": other}, {"objname": "gb/00", "bucket": bucket}],
                           "strm": True})
        assert r.status_code == 200 and untar(r.content) == [(f"{other}/x", b"from the other bucket"),
                                                                (f"{bucket}/gb/00", objs["gb/00"])], r.text
        r = moss(cluster, {"in": ins, "strm": True}, bucket)
        assert r.status_code == 404 and "nope" in r.json()["message"], r.text
    finally:
        requests.delete(bucket_url(cluster, other), headers=UA, json=act("destroy-bck"), timeout=TIMEOUT)


def moss_buffered(resp):
    """A buffered GetBatch answer read twice: as the SDK's MultipartDecoder does (boundary from the Content-Type,
    body split on it, part headers ignored, metadata first) and by a strict MIME parser (part names, framing, the
    declared length). Returns (MossResp, TAR bytes)."""
    assert resp.status_code == 200, resp.text
    ctype = resp.headers["Content-Type"]
    m = re.fullmatch(r"multipart/mixed; boundary=([0-9a-f]{32})", ctype)
    assert m, ctype
    assert int(resp.headers["Content-Length"]) == len(resp.content)
    parts = [p for p in resp.content.split(b"--" + m.group(1).encode()) if p not in (b"", b"--\r\n")]
    assert len(parts) == 2, parts[:3]
    sdk = [p.split(b"\r\n\r\n", 1)[1] for p in parts]
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + resp.content)
    assert msg.is_multipart() and not msg.defects, msg.defects
    meta, archive = msg.get_payload()
    assert meta.get_param("name", header="content-disposition") == "metadata"
    assert archive.get_param("name", header="content-disposition") == "archive"
    assert archive.get_content_type() == "application/octet-stream"
    tar = archive.get_payload(decode=True)
    assert sdk[1] == tar + b"\r\n"  # the SDK keeps the CRLF before the next boundary; tarfile ignores it
    doc = json.loads(sdk[0])
    assert doc == json.loads(meta.get_payload(decode=True))
    return doc, tar


def test_get_batch_buffered(cluster, bucket):
    """Batch(streaming_get=False).get(): "strm" false (or absent, AIStore's default) answers multipart/mixed, the
    MossResp then the TAR; the SDK pairs the i-th file of the TAR with out[i]: one entry per item, in order, with
    its size, the missing one's err_msg and the opaque given; the TAR is the streamed one's. Items of every target,
    small and large (past the sender's 192 KiB output buffer), a shard member and a range."""
    objs = {f"bf/{i:02d}": bytes([65 + i]) * (700 * i + 3) for i in range(12)}
    objs.update({f"bf/big{i}": bytes([97 + i]) * (300_000 + i) for i in range(3)})
    for n, d in objs.items():
        put(cluster, bucket, n, d)
    put(cluster, bucket, "sh.tar", make_tar([("a.txt", b"alpha"), ("b/c.cls", b"7")]))
    ins = [{"objname": n, "opaque": base64.b64encode(n.encode()).decode()} for n in objs] + [
        {"objname": "sh.tar", "archpath": "b/c.cls"},
        {"objname": "bf/03", "start": 10, "length": 20},
        {"objname": "bf/04", "start": 7, "length": -1},
        {"objname": "nope"}]
    want = [(f"{bucket}/{n}", d) for n, d in objs.items()] + [
        (f"{bucket}/sh.tar/b/c.cls", b"7"), (f"{bucket}/bf/03", objs["bf/03"][10:30]),
        (f"{bucket}/bf/04", objs["bf/04"][7:]), (f"__404__/{bucket}/nope", b"")]
    streamed = moss(cluster, {"in": ins, "coer": True, "strm": True}, bucket)
    assert streamed.status_code == 200 and untar(streamed.content) == want, streamed.text[:300]
    for body in ({"in": ins, "mime": ".tar", "coer": True, "onob": False, "strm": False},
                 {"in": ins, "coer": True}):
        doc, tar = moss_buffered(moss(cluster, body, bucket))
        assert untar(tar) == want
        assert doc["uuid"] and len(doc["out"]) == len(ins)
        for (name, data), i, o in zip(want, ins, doc["out"]):
            assert o["objname"] == i["objname"] and o["bucket"] == bucket and o["provider"] == "ais", o
            assert o["size"] == len(data), (o, name)
            assert o.get("archpath") == i.get("archpath") and o.get("opaque") == i.get("opaque"), o
            assert ("err_msg" in o) == name.startswith("__404__/"), o
        assert "nope" in doc["out"][-1]["err_msg"] and "does not exist" in doc["out"][-1]["err_msg"]
    # without "coer" a missing item fails the whole request, before anything is sent
    r = moss(cluster, {"in": ins}, bucket)
    assert r.status_code == 404 and "nope" in r.json()["message"], r.text


class _SlowOrigin(http.server.BaseHTTPRequestHandler):
    """An ht:// origin that takes a second for each object, and counts its GETs."""
    protocol_version = "HTTP/1.1"
    gets = 0
    lock = threading.Lock()

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.command == "GET":
            with _SlowOrigin.lock:
                _SlowOrigin.gets += 1
            time.sleep(1.0)
        body = b"s" * 4096
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    do_HEAD = do_GET


def batch_client_leaves(url, sess, connect):
    """A buffered GetBatch of 600 uncached objects of a slow origin (15 s of fetches, 12 at a time on each target),
    sent on connect(host, port)'s socket, which is closed once the targets fetch: every target's assembly ends, and
    with it the fetches from the backend, instead of the targets spooling the whole answer for nobody."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", peers.free_port()), _SlowOrigin)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    b = unique("aisw-left")
    _SlowOrigin.gets = 0
    try:
        r = sess.post("%s/v1/buckets/%s?provider=ht" % (url, b), timeout=TIMEOUT, json={
            "action": "create-bck", "value": {"backend": {"endpoint": "http://127.0.0.1:%d/o" % srv.server_address[1]}}})
        assert r.status_code == 200, r.text
        body = json.dumps({"in": [{"objname": "n%03d" % i} for i in range(600)]}).encode()
        r = sess.get(f"{url}/v1/ml/moss/{b}", params={"provider": "ht"}, data=body,
                     headers={**UA, "Content-Type": "application/json"}, allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code == 307, r.text
        loc = urllib.parse.urlsplit(r.headers["Location"])
        host, port = loc.netloc.rsplit(":", 1)
        with connect(host, int(port)) as c:
            c.sendall(("GET %s?%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                       "Content-Length: %d\r\n\r\n" % (loc.path, loc.query, loc.netloc, len(body))).encode() + body)
            wait_until(lambda: _SlowOrigin.gets >= 10, 10, 0.05, "the target fetches the batch's objects")
        # the client is gone: the fetches stop (those in flight end; the owners of parts learn it when the
        # assembling target drops its pulls), far short of the 600
        seen = []

        def settled():
            seen.append(_SlowOrigin.gets)
            return len(seen) > 3 and seen[-1] == seen[-4]  # no new fetch for 1.5 s

        wait_until(settled, 12, 0.5, "the fetches stop once the client is gone")
        assert seen[-1] < 200, seen
    finally:
        sess.delete(f"{url}/v1/buckets/{b}?provider=ht", headers=UA, timeout=TIMEOUT)
        srv.shutdown()
        srv.server_close()


def test_get_batch_buffered_stops_when_the_client_leaves(cluster):
    """The client leaves a buffered batch early (test_tls.py: the same over HTTPS)."""
    batch_client_leaves(cluster.url, session(None), lambda host, port: socket.create_connection((host, port), 10))


def test_get_batch_buffered_bounded(make_cluster):
    """The buffered answer's TAR is written to a work file first, at most batch_max_buffered_bytes: past it the
    request gets 413 naming the limit and the streamed answer (which has no such bound) still works; nothing is
    left in the targets' work directories."""
    c = make_cluster(targets=2, target_args=["--batch_max_buffered_bytes", str(200_000)])
    b = unique("aisw-bb")
    assert requests.post(bucket_url(c, b), headers=UA, json=act("create-bck"), timeout=TIMEOUT).ok
    for i in range(4):
        put(c, b, f"o{i}", bytes([48 + i]) * 60_000)
    ins = [{"objname": f"o{i}"} for i in range(4)]
    r = moss(c, {"in": ins[:2], "strm": False}, b)
    doc, tar = moss_buffered(r)
    assert [o["size"] for o in doc["out"]] == [60_000, 60_000] and len(untar(tar)) == 2
    r = moss(c, {"in": ins, "strm": False}, b)
    assert r.status_code == 413, r.text
    assert "batch_max_buffered_bytes (200000)" in r.json()["message"] and '"strm": true' in r.json()["message"]
    r = moss(c, {"in": ins, "strm": True}, b)
    assert r.status_code == 200 and len(untar(r.content)) == 4
    assert c.work_files() == []


@pytest.mark.parametrize("body,status,word", [
    ({"in": [{"objname": "a"}], "strm": True, "mime": ".tgz"}, 501, ".tgz"),
    ({"in": [{"objname": "a", "uname": "ais/@#/b/a"}], "strm": True}, 501, "uname"),
    ({"in": [], "strm": True}, 400, "MossReq"),
    ({"in": [{"bucket": "b"}], "strm": True}, 400, "objname"),
    ({"in": [{"objname": "a", "start": -1}], "strm": True}, 400, "start"),
    (["not", "a", "MossReq"], 400, "MossReq"),
])
def test_get_batch_refused(cluster, bucket, body, status, word):
    r = moss(cluster, body, bucket)
    assert r.status_code == status and word in r.json()["message"], r.text


def test_get_batch_bad_requests(cluster, bucket):
    r = moss(cluster, {"in": [{"objname": "a"}], "strm": True})  # neither the URL nor the item names a bucket
    assert r.status_code == 400 and "bucket" in r.json()["message"], r.text
    r = requests.post(f"{cluster.url}/v1/ml/moss/{bucket}", json={"in": [{"objname": "a"}], "strm": True},
                      headers=UA, timeout=TIMEOUT)
    assert r.status_code == 405 and r.headers["Allow"] == "GET", r.text
    r = requests.get(f"{cluster.url}/v1/ml/moss/{bucket}/extra", json={"in": [{"objname": "a"}], "strm": True},
                     headers=UA, timeout=TIMEOUT)
    assert r.status_code == 400, r.text


# ---- jobs ----
def cluster_query(cluster, what, body):
    return requests.get(f"{cluster.url}/v1/cluster", params={"what": what}, json=body, headers=UA, timeout=TIMEOUT)


def job_args(job_id="", kind=""):
    """JobArgs.as_dict() as Job.status() and Job.get_details() send it."""
    return {"ID": job_id, "Kind": kind, "DaemonID": "", "Bck": None, "Buckets": None}


def wait_done(cluster, job_id):
    """Job.wait(): kind from qryxstats, then what=status until end_time is set."""
    snaps = cluster_query(cluster, "qryxstats", job_args(job_id)).json()
    kinds = {s["kind"] for v in snaps.values() for s in v}
    assert len(kinds) == 1, snaps

    def ended():
        r = cluster_query(cluster, "status", job_args(job_id))
        assert r.status_code == 200, r.text
        return r.json() if r.json()["end_time"] > 0 else None
    return kinds.pop(), wait_until(ended, 30, what=f"job {job_id} ends")


@pytest.fixture
def remote(cluster, origin):
    b = unique("aisw-r")
    create_remote(cluster.url, b, "ht", {"endpoint": origin.url})
    names = ["t-%02d" % i for i in range(12)]
    for n in names:
        put_origin(origin, n, n.encode() * 10)
    yield b, names
    requests.delete(bucket_url(cluster, b, "ht"), timeout=TIMEOUT)


def cached(cluster, bucket):
    return list_all(cluster, bucket, provider="ht", flags=1)  # ListObjectFlag.CACHED


def test_prefetch_status_evict(cluster, remote):
    b, names = remote
    # ObjectGroup.prefetch(): POST, PrefetchMsg (names plus coer, latest-ver); the answer is the bare job id
    value = {"objnames": names[:4], "coer": False, "latest-ver": False}
    r = requests.post(bucket_url(cluster, b, "ht"), headers=UA, json=act("prefetch-listrange", value), timeout=TIMEOUT)
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9-]+", r.text), r.text
    job_id = r.text
    kind, status = wait_done(cluster, job_id)
    assert kind == "prefetch-listrange"
    assert status["uuid"] == job_id and status["err"] == "" and status["aborted"] is False
    snaps = cluster_query(cluster, "qryxstats", job_args(job_id)).json()
    assert set(snaps) <= {t["id"] for t in cluster.smap()["targets"]}
    flat = [s for v in snaps.values() for s in v]
    assert sum(int(s["stats"]["loc-objs"]) for s in flat) == 4
    for s in flat:
        assert s["id"] == job_id and s["bck"]["name"] == b and not s["aborted"] and s["abort-err"] == ""
        assert datetime.fromisoformat(s["start-time"].replace("Z", "+00:00")) <= \
            datetime.fromisoformat(s["end-time"].replace("Z", "+00:00"))
    assert cached(cluster, b) == names[:4]
    # template prefetch, then Cluster.list_jobs_status(): JobQuery body, a list of JobStatus
    value = {"template": "t-{04..11}", "coer": False, "latest-ver": False}
    tpl = requests.post(bucket_url(cluster, b, "ht"), json=act("prefetch-listrange", value), timeout=TIMEOUT).text
    wait_done(cluster, tpl)
    assert cached(cluster, b) == names
    r = cluster_query(cluster, "status_all", {"kind": "prefetch-listrange", "node": "", "show_active": False})
    assert r.status_code == 200 and {job_id, tpl} <= {s["uuid"] for s in r.json()}, r.text
    # ObjectGroup.evict(): DELETE with evict-listrange
    r = requests.delete(bucket_url(cluster, b, "ht"), json=act("evict-listrange", {"objnames": names[:6]}),
                        timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    kind, _ = wait_done(cluster, r.text)
    assert kind == "evict-listrange" and cached(cluster, b) == names[6:]
    # Bucket.evict(keep_md=True): DELETE ?keep_bck_md=True evict-remote-bck: the cache goes, the bucket stays
    r = requests.delete(bucket_url(cluster, b, "ht") + "&keep_bck_md=True", json=act("evict-remote-bck"),
                        timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    wait_done(cluster, r.text)
    assert cached(cluster, b) == []
    assert requests.head(bucket_url(cluster, b, "ht"), timeout=TIMEOUT).status_code == 200
    # Bucket.evict(): keep_bck_md=False forgets the bucket as well
    r = requests.delete(bucket_url(cluster, b, "ht") + "&keep_bck_md=False", json=act("evict-remote-bck"),
                        timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert requests.head(bucket_url(cluster, b, "ht"), timeout=TIMEOUT).status_code == 404


def test_blob_download(cluster, remote):
    # Object.blob_download(): POST /v1/buckets/B with {"action": "blob-download", "name": OBJ, "value": BlobMsg}
    b, names = remote
    value = {"chunk-size": 1 << 20, "num-workers": 4, "latest-ver": False}
    r = requests.post(bucket_url(cluster, b, "ht"), headers=UA,
                      json={"action": "blob-download", "name": names[5], "value": value}, timeout=TIMEOUT)
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9-]+", r.text), r.text
    _, status = wait_done(cluster, r.text)
    assert status["err"] == "" and not status["aborted"], status
    assert cached(cluster, b) == [names[5]]
    r = requests.post(bucket_url(cluster, b, "ht"), json={"action": "blob-download", "name": "", "value": value},
                      timeout=TIMEOUT)
    assert r.status_code == 400 and "name" in r.json()["message"], r.text
    r = requests.post(bucket_url(cluster, b, "ht"), json={"action": "blob-download", "name": "x" * 1025, "value": {}},
                      timeout=TIMEOUT)
    assert r.status_code == 400, r.text


def test_job_queries_bad_input(cluster, remote):
    b, names = remote
    assert cluster_query(cluster, "status", job_args("j-no-such-job")).status_code == 404
    assert cluster_query(cluster, "status", job_args("")).status_code == 400
    assert cluster_query(cluster, "status", job_args("bad/id")).status_code == 400
    r = requests.get(f"{cluster.url}/v1/cluster?what=status", data=b"{", timeout=TIMEOUT)
    assert r.status_code == 400
    assert requests.get(f"{cluster.url}/v1/cluster?what=nonsense", timeout=TIMEOUT).status_code == 400
    # Job.abort(): PUT /v1/cluster {"action":"stop","value":JobArgs}
    job_id = requests.post(bucket_url(cluster, b, "ht"), json=act("prefetch-listrange", {"objnames": names}),
                           timeout=TIMEOUT).text
    r = requests.put(f"{cluster.url}/v1/cluster", json=act("stop", job_args(job_id)), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    wait_done(cluster, job_id)
    # Job(kind).start(): PUT /v1/cluster {"action":"start","value":JobArgs}, answered with the id as text
    r = requests.put(f"{cluster.url}/v1/cluster", json=act("start", job_args(kind="rebalance")), timeout=TIMEOUT)
    assert r.status_code == 200 and re.fullmatch(r"j-[0-9a-f]+-[0-9a-f]+", r.text), r.text
    wait_done(cluster, r.text)
    assert cluster_query(cluster, "status", job_args(r.text)).json()["kind"] == "rebalance"
    r = requests.put(f"{cluster.url}/v1/cluster", json=act("start", job_args(kind="lru")), timeout=TIMEOUT)
    assert r.status_code == 501 and "rebalance" in r.json()["message"], r.text
    r = requests.put(f"{cluster.url}/v1/cluster", json=act("start", job_args()), timeout=TIMEOUT)
    assert r.status_code == 400 and "kind" in r.json()["message"], r.text
    # FastTier's own action message (no "name") still gets its JSON answer
    r = requests.post(bucket_url(cluster, b, "ht"), json={"action": "prefetch-listrange", "value": {"objnames": names}},
                      timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["job_id"], r.text


def test_delete_listrange(cluster, bucket):
    names = ["d-%02d" % i for i in range(20)]
    for n in names:
        put(cluster, bucket, n, n.encode())
    # ObjectGroup.delete(): DELETE with delete-listrange, by names (one absent: skipped) and by template
    r = requests.delete(bucket_url(cluster, bucket), headers=UA,
                        json=act("delete-listrange", {"objnames": names[:3] + ["never-there"]}), timeout=TIMEOUT)
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9-]+", r.text), r.text
    kind, status = wait_done(cluster, r.text)
    assert kind == "delete-listrange" and status["err"] == "" and not status["aborted"]
    r = requests.delete(bucket_url(cluster, bucket), json=act("delete-listrange", {"template": "d-{10..19}"}),
                        timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    wait_done(cluster, r.text)
    assert list_all(cluster, bucket) == names[3:10]
    assert requests.get(obj_url(cluster, bucket, "d-00"), timeout=TIMEOUT).status_code == 404
    # a prefix is not a list or a range; an unknown bucket is AIStore's ErrBckNotFound
    r = requests.delete(bucket_url(cluster, bucket), json=act("delete-listrange", {"prefix": "d-"}), timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    r = requests.delete(bucket_url(cluster, unique("aisw-none")), json=act("delete-listrange", {"objnames": ["x"]}),
                        timeout=TIMEOUT)
    assert r.status_code == 404 and sdk_error_class(r) == "ErrBckNotFound", r.text
    assert list_all(cluster, bucket) == names[3:10]


# ---- copy-bck ----
def copy_msg(prefix="", prepend="", dry_run=False, force=False, latest=False, sync=False, ext=None, num_workers=0):
    """Bucket.copy()'s value: TCBckMsg.as_dict() (ext, num-workers only when set) over CopyBckMsg.as_dict()."""
    v = {}
    if ext:
        v["ext"] = ext
    if num_workers:
        v["num-workers"] = num_workers
    v.update({"prefix": prefix, "prepend": prepend, "dry_run": dry_run, "force": force, "latest-ver": latest,
              "synchronize": sync})
    return v


def sdk_copy(cluster, src, dst, value, dst_provider="ais"):
    """Bucket.copy(): POST /v1/buckets/SRC, the source's qparam plus bck_to=BucketModel.get_path()."""
    params = {"provider": "ais", "bck_to": f"{dst_provider}/@#/{dst}/"}
    return requests.post(f"{cluster.url}/v1/buckets/{src}", params=params, headers=UA, json=act("copy-bck", value),
                         timeout=TIMEOUT)


@pytest.fixture
def dst(cluster):
    b = unique("aisw-dst")
    yield b
    requests.delete(bucket_url(cluster, b), headers=UA, json=act("destroy-bck"), timeout=TIMEOUT)


def test_copy_bck(cluster, bucket, dst):
    data = {f"c/obj-{i}": (f"copy {i} " * (50 + i)).encode() for i in range(8)}
    for n, d in data.items():
        put(cluster, bucket, n, d)
    put(cluster, bucket, "other/x", b"not copied")
    # a dry run writes nothing and cannot create the destination
    r = sdk_copy(cluster, bucket, dst, copy_msg(prefix="c/", dry_run=True))
    assert r.status_code == 404 and "does not exist" in r.json()["message"], r.text
    # the copy by prefix: the answer is the bare job id; Job.wait() sees AIStore's kind
    r = sdk_copy(cluster, bucket, dst, copy_msg(prefix="c/", num_workers=4))
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9-]+", r.text), r.text
    job_id = r.text
    kind, status = wait_done(cluster, job_id)
    assert kind == "copy-bck" and status["uuid"] == job_id and status["err"] == "" and not status["aborted"], status
    snaps = cluster_query(cluster, "qryxstats", job_args(job_id)).json()
    assert sum(int(s["stats"]["loc-objs"]) for v in snaps.values() for s in v) == len(data), snaps
    assert list_all(cluster, dst) == sorted(data)
    for n, d in data.items():
        r = requests.get(obj_url(cluster, dst, n), timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == d, n
    r = cluster_query(cluster, "status_all", {"kind": "copy-bck", "node": "", "show_active": False})
    assert r.status_code == 200 and job_id in {s["uuid"] for s in r.json()}, r.text
    # synchronize: a source object gone is removed from the destination; coer is what the job always does
    assert requests.delete(obj_url(cluster, bucket, "c/obj-0"), timeout=TIMEOUT).status_code == 200
    value = {**copy_msg(prefix="c/", sync=True), "coer": True}
    r = sdk_copy(cluster, bucket, dst, value)
    assert r.status_code == 200, r.text
    _, status = wait_done(cluster, r.text)
    assert status["err"] == "", status
    assert list_all(cluster, dst) == sorted(data)[1:]
    # the whole bucket (prefix "") into the now existing destination
    r = sdk_copy(cluster, bucket, dst, copy_msg())
    assert r.status_code == 200, r.text
    wait_done(cluster, r.text)
    assert list_all(cluster, dst) == sorted(data)[1:] + ["other/x"]


def test_copy_bck_prepend(cluster, bucket, dst):
    data = {f"c/obj-{i}": (f"prepend {i} " * (40 + i)).encode() for i in range(6)}
    for n, d in data.items():
        put(cluster, bucket, n, d)
    # TCBMsg.prepend: every copy is named <prepend><name> (AIStore's ToName)
    r = sdk_copy(cluster, bucket, dst, copy_msg(prefix="c/", prepend="2025/"))
    assert r.status_code == 200, r.text
    kind, status = wait_done(cluster, r.text)
    assert kind == "copy-bck" and status["err"] == "" and not status["aborted"], status
    assert list_all(cluster, dst) == sorted("2025/" + n for n in data)
    for n, d in data.items():
        r = requests.get(obj_url(cluster, dst, "2025/" + n), timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == d, n
    # synchronize with the prepend: the copy of a source object gone goes, nothing else
    assert requests.delete(obj_url(cluster, bucket, "c/obj-0"), timeout=TIMEOUT).status_code == 200
    put(cluster, dst, "c/obj-1", b"dst's own object, not under the prepend")
    r = sdk_copy(cluster, bucket, dst, copy_msg(prefix="c/", prepend="2025/", sync=True))
    assert r.status_code == 200, r.text
    _, status = wait_done(cluster, r.text)
    assert status["err"] == "", status
    assert list_all(cluster, dst) == ["2025/" + n for n in sorted(data)[1:]] + ["c/obj-1"]


@pytest.mark.parametrize("value, bck_to, status, word", [
    (copy_msg(prepend="p" * 1024), None, 400, "prepend"),
    (copy_msg(prefix="c/" * 20, prepend="p" * 1000), None, 400, "plus prefix"),
    (copy_msg(ext={"jpg": "t/x"}), None, 400, "ext"),
    (copy_msg(ext=["jpg"]), None, 400, "ext"),
    (copy_msg(sync=True, ext={"jpg": "txt"}), None, 501, "sync with ext"),
    ({**copy_msg(), "id": "my-etl"}, None, 501, "ETL"),
    ({**copy_msg(), "non-recurs": True}, None, 400, "non-recurs"),
    ({**copy_msg(), "latest-ver": "yes"}, None, 400, "latest-ver"),
    ([1, 2], None, 400, "value"),
    (copy_msg(), "ais/@uuid#ns/x/", 501, "namespace"),
    (copy_msg(), "ais", 400, "bck_to"),
    (copy_msg(), "ais/@#/", 400, "bck_to"),
    (copy_msg(), "ais/@#/a/b/", 400, "bck_to"),
    (copy_msg(), "ais/@#/bad name/", 400, "bucket name"),
    (copy_msg(), "nope/@#/x/", 400, "provider"),
    (copy_msg(), "SELF", 400, "onto itself"),
])
def test_copy_bck_refused(cluster, bucket, dst, value, bck_to, status, word):
    put(cluster, bucket, "a", b"a")
    bck_to = bck_to or f"ais/@#/{dst}/"
    bck_to = f"ais/@#/{bucket}/" if bck_to == "SELF" else bck_to
    r = requests.post(bucket_url(cluster, bucket), params={"bck_to": bck_to}, json=act("copy-bck", value),
                      timeout=TIMEOUT)
    assert r.status_code == status and word in r.json()["message"], r.text
    assert r.json()["status"] == status
    assert requests.head(bucket_url(cluster, dst), timeout=TIMEOUT).status_code == 404


def test_copy_bck_bad_requests(cluster, bucket, dst):
    to = {"bck_to": f"ais/@#/{dst}/"}
    r = requests.post(bucket_url(cluster, bucket), params=to, data=b"{", timeout=TIMEOUT)
    assert r.status_code == 400 and "action" in r.json()["message"], r.text
    r = requests.post(bucket_url(cluster, bucket), params=to, json=act("make-n-copies"), timeout=TIMEOUT)
    assert r.status_code == 400 and "bck_to" in r.json()["message"], r.text
    # an absent source is AIStore's ErrBckNotFound
    r = sdk_copy(cluster, unique("aisw-none"), dst, copy_msg())
    assert r.status_code == 404 and sdk_error_class(r) == "ErrBckNotFound", r.text
    # FastTier's own copy-bck on the same bucket still answers {"job_id"}
    r = requests.post(bucket_url(cluster, bucket), json={"action": "copy-bck", "value": {"to": {"name": dst}}},
                      timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["job_id"], r.text
    wait_done(cluster, r.json()["job_id"])


# ---- etl-bck (Bucket.transform) ----
def etl_msg(name, timeout="5m", **kw):
    """Bucket.transform()'s value: TCBckMsg.as_dict() with TransformBckMsg's id, request_timeout, pipeline."""
    return {**copy_msg(**kw), "id": name, "request_timeout": timeout, "pipeline": None}


def sdk_transform(cluster, src, dst, value):
    params = {"provider": "ais", "bck_to": f"ais/@#/{dst}/"}
    return requests.post(f"{cluster.url}/v1/buckets/{src}", params=params, headers=UA, json=act("etl-bck", value),
                         timeout=TIMEOUT)


@pytest.fixture
def etl(cluster):
    """A transformer of FastTier's registry (AIStore's ETLs run in Kubernetes pods; the SDK's transform names one)."""
    names = []

    def register(spec):
        name = unique("aisw-etl")
        r = requests.post(cluster.url + "/v1/etl", json={"name": name, **spec}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        names.append(name)
        return name
    yield register
    for n in names:
        requests.delete(cluster.url + "/v1/etl/" + n, timeout=TIMEOUT)


def test_etl_bck(cluster, bucket, dst, etl):
    upper = etl({"command": ["tr", "a-z", "A-Z"]})
    data = {"t/a.txt": b"alpha", "t/b.txt": b"bravo", "t/c.bin": b"charlie", "u/d.txt": b"not selected"}
    for n, d in data.items():
        put(cluster, bucket, n, d)
    r = sdk_transform(cluster, bucket, dst, etl_msg(upper, prefix="t/", ext={"txt": "TXT"}))
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9-]+", r.text), r.text
    _, status = wait_done(cluster, r.text)
    assert status["err"] == "" and not status["aborted"], status
    assert list_all(cluster, dst) == ["t/a.TXT", "t/b.TXT", "t/c.bin"]
    for n, src in [("t/a.TXT", "t/a.txt"), ("t/b.TXT", "t/b.txt"), ("t/c.bin", "t/c.bin")]:
        r = requests.get(obj_url(cluster, dst, n), timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == data[src].upper(), n


def test_etl_bck_request_timeout_bounds_each_object(cluster, bucket, dst, etl):
    slow = etl({"command": ["sh", "-c", "sleep 3; cat"], "timeout_ms": 60000})
    put(cluster, bucket, "s/one", b"one")
    r = sdk_transform(cluster, bucket, dst, etl_msg(slow, timeout="200ms", prefix="s/"))
    assert r.status_code == 200, r.text
    wait_done(cluster, r.text)
    st = requests.get(f"{cluster.url}/v1/jobs/{r.text}", timeout=TIMEOUT).json()  # FastTier's view: the errors
    assert st["errors"] == 1 and any("timed out after 200 ms" in e for e in st["error_samples"]), st
    assert list_all(cluster, dst) == []


@pytest.mark.parametrize("value, status, word", [
    (etl_msg(""), 400, "id"),
    ({**copy_msg(), "request_timeout": "5m"}, 400, "id"),
    (etl_msg("no-such-etl"), 404, "does not exist"),
    (etl_msg("x", timeout="5 minutes"), 400, "request_timeout"),
    (etl_msg("x", timeout="-5m"), 400, "request_timeout"),
    (etl_msg("x", timeout=["5m"]), 400, "request_timeout"),
])
def test_etl_bck_refused(cluster, bucket, dst, value, status, word):
    put(cluster, bucket, "a", b"a")
    r = sdk_transform(cluster, bucket, dst, value)
    assert r.status_code == status and word in r.json()["message"], r.text
    assert requests.head(bucket_url(cluster, dst), timeout=TIMEOUT).status_code == 404


# ---- copy-listrange, etl-listrange (ObjectGroup.copy / ObjectGroup.transform) ----
def sdk_objects(cluster, src, action, dst, selection, tc_msg, coer=False):
    """ObjectGroup.copy()/transform(): POST /v1/buckets/SRC with TCMultiObj.as_dict(): the selection, the
    TCBckMsg's keys, tobck (BucketModel.model_dump()) and coer; the answer is the job id(s) as text."""
    value = {**selection, **tc_msg, "tobck": {"name": dst, "provider": "ais", "namespace": None}, "coer": coer}
    return requests.post(f"{cluster.url}/v1/buckets/{src}", params={"provider": "ais"}, headers=UA,
                         json=act(action, value), timeout=TIMEOUT)


def test_copy_and_transform_objects(cluster, bucket, dst, etl):
    data = {f"g/{i}.txt": f"group {i}".encode() for i in range(5)}
    for n, d in data.items():
        put(cluster, bucket, n, d)
    r = sdk_objects(cluster, bucket, "copy-listrange", dst, {"objnames": ["g/0.txt", "g/1.txt"]},
                    copy_msg(prepend="c/"))
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9-]+", r.text), r.text
    _, status = wait_done(cluster, r.text.split(",")[0])
    assert status["err"] == "", status
    assert list_all(cluster, dst) == ["c/g/0.txt", "c/g/1.txt"]
    upper = etl({"command": ["tr", "a-z", "A-Z"]})
    r = sdk_objects(cluster, bucket, "etl-listrange", dst, {"template": "g/{2..4}.txt"},
                    etl_msg(upper, ext={"txt": "up"}))
    assert r.status_code == 200, r.text
    wait_done(cluster, r.text)
    assert list_all(cluster, dst) == ["c/g/0.txt", "c/g/1.txt", "g/2.up", "g/3.up", "g/4.up"]
    for i in (2, 3, 4):
        got = requests.get(obj_url(cluster, dst, f"g/{i}.up"), timeout=TIMEOUT)
        assert got.status_code == 200 and got.content == data[f"g/{i}.txt"].upper()


@pytest.mark.parametrize("action, selection, tc, tobck, status, word", [
    ("copy-listrange", {}, copy_msg(), None, 400, "objnames or template"),
    ("copy-listrange", {"objnames": "g/0"}, copy_msg(), None, 400, "objnames"),
    ("copy-listrange", {"objnames": ["a"]}, copy_msg(), {"provider": "ais"}, 400, "tobck"),
    ("copy-listrange", {"objnames": ["a"]}, copy_msg(),
     {"name": "x", "provider": "ais", "namespace": {"uuid": "u", "name": "n"}}, 501, "namespace"),
    ("copy-listrange", {"objnames": ["a"]}, {**copy_msg(), "id": "e"}, None, 501, "ETL"),
    ("etl-listrange", {"objnames": ["a"]}, copy_msg(), None, 400, "id"),
    ("etl-listrange", {"objnames": ["a"]}, etl_msg("no-such-etl"), None, 404, "does not exist"),
    ("etl-listrange", {"objnames": ["a"]}, {**etl_msg("x"), "pipeline": ["y"]}, None, 501, "pipeline"),
])
def test_copy_objects_refused(cluster, bucket, dst, action, selection, tc, tobck, status, word):
    put(cluster, bucket, "a", b"a")
    value = {**selection, **tc, "tobck": tobck or {"name": dst, "provider": "ais", "namespace": None}}
    r = requests.post(f"{cluster.url}/v1/buckets/{bucket}", params={"provider": "ais"}, headers=UA,
                      json=act(action, value), timeout=TIMEOUT)
    assert r.status_code == status and word in r.json()["message"], r.text
    assert requests.head(bucket_url(cluster, dst), timeout=TIMEOUT).status_code == 404


# ---- archive (ObjectGroup.archive) ----
def sdk_archive(cluster, src, selection, archname, to=None, mime="", isbn=False, aate=False, coer=False):
    """ObjectGroup.archive(): PUT /v1/buckets/SRC with ArchiveMultiObj.as_dict(); the answer is the job id(s)."""
    value = {**selection, "archname": archname, "isbn": isbn, "aate": aate, "coer": coer}
    if mime:
        value["mime"] = mime
    value["tobck"] = {"name": to or src, "provider": "ais", "namespace": None}
    return requests.put(f"{cluster.url}/v1/buckets/{src}", params={"provider": "ais"}, headers=UA,
                        json=act("archive", value), timeout=TIMEOUT)


def test_archive_objects(cluster, bucket, dst):
    data = {f"w/{i}.bin": f"sample {i}".encode() * (i + 1) for i in range(4)}
    for n, d in data.items():
        put(cluster, bucket, n, d)
    r = sdk_archive(cluster, bucket, {"objnames": ["w/0.bin", "w/2.bin"]}, "pack.tar")
    assert r.status_code == 200 and re.fullmatch(r"[A-Za-z0-9-]+", r.text), r.text
    wait_done(cluster, r.text.split(",")[0])
    got = requests.get(obj_url(cluster, bucket, "pack.tar"), timeout=TIMEOUT)
    assert got.status_code == 200 and untar(got.content) == [("w/0.bin", data["w/0.bin"]),
                                                             ("w/2.bin", data["w/2.bin"])]
    # a template into another bucket, the source's name in the members', the format by MIME
    assert requests.post(bucket_url(cluster, dst), json=act("create-bck"), timeout=TIMEOUT).status_code == 200
    r = sdk_archive(cluster, bucket, {"template": "w/{1..3}.bin"}, "pack.out", to=dst, mime=".tar", isbn=True)
    assert r.status_code == 200, r.text
    wait_done(cluster, r.text)
    got = requests.get(obj_url(cluster, dst, "pack.out"), timeout=TIMEOUT)
    assert got.status_code == 200
    assert untar(got.content) == [(f"{bucket}/w/{i}.bin", data[f"w/{i}.bin"]) for i in (1, 2, 3)]


@pytest.mark.parametrize("kw, status, word", [
    ({"aate": True}, 501, "aate"),
    ({"aate": "yes"}, 400, "aate"),
    ({"to": "absent-bucket-xyz"}, 404, "absent-bucket-xyz"),
    ({"mime": "application/x-bogus"}, 400, "format"),
])
def test_archive_objects_refused(cluster, bucket, kw, status, word):
    put(cluster, bucket, "a", b"a")
    r = sdk_archive(cluster, bucket, {"objnames": ["a"]}, "refused.tar", **kw)
    assert r.status_code == status and word in r.json()["message"], r.text
    assert requests.head(obj_url(cluster, bucket, "refused.tar"), allow_redirects=True,
                         timeout=TIMEOUT).status_code == 404


def test_archive_objects_bad_destination_and_action(cluster, bucket):
    put(cluster, bucket, "a", b"a")
    value = {"objnames": ["a"], "archname": "x.tar", "tobck": {"name": "b", "provider": "aws"}}
    r = requests.put(bucket_url(cluster, bucket), json=act("archive", value), timeout=TIMEOUT)
    assert r.status_code == 501 and "ais buckets" in r.json()["message"], r.text
    r = requests.put(bucket_url(cluster, bucket), json=act("archive", {**value, "tobck": {"provider": "ais"}}),
                     timeout=TIMEOUT)
    assert r.status_code == 400 and "tobck" in r.json()["message"], r.text
    r = requests.put(bucket_url(cluster, bucket), json=act("archive", {"objnames": ["a"], "archname": "x.tar",
                                                                      "bogus": 1}), timeout=TIMEOUT)
    assert r.status_code == 400 and "bogus" in r.json()["message"], r.text
    r = requests.put(bucket_url(cluster, bucket), json=act("set-bprops", {}), timeout=TIMEOUT)
    assert r.status_code == 405 and "GET" in r.headers.get("Allow", ""), r.text


# ---- object copy (Object.copy) ----
def sdk_obj_copy(cluster, src, name, to, etl=None, latest=False, sync=False, data=None):
    """Object.copy(): PUT /v1/objects/SRC/NAME with obj_to=<uname>, latest, sync (etl_name with an ETL), no
    body; requests follows the proxy's 307 with the same method."""
    params = {"provider": "ais", "obj_to": to, "latest": "true" if latest else "false",
              "sync": "true" if sync else "false"}
    if etl:
        params["etl_name"] = etl
    return requests.put(f"{cluster.url}/v1/objects/{src}/{name}", params=params, headers=UA, data=data,
                        timeout=TIMEOUT)


def test_object_copy(cluster, bucket, dst, etl):
    put(cluster, bucket, "c/src.txt", b"copy me")
    assert requests.post(bucket_url(cluster, dst), json=act("create-bck"), timeout=TIMEOUT).status_code == 200
    r = sdk_obj_copy(cluster, bucket, "c/src.txt", f"ais/@#/{dst}/d/new name.txt")
    assert r.status_code == 200 and r.json()["bucket"] == dst, r.text
    got = requests.get(obj_url(cluster, dst, "d/new name.txt"), timeout=TIMEOUT)
    assert got.status_code == 200 and got.content == b"copy me"
    # within the bucket, through a transformer
    upper = etl({"command": ["tr", "a-z", "A-Z"]})
    r = sdk_obj_copy(cluster, bucket, "c/src.txt", f"ais/@#/{bucket}/c/upper.txt", etl=upper)
    assert r.status_code == 200, r.text
    assert requests.get(obj_url(cluster, bucket, "c/upper.txt"), timeout=TIMEOUT).content == b"COPY ME"
    assert requests.get(obj_url(cluster, bucket, "c/src.txt"), timeout=TIMEOUT).content == b"copy me"
    # a provider's alias for the destination, as the proxy reads it ("ais" has none: an unknown word is 400)
    r = sdk_obj_copy(cluster, bucket, "c/src.txt", f"nope/@#/{dst}/x")
    assert r.status_code == 400 and "provider" in r.json()["message"], r.text


@pytest.mark.parametrize("name, to, kw, status, word", [
    ("absent", "ais/@#/{dst}/x", {}, 404, "does not exist"),
    ("o", "ais/@#/no-such-bucket-q/x", {}, 404, "no-such-bucket-q"),
    ("o", "ais/@uuid#ns/{dst}/x", {}, 501, "namespace"),
    ("o", "ais/@#/{dst}/", {}, 400, "obj_to"),
    ("o", "ais", {}, 400, "obj_to"),
    ("o", "nope/@#/{dst}/x", {}, 400, "provider"),
    ("o", "ais/@#/{dst}/x", {"sync": True}, 501, "sync"),
    ("o", "ais/@#/{dst}/x", {"etl": "no-such-etl"}, 404, "no-such-etl"),
    ("o", "ais/@#/{dst}/x", {"data": b"a body"}, 400, "no body"),
    ("o", "ais/@#/{bucket}/o", {}, 400, "itself"),
])
def test_object_copy_refused(cluster, bucket, dst, name, to, kw, status, word):
    put(cluster, bucket, "o", b"o")
    assert requests.post(bucket_url(cluster, dst), json=act("create-bck"), timeout=TIMEOUT).status_code == 200
    r = sdk_obj_copy(cluster, bucket, name, to.format(dst=dst, bucket=bucket), **kw)
    assert r.status_code == status and word in r.json()["message"], r.text
    assert list_all(cluster, dst) == []
