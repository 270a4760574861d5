# SPDX-License-Identifier: Apache-2.0
# EC (erasure-coded buckets): slices and replicas on other targets, restore of lost main copies, corrupt slices, a SIGKILLed target.
import os
import random
import threading
import time

import pytest

from ftutil import TIMEOUT, Api, assert_json_error, bucket_path, cksum_hex, md5_hex, session, unique, wait_until

KA_MS = 300  # keepalive: a killed target leaves the map within a few seconds


def set_ec(h, api, bucket, data, parity, limit):
    """Sets the bucket's EC properties (set-bprops) and waits until every target has that BMD."""
    r = api.s.post(h.url + bucket_path(bucket), timeout=TIMEOUT,
                   json={"action": "set-bprops",
                         "value": {"ec": {"data_slices": data, "parity_slices": parity,
                                          "objsize_limit": limit}}})
    assert r.status_code == 200, "set-bprops ec: %d %r" % (r.status_code, r.text)
    want = api.bmd()["version"]
    s = session()
    for t in h.targets():
        wait_until(lambda: s.post(t["control_url"] + "/v1/metasync", json={},
                                  timeout=TIMEOUT).json()["bmd_version"] >= want,
                   timeout=10, what="BMD v%d on %s" % (want, t["id"]))


def slice_files(h, bucket, name):
    """{target index: path} of the EC slice or replica files of bucket/name on every target."""
    out = {}
    for i, t in enumerate(h.c.targets):
        for mp in t.mountpaths:
            p = os.path.join(mp, ".ec", "ais", bucket, name)
            if os.path.isfile(p):
                assert i not in out, "two slices of %s on target %d" % (name, i)
                out[i] = p
    return out


def main_files(h, index, bucket, name):
    return [p for p in (os.path.join(mp, "ais", bucket, name) for mp in h.mountpaths(index))
            if os.path.isfile(p)]


def lose_main_copy_and_get(h, api, b, name, data):
    """Removes the owner's copy of b/name, GETs it (restored from EC) and checks the bytes and that the restored
    copy is back on the owner; returns the GET's response."""
    owner = h.index_of_url(api.owner(b, name))
    files = main_files(h, owner, b, name)
    assert len(files) == 1, files
    os.remove(files[0])
    r = api.get(b, name)
    assert r.status_code == 200, "%s: %d %r" % (name, r.status_code, r.text)
    assert r.content == data, name
    assert len(main_files(h, owner, b, name)) == 1, "restored copy not on the owner"
    return r


def slice_header(path):
    """The JSON header of a slice file (see target/protect/ec_codec.h)."""
    import json
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == b"FTEC", path
    n = int.from_bytes(raw[4:8], "little")
    return json.loads(raw[8:8 + n]), len(raw) - (8 + n + 4)


def flip_payload_byte(path, at):
    hdr, payload = slice_header(path)
    with open(path, "r+b") as f:
        off = os.path.getsize(path) - payload + at
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x5A]))


def ec_cluster(make_cluster, data=2, parity=1, limit=50_000, cksum="md5"):
    h = make_cluster(targets=4, mountpaths=2, keepalive_ms=KA_MS)
    api = Api(h.url)
    b = unique("ec")
    api.create_bucket(b, cksum=cksum)
    set_ec(h, api, b, data, parity, limit)
    return h, api, b


def test_put_places_slices_and_replicas(make_cluster):
    h, api, b = ec_cluster(make_cluster)
    big = os.urandom(300_001)
    small = os.urandom(1000)
    api.put(b, "big", big)
    api.put(b, "dir/small", small)

    owner = h.index_of_url(api.owner(b, "big"))
    sl = slice_files(h, b, "big")
    assert len(sl) == 3 and owner not in sl, (owner, sl)
    idx = set()
    for path in sl.values():
        hdr, payload = slice_header(path)
        assert hdr["data"] == 2 and hdr["parity"] == 1 and not hdr["replica"]
        assert payload == hdr["slice_size"] == 150_001
        idx.add(hdr["idx"])
    assert idx == {0, 1, 2}
    # the data slices are the object's halves (zero padded)
    by_idx = {}
    for path in sl.values():
        hdr, payload = slice_header(path)
        with open(path, "rb") as f:
            by_idx[hdr["idx"]] = f.read()[-payload:]
    assert by_idx[0] == big[:150_001] and by_idx[1] == big[150_001:] + b"\0"

    owner_small = h.index_of_url(api.owner(b, "dir/small"))
    rs = slice_files(h, b, "dir/small")
    assert len(rs) == 1 and owner_small not in rs, rs
    hdr, payload = slice_header(list(rs.values())[0])
    assert hdr["replica"] and payload == 1000
    with open(list(rs.values())[0], "rb") as f:
        assert f.read()[-1000:] == small

    r = api.get(b, "big")
    assert r.status_code == 200 and r.content == big

    # a re-PUT replaces the slices; a DELETE removes them (after the response)
    big2 = os.urandom(120_000)
    api.put(b, "big", big2)
    for path in slice_files(h, b, "big").values():
        hdr, payload = slice_header(path)
        assert payload == 60_000 and hdr["slice_size"] == 60_000
    assert api.delete(b, "big").status_code == 200
    assert api.delete(b, "dir/small").status_code == 200
    wait_until(lambda: not slice_files(h, b, "big") and not slice_files(h, b, "dir/small"),
               timeout=10, what="slices removed after DELETE")
    assert api.get(b, "big").status_code == 404

    # a PUT right after a DELETE keeps its slices (the holders drop only older ones)
    for k in range(5):
        data = os.urandom(100_000 + k)
        api.put(b, "again", data)
        assert api.delete(b, "again").status_code == 200
        api.put(b, "again", data)
    time.sleep(1)  # the deferred deletes have run by now (they are not what is tested)
    sl = slice_files(h, b, "again")
    assert len(sl) == 3, sl
    owner = h.index_of_url(api.owner(b, "again"))
    os.remove(main_files(h, owner, b, "again")[0])
    r = api.get(b, "again")
    assert r.status_code == 200 and r.content == data
    assert h.work_files() == []


def test_late_slice_of_an_older_version_is_dropped(make_cluster):
    # The owner sends slices without the name's lock: a fan-out of version N may reach a holder after
    # the one of N+1. The holder keeps the newest version (and still answers 200).
    h, api, b = ec_cluster(make_cluster)
    v1, v2 = os.urandom(300_001), os.urandom(200_003)
    api.put(b, "x", v1)
    old = {}
    for i, path in slice_files(h, b, "x").items():
        with open(path, "rb") as f:
            old[i] = f.read()
    api.put(b, "x", v2)
    new = slice_files(h, b, "x")
    assert sorted(new) == sorted(old), (new, old)
    stored = {}
    for i, path in new.items():
        with open(path, "rb") as f:
            stored[i] = f.read()
    s = session()
    for n, (i, raw) in enumerate(old.items()):
        url = h.c.targets[i].control_url + "/v1/ec/slice"
        r = s.post(url, params={"provider": "ais", "bucket": b, "obj": "x", "xfer": "%016x" % (0xbad0 + n),
                                "off": 0, "total": len(raw)},
                   data=raw, headers={"Content-Type": "application/octet-stream"}, timeout=TIMEOUT)
        assert r.status_code == 200 and r.json().get("kept") is True, (r.status_code, r.text)
        with open(new[i], "rb") as f:
            assert f.read() == stored[i], "target %d: the older slice replaced the newer one" % i
    owner = h.index_of_url(api.owner(b, "x"))
    os.remove(main_files(h, owner, b, "x")[0])
    r = api.get(b, "x")
    assert r.status_code == 200 and r.content == v2
    assert h.work_files() == []


def test_corrupt_slice_post_refused(make_cluster):
    # A slice that arrives in one chunk is checked in memory before it is written; one in several
    # chunks once the last is in. Either way a corrupt one gets 400 and leaves nothing: the slice
    # held stays as it was and no work file is left.
    h, api, b = ec_cluster(make_cluster)
    api.put(b, "x", os.urandom(300_001))
    held = slice_files(h, b, "x")
    i, path = sorted(held.items())[0]
    with open(path, "rb") as f:
        good = f.read()
    bad = bytearray(good)
    bad[-7] ^= 0x5A
    s = session()
    url = h.c.targets[i].control_url + "/v1/ec/slice"

    def post(xfer, off, chunk):
        return s.post(url, params={"provider": "ais", "bucket": b, "obj": "x", "xfer": "%016x" % xfer,
                                   "off": off, "total": len(bad)},
                      data=bytes(chunk), headers={"Content-Type": "application/octet-stream"}, timeout=TIMEOUT)

    r = post(0xc0de1, 0, bad)
    assert_json_error(r, 400, "corrupt")
    half = len(bad) // 2
    r = post(0xc0de2, 0, bad[:half])
    assert r.status_code == 200 and r.json().get("received") == half, (r.status_code, r.text)
    assert_json_error(post(0xc0de2, half, bad[half:]), 400, "corrupt")
    with open(path, "rb") as f:
        assert f.read() == good, "a refused slice replaced the one held"
    assert h.work_files() == []
    # the good slice, sent again in one chunk, is taken
    r = s.post(url, params={"provider": "ais", "bucket": b, "obj": "x", "xfer": "%016x" % 0xc0de3, "off": 0,
                            "total": len(good)},
               data=good, headers={"Content-Type": "application/octet-stream"}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.json().get("idx") is not None, (r.status_code, r.text)
    with open(path, "rb") as f:
        assert f.read() == good


def test_put_fails_without_enough_targets(make_cluster):
    # 2+2 needs 4 targets besides the owner: refused when set on a 4-target cluster
    h, api, b = ec_cluster(make_cluster, data=2, parity=1, limit=0)
    r = api.s.post(h.url + bucket_path(b), timeout=TIMEOUT,
                   json={"action": "set-bprops", "value": {"ec": {"data_slices": 2, "parity_slices": 2}}})
    assert_json_error(r, 400, "needs at least 5 targets")
    # 2+1 set while 4 targets were up; with one gone the owner has 2 others: the PUT fails, not acknowledged
    victim = 3
    ids_before = [t["id"] for t in h.smap()["targets"]]
    h.kill_target(victim, "KILL")
    wait_until(lambda: len(h.smap()["targets"]) == 3, timeout=3 * KA_MS / 1000 + 10,
               what="killed target to leave the map")
    smap = h.smap()
    gone = set(ids_before) - {t["id"] for t in smap["targets"]}
    assert len(gone) == 1, gone
    # the owner goes by its own map: every target that is left must have the new one (a busy machine may be late)
    s = session()
    for t in smap["targets"]:
        wait_until(lambda: s.post(t["control_url"] + "/v1/metasync", json={},
                                  timeout=TIMEOUT).json()["smap_version"] >= smap["version"],
                   timeout=10, what="map v%d on %s" % (smap["version"], t["id"]))
    r = api.put(b, "x", os.urandom(5000), expect=None)
    assert_json_error(r, 500, "needs 3 other targets")


def test_restore_after_main_copy_lost(make_cluster):
    h, api, b = ec_cluster(make_cluster)
    objs = {"a/big%d" % i: os.urandom(random.choice([60_000, 333_333, 1_000_003])) for i in range(4)}
    objs["a/small"] = os.urandom(999)
    objs["a/empty-ish"] = b"x"
    objs["a/huge"] = os.urandom(20 << 20)  # 10 MiB slices: sent and fetched in several chunks
    objs["a/odd name+%&=?#\u00e9\u540d"] = os.urandom(70_001)  # every byte percent-encoded on the way
    acks = {}
    for name, data in objs.items():
        r = api.put(b, name, data, headers={"Content-Type": "text/x-test"})
        acks[name] = (r.headers["Ais-Checksum-Value"], r.headers["Ais-Version"])
        assert acks[name][0] == md5_hex(data)

    for name, data in objs.items():
        r = lose_main_copy_and_get(h, api, b, name, data)
        assert r.headers["Ais-Checksum-Value"] == acks[name][0]
        assert r.headers["Ais-Version"] == acks[name][1]
        assert r.headers["Content-Type"] == "text/x-test"

    # an object never stored stays a 404
    assert api.get(b, "a/never").status_code == 404
    assert h.work_files() == []


@pytest.mark.parametrize("kind", ["xxh3", "crc32c", "sha256", "sha512"])
def test_restore_checks_the_object_type(make_cluster, kind):
    """An EC restore (from slices, and from a whole replica below objsize_limit) checks and keeps the object's own
    checksum type: the restored copy serves the value stored at PUT."""
    h, api, b = ec_cluster(make_cluster, cksum=kind)
    objs = {"big": os.urandom(333_335), "small": os.urandom(4_099)}
    for name, data in objs.items():
        r = api.put(b, name, data)
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, cksum_hex(kind, data))
    for name, data in objs.items():
        r = lose_main_copy_and_get(h, api, b, name, data)
        assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == (kind, cksum_hex(kind, data))


def test_corrupt_slice_detected_not_used(make_cluster):
    h, api, b = ec_cluster(make_cluster)
    data = os.urandom(500_000)
    api.put(b, "obj", data)
    owner = h.index_of_url(api.owner(b, "obj"))
    sl = slice_files(h, b, "obj")
    by_idx = {slice_header(p)[0]["idx"]: (i, p) for i, p in sl.items()}

    # one corrupt data slice: detected and dropped; the object comes back from the other two
    bad_target, bad_path = by_idx[0]
    flip_payload_byte(bad_path, 1234)
    with open(bad_path, "rb") as f:
        corrupt = f.read()
    os.remove(main_files(h, owner, b, "obj")[0])
    r = api.get(b, "obj")
    assert r.status_code == 200 and r.content == data
    # the holder removed the corrupt slice, and the restore re-created it
    now = slice_files(h, b, "obj")
    assert bad_target in now
    with open(now[bad_target], "rb") as f:
        assert f.read() != corrupt
    assert slice_header(now[bad_target])[0]["idx"] == 0

    # two of three slices corrupt: the object cannot be rebuilt, and nothing wrong is served
    sl = slice_files(h, b, "obj")
    for i, p in list(sl.items())[:2]:
        flip_payload_byte(p, 99)
    os.remove(main_files(h, owner, b, "obj")[0])
    r = api.get(b, "obj")
    assert r.status_code == 500, (r.status_code, r.content[:200])
    assert "not enough" in r.json()["message"] or "good slices" in r.json()["message"], r.text
    assert main_files(h, owner, b, "obj") == []
    assert h.work_files() == []


def test_sigkill_target_under_load(make_cluster):
    h, api, b = ec_cluster(make_cluster, limit=50_000)
    rnd = random.Random(7)
    acked = {}  # name -> md5
    for i in range(40):
        data = os.urandom(rnd.choice([1000, 64_000, 300_000]))
        api.put(b, "pre/%03d" % i, data)
        acked["pre/%03d" % i] = md5_hex(data)
    victim = 0
    vid = h.c.targets[victim].id
    owned = [n for n in acked if h.index_of_url(api.owner(b, n)) == victim]
    assert owned, "the victim owns none of the objects"

    lock = threading.Lock()
    stop = threading.Event()
    wrong = []
    gets_ok = [0]
    load_acked = [0]

    def putter(k):
        a = Api(h.url, session())
        i = 0
        while not stop.is_set():
            name = "load%d/%04d" % (k, i)
            i += 1
            data = os.urandom(random.choice([2000, 80_000, 200_000]))
            try:
                r = a.put(b, name, data, expect=None)
            except Exception:  # the victim died under us: not acked
                a = Api(h.url, session())
                continue
            if r.status_code == 200:
                with lock:
                    acked[name] = md5_hex(data)
                    load_acked[0] += 1

    def getter(k):
        a = Api(h.url, session())
        with lock:
            names = sorted(acked)
        rr = random.Random(k)
        while not stop.is_set():
            name = rr.choice(names)
            try:
                r = a.get(b, name)
            except Exception:
                a = Api(h.url, session())
                continue
            if r.status_code == 200 and len(r.content) != int(r.headers.get("Content-Length", len(r.content))):
                continue  # the victim died while sending: a cut connection (urllib3 1.26 does not raise on it)
            if r.status_code == 200:
                if md5_hex(r.content) != acked[name]:
                    wrong.append((name, len(r.content), r.url))
                gets_ok[0] += 1

    threads = [threading.Thread(target=putter, args=(k,)) for k in range(2)]
    threads += [threading.Thread(target=getter, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        h.kill_target(victim, "KILL")
        wait_until(lambda: vid not in [t["id"] for t in h.smap()["targets"]],
                   timeout=3 * KA_MS / 1000 + 10, what="killed target to leave the map")
        time.sleep(1.5)  # load goes on against the 3 left
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not wrong, "wrong bytes served for %s" % wrong[:5]
    assert gets_ok[0] > 0 and load_acked[0] > 0, (gets_ok, load_acked)

    def check_all(when):
        s = Api(h.url, session())
        for name, digest in sorted(acked.items()):
            r = s.get(b, name)
            assert r.status_code == 200, "%s, acked %s: GET %d %r" % (when, name, r.status_code,
                                                                       r.text[:200])
            assert md5_hex(r.content) == digest, "%s: %s came back different" % (when, name)
            assert r.headers["Ais-Checksum-Value"] == digest

    # every acknowledged object reads back while the victim is down (its own ones restored)
    check_all("victim down")
    for n in owned:
        now = h.index_of_url(api.owner(b, n))
        assert now != victim and main_files(h, now, b, n), "%s not restored on its new owner" % n

    h.restart_target(victim)
    wait_until(lambda: len(h.smap()["targets"]) == 4, timeout=15, what="victim to rejoin")
    check_all("victim back")


def test_encode_objects_stored_before_ec_and_repair(make_cluster):
    h = make_cluster(targets=4, mountpaths=2, keepalive_ms=KA_MS)
    api = Api(h.url)
    b = unique("ecjob")
    api.create_bucket(b, cksum="md5")
    objs = {"big": os.urandom(400_000), "small": os.urandom(3000)}
    for name, data in objs.items():
        api.put(b, name, data)
    s = session()

    def encode(name, index=None):
        i = h.index_of_url(api.owner(b, name)) if index is None else index
        return s.post(h.c.targets[i].control_url + "/v1/ec/encode",
                      params={"provider": "ais", "bucket": b, "obj": name}, timeout=TIMEOUT)

    assert_json_error(encode("big"), 400, "no erasure coding")
    set_ec(h, api, b, 2, 1, 50_000)
    assert not slice_files(h, b, "big") and not slice_files(h, b, "small")
    for name in objs:
        r = encode(name)
        assert r.status_code == 200 and r.json()["encoded"] is True, r.text
        assert r.json()["bytes"] == len(objs[name])
        r = encode(name)
        assert r.status_code == 200 and r.json()["encoded"] is False, r.text
    assert len(slice_files(h, b, "big")) == 3
    assert len(slice_files(h, b, "small")) == 1

    # a corrupt slice is found and re-created; so is a missing one
    sl = slice_files(h, b, "big")
    victim, path = sorted(sl.items())[0]
    flip_payload_byte(path, 7)
    with open(path, "rb") as f:
        corrupt_before = f.read()
    r = encode("big")
    assert r.status_code == 200 and r.json()["encoded"] is True, r.text
    assert encode("big").json()["encoded"] is False
    with open(slice_files(h, b, "big")[victim], "rb") as f:
        assert f.read() != corrupt_before
    victim2, path2 = sorted(slice_files(h, b, "big").items())[1]
    os.remove(path2)
    assert encode("big").json()["encoded"] is True
    assert victim2 in slice_files(h, b, "big")

    # and the slices made by the job rebuild the object
    owner = h.index_of_url(api.owner(b, "big"))
    os.remove(main_files(h, owner, b, "big")[0])
    r = api.get(b, "big")
    assert r.status_code == 200 and r.content == objs["big"]

    # not stored on that target: 404
    other = next(i for i in range(4) if i != owner)
    assert_json_error(encode("big", other), 404, "main copy missing")
