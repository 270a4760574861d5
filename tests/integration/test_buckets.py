# SPDX-License-Identifier: Apache-2.0
# Buckets: create, list, HEAD, destroy, checksum type, and every bad bucket request.
import json
import os
import time

import pytest

from ftutil import CKSUM_TYPES, TIMEOUT, Api, assert_json_error, bucket_path, cksum_hex, md5_hex, session, unique


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


def set_bprops(api, bucket, value):
    return api.s.post(api.url + bucket_path(bucket), json={"action": "set-bprops", "value": value}, timeout=TIMEOUT)


@pytest.mark.parametrize("kind", ["xxh3", "crc32c", "sha256", "sha512"])
def test_later_checksum_types(api, kind):
    """PUT, HEAD and GET in a bucket of each later type carry that type and its value, as hashlib, a
    table CRC-32C and libxxhash's one-shot XXH3 compute it; sizes cross the hashing block sizes."""
    b = unique(kind)
    api.create_bucket(b, cksum=kind)
    assert names_of(api)[b]["checksum"] == kind
    r = api.s.head(api.url + bucket_path(b), timeout=TIMEOUT)
    assert json.loads(r.headers["Ais-Bucket-Props"])["checksum"] == kind
    for i, size in enumerate([0, 1, 3, 17, 240, 241, 4095, 65537, (1 << 20) + 7]):
        data = os.urandom(size)
        want = cksum_hex(kind, data)
        r = api.put(b, "o%d" % i, data)
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, want), size
        r = api.head(b, "o%d" % i)
        assert r.status_code == 200
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, want), size
        r = api.get(b, "o%d" % i)
        assert r.status_code == 200 and r.content == data
        assert r.headers["Ais-Checksum-Value"] == want
    api.destroy_bucket(b)


def test_bad_checksum_type_names(api):
    """An unknown (or "none", or not lowercase) type at create-bck or set-bprops is a 400 listing the valid names;
    nothing is created or changed."""
    for bad in ["sha384", "SHA512", "xxhash3", "CRC32C", "none", "", 5, {"type": "md5"}]:
        b = unique("badck")
        r = api.s.post(api.url + bucket_path(b), json={"action": "create-bck", "value": {"checksum": {"type": bad}}},
                       timeout=TIMEOUT)
        assert_json_error(r, 400, "xxhash, md5, xxh3, crc32c, sha256, sha512")
        assert b not in names_of(api)
    r = api.s.post(api.url + bucket_path(unique("badck")), json={"action": "create-bck", "value": {"checksum": "md5"}},
                   timeout=TIMEOUT)
    assert_json_error(r, 400, "crc32c")
    b = unique("badck")
    api.create_bucket(b, cksum="crc32c")
    for bad in ["sha1", "sha512 ", "none", None, 1]:
        r = set_bprops(api, b, {"checksum": {"type": bad}} if bad is not None else {"checksum": "xxh3"})
        assert_json_error(r, 400, "xxhash, md5, xxh3, crc32c, sha256, sha512")
    assert names_of(api)[b]["checksum"] == "crc32c"
    api.destroy_bucket(b)


def test_checksum_type_change_keeps_stored_objects(api):
    """set-bprops checksum.type: new objects (and overwrites) take the new type, stored ones keep theirs and still
    pass a validated warm GET."""
    b = unique("ckchg")
    api.create_bucket(b)
    assert set_bprops(api, b, {"checksum_validate_warm_get": True}).status_code == 200
    data = {}
    for kind in CKSUM_TYPES:
        r = set_bprops(api, b, {"checksum": {"type": kind}})
        assert r.status_code == 200, r.text
        assert names_of(api)[b]["checksum"] == kind
        data[kind] = os.urandom(70000)
        r = api.put(b, kind, data[kind])
        assert r.headers["Ais-Checksum-Type"] == kind
    for kind, d in data.items():
        r = api.get(b, kind)
        assert r.status_code == 200 and r.content == d
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, cksum_hex(kind, d))
    # an overwrite takes the bucket's current type (sha512, the last one set)
    r = api.put(b, "xxhash", data["xxhash"])
    assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == ("sha512",
                                                                                cksum_hex("sha512", data["xxhash"]))
    # and back: from sha512 to xxhash, the sha512 objects keep their type and value
    assert set_bprops(api, b, {"checksum": {"type": "xxhash"}}).status_code == 200
    assert api.put(b, "new", data["md5"]).headers["Ais-Checksum-Type"] == "xxhash"
    for name, kind in (("sha512", "sha512"), ("xxhash", "sha512"), ("new", "xxhash")):
        d = data["md5"] if name == "new" else data[name]
        r = api.get(b, name)
        assert r.status_code == 200 and r.content == d
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, cksum_hex(kind, d))
    api.destroy_bucket(b)


def test_put_with_client_checksum(api):
    """Ais-Checksum-Type/-Value on a PUT: the body is checked against them (the bucket's type or another), a
    mismatch is a 400 and nothing is stored; the stored checksum stays the bucket's type."""
    b = unique("clck")
    api.create_bucket(b, cksum="xxh3")
    data, other = os.urandom(100000), os.urandom(100000)
    for kind in CKSUM_TYPES:
        r = api.put(b, "ok-" + kind, data, headers={"Ais-Checksum-Type": kind,
                                                     "Ais-Checksum-Value": cksum_hex(kind, data).upper()})
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == ("xxh3", cksum_hex("xxh3", data))
        r = api.put(b, "bad-" + kind, data, headers={"Ais-Checksum-Type": kind,
                                                      "Ais-Checksum-Value": cksum_hex(kind, other)}, expect=400)
        assert_json_error(r, 400, "BadCksum")
        assert cksum_hex(kind, data) in r.json()["message"]
        assert api.get(b, "bad-" + kind).status_code == 404
    # an overwrite that fails its check leaves the stored object as it was
    r = api.put(b, "ok-md5", other, headers={"Ais-Checksum-Type": "md5", "Ais-Checksum-Value": cksum_hex("md5", data)},
                expect=400)
    assert api.get(b, "ok-md5").content == data
    # "none" checks nothing; a bad type, or a type without a value, is refused before the body is read
    assert api.put(b, "none", data, headers={"Ais-Checksum-Type": "none"}).status_code == 200
    r = api.put(b, "x", data, headers={"Ais-Checksum-Type": "sha1", "Ais-Checksum-Value": "00"}, expect=400)
    assert_json_error(r, 400, "xxhash, md5, xxh3, crc32c, sha256, sha512")
    r = api.put(b, "x", data, headers={"Ais-Checksum-Type": "crc32c"}, expect=400)
    assert_json_error(r, 400, "Ais-Checksum-Value")
    r = api.put(b, "x", data, headers={"Ais-Checksum-Value": "e3069283"}, expect=400)
    assert_json_error(r, 400, "Ais-Checksum-Type")
    assert api.get(b, "x").status_code == 404
    api.destroy_bucket(b)


def test_put_with_client_checksum_in_sha512_bucket(api):
    """In a sha512 bucket, a client's sha512 Ais-Checksum-Value is the stored one: a match stores it (128 digits), a
    value cut by one digit, one with a digit changed and an overlong one are 400 BadCksum with nothing stored; a
    client's sha256 is computed beside the bucket's sha512."""
    b = unique("clck512")
    api.create_bucket(b, cksum="sha512")
    data = os.urandom(300001)
    want = cksum_hex("sha512", data)
    assert len(want) == 128
    r = api.put(b, "ok", data, headers={"Ais-Checksum-Type": "sha512", "Ais-Checksum-Value": want})
    assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == ("sha512", want)
    assert api.head(b, "ok").headers["Ais-Checksum-Value"] == want
    changed = want[:-1] + ("0" if want[-1] != "0" else "1")
    for i, bad in enumerate([want[:-1], changed, want + "0" * 200]):
        r = api.put(b, "bad%d" % i, data, headers={"Ais-Checksum-Type": "sha512", "Ais-Checksum-Value": bad},
                    expect=400)
        assert_json_error(r, 400, "BadCksum")
        assert want in r.json()["message"]
        assert api.get(b, "bad%d" % i).status_code == 404
    r = api.put(b, "other", data,
                headers={"Ais-Checksum-Type": "sha256", "Ais-Checksum-Value": cksum_hex("sha256", data)})
    assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == ("sha512", want)
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
    # Listing an unknown remote bucket: 404. The buckets of a remote provider the cluster has (presence=2) come from
    # the BMD; an HTTP origin has no account to list (the accounts' listings: test_remote_buckets.py).
    r = api.s.get(api.url + "/v1/buckets/some?provider=aws", timeout=TIMEOUT)
    assert_json_error(r, 404, "does not exist")
    r = api.s.get(api.url + "/v1/buckets?provider=aws&presence=2", timeout=TIMEOUT)
    assert r.status_code == 200 and all(b["provider"] == "aws" for b in r.json()), r.text
    r = api.s.get(api.url + "/v1/buckets?provider=ht", timeout=TIMEOUT)
    assert_json_error(r, 400, "HTTP origin")
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
