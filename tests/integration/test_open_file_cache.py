# SPDX-License-Identifier: Apache-2.0
# The target's open-file cache of warm GETs (target/core/fcache.c): never a stale byte or stale metadata.
"""
Every cluster here has one target with one loop thread, so all GETs share one cache: the second warm
GET of an object keeps its file open (the first is only remembered), the next ones are hits
(ft_open_file_cache_hits_total counts them, and each test checks that its GETs did hit before it
changes anything). Objects of a test have the same size before and after a change, so that only the
cache's validation (the file still linked, the same inode and times, the generation) tells them apart.
"""
import hashlib
import io
import os
import re
import tarfile
import time

import pytest

import peers
import s3util
from conftest import module_cluster
from ftutil import Api, assert_json_error, cksum_hex, create_remote, ctl, session, unique, wait_job, wait_until
from test_coldget import put_origin
from test_mirror import LOM_XATTR, replicas, set_props
from test_mirror import create as create_with_props
from test_s3_multipart import Native, mpu_etag, new_id

SIZE = 16 * 1024
ONE_LOOP = ["--loop_threads", "1"]

fcluster = module_cluster("fcache", "one loop thread, a small open-file cache", targets=1, mountpaths=1,
                          target_args=ONE_LOOP + ["--open_file_cache", "8"])
origin = peers.nginx_origin_fixture()


def body(tag, size=SIZE):
    """size bytes that differ from any other tag's in every position."""
    seed = (tag * (size // len(tag) + 1))[:size]
    return seed.encode()


def target_metric(h, name):
    r = session(h.token).get(h.c.targets[0].public_url + "/metrics", timeout=10)
    assert r.status_code == 200, r.text
    m = re.search(r"^%s (\d+)$" % re.escape(name), r.text, re.M)
    return int(m.group(1)) if m else 0


def hits(h):
    return target_metric(h, "ft_open_file_cache_hits_total")


def get_ok(api, bucket, name, want, status=200, **kw):
    r = api.get(bucket, name, **kw)
    assert r.status_code == status, (name, r.status_code, r.text[:200])
    assert r.content == want, "%s: stale or wrong bytes (%r...)" % (name, r.content[:16])
    return r


def warm(h, api, bucket, name, want):
    """GETs name until it is a hit of the cache (the first miss is remembered, the second keeps the file,
    the third GET hits)."""
    before = hits(h)
    for _ in range(3):
        get_ok(api, bucket, name, want)
    assert hits(h) > before, "the GETs of %s did not hit the open-file cache" % name


def put_kept(h, api, bucket, names, tag):
    """PUTs every name (body(tag + name)) and reads it until the cache keeps its file."""
    for n in names:
        api.put(bucket, n, body(tag + n))
        warm(h, api, bucket, n, body(tag + n))


def fd_links(pid):
    """Where the target's fds point (a path, " (deleted)" after it when unlinked)."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            continue
    return out


def deleted_fds(pid):
    """The target's fds of files that were unlinked."""
    return [link for link in fd_links(pid) if link.endswith(" (deleted)") and "/.work/" not in link]


@pytest.fixture
def api(fcluster):
    return Api(fcluster.url)


@pytest.fixture
def bucket(api):
    b = unique("fc")
    api.create_bucket(b)
    return b


def test_overwrite_is_served_new(fcluster, api, bucket):
    api.put(bucket, "x", body("old"))
    warm(fcluster, api, bucket, "x", body("old"))
    api.put(bucket, "x", body("new"))
    get_ok(api, bucket, "x", body("new"))
    get_ok(api, bucket, "x", body("new"))  # kept anew: a hit of the new file
    r = get_ok(api, bucket, "x", body("new")[100:200], status=206, headers={"Range": "bytes=100-199"})
    assert r.headers["Content-Range"] == "bytes 100-199/%d" % SIZE
    assert api.head(bucket, "x").headers["Content-Length"] == str(SIZE)
    assert target_metric(fcluster, "ft_open_file_cache_stale_total") > 0


def test_metadata_of_an_overwrite(fcluster, api, bucket):
    """A new version's metadata (its content type, checksum, version), not only its bytes."""
    api.put(bucket, "m", body("one"), headers={"Content-Type": "text/one"})
    warm(fcluster, api, bucket, "m", body("one"))
    v1 = api.head(bucket, "m").headers
    api.put(bucket, "m", body("two"), headers={"Content-Type": "text/two"})
    r = get_ok(api, bucket, "m", body("two"))
    assert r.headers["Content-Type"] == "text/two"
    assert r.headers["Ais-Checksum-Value"] != v1["Ais-Checksum-Value"]
    assert r.headers["Ais-Version"] != v1["Ais-Version"]


def test_hit_of_a_sha512_object(fcluster, api):
    """A cache hit in a sha512 bucket serves the whole 128-digit value, the ETag and the user metadata kept in the
    entry's encoded metadata."""
    b = unique("fc512")
    api.create_bucket(b, cksum="sha512")
    data = body("sha")
    meta = {"x-amz-meta-k%02d" % i: "%02d" % i * 50 for i in range(12)}
    api.put(b, "s", data, headers=meta)
    warm(fcluster, api, b, "s", data)
    before = hits(fcluster)
    r = get_ok(api, b, "s", data)
    assert hits(fcluster) > before
    want = cksum_hex("sha512", data)
    assert (r.headers["Ais-Checksum-Type"], r.headers["Ais-Checksum-Value"]) == ("sha512", want)
    assert r.headers["ETag"] == '"%s"' % want
    assert {k: r.headers[k] for k in meta} == meta
    api.destroy_bucket(b)


def test_delete_then_get_is_404_and_the_file_is_closed(fcluster, api, bucket):
    names = ["d%d" % i for i in range(4)]
    for n in names:
        api.put(bucket, n, body(n))
        warm(fcluster, api, bucket, n, body(n))
    for n in names[:2]:
        assert api.delete(bucket, n).status_code == 200
    for n in names[:2]:
        assert api.get(bucket, n).status_code == 404
        assert api.head(bucket, n).status_code == 404
    for n in names[2:]:
        assert api.delete(bucket, n).status_code == 200
    # no GET of these two since: the sweep closes them within about a second
    pid = fcluster.c.targets[0].pid
    wait_until(lambda: not deleted_fds(pid), 5, 0.1, "the target closes the files of deleted objects")


def test_bucket_destroyed_and_recreated(fcluster, api):
    b = unique("fcb")
    api.create_bucket(b)
    names = ["r%d" % i for i in range(3)]
    for n in names:
        api.put(b, n, body("first" + n))
        warm(fcluster, api, b, n, body("first" + n))
    api.destroy_bucket(b)
    assert api.get(b, names[0]).status_code == 404
    api.create_bucket(b)
    assert api.get(b, names[0]).status_code == 404
    for n in names:
        api.put(b, n, body("second" + n))
    for n in names:
        get_ok(api, b, n, body("second" + n))
        get_ok(api, b, n, body("second" + n))


def test_hashed_names(fcluster, api, bucket):
    """"a" a file, so "a/b" goes to its hashed file; a folder marker "f/" is always hashed."""
    for n in ("a", "a/b", "f/"):
        api.put(bucket, n, body("v1" + n))
        warm(fcluster, api, bucket, n, body("v1" + n))
    for n in ("a/b", "f/", "a"):
        api.put(bucket, n, body("v2" + n))
        get_ok(api, bucket, n, body("v2" + n))
        get_ok(api, bucket, n, body("v2" + n))
    assert api.delete(bucket, "a").status_code == 200
    assert api.get(bucket, "a").status_code == 404
    get_ok(api, bucket, "a/b", body("v2a/b"))
    assert api.delete(bucket, "a/b").status_code == 200
    assert api.get(bucket, "a/b").status_code == 404
    # "a" is free again: "a/b" now a path, and the name "a" a directory of it
    api.put(bucket, "a/b", body("v3a/b"))
    get_ok(api, bucket, "a/b", body("v3a/b"))
    get_ok(api, bucket, "a/b", body("v3a/b"))
    assert api.get(bucket, "a").status_code == 404


def test_only_small_plain_objects_are_kept(fcluster, api, bucket):
    """Checksum-validated warm GETs, mirrored buckets and objects over 1 MiB open their file every time."""
    validated, mirrored = unique("fcv"), unique("fcm")
    create_with_props(api, validated, {"checksum_validate_warm_get": True})
    create_with_props(api, mirrored, {"mirror": {"copies": 2}})
    big = os.urandom((1 << 20) + 1)
    api.put(validated, "v", body("valid"))
    api.put(mirrored, "m", body("mirror"))
    api.put(bucket, "big", big)
    before = hits(fcluster)
    for _ in range(4):
        get_ok(api, validated, "v", body("valid"))
        get_ok(api, mirrored, "m", body("mirror"))
        get_ok(api, bucket, "big", big)
        assert api.head(validated, "v").status_code == 200
    assert hits(fcluster) == before


def test_more_objects_than_entries(fcluster, api, bucket):
    """40 objects through 8 entries, rounds in both orders, one object rewritten between rounds."""
    want = {}
    for i in range(40):
        n = "many/%02d" % i
        want[n] = body("m%02d-0" % i)
        api.put(bucket, n, want[n])
    before = hits(fcluster)
    for rnd in range(3):
        order = sorted(want) if rnd % 2 == 0 else sorted(want, reverse=True)
        for n in order:  # missed (remembered), kept, hit
            for _ in range(3):
                get_ok(api, bucket, n, want[n])
        n = "many/%02d" % (rnd * 7)
        want[n] = body("m%02d-%d" % (rnd * 7, rnd + 1))
        api.put(bucket, n, want[n])
    for n in sorted(want):
        get_ok(api, bucket, n, want[n])
    assert hits(fcluster) - before >= 100
    pid = fcluster.c.targets[0].pid
    held = [link for link in os.listdir("/proc/%d/fd" % pid)]
    assert len(held) < 200, "the target holds %d fds" % len(held)


def test_evicted_remote_object(fcluster, origin):
    b = unique("fce")
    create_remote(fcluster.url, b, "ht", {"endpoint": origin.url})
    name = b + "-obj"
    put_origin(origin, name, body("origin1"))
    r = session().get("%s/v1/objects/%s/%s?provider=ht" % (fcluster.url, b, name), timeout=30)
    assert r.status_code == 200 and r.content == body("origin1")
    url = "%s/v1/objects/%s/%s?provider=ht" % (fcluster.url, b, name)
    before = hits(fcluster)
    for _ in range(3):
        r = session().get(url, timeout=30)
        assert r.status_code == 200 and r.content == body("origin1")
    assert hits(fcluster) > before
    r = session().post("%s/v1/buckets/%s?provider=ht" % (fcluster.url, b),
                       json={"action": "evict-listrange", "value": {"objnames": [name]}}, timeout=30)
    assert r.status_code == 200, r.text
    st = wait_job(fcluster, r.json()["job_id"])
    assert st["objects"] == 1, st
    put_origin(origin, name, body("origin2"))
    for _ in range(3):  # cold, then warm from the new file
        r = session().get(url, timeout=30)
        assert r.status_code == 200 and r.content == body("origin2")
    session().delete("%s/v1/buckets/%s?provider=ht" % (fcluster.url, b), timeout=30)


def test_cache_off_still_serves(make_cluster):
    h = make_cluster(targets=1, mountpaths=1, target_args=ONE_LOOP + ["--open_file_cache", "0"])
    api = Api(h.url)
    b = unique("fc0")
    api.create_bucket(b)
    api.put(b, "x", body("off1"))
    for _ in range(3):
        get_ok(api, b, "x", body("off1"))
    api.put(b, "x", body("off2"))
    get_ok(api, b, "x", body("off2"))
    assert hits(h) == 0
    assert api.delete(b, "x").status_code == 200
    assert api.get(b, "x").status_code == 404


def test_mountpath_detach_and_attach(make_cluster):
    h = make_cluster(targets=1, mountpaths=2, target_args=ONE_LOOP)
    t = h.c.targets[0]
    mp0 = h.mountpaths(0)[0]
    api = Api(h.url)
    b = unique("fcm")
    api.create_bucket(b)
    names = ["p%02d" % i for i in range(16)]
    put_kept(h, api, b, names, "a")

    def change(action, path, status):
        j = ctl("POST", t.control_url, "/v1/mountpaths", {"action": action, "path": path}, expect=status)
        wait_until(lambda: ctl("GET", t.control_url, "/v1/mountpaths")["resilver"]["id"] == j["resilver_id"] and
                   ctl("GET", t.control_url, "/v1/mountpaths")["resilver"]["state"] == "finished", 120, 0.1,
                   "%s %s resilvered" % (action, path))

    change("detach", mp0, 202)
    for n in names:
        get_ok(api, b, n, body("a" + n))
    for n in names:  # new versions, all on mp1 now
        api.put(b, n, body("b" + n))
    change("attach", mp0, 200)  # some move back to mp0, where their old versions were kept open
    for n in names:
        get_ok(api, b, n, body("b" + n))
        get_ok(api, b, n, body("b" + n))
    wait_until(lambda: not deleted_fds(t.pid), 5, 0.1, "the target closes the files of replaced objects")


PUBLIC = ["--allow_public_read", "true"]


def test_acl_change_is_seen(make_cluster):
    h = make_cluster(targets=1, mountpaths=1, auth=True, proxy_args=PUBLIC, target_args=ONE_LOOP + PUBLIC)
    api = Api(h.url, token=h.token)
    b = unique("fca")
    api.create_bucket(b)
    api.put(b, "k", body("acl"))
    warm(h, api, b, "k", body("acl"))
    anon = session(token="")
    url = "%s/v1/objects/%s/k" % (h.url, b)
    assert anon.get(url, timeout=30).status_code == 401
    s = session(token=h.token)
    r = s.put(url + "?acl=public-read", timeout=30)
    assert r.status_code == 200, r.text
    r = anon.get(url, timeout=30)
    assert r.status_code == 200 and r.content == body("acl"), (r.status_code, r.text[:200])
    assert api.head(b, "k").headers.get("x-amz-acl") == "public-read"
    r = s.put(url + "?acl=private", timeout=30)
    assert r.status_code == 200, r.text
    assert anon.get(url, timeout=30).status_code == 401
    assert api.head(b, "k").headers.get("x-amz-acl") in (None, "private")


def test_shard_kept_open_for_member_reads(fcluster, api, bucket):
    """A shard (any size: its member reads are small) is kept like a small object; a member read after the shard
    was overwritten, or appended to, reads the new shard."""
    from test_shards import append, get_member, make_tar
    shard = unique("fcs") + ".tar"
    big = {"a/%04d.bin" % i: body("m%d" % i, 64 * 1024) for i in range(24)}  # a shard over the 1 MiB of objects
    api.put(bucket, shard, make_tar(big))
    before = hits(fcluster)
    for _ in range(3):
        r = get_member(api, bucket, shard, "a/0007.bin")
        assert r.status_code == 200 and r.content == big["a/0007.bin"]
    assert hits(fcluster) > before, "the member reads did not hit the open-file cache"
    r = get_member(api, bucket, shard, "a/0003.bin", headers={"Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == big["a/0003.bin"][10:20]
    new = {name: body("n" + name, 64 * 1024) for name in big}  # the same layout, other bytes
    api.put(bucket, shard, make_tar(new))
    for _ in range(3):
        r = get_member(api, bucket, shard, "a/0007.bin")
        assert r.status_code == 200 and r.content == new["a/0007.bin"], "stale member bytes"
    append(api, bucket, shard, "a/0007.bin", b"appended")
    assert get_member(api, bucket, shard, "a/0007.bin").content == b"appended"
    assert get_member(api, bucket, shard, "a/0008.bin").content == new["a/0008.bin"]
    assert api.delete(bucket, shard).status_code == 200
    assert get_member(api, bucket, shard, "a/0007.bin").status_code == 404


def main_copy(h, bucket, name):
    (path,), _ = replicas(h, bucket, name)
    return path


def test_validation_turned_on_bypasses_kept_files(fcluster, api, bucket):
    """checksum_validate_warm_get set on a bucket whose object is kept: every GET from then on checks
    the bytes (a kept file is not used), so a byte flipped in place is never served."""
    api.put(bucket, "v", body("valid"))
    warm(fcluster, api, bucket, "v", body("valid"))
    set_props(api, bucket, {"checksum_validate_warm_get": True})
    before = hits(fcluster)
    for _ in range(3):
        get_ok(api, bucket, "v", body("valid"))
        assert api.head(bucket, "v").status_code == 200
    assert hits(fcluster) == before, "validated GETs used the open-file cache"
    path = main_copy(fcluster, bucket, "v")
    st = os.stat(path)
    with open(path, "r+b") as f:  # same size; mtime put back: only the checksum tells
        f.seek(100)
        f.write(b"X")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert_json_error(api.get(bucket, "v"), 500, "checksum mismatch")
    assert_json_error(api.get(bucket, "v", headers={"Range": "bytes=0-9"}), 500, "checksum mismatch")


def test_metadata_damaged_in_place_is_not_served(fcluster, api, bucket):
    """The metadata xattr of a kept object overwritten in place (no rename, same size and mtime): the
    next GET and HEAD read the file anew and refuse it, as without the cache."""
    api.put(bucket, "md", body("meta"))
    warm(fcluster, api, bucket, "md", body("meta"))
    assert api.head(bucket, "md").status_code == 200
    os.setxattr(main_copy(fcluster, bucket, "md"), LOM_XATTR, b"\x01garbage")
    assert_json_error(api.get(bucket, "md"), 500, "metadata corrupt")
    assert api.head(bucket, "md").status_code == 500


def test_multipart_completion_over_a_kept_object(fcluster, api, bucket):
    """A completed multipart upload replaces a kept object of the same size: new bytes, ETag and parts."""
    api.put(bucket, "mp", body("whole"))
    warm(fcluster, api, bucket, "mp", body("whole"))
    n = Native(fcluster, bucket, "mp")
    uid = new_id()
    assert n.start(uid).status_code == 200
    part = body("parted")
    r = n.part(uid, 1, part)
    assert r.status_code == 200, r.text
    r = n.complete(uid, [(1, r.json()["etag"])])
    assert r.status_code == 200, r.text
    for _ in range(3):
        g = get_ok(api, bucket, "mp", part)
        assert g.headers["ETag"] == mpu_etag([part])
    h = api.head(bucket, "mp")
    assert h.headers["ETag"] == mpu_etag([part]) and h.headers.get("Ais-S3-Parts") == "1"


def test_latest_version_refetch_replaces_the_kept_copy(fcluster, origin):
    """A remote object kept open, changed at its origin (same size): plain GETs serve the cached copy
    until a latest-ver GET fetches the new one; from then on every GET serves the new one."""
    b = unique("fcl")
    create_remote(fcluster.url, b, "ht", {"endpoint": origin.url})
    name = b + "-lv"
    url = "%s/v1/objects/%s/%s?provider=ht" % (fcluster.url, b, name)
    put_origin(origin, name, body("origin-v1"))
    before = hits(fcluster)
    for _ in range(4):
        r = session().get(url, timeout=30)
        assert r.status_code == 200 and r.content == body("origin-v1")
    assert hits(fcluster) > before
    time.sleep(1.1)  # nginx's ETag holds the mtime in seconds
    put_origin(origin, name, body("origin-v2"))
    r = session().get(url, timeout=30)
    assert r.status_code == 200 and r.content == body("origin-v1")  # no revalidation asked: cached
    r = session().get(url + "&latest-ver=true", timeout=30)
    assert r.status_code == 200 and r.content == body("origin-v2")
    for _ in range(3):
        r = session().get(url, timeout=30)
        assert r.status_code == 200 and r.content == body("origin-v2"), "the old copy was served"
    session().delete("%s/v1/buckets/%s?provider=ht" % (fcluster.url, b), timeout=30)


def fds_under(pid, part):
    """The target's fds of files whose path (deleted or not) holds part."""
    return [link for link in fd_links(pid) if part in link]


def test_destroyed_bucket_files_are_closed(fcluster, api):
    """A destroyed bucket's kept files (moved into .work, then deleted) are closed within seconds, so
    their space comes back; a shard of any size is kept like the small objects."""
    from test_shards import get_member, make_tar
    b = unique("fcx")
    api.create_bucket(b)
    for n in ("o1", "o2"):
        api.put(b, n, body(n))
        warm(fcluster, api, b, n, body(n))
    members = {"m/%02d" % i: body("s%d" % i, 64 * 1024) for i in range(20)}
    api.put(b, "big.tar", make_tar(members))
    for _ in range(3):
        assert get_member(api, b, "big.tar", "m/03").content == members["m/03"]
    pid = fcluster.c.targets[0].pid
    assert len(fds_under(pid, "/" + b)) >= 3, fds_under(pid, "/" + b)
    api.destroy_bucket(b)
    wait_until(lambda: not fds_under(pid, "." + b) and not fds_under(pid, "/" + b), 5, 0.1,
               "the target closes the files of a destroyed bucket")


def test_objects_moved_away_by_rebalance(make_cluster):
    """Kept objects of one target; a second joins and about half of them move to it: the first target
    redirects their GETs (it no longer owns them), closes their files, and new versions written on the
    new owner are what every GET serves."""
    h = make_cluster(targets=1, mountpaths=1, target_args=ONE_LOOP)
    api = Api(h.url)
    b = unique("fcr")
    api.create_bucket(b)
    names = ["r%02d" % i for i in range(24)]
    put_kept(h, api, b, names, "old")
    old = h.c.targets[0]
    new = h.add_target()
    new_url = h.c.targets[new].public_url

    def on_owner(n):
        mains = replicas(h, b, n)[0]
        owner = h.c.targets[h.index_of_url(api.owner(b, n))]
        return len(mains) == 1 and mains[0].startswith(owner.mountpaths[0] + os.sep)

    wait_until(lambda: all(on_owner(n) for n in names), 120, 0.2, "every object on its owner")
    moved = [n for n in names if api.owner(b, n).startswith(new_url + "/")]
    assert moved, "no object moved to the new target"
    s = session()
    for n in moved:
        r = s.get("%s/v1/objects/%s/%s" % (old.public_url, b, n), allow_redirects=False, timeout=30)
        assert r.status_code == 307 and r.headers["Location"].startswith(new_url + "/"), (n, r.status_code)
        api.put(b, n, body("new" + n))
    for n in names:
        want = body(("new" if n in moved else "old") + n)
        get_ok(api, b, n, want)
        get_ok(api, b, n, want)
    wait_until(lambda: not deleted_fds(old.pid), 5, 0.1, "the first target closes the files that moved away")


def test_s3_copy_onto_itself_replaces_metadata(fcluster, api, bucket):
    """S3's way to change an object's metadata, CopyObject onto itself with REPLACE: a kept object's
    next GETs and HEADs show the new Content-Type, user metadata, version and Last-Modified."""
    api.put(bucket, "cm", body("copy"), headers={"Content-Type": "text/before", "x-amz-meta-k": "v1"})
    warm(fcluster, api, bucket, "cm", body("copy"))
    v1 = api.head(bucket, "cm").headers
    assert v1["Content-Type"] == "text/before" and v1.get("x-amz-meta-k") == "v1", dict(v1)
    time.sleep(1.1)  # Last-Modified has seconds
    s3 = s3util.client(fcluster)
    s3.copy_object(Bucket=bucket, Key="cm", CopySource={"Bucket": bucket, "Key": "cm"},
                   MetadataDirective="REPLACE", ContentType="text/after", Metadata={"k": "v2"})
    for _ in range(3):
        r = get_ok(api, bucket, "cm", body("copy"))
        assert r.headers["Content-Type"] == "text/after" and r.headers.get("x-amz-meta-k") == "v2", dict(r.headers)
        assert r.headers["Ais-Version"] != v1["Ais-Version"]
        assert r.headers["Last-Modified"] != v1["Last-Modified"]
        assert r.headers["ETag"] == '"%s"' % hashlib.md5(body("copy")).hexdigest()  # S3's, of the same bytes
    h = api.head(bucket, "cm").headers
    assert h["Content-Type"] == "text/after" and h.get("x-amz-meta-k") == "v2", dict(h)


# ---- GetBatch items: one more table, shared by the threads that prepare a batch's items ----

def batch_members(h, bucket, names, status=200, **kw):
    """POST /v1/batch of names through the proxy: the TAR's (name, bytes) in order."""
    r = session(h.token).post(h.url + "/v1/batch", json=dict({"in": [{"bucket": bucket, "objname": n}
                                                                      for n in names]}, **kw), timeout=30)
    assert r.status_code == status, (r.status_code, r.text[:300])
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:") as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def test_batch_items_kept_and_never_stale(fcluster, api, bucket):
    """A batch's items are kept open after their second batch (a 200 KiB one too, sent with sendfile from a
    descriptor of its own, twice in a row here); an item replaced, grown in place or deleted afterwards is never
    served from the kept file, and a deleted one's file is closed within about a second."""
    big = 200 * 1024
    names = ["ba", "bb", "big", "big", "bc"]
    want = {"ba": body("ba"), "bb": body("bb"), "big": body("big", big), "bc": body("bc")}
    for n, b in want.items():
        api.put(bucket, n, b)
    before = hits(fcluster)
    for _ in range(3):
        assert batch_members(fcluster, bucket, names) == [("%s/%s" % (bucket, n), want[n]) for n in names]
    assert hits(fcluster) - before >= len(names), "the third batch did not take its items from the open-file cache"
    # replaced, same sizes: only the validation tells the kept files apart
    want["bb"], want["big"] = body("BB"), body("BIG", big)
    api.put(bucket, "bb", want["bb"])
    api.put(bucket, "big", want["big"])
    for _ in range(2):
        assert batch_members(fcluster, bucket, names) == [("%s/%s" % (bucket, n), want[n]) for n in names]
    # grown in place behind the target's back (same inode): not the kept size, and then not its metadata's
    with open(main_copy(fcluster, bucket, "ba"), "ab") as f:
        f.write(b"X" * 512)
    r = session(fcluster.token).post(fcluster.url + "/v1/batch", json={"in": [{"bucket": bucket, "objname": "ba"}]},
                                     timeout=30)
    assert_json_error(r, 502, "size differs from its metadata")  # a failed item: 502, as documented
    api.put(bucket, "ba", want["ba"])
    assert batch_members(fcluster, bucket, names) == [("%s/%s" % (bucket, n), want[n]) for n in names]
    # deleted: a missing item, and the kept file closed without another batch
    assert api.delete(bucket, "bc").status_code == 200
    r = session(fcluster.token).post(fcluster.url + "/v1/batch", json={"in": [{"bucket": bucket, "objname": "bc"}]},
                                     timeout=30)
    assert_json_error(r, 404)
    got = batch_members(fcluster, bucket, names, continue_on_error=True)
    assert got[-1][0].startswith("__404__/") and got[-1][1] == b"", got[-1]
    assert api.delete(bucket, "big").status_code == 200
    pid = fcluster.c.targets[0].pid
    wait_until(lambda: not deleted_fds(pid), 5, 0.1, "the target closes the kept files of deleted batch items")


def test_batch_items_of_a_validated_bucket_are_not_kept(fcluster, api, bucket):
    """checksum_validate_warm_get: a batch opens its items every time (the open-file cache is for the plain case)."""
    set_props(api, bucket, {"checksum_validate_warm_get": True})
    api.put(bucket, "vb", body("vb"))
    before = hits(fcluster)
    for _ in range(4):
        assert batch_members(fcluster, bucket, ["vb"]) == [("%s/vb" % bucket, body("vb"))]
    assert hits(fcluster) == before, "a validated bucket's batch items came from the open-file cache"
