# SPDX-License-Identifier: Apache-2.0
# Buckets: create, list, HEAD, destroy, checksum type, and every bad bucket request.
import json
import os
import time

import pytest

from ftutil import TIMEOUT, Api, assert_json_error, bucket_path, md5_hex, session, unique


def names_of(api):
    r = api.s.get(api.url + "/v1/buckets", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    lst = r.json()
    assert isinstance(lst, list)
    return {b["name"]: b for b in lst}


def test_create_list_head_destroy(api):
    b = unique("bck")
    r = api.create_bucket(b)
    listed = names_of(api)
    assert b in listed
    assert listed[b]["provider"] == "ais"
    assert listed[b]["checksum"] == "xxhash"
    assert isinstance(listed[b]["created"], int)
    assert abs(listed[b]["created"] - time.time_ns()) < 600 * 10**9

    r = api.s.head(api.url + bucket_path(b), timeout=TIMEOUT)
    assert r.status_code == 200
    props = json.loads(r.headers["Ais-Bucket-Props"])
    assert props["name"] == b and props["checksum"] == "xxhash" and props["provider"] == "ais"
    assert r.content == b""

    bmd = api.bmd()
    assert [x for x in bmd["buckets"] if x["name"] == b][0]["checksum"] == "xxhash"

    r = api.create_bucket(b, expect=None)
    assert_json_error(r, 409)

    api.destroy_bucket(b)
    assert b not in names_of(api)
    r = api.s.head(api.url + bucket_path(b), timeout=TIMEOUT)
    assert r.status_code == 404
    assert_json_error(api.destroy_bucket(b, expect=None), 404)
    r = api.s.get(api.url + bucket_path(b), timeout=TIMEOUT)
    assert_json_error(r, 404)


def test_destroy_with_action_body(api):
    b = unique("bck")
    api.create_bucket(b)
    r = api.s.delete(api.url + bucket_path(b), json={"action": "destroy-bck"}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert b not in names_of(api)


def test_md5_bucket(api):
    b = unique("md5")
    api.create_bucket(b, cksum="md5")
    assert names_of(api)[b]["checksum"] == "md5"
    r = api.s.head(api.url + bucket_path(b), timeout=TIMEOUT)
    assert json.loads(r.headers["Ais-Bucket-Props"])["checksum"] == "md5"
    data = os.urandom(5000)
    r = api.put(b, "x", data)
    assert r.headers["Ais-Checksum-Type"] == "md5"
    assert r.headers["Ais-Checksum-Value"] == md5_hex(data)
    api.destroy_bucket(b)


def test_explicit_xxhash_bucket(api):
    b = unique("xxh")
    api.create_bucket(b, cksum="xxhash")
    assert names_of(api)[b]["checksum"] == "xxhash"
    api.destroy_bucket(b)


def test_destroy_removes_objects(cluster, api):
    b = unique("gone")
    api.create_bucket(b)
    for i in range(20):
        api.put(b, "d/o%d" % i, b"x" * i)
    api.destroy_bucket(b)
    api.create_bucket(b)
    entries, _ = api.list_all(b)
    assert entries == []
    r = api.get(b, "d/o3")
    assert_json_error(r, 404)
    if cluster.local:
        # the old bucket's files are gone from every mountpath once the recreate happened
        def leftovers():
            out = []
            for mp in cluster.all_mountpaths():
                for dirpath, _, files in os.walk(os.path.join(mp, "ais", b)):
                    out += [os.path.join(dirpath, f) for f in files]
            return out
        deadline = time.monotonic() + 5
        while leftovers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert leftovers() == []
    api.destroy_bucket(b)


BAD_BUCKET_NAMES = [
    ".hidden", "-dash", "a b", "a" * 65, "ümlaut", "a$b", "a:b", "a%00b", "a\x00b", "a\\b",
    ".", "..",
]


@pytest.mark.parametrize("name", BAD_BUCKET_NAMES)
def test_create_invalid_bucket_name_is_400(api, name):
    r = api.create_bucket(name, expect=None)
    assert_json_error(r, 400)
    assert name not in names_of(api)


def test_longest_bucket_name_is_fine(api):
    b = unique("l")
    b = b + "x" * (64 - len(b))
    api.create_bucket(b)
    api.put(b, "o", b"1")
    api.destroy_bucket(b)


@pytest.mark.parametrize("body", [
    b"{not json",
    b"",
    b"[]",
    b"{\"action\": 5}",
    b"{\"action\": \"no-such-action\"}",
    b"{\"value\": {}}",
    b"{\"action\": \"create-bck\", \"value\": {\"checksum\": {\"type\": \"crc99\"}}}",
    b"{\"action\": \"create-bck\", \"value\": {\"checksum\": \"md5\"}}",
    b"{\"action\": \"create-bck\"} trailing",
])
def test_malformed_action_is_400(api, body):
    b = unique("act")
    r = api.s.post(api.url + bucket_path(b), data=body, timeout=TIMEOUT,
                   headers={"Content-Type": "application/json"})
    assert_json_error(r, 400)
    assert b not in names_of(api)


def test_remote_provider_listing(api):
    # Listing an unknown remote bucket: 404; listing every bucket of a remote provider is not built: 501.
    r = api.s.get(api.url + "/v1/buckets/some?provider=aws", timeout=TIMEOUT)
    assert_json_error(r, 404, "does not exist")
    r = api.s.get(api.url + "/v1/buckets?provider=aws", timeout=TIMEOUT)
    assert_json_error(r, 501)
    # Creating one needs the backend properties.
    r = api.s.post(api.url + "/v1/buckets/some?provider=gcp", json={"action": "create-bck"},
                   timeout=TIMEOUT)
    assert_json_error(r, 400, "backend")


def test_unknown_provider_is_400(api):
    r = api.s.get(api.url + "/v1/buckets/some?provider=nosuch", timeout=TIMEOUT)
    assert_json_error(r, 400)


def test_bucket_api_on_missing_bucket_is_404(api):
    b = unique("nope")
    assert_json_error(api.s.get(api.url + bucket_path(b), timeout=TIMEOUT), 404)
    assert_json_error(api.s.delete(api.url + bucket_path(b), timeout=TIMEOUT), 404)
    assert api.s.head(api.url + bucket_path(b), timeout=TIMEOUT).status_code == 404


def test_bucket_list_is_consistent_across_sessions(cluster):
    apis = [Api(cluster.url, session()) for _ in range(4)]
    made = [unique("many") for _ in range(8)]
    for i, b in enumerate(made):
        apis[i % 4].create_bucket(b, cksum="md5" if i % 2 else None)
    listed = names_of(apis[0])
    for i, b in enumerate(made):
        assert listed[b]["checksum"] == ("md5" if i % 2 else "xxhash")
    for b in made:
        apis[1].destroy_bucket(b)
    listed = names_of(apis[2])
    assert not set(made) & set(listed)
